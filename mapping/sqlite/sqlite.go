// Package sqlite stores task mappings in an embedded SQLite database file
// (pure Go, no cgo), the default store of a single bridge process.
//
// One process owns the file. The store writes through one connection and
// reads through a small pool of read-only connections; SQLite in WAL mode
// lets those reads run while a write commits. Deployments with several
// replicas use mapping/postgres.
//
// # One server per file
//
// Open takes an exclusive lock (flock) on a sidecar file, the database's
// path with ".lock" appended, and holds it until Close; the lock file holds
// the owner's process ID. A second Open of the same file, by another
// process or by this one, is refused with an error wrapping ErrInUse that
// names the file and that process: two servers on one file would both sweep
// and poll the same jobs. Tools that read or mark a few rows while the
// server runs (jobbridge tasks) open the file with Options.Shared, which
// takes no lock; SQLite itself serialises their writes with the server's.
// The lock is the kernel's, so a process that dies frees it. (On systems
// without flock there is no lock and no check.)
//
// # Change feed
//
// Subscribe reports the writes made through this Store: the batch that
// commits them publishes them to a mapping.Feed once the commit succeeded,
// in commit order, before the writers are answered. Writes by other
// processes on the file (a Shared tool's) are not reported.
//
// Every write is durable when it returns (synchronous=FULL). Concurrent
// Creates and Updates share commits (mapping/groupcommit): the writes that
// queue while one transaction commits go into the next one, each under a
// savepoint of its own, so that N concurrent writers pay for one fsync
// rather than N while each still gets its own outcome (a Create refused by
// the live-task limit or a duplicate key, or an Update that lost its
// version check, fails alone) and is answered only after its transaction
// has committed. PurgeExpired commits on its own. Times are stored as unix
// milliseconds in UTC and durations as milliseconds, so they read back at
// millisecond precision.
//
// # Live-task limit
//
// The store keeps the number of live (not terminal) tasks of each principal
// in a table of its own, live_counts, which triggers change in the same
// transaction as every write to the tasks: an insert of a live task adds
// one, an update to a terminal status and a delete of a live task take one
// away. Create checks the limit against that number, so its cost does not
// grow with the principal's tasks; and since the writer begins every
// transaction IMMEDIATE (taking SQLite's write lock first), the check and
// the insert are one step, also for several processes on one file. Being
// triggers, the counts also follow rows changed or deleted by hand.
//
// # Creation rate limit
//
// The tasks each principal created in its newest rate window
// (mapping.RateWindow) are counted in create_counts, one row per principal:
// a Create with a rate limit bumps the row in the transaction that inserts
// the task, starting it afresh when the task's window is newer than the
// row's, and refuses when the row's window already holds the limit. A
// Create refused or failed later in its write is rolled back to its
// savepoint, bump included. PurgeExpired deletes the rows of windows that
// ended.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/groupcommit"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// busyTimeout is how long a connection waits for a lock held by another
// connection before failing with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// readConns is the size of the read-only connection pool.
const readConns = 4

// maxBatch bounds the writes that share one commit.
const maxBatch = 256

// Options tunes a Store. The zero value (or nil) is the default: a server's
// store, which holds the file's lock.
type Options struct {
	// Shared opens the store for a tool that runs beside the server (an
	// operator's command), not for a server: it takes no lock, so it opens
	// while a server holds the file, and its writes queue with the server's
	// on SQLite's own write lock. When no server holds the file it brings
	// the schema up to date as a server would; when one does, it leaves the
	// schema alone and refuses a file whose schema is not this build's.
	Shared bool
}

// ErrInUse is wrapped by the error Open returns for a file that another
// store (of another process, or of this one) holds open as a server.
var ErrInUse = errors.New("in use")

// Store is a mapping.Store backed by one SQLite database file.
type Store struct {
	// writer has exactly one connection: SQLite allows one writer at a time,
	// and queueing writers in database/sql rather than in SQLite's busy
	// handler keeps them fair and free of "database is locked" errors.
	writer *sql.DB
	// reader has read-only connections for Get and the lists.
	reader *sql.DB
	// path is the absolute path of the database file.
	path string
	// lock is the open lock file whose flock this store holds; nil for a
	// Shared store.
	lock *os.File

	// feed publishes the committed writes to subscribers.
	feed mapping.Feed

	// commits batches Create and Update into shared transactions on
	// writer.
	commits *groupcommit.Committer[*writeTx]

	// Prepared statements: parsing a statement costs as much as running it.
	create, update, purge, liveCount              *sql.Stmt // on writer
	countCreate, purgeCounts                      *sql.Stmt // on writer
	claimDelivery, purgeDeliveries                *sql.Stmt // on writer
	savepoint, rollbackTo, release                *sql.Stmt // on writer
	get, listLive, listPrincipal, listPrincipalAt *sql.Stmt // on reader
	findJob                                       *sql.Stmt // on reader

	closeOnce sync.Once
	closeErr  error
}

