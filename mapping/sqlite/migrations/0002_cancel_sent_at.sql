-- The time the backend accepted a forwarded cancel: a claim without it,
-- old enough, was left by a process that died while forwarding.
ALTER TABLE tasks ADD COLUMN cancel_sent_at INTEGER;
