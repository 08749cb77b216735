-- When a job's submission was first sent: the start of the backend's
-- listing lag when a submission with an unknown outcome is looked up.
ALTER TABLE tasks ADD COLUMN submitted_at timestamptz;
