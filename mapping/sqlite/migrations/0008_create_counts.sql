-- How many tasks each principal created in its newest rate window (a whole
-- minute, as unix milliseconds of its start), so that Create checks the
-- creation rate limit by reading and bumping one row, in the transaction
-- that inserts the task. Create moves a principal's window forward only
-- (resetting n), never back. PurgeExpired deletes the rows of windows that
-- ended, which read exactly as no row.
CREATE TABLE create_counts (
	principal    TEXT    NOT NULL PRIMARY KEY,
	window_start INTEGER NOT NULL,
	n            INTEGER NOT NULL
) WITHOUT ROWID;

-- PurgeExpired deletes a prefix of this index.
CREATE INDEX create_counts_window ON create_counts (window_start);
