-- Idempotency keys (mapping.IdempotencyStore), in a table of their own
-- beside the tasks: one row per principal and key, the key only as its hash
-- and the task's ID only sealed by the bridge. A claim inserts the row if
-- the (principal, key_hash) primary key is free, or takes over a row that
-- expired or names the task the claimer found gone: one statement, under
-- the writer's IMMEDIATE transaction, so concurrent claims have one winner.
-- Times are unix milliseconds; the window is milliseconds.
CREATE TABLE idempotency_keys (
	principal   TEXT    NOT NULL,
	key_hash    BLOB    NOT NULL,
	args_digest TEXT    NOT NULL,
	task_key    BLOB    NOT NULL,
	sealed_id   BLOB,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	window_ms   INTEGER NOT NULL,
	PRIMARY KEY (principal, key_hash)
) WITHOUT ROWID;

-- PurgeIdempotencyKeys deletes a prefix of this index.
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
