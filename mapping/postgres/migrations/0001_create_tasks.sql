-- Tasks, one row per task, keyed by the SHA-256 of the task ID. The columns
-- mean what they mean in the SQLite store. Times are TIMESTAMPTZ written at
-- millisecond precision; durations are BIGINT milliseconds; bridge-owned JSON
-- is stored verbatim as BYTEA. A NULL column is a nil Go field. Rows are
-- updated often; free space in each page (fillfactor) lets an update that
-- changes no indexed column, such as a lease, stay in its page (HOT).
CREATE TABLE tasks (
	key                 BYTEA       NOT NULL PRIMARY KEY CHECK (octet_length(key) = 32),
	principal           TEXT        NOT NULL,
	tool                TEXT        NOT NULL,
	args_digest         TEXT        NOT NULL,
	args                BYTEA,
	server_build        TEXT        NOT NULL,
	catalog_revision    TEXT        NOT NULL,
	backend             TEXT        NOT NULL,
	job_ref             BYTEA,
	correlation_id      TEXT        NOT NULL,
	phase               TEXT        NOT NULL,
	status              TEXT        NOT NULL,
	status_message      TEXT        NOT NULL,
	created_at          TIMESTAMPTZ NOT NULL,
	updated_at          TIMESTAMPTZ NOT NULL,
	ttl_ms              BIGINT      NOT NULL,
	expires_at          TIMESTAMPTZ NOT NULL,
	poll_interval_ms    BIGINT      NOT NULL,
	cancel_requested_at TIMESTAMPTZ,
	cancel_forwarded_at TIMESTAMPTZ,
	cancel_sent_at      TIMESTAMPTZ,
	input_requests      BYTEA,
	answered_keys       BYTEA,
	observation         BYTEA,
	observed_at         TIMESTAMPTZ,
	missing_since       TIMESTAMPTZ,
	outcome             BYTEA,
	version             BIGINT      NOT NULL,
	-- The sweep lease (ClaimLive): which replica holds the task and until
	-- when. Both NULL when no replica ever claimed it or the lease was
	-- released. Update leaves them alone.
	lease_owner         TEXT,
	lease_until         TIMESTAMPTZ
) WITH (fillfactor = 80);

-- ListLive and ClaimLive walk this partial index in order: only live rows
-- are in it, never-observed ones (NULL observed_at) first.
CREATE INDEX tasks_live ON tasks (observed_at ASC NULLS FIRST, created_at, key)
	WHERE status IN ('working', 'input_required');

-- PurgeExpired deletes a prefix of this index.
CREATE INDEX tasks_expires_at ON tasks (expires_at);
