-- The task ID sealed by the bridge, so that a list of tasks can name them.
-- NULL for the tasks created before.
ALTER TABLE tasks ADD COLUMN sealed_id BYTEA;
