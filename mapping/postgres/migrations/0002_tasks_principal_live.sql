-- CountLive counts a principal's live tasks from this partial index: only
-- tasks that are not terminal are in it, by principal and then expiry.
CREATE INDEX tasks_principal_live ON tasks (principal, expires_at)
	WHERE status NOT IN ('completed', 'failed', 'cancelled');
