-- Idempotency keys (mapping.IdempotencyStore), in a table of their own
-- beside the tasks: one row per principal and key, the key only as its hash
-- and the task's ID only sealed by the bridge. A claim is one
-- INSERT ... ON CONFLICT on the (principal, key_hash) primary key, so that
-- concurrent claims, also from replicas sharing the database, have exactly
-- one winner.
CREATE TABLE idempotency_keys (
	principal   TEXT        NOT NULL,
	key_hash    BYTEA       NOT NULL,
	args_digest TEXT        NOT NULL,
	task_key    BYTEA       NOT NULL,
	sealed_id   BYTEA,
	created_at  TIMESTAMPTZ NOT NULL,
	expires_at  TIMESTAMPTZ NOT NULL,
	window_ms   BIGINT      NOT NULL,
	PRIMARY KEY (principal, key_hash)
);

-- PurgeIdempotencyKeys deletes along this index.
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
