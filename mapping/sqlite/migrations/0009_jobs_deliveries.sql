-- The backend's job ID (the job reference's "id"), so that a pushed event
-- finds its tasks by (backend, job_id); when the last pushed event was
-- applied; and who asked to cancel ('' the task's client, 'operator').
ALTER TABLE tasks ADD COLUMN job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN event_at INTEGER;
ALTER TABLE tasks ADD COLUMN cancel_by TEXT NOT NULL DEFAULT '';

-- The tasks submitted before have their job ID only in job_ref (JSON
-- stored as a BLOB: read it as text, skip what is not a JSON object).
-- (CASE evaluates json_type only for valid JSON.)
UPDATE tasks SET job_id = CAST(json_extract(CAST(job_ref AS TEXT), '$.id') AS TEXT)
	WHERE CASE WHEN json_valid(CAST(job_ref AS TEXT))
		THEN json_type(CAST(job_ref AS TEXT), '$.id') IN ('text', 'integer', 'real')
		ELSE 0 END;

-- FindByJob searches this index; tasks not submitted yet are not in it.
CREATE INDEX tasks_job ON tasks (backend, job_id) WHERE job_id <> '';

-- List by correlation ID (jobbridge tasks cancel) searches this index.
CREATE INDEX tasks_correlation ON tasks (correlation_id);

-- The pushed events being applied or applied (ClaimDelivery), by source
-- (a backend name) and the sender's event ID, with when they were claimed
-- (unix milliseconds). PurgeExpired deletes a prefix of the claimed_at
-- index once claims are older than the retention.
CREATE TABLE deliveries (
	source     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	claimed_at INTEGER NOT NULL,
	PRIMARY KEY (source, id)
) WITHOUT ROWID;

CREATE INDEX deliveries_claimed ON deliveries (claimed_at);
