-- The backend's job ID (the job reference's "id"), so that a pushed event
-- finds its tasks by (backend, job_id); when the last pushed event was
-- applied; and who asked to cancel ('' the task's client, 'operator').
-- Columns with constant defaults are added without rewriting the table.
ALTER TABLE tasks
	ADD COLUMN job_id    TEXT NOT NULL DEFAULT '',
	ADD COLUMN event_at  TIMESTAMPTZ,
	ADD COLUMN cancel_by TEXT NOT NULL DEFAULT '';

-- The tasks submitted before have their job ID only in job_ref (JSON
-- stored as BYTEA). A reference that is not UTF-8 JSON, or has no string or
-- number "id", keeps ''. The function lives in this session's temporary
-- schema and goes with it.
CREATE FUNCTION pg_temp.job_id_of(ref bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	doc jsonb;
BEGIN
	doc := convert_from(ref, 'UTF8')::jsonb;
	IF jsonb_typeof(doc) = 'object' AND jsonb_typeof(doc -> 'id') IN ('string', 'number') THEN
		RETURN doc ->> 'id';
	END IF;
	RETURN '';
EXCEPTION WHEN others THEN
	RETURN '';
END
$$;
UPDATE tasks SET job_id = pg_temp.job_id_of(job_ref) WHERE job_ref IS NOT NULL;
DROP FUNCTION pg_temp.job_id_of(bytea);

-- FindByJob searches this index; tasks not submitted yet are not in it.
CREATE INDEX tasks_job ON tasks (backend, job_id) WHERE job_id <> '';

-- List by correlation ID (jobbridge tasks cancel) searches this index.
CREATE INDEX tasks_correlation ON tasks (correlation_id);

-- The pushed events being applied or applied (ClaimDelivery), by source
-- (a backend name) and the sender's event ID, with when they were claimed.
-- PurgeExpired deletes along the claimed_at index once claims are older
-- than the retention.
CREATE TABLE deliveries (
	source     TEXT        NOT NULL,
	id         TEXT        NOT NULL,
	claimed_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (source, id)
);

CREATE INDEX deliveries_claimed ON deliveries (claimed_at);

-- Every insert of a task and every update that sets its version (the
-- store's Update always does; a sweep lease does not) notifies the
-- channel of the table's schema, in the writing transaction: the
-- notification goes out when it commits, and not at all if it (or the
-- write's savepoint) rolls back. The payload is the key in hex, ':' and the
-- version written. The channel is 'jobbridge.tasks.' and the schema's name,
-- or a hash of the name when that would exceed the 63 bytes a channel may
-- have; NOTIFY itself never crosses databases. The store computes the same
-- name (changesChannel) to LISTEN.
CREATE FUNCTION tasks_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	channel text := 'jobbridge.tasks.' || TG_TABLE_SCHEMA;
BEGIN
	IF octet_length(channel) > 63 THEN
		channel := 'jobbridge.tasks.' || left(encode(sha256(convert_to(TG_TABLE_SCHEMA, 'UTF8')), 'hex'), 32);
	END IF;
	PERFORM pg_notify(channel, encode(NEW.key, 'hex') || ':' || NEW.version);
	RETURN NULL;
END
$$;

CREATE TRIGGER tasks_notify AFTER INSERT OR UPDATE OF version ON tasks
	FOR EACH ROW EXECUTE FUNCTION tasks_notify_change();
