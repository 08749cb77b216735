-- How many tasks each principal created in its newest rate window (a whole
-- minute), so that Create checks the creation rate limit by locking and
-- bumping one row, in the statement that inserts the task: concurrent
-- creates of one principal, on any replica, queue on that row lock. Create
-- moves a principal's window forward only (resetting n), never back, so
-- replicas whose clocks disagree share the newest window's count.
-- PurgeExpired deletes the rows of windows that ended, which read exactly
-- as no row. The rows are small and updated often: free space in each page
-- keeps the updates within a window HOT.
CREATE TABLE create_counts (
	principal    TEXT        NOT NULL PRIMARY KEY,
	window_start TIMESTAMPTZ NOT NULL,
	n            BIGINT      NOT NULL
) WITH (fillfactor = 50);

-- PurgeExpired deletes along this index.
CREATE INDEX create_counts_window ON create_counts (window_start);