var _ mapping.Store = (*Store)(nil)

// Open opens the database file at path, creating it with mode 0600 if it does
// not exist, and brings its schema up to date. A database written by a newer
// build (with a schema this build does not know) is refused. opts may be nil.
//
// Unless opts.Shared is set, Open takes the file's lock (see the package
// comment) and refuses, with an error wrapping ErrInUse, a file that another
// store holds. The caller must Close the store, which releases the lock.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("opening sqlite store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("opening sqlite store: %w", err)
	}
	shared := opts != nil && opts.Shared
	s, err := open(ctx, abs, shared)
	if errors.Is(err, ErrInUse) {
		return nil, err // it names the store
	}
	if err != nil {
		return nil, fmt.Errorf("opening sqlite store %s: %w", abs, err)
	}
	return s, nil
}

// open is Open of the absolute path abs.
func open(ctx context.Context, abs string, shared bool) (_ *Store, err error) {
	// Create the file ourselves so that it never exists with the umask's
	// looser mode; SQLite gives the -wal and -shm files the same mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	lock, owner, err := lockFile(abs + lockSuffix)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A Shared store holds the lock only while it migrates; a server
		// holds it until Close.
		if lock != nil && (err != nil || shared) {
			releaseLock(lock)
		}
	}()
	if lock == nil && !shared {
		return nil, inUseError(abs, owner)
	}

	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return nil, err
	}

	writer, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, err
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	if lock != nil {
		err = migrate(ctx, writer, ms)
	} else {
		// A server holds the file: its build decides the schema.
		err = checkSchema(ctx, writer, ms, owner)
	}
	if err != nil {
		_ = writer.Close()
		return nil, err
	}

	reader, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		_ = writer.Close()
		return nil, err
	}
	reader.SetMaxOpenConns(readConns)
	reader.SetMaxIdleConns(readConns)
	s := &Store{writer: writer, reader: reader, path: abs}
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if !shared {
		s.lock = lock
	}
	s.commits = groupcommit.New(s.begin, groupcommit.Options{MaxBatch: maxBatch})
	return s, nil
}

// lockSuffix is appended to the database's path to name its lock file.
const lockSuffix = ".lock"

// lockFile opens (creating it with mode 0600) the lock file at path and
// takes its lock, writing this process's ID into it. When another store
// holds the lock it returns a nil file and the ID written there (0 if
// unreadable).
func lockFile(path string) (*os.File, int, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	ok, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	if !ok {
		var b [32]byte
		n, _ := f.ReadAt(b[:], 0)
		_ = f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		return nil, max(pid, 0), nil
	}
	// Best effort: the ID only improves the message a second Open gives.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, 0, nil
}

// releaseLock empties the lock file and releases its lock. The file stays:
// removing it could let two stores lock two different files of one name.
func releaseLock(f *os.File) {
	_ = f.Truncate(0)
	_ = unlock(f)
	_ = f.Close()
}

// inUseError is the error for a file whose lock the process pid holds (0:
// unknown).
func inUseError(abs string, pid int) error {
	by := "another jobbridge process"
	switch {
	case pid == os.Getpid():
		by = fmt.Sprintf("another store of this process (pid %d)", pid)
	case pid > 0:
		by = fmt.Sprintf("another jobbridge process (pid %d)", pid)
	}
	return fmt.Errorf("sqlite store %s is %w by %s; SQLite stores serve one process: stop it, or use PostgreSQL for several replicas",
		abs, ErrInUse, by)
}

// writeTx is a transaction on the writer connection, one batch of the group
// commit, with the changes its writes made so far.
type writeTx struct {
	*sql.Tx
	s *Store
	// changes are the Creates and Updates of the batch that succeeded,
	// published once the batch commits.
	changes []mapping.Change
}

// begin begins a batch's transaction (IMMEDIATE: see dsn).
func (s *Store) begin(ctx context.Context) (*writeTx, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &writeTx{Tx: tx, s: s}, nil
}

// exec runs the prepared statement stmt in tx.
func (tx *writeTx) exec(ctx context.Context, stmt *sql.Stmt, args ...any) (sql.Result, error) {
	return tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
}

// changed records a write's change, to be published if the batch commits.
// A write calls it last, once nothing can fail it any more.
func (tx *writeTx) changed(key mapping.Key, version int64) {
	tx.changes = append(tx.changes, mapping.Change{Key: key, Version: version})
}

