-- The number of live (not terminal) tasks of each principal, so that Create
-- checks the live-task limit without counting rows. Triggers keep it in the
-- same transaction as every write to tasks, whoever makes it: a task counts
-- from its insertion (if it is not terminal) until it is updated to a
-- terminal status or deleted. An expired task counts until it is purged.
CREATE TABLE live_counts (
	principal TEXT    NOT NULL PRIMARY KEY,
	n         INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
	WHEN NEW.status NOT IN ('completed', 'failed', 'cancelled')
BEGIN
	INSERT INTO live_counts (principal, n) VALUES (NEW.principal, 1)
		ON CONFLICT (principal) DO UPDATE SET n = n + 1;
END;

-- The store's Update never changes the principal and never leaves a
-- terminal status; the trigger also follows writes that do.
CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, principal ON tasks
	WHEN OLD.principal IS NOT NEW.principal
		OR (OLD.status NOT IN ('completed', 'failed', 'cancelled'))
			IS NOT (NEW.status NOT IN ('completed', 'failed', 'cancelled'))
BEGIN
	UPDATE live_counts SET n = n - 1
		WHERE principal = OLD.principal
			AND OLD.status NOT IN ('completed', 'failed', 'cancelled');
	INSERT INTO live_counts (principal, n)
		SELECT NEW.principal, 1 WHERE NEW.status NOT IN ('completed', 'failed', 'cancelled')
		ON CONFLICT (principal) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
	WHEN OLD.status NOT IN ('completed', 'failed', 'cancelled')
BEGIN
	UPDATE live_counts SET n = n - 1 WHERE principal = OLD.principal;
END;

-- Count the tasks already live, expired or not.
INSERT INTO live_counts (principal, n)
	SELECT principal, count(*) FROM tasks
	WHERE status NOT IN ('completed', 'failed', 'cancelled')
	GROUP BY principal;

-- Nothing counts rows any more.
DROP INDEX tasks_principal_live;
