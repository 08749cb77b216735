-- Tasks, one row per task, keyed by the SHA-256 of the task ID.
-- Times are INTEGER unix milliseconds (UTC); durations are INTEGER
-- milliseconds; bridge-owned JSON is stored verbatim as BLOB. A NULL column
-- is a nil Go field.
CREATE TABLE tasks (
	key                 BLOB    NOT NULL PRIMARY KEY CHECK (length(key) = 32),
	principal           TEXT    NOT NULL,
	tool                TEXT    NOT NULL,
	args_digest         TEXT    NOT NULL,
	args                BLOB,
	server_build        TEXT    NOT NULL,
	catalog_revision    TEXT    NOT NULL,
	backend             TEXT    NOT NULL,
	job_ref             BLOB,
	correlation_id      TEXT    NOT NULL,
	phase               TEXT    NOT NULL,
	status              TEXT    NOT NULL,
	status_message      TEXT    NOT NULL,
	created_at          INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL,
	ttl_ms              INTEGER NOT NULL,
	expires_at          INTEGER NOT NULL,
	poll_interval_ms    INTEGER NOT NULL,
	cancel_requested_at INTEGER,
	cancel_forwarded_at INTEGER,
	input_requests      BLOB,
	answered_keys       BLOB,
	observation         BLOB,
	observed_at         INTEGER,
	missing_since       INTEGER,
	outcome             BLOB,
	version             INTEGER NOT NULL
);

-- ListLive walks this partial index in order: only live rows are in it, and
-- SQLite sorts NULL observed_at (never observed) first.
CREATE INDEX tasks_live ON tasks (observed_at, created_at)
	WHERE status IN ('working', 'input_required');

-- PurgeExpired deletes a prefix of this index.
CREATE INDEX tasks_expires_at ON tasks (expires_at);