// Savepoint implements groupcommit.Tx.
func (tx *writeTx) Savepoint(ctx context.Context) error {
	_, err := tx.exec(ctx, tx.s.savepoint)
	return err
}

// RollbackToSavepoint implements groupcommit.Tx.
func (tx *writeTx) RollbackToSavepoint(ctx context.Context) error {
	_, err := tx.exec(ctx, tx.s.rollbackTo)
	return err
}

// ReleaseSavepoint implements groupcommit.Tx.
func (tx *writeTx) ReleaseSavepoint(ctx context.Context) error {
	_, err := tx.exec(ctx, tx.s.release)
	return err
}

// Commit implements groupcommit.Tx. Once the commit succeeded it publishes
// the batch's changes, on the committer's goroutine and so in commit
// order, before the writers are answered.
func (tx *writeTx) Commit(context.Context) error {
	if err := tx.Tx.Commit(); err != nil {
		return err
	}
	for _, c := range tx.changes {
		tx.s.feed.Publish(c)
	}
	return nil
}

// Rollback implements groupcommit.Tx.
func (tx *writeTx) Rollback(context.Context) error { return tx.Tx.Rollback() }

// prepare prepares the store's statements.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt  **sql.Stmt
		db    *sql.DB
		query string
	}{
		{&s.create, s.writer, createQuery},
		{&s.update, s.writer, updateQuery},
		{&s.purge, s.writer, purgeQuery},
		{&s.liveCount, s.writer, liveCountQuery},
		{&s.countCreate, s.writer, countCreateQuery},
		{&s.purgeCounts, s.writer, purgeCountsQuery},
		{&s.claimDelivery, s.writer, claimDeliveryQuery},
		{&s.purgeDeliveries, s.writer, purgeDeliveriesQuery},
		{&s.savepoint, s.writer, `SAVEPOINT write`},
		{&s.rollbackTo, s.writer, `ROLLBACK TO SAVEPOINT write`},
		{&s.release, s.writer, `RELEASE SAVEPOINT write`},
		{&s.get, s.reader, getQuery},
		{&s.listLive, s.reader, listLiveQuery},
		{&s.listPrincipal, s.reader, listPrincipalQuery},
		{&s.listPrincipalAt, s.reader, listPrincipalAfterQuery},
		{&s.findJob, s.reader, findJobQuery},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("preparing statements: %w", err)
		}
		*p.stmt = stmt
	}
	return nil
}

