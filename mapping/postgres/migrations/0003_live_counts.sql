-- The number of live (not terminal) tasks of each principal, so that Create
-- checks the live-task limit without counting rows: it locks the
-- principal's row here, which serialises the creates of one principal
-- across replicas. Triggers keep the counts in the same transaction as
-- every write to tasks, whoever makes it (also a replica of an older build
-- during a rolling upgrade, or an operator by hand): a task counts from its
-- insertion (if it is not terminal) until it is updated to a terminal status
-- or deleted. An expired task counts until it is purged. The rows are
-- updated often and are small: free space in each page keeps the updates
-- HOT.
CREATE TABLE live_counts (
	principal TEXT   NOT NULL PRIMARY KEY,
	n         BIGINT NOT NULL
) WITH (fillfactor = 50);

-- Inserts and deletes count per statement, one counter update per principal
-- however many rows the statement wrote (a purge deletes many rows).
-- Deletes lock the counters in principal order, so that concurrent purges
-- cannot deadlock.
CREATE FUNCTION tasks_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO live_counts AS c (principal, n)
			SELECT principal, count(*) FROM inserted
			WHERE status NOT IN ('completed', 'failed', 'cancelled')
			GROUP BY principal
			ORDER BY principal
		ON CONFLICT (principal) DO UPDATE SET n = c.n + excluded.n;
	ELSE
		PERFORM 1 FROM live_counts
			WHERE principal IN (SELECT principal FROM deleted
				WHERE status NOT IN ('completed', 'failed', 'cancelled'))
			ORDER BY principal
			FOR UPDATE;
		UPDATE live_counts AS c SET n = c.n - d.k
			FROM (SELECT principal, count(*) AS k FROM deleted
				WHERE status NOT IN ('completed', 'failed', 'cancelled')
				GROUP BY principal) AS d
			WHERE c.principal = d.principal;
	END IF;
	RETURN NULL;
END
$$;

-- Updates count per row, and only those that change whether a row is live
-- or whose principal it is: the store's Update changes neither, except once
-- per task, to a terminal status.
CREATE FUNCTION tasks_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.status NOT IN ('completed', 'failed', 'cancelled') THEN
		UPDATE live_counts SET n = n - 1 WHERE principal = OLD.principal;
	END IF;
	IF NEW.status NOT IN ('completed', 'failed', 'cancelled') THEN
		INSERT INTO live_counts AS c (principal, n) VALUES (NEW.principal, 1)
		ON CONFLICT (principal) DO UPDATE SET n = c.n + 1;
	END IF;
	RETURN NULL;
END
$$;

-- Creating the triggers locks tasks against writes until the migration
-- commits, so that the counts below miss no write.
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
	REFERENCING NEW TABLE AS inserted
	FOR EACH STATEMENT EXECUTE FUNCTION tasks_count_rows();
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
	REFERENCING OLD TABLE AS deleted
	FOR EACH STATEMENT EXECUTE FUNCTION tasks_count_rows();
CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, principal ON tasks
	FOR EACH ROW
	WHEN (OLD.principal IS DISTINCT FROM NEW.principal
		OR (OLD.status NOT IN ('completed', 'failed', 'cancelled'))
			IS DISTINCT FROM (NEW.status NOT IN ('completed', 'failed', 'cancelled')))
	EXECUTE FUNCTION tasks_count_update();

-- Count the tasks already live, expired or not.
INSERT INTO live_counts (principal, n)
	SELECT principal, count(*) FROM tasks
	WHERE status NOT IN ('completed', 'failed', 'cancelled')
	GROUP BY principal;

-- Nothing counts rows any more.
DROP INDEX tasks_principal_live;
