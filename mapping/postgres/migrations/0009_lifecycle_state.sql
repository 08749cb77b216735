-- The lifecycle's typed state of a task, which its status message is
-- written from: the cancel's attempts, when the next may be sent and its
-- last problem; the last problem of the observation path (class, the call,
-- HTTP status, the backend's words, since when, how many calls in a row);
-- the last state value the backend reported, when it was first and last
-- seen; when the job was first observed; and the backend's own words at
-- the last observation. Columns with constant defaults are added without
-- rewriting the table.
ALTER TABLE tasks
	ADD COLUMN cancel_attempts        INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN cancel_next_at         TIMESTAMPTZ,
	ADD COLUMN cancel_problem_class   TEXT NOT NULL DEFAULT '',
	ADD COLUMN cancel_problem_call    TEXT NOT NULL DEFAULT '',
	ADD COLUMN cancel_problem_status  INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN cancel_problem_message TEXT NOT NULL DEFAULT '',
	ADD COLUMN cancel_problem_since   TIMESTAMPTZ,
	ADD COLUMN cancel_problem_count   INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN problem_class          TEXT NOT NULL DEFAULT '',
	ADD COLUMN problem_call           TEXT NOT NULL DEFAULT '',
	ADD COLUMN problem_status         INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN problem_message        TEXT NOT NULL DEFAULT '',
	ADD COLUMN problem_since          TIMESTAMPTZ,
	ADD COLUMN problem_count          INTEGER NOT NULL DEFAULT 0,
	ADD COLUMN backend_state          TEXT NOT NULL DEFAULT '',
	ADD COLUMN state_since            TIMESTAMPTZ,
	ADD COLUMN state_seen_at          TIMESTAMPTZ,
	ADD COLUMN first_observed_at      TIMESTAMPTZ,
	ADD COLUMN job_message            TEXT NOT NULL DEFAULT '';

-- Rows written before carry their state over: a job observed and not
-- missing was observed; a cancel the backend accepted was sent once; the
-- job's own words of a live submitted task are its status message, after
-- the pending cancel's note where there is one (the last time that text
-- is read: from now on it is only written).
UPDATE tasks SET first_observed_at = observed_at
	WHERE job_ref IS NOT NULL AND observed_at IS NOT NULL AND missing_since IS NULL;
UPDATE tasks SET cancel_attempts = 1 WHERE cancel_sent_at IS NOT NULL;
UPDATE tasks SET job_message = CASE
		WHEN cancel_requested_at IS NULL THEN status_message
		WHEN strpos(status_message, '; job: ') > 0 THEN substr(status_message, strpos(status_message, '; job: ') + 7)
		ELSE '' END
	WHERE phase = 'submitted' AND status IN ('working', 'input_required');