// dsn returns the modernc.org/sqlite data source name for the file at the
// absolute path abs. Every connection waits busyTimeout for locks; the writer
// switches the file to WAL, commits with synchronous=FULL and begins its
// transactions IMMEDIATE (taking the write lock up front, so a transaction
// never fails to upgrade a read lock); readers are query-only.
func dsn(abs string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// columns lists the tasks columns in the order scanTask reads them and Create
// binds them.
const columns = `key, principal, tool, args_digest, args, server_build, catalog_revision,
	backend, job_ref, correlation_id, phase, status, status_message,
	created_at, updated_at, ttl_ms, expires_at, poll_interval_ms,
	cancel_requested_at, cancel_forwarded_at, input_requests, answered_keys,
	observation, observed_at, missing_since, outcome, version, cancel_sent_at, submitted_at, sealed_id,
	job_id, event_at, cancel_by,
	cancel_attempts, cancel_next_at,
	cancel_problem_class, cancel_problem_call, cancel_problem_status, cancel_problem_message, cancel_problem_since, cancel_problem_count,
	problem_class, problem_call, problem_status, problem_message, problem_since, problem_count,
	backend_state, state_since, state_seen_at, first_observed_at, job_message`

// terminalStatuses is the SQL list of terminal statuses.
const terminalStatuses = `('completed', 'failed', 'cancelled')`

// createQuery inserts a task, binding columns in order.
const createQuery = `INSERT INTO tasks (` + columns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
		?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// updateQuery writes the mutable columns of a task if its version matches
// and it is not terminal.
const updateQuery = `UPDATE tasks SET
	tool = ?, args_digest = ?, args = ?, server_build = ?, catalog_revision = ?,
	backend = ?, job_ref = ?, correlation_id = ?, phase = ?, status = ?, status_message = ?,
	updated_at = ?, ttl_ms = ?, expires_at = ?, poll_interval_ms = ?,
	cancel_requested_at = ?, cancel_forwarded_at = ?, cancel_sent_at = ?, input_requests = ?, answered_keys = ?,
	observation = ?, observed_at = ?, missing_since = ?, outcome = ?, submitted_at = ?,
	sealed_id = ?, job_id = ?, event_at = ?, cancel_by = ?,
	cancel_attempts = ?, cancel_next_at = ?,
	cancel_problem_class = ?, cancel_problem_call = ?, cancel_problem_status = ?, cancel_problem_message = ?, cancel_problem_since = ?, cancel_problem_count = ?,
	problem_class = ?, problem_call = ?, problem_status = ?, problem_message = ?, problem_since = ?, problem_count = ?,
	backend_state = ?, state_since = ?, state_seen_at = ?, first_observed_at = ?, job_message = ?,
	version = version + 1
	WHERE key = ? AND version = ? AND status NOT IN ` + terminalStatuses

// getQuery reads a task by primary key.
const getQuery = `SELECT ` + columns + ` FROM tasks
	WHERE key = ? AND principal = ? AND expires_at > ?`

// listLiveQuery walks the tasks_live partial index (its status condition is
// the index's), which also yields the order: SQLite sorts NULL first, so
// never-observed tasks lead.
const listLiveQuery = `SELECT ` + columns + ` FROM tasks
	WHERE status IN ('working', 'input_required') AND expires_at > ?
	ORDER BY observed_at, created_at
	LIMIT ?`

// listPrincipalQuery reads up to ?3 unexpired (at ?2) tasks of principal ?1,
// newest first, walking the tasks_principal_created index in its order.
const listPrincipalQuery = `SELECT ` + columns + ` FROM tasks
	WHERE principal = ?1 AND expires_at > ?2
	ORDER BY created_at DESC, key
	LIMIT ?3`

// listPrincipalAfterQuery is listPrincipalQuery from after the cursor
// (?4, ?5): the index search starts at the cursor's created_at (which
// created_at <= ?4 bounds) and skips its ties up to the cursor's key.
const listPrincipalAfterQuery = `SELECT ` + columns + ` FROM tasks
	WHERE principal = ?1 AND expires_at > ?2
		AND created_at <= ?4 AND (created_at < ?4 OR key > ?5)
	ORDER BY created_at DESC, key
	LIMIT ?3`

// findJobQuery reads the unexpired (at ?3) tasks of backend ?1 and job ?2
// from the tasks_job index; the query repeats the index's condition (a job
// ID that is not empty), so that SQLite may use it.
const findJobQuery = `SELECT ` + columns + ` FROM tasks
	WHERE backend = ?1 AND job_id = ?2 AND job_id <> '' AND expires_at > ?3
	ORDER BY created_at, key`

// purgeQuery deletes along the tasks_expires_at index.
const purgeQuery = `DELETE FROM tasks WHERE expires_at <= ?`

// claimDeliveryQuery claims delivery (?1, ?2) at ?3 (unix milliseconds):
// it inserts the claim, or takes over one made at or before ?4 (a claim
// that no longer counts); it changes no row when a claim that counts
// exists.
const claimDeliveryQuery = `INSERT INTO deliveries (source, id, claimed_at) VALUES (?1, ?2, ?3)
	ON CONFLICT (source, id) DO UPDATE SET claimed_at = excluded.claimed_at
	WHERE claimed_at <= ?4`

// purgeDeliveriesQuery forgets the claims made at or before ?, along the
// deliveries_claimed index.
const purgeDeliveriesQuery = `DELETE FROM deliveries WHERE claimed_at <= ?`

// liveCountQuery reads the live count of a principal. The triggers of
// migration 0004 keep it.
const liveCountQuery = `SELECT n FROM live_counts WHERE principal = ?`

// countCreateQuery counts a task of principal ?1 created in the rate
// window starting at ?2 (unix milliseconds), if the principal's newest
// window is older (starting it afresh) or has fewer than ?3 tasks; a task
// of an older window counts in the newest. It changes no row when the
// limit refuses. (In the update, column names are the row's old values.)
const countCreateQuery = `INSERT INTO create_counts (principal, window_start, n) VALUES (?1, ?2, 1)
	ON CONFLICT (principal) DO UPDATE SET
		window_start = max(window_start, excluded.window_start),
		n = CASE WHEN excluded.window_start > window_start THEN 1 ELSE n + 1 END
	WHERE excluded.window_start > window_start OR n < ?3`

// purgeCountsQuery deletes the counts of the rate windows that started
// before ?, along the create_counts_window index.
const purgeCountsQuery = `DELETE FROM create_counts WHERE window_start < ?`

// Create inserts t. A key that already exists is an error.
//
// When limits.MaxLive is positive and t.Principal already has MaxLive live
// tasks, it returns mapping.ErrLiveLimit and inserts nothing. A task is live from
// its creation until an Update makes it terminal or PurgeExpired deletes
// it: a task whose ExpiresAt has passed still counts until the bridge's
// sweep (every 10 s by default) purges it. The check reads one counter,
// whatever the number of tasks, in the write transaction that inserts the
// row (after the writes committed with it that come first), so concurrent
// creates (also by other processes on the file) never exceed the limit.
//
// When limits.PerMinute is positive, the task is then counted in its
// principal's create_counts row (see the package comment); when that row's
// window already holds PerMinute tasks, Create returns mapping.ErrRateLimit
// and inserts nothing. The count costs one row however many tasks there
// are, in the same transaction.
//
// The insert shares its commit with the concurrent writes of the store
// (see the package comment); Create returns once that commit is durable.
func (s *Store) Create(ctx context.Context, t *mapping.Task, limits mapping.CreateLimits) error {
	args := createArgs(t)
	window := mapping.RateWindowOf(t.CreatedAt).UnixMilli()
	err := s.commits.Do(ctx, func(ctx context.Context, tx *writeTx) error {
		if limits.MaxLive > 0 {
			var n int64
			if err := tx.StmtContext(ctx, s.liveCount).QueryRowContext(ctx, t.Principal).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("counting live tasks: %w", err)
			}
			if n >= int64(limits.MaxLive) {
				return mapping.ErrLiveLimit
			}
		}
		if limits.PerMinute > 0 {
			res, err := tx.exec(ctx, s.countCreate, t.Principal, window, limits.PerMinute)
			if err != nil {
				return fmt.Errorf("counting created tasks: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("counting created tasks: %w", err)
			} else if n == 0 {
				return mapping.ErrRateLimit
			}
		}
		// A failed insert rolls back to the write's savepoint, the count
		// above included.
		if _, err := tx.exec(ctx, s.create, args...); err != nil {
			return err
		}
		tx.changed(t.Key, t.Version)
		return nil
	})
	if err != nil && !errors.Is(err, mapping.ErrLiveLimit) && !errors.Is(err, mapping.ErrRateLimit) {
		return fmt.Errorf("creating task: %w", err)
	}
	return err
}

// createArgs returns the arguments of createQuery for t.
func createArgs(t *mapping.Task) []any {
	return append([]any{
		t.Key[:], t.Principal, t.Tool, t.ArgsDigest, blob(t.Args), t.ServerBuild, t.CatalogRevision,
		t.Backend, blob(t.JobRef), t.CorrelationID, string(t.Phase), string(t.Status), t.StatusMessage,
		t.CreatedAt.UnixMilli(), t.UpdatedAt.UnixMilli(), t.TTL.Milliseconds(), t.ExpiresAt.UnixMilli(), t.PollInterval.Milliseconds(),
		millis(t.CancelRequestedAt), millis(t.CancelForwardedAt), blob(t.InputRequests), blob(t.AnsweredKeys),
		blob(t.Observation), millis(t.ObservedAt), millis(t.MissingSince), blob(t.Outcome), t.Version,
		millis(t.CancelSentAt), millis(t.SubmittedAt), blob(t.SealedID),
		t.JobID, millis(t.EventAt), t.CancelBy,
	}, lifecycleArgs(t)...)
}

// lifecycleArgs returns the values of the lifecycle state columns of t, in
// the order of columns.
func lifecycleArgs(t *mapping.Task) []any {
	return []any{
		t.CancelAttempts, millis(t.CancelNextAt),
		t.CancelProblem.Class, t.CancelProblem.Call, t.CancelProblem.Status, t.CancelProblem.Message, millis(t.CancelProblem.Since), t.CancelProblem.Count,
		t.Problem.Class, t.Problem.Call, t.Problem.Status, t.Problem.Message, millis(t.Problem.Since), t.Problem.Count,
		t.BackendState, millis(t.StateSince), millis(t.StateSeenAt), millis(t.FirstObservedAt), t.JobMessage,
	}
}

// Get returns the task with key if it belongs to principal and has not
// expired at now; otherwise it returns mapping.ErrNotFound.
func (s *Store) Get(ctx context.Context, key mapping.Key, principal string, now time.Time) (*mapping.Task, error) {
	row := s.get.QueryRowContext(ctx, key[:], principal, now.UnixMilli())
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, mapping.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading task: %w", err)
	}
	return t, nil
}

// Update writes every field of t except Key, Principal and CreatedAt, which
// never change, if the stored row has t.Version and is not terminal; then it
// increments t.Version. Otherwise, and for an unknown key, it returns
// mapping.ErrConflict. An Update to a terminal status frees a slot of the
// stored principal's live-task limit (a trigger, in the same statement);
// since only a task that is not terminal yet can be updated, that happens
// once per task.
//
// The write shares its commit with the concurrent writes of the store (see
// the package comment); Update returns once that commit is durable.
func (s *Store) Update(ctx context.Context, t *mapping.Task) error {
	args := append([]any{
		t.Tool, t.ArgsDigest, blob(t.Args), t.ServerBuild, t.CatalogRevision,
		t.Backend, blob(t.JobRef), t.CorrelationID, string(t.Phase), string(t.Status), t.StatusMessage,
		t.UpdatedAt.UnixMilli(), t.TTL.Milliseconds(), t.ExpiresAt.UnixMilli(), t.PollInterval.Milliseconds(),
		millis(t.CancelRequestedAt), millis(t.CancelForwardedAt), millis(t.CancelSentAt), blob(t.InputRequests), blob(t.AnsweredKeys),
		blob(t.Observation), millis(t.ObservedAt), millis(t.MissingSince), blob(t.Outcome), millis(t.SubmittedAt),
		blob(t.SealedID), t.JobID, millis(t.EventAt), t.CancelBy,
	}, lifecycleArgs(t)...)
	args = append(args, t.Key[:], t.Version)
	err := s.commits.Do(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.exec(ctx, s.update, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return mapping.ErrConflict
		}
		tx.changed(t.Key, t.Version+1)
		return nil
	})
	if errors.Is(err, mapping.ErrConflict) {
		return err
	}
	if err != nil {
		return fmt.Errorf("updating task: %w", err)
	}
	t.Version++
	return nil
}

// ListLive returns up to limit tasks that are neither terminal nor expired at
// now, never-observed tasks first, then by oldest observation, then by
// creation.
func (s *Store) ListLive(ctx context.Context, now time.Time, limit int) ([]*mapping.Task, error) {
	if limit <= 0 {
		return nil, nil
	}
	ts, err := queryTasks(ctx, s.listLive, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("listing live tasks: %w", err)
	}
	return ts, nil
}

// ListByPrincipal returns up to limit (1 to mapping.MaxListLimit) of
// principal's tasks that have not expired at now, newest first (then by
// key), beginning after the cursor after (nil: from the newest), and the
// cursor of the page's last task, or nil if no task follows it. It reads
// one row more than limit to know whether one follows, along the
// tasks_principal_created index.
func (s *Store) ListByPrincipal(ctx context.Context, principal string, now time.Time, after *mapping.Cursor, limit int) ([]*mapping.Task, *mapping.Cursor, error) {
	if limit < 1 || limit > mapping.MaxListLimit {
		return nil, nil, fmt.Errorf("listing tasks: limit %d is not between 1 and %d", limit, mapping.MaxListLimit)
	}
	var (
		ts  []*mapping.Task
		err error
	)
	if after == nil {
		ts, err = queryTasks(ctx, s.listPrincipal, principal, now.UnixMilli(), limit+1)
	} else {
		ts, err = queryTasks(ctx, s.listPrincipalAt, principal, now.UnixMilli(), limit+1, after.CreatedAt.UnixMilli(), after.Key[:])
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	page, next := mapping.Page(ts, limit)
	return page, next, nil
}

// List returns up to limit (1 to mapping.MaxListLimit) of the tasks of any
// principal that match f and have not expired at now, newest first (then
// by key), beginning after the cursor after (nil: from the newest), and the
// cursor of the page's last task, or nil if no task follows it. Filtered by
// principal it walks the tasks_principal_created index from the cursor;
// by correlation ID it searches tasks_correlation; otherwise it reads the
// unexpired tasks and sorts them.
func (s *Store) List(ctx context.Context, f mapping.Filter, now time.Time, after *mapping.Cursor, limit int) ([]*mapping.Task, *mapping.Cursor, error) {
	query, args, err := listQuery(f, now, after, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	ts, err := queryTasksOn(ctx, s.reader, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	page, next := mapping.Page(ts, limit)
	return page, next, nil
}

// listQuery builds List's query, which reads one row more than limit to
// know whether one follows. Statuses are checked against the five and
// written into the query as literals; every other value is a parameter.
func listQuery(f mapping.Filter, now time.Time, after *mapping.Cursor, limit int) (string, []any, error) {
	if limit < 1 || limit > mapping.MaxListLimit {
		return "", nil, fmt.Errorf("limit %d is not between 1 and %d", limit, mapping.MaxListLimit)
	}
	var b strings.Builder
	b.WriteString(`SELECT ` + columns + ` FROM tasks WHERE expires_at > ?`)
	args := []any{now.UnixMilli()}
	if len(f.Status) > 0 {
		b.WriteString(` AND status IN (`)
		for i, st := range f.Status {
			if !st.Valid() {
				return "", nil, fmt.Errorf("unknown status %q", st)
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`'` + string(st) + `'`)
		}
		b.WriteString(`)`)
	}
	for _, c := range []struct{ column, value string }{
		{"principal", f.Principal}, {"tool", f.Tool}, {"correlation_id", f.CorrelationID},
	} {
		if c.value != "" {
			b.WriteString(` AND ` + c.column + ` = ?`)
			args = append(args, c.value)
		}
	}
	if after != nil {
		at := after.CreatedAt.UnixMilli()
		b.WriteString(` AND created_at <= ? AND (created_at < ? OR key > ?)`)
		args = append(args, at, at, after.Key[:])
	}
	b.WriteString(` ORDER BY created_at DESC, key LIMIT ?`)
	args = append(args, limit+1)
	return b.String(), args, nil
}

// FindByJob returns the tasks of backend's job jobID that have not expired
// at now, oldest first, from the tasks_job index. An empty jobID matches
// no task.
func (s *Store) FindByJob(ctx context.Context, backend, jobID string, now time.Time) ([]*mapping.Task, error) {
	if jobID == "" {
		return nil, nil
	}
	ts, err := queryTasks(ctx, s.findJob, backend, jobID, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("finding the tasks of job %s: %w", jobID, err)
	}
	return ts, nil
}

// ClaimDelivery claims the pushed event id from source at now and reports
// whether it is the first claim that counts (see mapping.Store). The claim
// is one statement on the writer, sharing its commit with the concurrent
// writes of the store; its check and insert are one step, also for several
// processes on the file (the writer begins IMMEDIATE).
func (s *Store) ClaimDelivery(ctx context.Context, source, id string, now time.Time) (bool, error) {
	var first bool
	err := s.commits.Do(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.exec(ctx, s.claimDelivery, source, id, now.UnixMilli(), now.Add(-mapping.DeliveryRetention).UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		first = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("claiming delivery %s: %w", id, err)
	}
	return first, nil
}

// Subscribe calls fn with each Create and Update made through this store
// once it committed (see mapping.Store and the package comment).
func (s *Store) Subscribe(fn func(mapping.Change)) (unsubscribe func()) {
	return s.feed.Subscribe(fn)
}

// PurgeExpired deletes the tasks whose ExpiresAt is not after now (the ones
// Get no longer returns) and returns how many it deleted. It deletes them in
// one statement, which also frees the live-task slots of the ones that were
// still live (a trigger), so that an error leaves every row and count in
// place. First it deletes the creation counts of the rate windows that
// ended by now and the delivery claims that no longer count, each in a
// statement of its own: a Create of a task created since starts its window
// afresh over such a row anyway, and a ClaimDelivery takes such a claim
// over, so that deleting them changes nothing either sees, even when the
// tasks' delete fails.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	if _, err := s.purgeCounts.ExecContext(ctx, mapping.RateWindowOf(now).UnixMilli()); err != nil {
		return 0, fmt.Errorf("purging creation counts: %w", err)
	}
	if _, err := s.purgeDeliveries.ExecContext(ctx, now.Add(-mapping.DeliveryRetention).UnixMilli()); err != nil {
		return 0, fmt.Errorf("purging delivery claims: %w", err)
	}
	res, err := s.purge.ExecContext(ctx, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purging expired tasks: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purging expired tasks: %w", err)
	}
	return int(n), nil
}

// Close waits for the writes already queued to commit, ends the
// subscriptions, closes the database and releases the file's lock; Create
// and Update called after Close fail. Further calls return the first
// call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.commits != nil {
			// Commit (or fail) and answer the writes already queued.
			errs = append(errs, s.commits.Close())
		}
		s.feed.Close()
		for _, stmt := range []*sql.Stmt{
			s.create, s.update, s.purge, s.liveCount, s.countCreate, s.purgeCounts,
			s.claimDelivery, s.purgeDeliveries, s.savepoint, s.rollbackTo, s.release,
			s.get, s.listLive, s.listPrincipal, s.listPrincipalAt, s.findJob,
		} {
			if stmt != nil {
				errs = append(errs, stmt.Close())
			}
		}
		// Close readers first, so that the writer's connection is the last
		// one and checkpoints the WAL into the database file.
		errs = append(errs, s.reader.Close(), s.writer.Close())
		// Only then may another store take the file.
		if s.lock != nil {
			releaseLock(s.lock)
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("closing sqlite store: %w", err)
		}
	})
	return s.closeErr
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// queryTasks runs stmt, a query returning columns, and reads its rows.
func queryTasks(ctx context.Context, stmt *sql.Stmt, args ...any) ([]*mapping.Task, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return scanTasks(rows)
}

// queryTasksOn runs query, which returns columns, on db and reads its rows.
func queryTasksOn(ctx context.Context, db *sql.DB, query string, args ...any) ([]*mapping.Task, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanTasks(rows)
}

// scanTasks reads and closes rows of columns.
func scanTasks(rows *sql.Rows) ([]*mapping.Task, error) {
	defer rows.Close()
	var ts []*mapping.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ts, nil
}

// scanTask reads one row of columns.
func scanTask(row scanner) (*mapping.Task, error) {
	var (
		t                                                               mapping.Task
		key                                                             []byte
		phase, status                                                   string
		createdAt, updatedAt, ttl, expiresAt, pollInterval              int64
		cancelRequestedAt, cancelForwardedAt, observedAt, missingSince  sql.NullInt64
		cancelSentAt, submittedAt, eventAt                              sql.NullInt64
		args, jobRef, inputRequests, answeredKeys, observation, outcome nullBlob
		sealedID                                                        nullBlob
		cancelNextAt, cancelProblemSince, problemSince                  sql.NullInt64
		stateSince, stateSeenAt, firstObservedAt                        sql.NullInt64
	)
	err := row.Scan(
		&key, &t.Principal, &t.Tool, &t.ArgsDigest, &args, &t.ServerBuild, &t.CatalogRevision,
		&t.Backend, &jobRef, &t.CorrelationID, &phase, &status, &t.StatusMessage,
		&createdAt, &updatedAt, &ttl, &expiresAt, &pollInterval,
		&cancelRequestedAt, &cancelForwardedAt, &inputRequests, &answeredKeys,
		&observation, &observedAt, &missingSince, &outcome, &t.Version,
		&cancelSentAt, &submittedAt, &sealedID,
		&t.JobID, &eventAt, &t.CancelBy,
		&t.CancelAttempts, &cancelNextAt,
		&t.CancelProblem.Class, &t.CancelProblem.Call, &t.CancelProblem.Status, &t.CancelProblem.Message, &cancelProblemSince, &t.CancelProblem.Count,
		&t.Problem.Class, &t.Problem.Call, &t.Problem.Status, &t.Problem.Message, &problemSince, &t.Problem.Count,
		&t.BackendState, &stateSince, &stateSeenAt, &firstObservedAt, &t.JobMessage,
	)
	if err != nil {
		return nil, err
	}
	t.CancelNextAt = timePtrOf(cancelNextAt)
	t.CancelProblem.Since = timePtrOf(cancelProblemSince)
	t.Problem.Since = timePtrOf(problemSince)
	t.StateSince = timePtrOf(stateSince)
	t.StateSeenAt = timePtrOf(stateSeenAt)
	t.FirstObservedAt = timePtrOf(firstObservedAt)
	if len(key) != len(t.Key) {
		return nil, fmt.Errorf("stored key has %d bytes, want %d", len(key), len(t.Key))
	}
	copy(t.Key[:], key)
	t.Phase = mapping.Phase(phase)
	t.Status = mapping.Status(status)
	t.CreatedAt = timeOf(createdAt)
	t.UpdatedAt = timeOf(updatedAt)
	t.TTL = time.Duration(ttl) * time.Millisecond
	t.ExpiresAt = timeOf(expiresAt)
	t.PollInterval = time.Duration(pollInterval) * time.Millisecond
	t.CancelRequestedAt = timePtrOf(cancelRequestedAt)
	t.CancelForwardedAt = timePtrOf(cancelForwardedAt)
	t.CancelSentAt = timePtrOf(cancelSentAt)
	t.SubmittedAt = timePtrOf(submittedAt)
	t.ObservedAt = timePtrOf(observedAt)
	t.MissingSince = timePtrOf(missingSince)
	t.EventAt = timePtrOf(eventAt)
	t.Args = args.b
	t.JobRef = jobRef.b
	t.InputRequests = inputRequests.b
	t.AnsweredKeys = answeredKeys.b
	t.Observation = observation.b
	t.Outcome = outcome.b
	t.SealedID = sealedID.b
	return &t, nil
}

// blob returns b as a column value: NULL for nil, a (possibly empty) BLOB
// otherwise.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// millis returns t as a column value: NULL for nil, unix milliseconds
// otherwise.
func millis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// timeOf converts stored unix milliseconds to a UTC time.
func timeOf(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// timePtrOf converts a nullable stored time.
func timePtrOf(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := timeOf(ms.Int64)
	return &t
}

// nullBlob scans a nullable BLOB, keeping NULL (nil) apart from an empty
// BLOB (non-nil, zero length).
type nullBlob struct{ b []byte }

// Scan implements sql.Scanner.
func (n *nullBlob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		n.b = nil
	case []byte:
		n.b = append(make([]byte, 0, len(v)), v...)
	case string:
		n.b = []byte(v)
	default:
		return fmt.Errorf("scanning %T into a blob", src)
	}
	return nil
}

// Ping reports whether the store answers a query: the readiness check of
// a server on it.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.reader.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("the SQLite store does not answer: %w", err)
	}
	return nil
}
