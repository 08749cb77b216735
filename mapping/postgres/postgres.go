// Package postgres stores task mappings in PostgreSQL, the store of several
// bridge replicas sharing one database.
//
// It keeps the same table as mapping/sqlite, with the same column meanings
// and the same semantics, and passes the same contract suite
// (mapping/storetest). Times are TIMESTAMPTZ written at millisecond precision
// in UTC and durations are milliseconds, so they read back exactly as the
// SQLite store returns them. Every write commits before it returns; Update is
// conditional on the row's version and on the row not being terminal, so
// replicas racing to write a task serialise on the row and exactly one of
// them wins.
//
// # Group commit
//
// Concurrent Creates and Updates of one Store share transactions
// (mapping/groupcommit): the writes that queue while one transaction
// commits go into the next, each under a savepoint of its own, so that
// they pay for one commit together while each keeps its own outcome (a
// duplicate key, the live-task limit or a lost version check fails that
// write alone) and returns only once its transaction has committed. The
// savepoint statements travel in one pipelined round trip with the write's
// own statement. A batch holds at most 64 writes, the number of
// subtransactions PostgreSQL tracks per transaction without spilling to
// pg_subtrans. Batches run read committed. A write whose row or live count
// another replica's batch holds while waiting for one this batch holds
// (a deadlock PostgreSQL breaks by failing one statement) is retried in a
// later batch, and so is a write that waited a second for a row lock (held
// by a transaction of another replica or of an operator): it waits on in a
// later batch, as long as its context lasts, and the writes queued behind it
// go on. ClaimLive, Release and PurgeExpired commit on their own.
//
// # Live-task limit
//
// The live (not terminal) tasks of each principal are counted in a table of
// their own, live_counts, which triggers change in the same transaction as
// every write to the tasks, whichever replica or build makes it: an insert of
// a live task adds one, an update to a terminal status and a delete of a live
// task take one away. Create locks the principal's count, checks it against
// the limit and inserts the task in one statement: concurrent creates of one
// principal, on any replica, queue on that row lock, so the limit holds
// exactly, and the check costs the same however many tasks there are. The
// writes that change counts (Create, an Update to a terminal status,
// PurgeExpired) run read committed whatever the connection's default, so that
// replicas queueing on a count never fail with a serialization error.
//
// # Creation rate limit
//
// The tasks each principal created in its newest rate window
// (mapping.RateWindow) are counted in create_counts, one row per
// principal. A Create with a rate limit bumps that row in the statement
// that locks the live count and inserts the task (starting the window
// afresh when the task's is newer than the row's), and inserts nothing
// when the row's window already holds the limit: creates of one principal
// on any replica queue on the row lock, so the limit holds across replicas,
// at one row's cost. PurgeExpired deletes the rows of windows that ended,
// in a statement of its own.
//
// # Schema migrations
//
// The schema is versioned (embedded migrations/NNNN_description.sql files)
// and brought up to date by Open, in one transaction that first takes a
// transaction-level advisory lock: replicas that start together wait for one
// another, the first applies the pending migrations and the others find the
// schema current. A database migrated by a newer build is refused.
//
// # Sweeps across replicas
//
// Beyond mapping.Store, [Store.ClaimLive] hands out live tasks to the sweeps
// of several replicas under time-limited leases, so that each task is swept
// by one replica at a time and the leases of a replica that dies run out;
// [Store.Release] gives leases back, [Store.ReleaseOwner] gives back every
// lease of a replica that restarts under the same name, and [Store.Now]
// reads the database's clock, which the replicas share.
//
// # Change feed
//
// Subscribe reports the writes of every replica. A trigger on the tasks
// table (migration 0008) calls pg_notify in the transaction of each insert
// and each update of a task's version, with the payload "KEY:VERSION" (the
// key in hex), so that the notification goes out at commit and never for a
// write that rolled back. The channel is named after the schema that holds
// the table: "jobbridge.tasks." and the schema's name, or a hash of it when
// that would exceed PostgreSQL's 63 bytes (see changesChannel).
// Notifications never cross databases, so stores on different databases
// or schemas of one server do not hear one another.
//
// Each Store keeps one connection of its own, outside the pool and its
// MaxConns, that LISTENs on the channel. It waits for notifications for at
// most a heartbeat at a time and then pings the server, so that a
// connection that died silently is noticed; on any loss it reconnects with
// backoff, LISTENs again and then publishes a Change with Resync set, since
// notifications sent while it was away are lost. The writes made through
// the Store itself are published as soon as their batch commits, in commit
// order, and their notifications (recognised by the sending backend's
// process ID, one of the pool's connections) are skipped; the writes of
// other Stores arrive as the notifications do. Subscribers compare
// versions: a remote change may arrive before or after a local one.
//
// # Connection string
//
// Open takes a PostgreSQL URL (postgres://user:password@host:5432/db?...) or
// keyword/value string, with pgx's pool settings such as pool_max_conns. The
// store prepares and caches its statements on each connection; behind a
// connection pooler in transaction mode add default_query_exec_mode=exec.
//
// The store is built for read committed, PostgreSQL's default isolation
// level. Under a stricter default_transaction_isolation, Update still reports
// a lost race as mapping.ErrConflict, but a ClaimLive that races another may
// fail with a serialization error, to be retried by the next sweep; the
// writes that change live counts run read committed anyway.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/groupcommit"
)

// Options tunes a Store. The zero value (or nil) is the default.
type Options struct {
	// MaxConns caps the connection pool. Zero keeps the connection
	// string's pool_max_conns, or else pgx's default (4, or the number of
	// CPUs if more). The change listener's connection comes on top.
	MaxConns int32
}

// Store is a mapping.Store backed by a PostgreSQL database. It is safe for
// concurrent use, also by several processes sharing the database.
type Store struct {
	pool *pgxpool.Pool
	// commits batches Create and Update into shared transactions, one
	// pool connection per batch.
	commits *groupcommit.Committer[*writeTx]

	// feed publishes the changes of this store (at commit) and of the
	// others (as the listener hears them) to subscribers.
	feed mapping.Feed
	// own holds the backend process IDs of the pool's connections, whose
	// notifications the listener skips: feed had them at commit.
	own *pidSet
	// listener LISTENs for the changes of other stores.
	listener *listener

	closeOnce sync.Once
}

var _ mapping.Store = (*Store)(nil)

// serializationFailure is the SQLSTATE of a transaction that lost a race
// under repeatable read or serializable isolation.
const serializationFailure = "40001"

// deadlockDetected is the SQLSTATE of a statement PostgreSQL failed to
// break a deadlock.
const deadlockDetected = "40P01"

// maxBatch bounds the writes of one group commit: PostgreSQL keeps up to
// 64 subtransaction IDs per transaction in shared memory (more spill to
// pg_subtrans, which slows every snapshot in the database), and each
// write's savepoint that writes takes one.
const maxBatch = 64

// deadlockRetries is how often a write that lost a deadlock is retried,
// each time in a later batch.
const deadlockRetries = 3

// lockNotAvailable is the SQLSTATE of a statement that waited lockTimeout
// for a lock.
const lockNotAvailable = "55P03"

// lockTimeout bounds how long a write of a batch waits for a row lock that
// another transaction holds before it steps out of the batch (rolled back
// to its savepoint) and waits again in a later one, so that the other
// writes of the replica are not held up behind it.
const lockTimeout = time.Second

// applicationName is reported to the server (pg_stat_activity) unless the
// connection string sets application_name.
const applicationName = "jobbridge"

// Open connects to the database at dsn and brings its schema up to date. A
// database written by a newer build (with a schema this build does not know)
// is refused. opts may be nil. The caller must Close the store.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the connection string, password
		// included if it fails to recognise it: say only what is wrong
		// in general.
		return nil, errors.New("opening postgres store: invalid connection string (want postgres://user:password@host:port/database or key=value pairs)")
	}
	if opts != nil && opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	own := &pidSet{pids: map[uint32]struct{}{}}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		own.add(c.PgConn().PID())
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) { own.remove(c.PgConn().PID()) }
	where := fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)

	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return nil, fmt.Errorf("opening postgres store %s: %w", where, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening postgres store %s: %w", where, err)
	}
	if err := migrate(ctx, pool, ms); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening postgres store %s: %w", where, err)
	}
	var schema string
	if err := pool.QueryRow(ctx, tableSchemaQuery).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening postgres store %s: reading the schema of tasks: %w", where, err)
	}
	s := &Store{pool: pool, own: own}
	s.listener, err = listen(ctx, cfg.ConnConfig.Copy(), changesChannel(schema), &s.feed, own, listenTimings{})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening postgres store %s: listening for changes: %w", where, err)
	}
	s.commits = groupcommit.New(s.begin, groupcommit.Options{MaxBatch: maxBatch})
	return s, nil
}

// tableSchemaQuery reads the name of the schema holding the tasks table the
// store's statements resolve to (through search_path), the one whose
// channel its trigger notifies.
const tableSchemaQuery = `SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'tasks'::regclass`

// channelPrefix begins the name of every change channel.
const channelPrefix = "jobbridge.tasks."

// maxChannelLen is the longest channel name (an identifier) PostgreSQL
// takes: NAMEDATALEN-1 bytes.
const maxChannelLen = 63

// changesChannel returns the channel the tasks table of schema notifies,
// as the trigger of migration 0008 names it: channelPrefix and the
// schema's name, or, when that is longer than maxChannelLen bytes,
// channelPrefix and the first 32 hex digits of the name's SHA-256.
func changesChannel(schema string) string {
	if c := channelPrefix + schema; len(c) <= maxChannelLen {
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return channelPrefix + hex.EncodeToString(sum[:])[:32]
}

// pidSet is a set of backend process IDs, safe for concurrent use.
type pidSet struct {
	mu   sync.Mutex
	pids map[uint32]struct{}
}

func (p *pidSet) add(pid uint32) {
	p.mu.Lock()
	p.pids[pid] = struct{}{}
	p.mu.Unlock()
}

func (p *pidSet) remove(pid uint32) {
	p.mu.Lock()
	delete(p.pids, pid)
	p.mu.Unlock()
}

func (p *pidSet) has(pid uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.pids[pid]
	return ok
}

// writeTx is the read committed transaction of one group commit batch. It
// holds back its savepoint statements and sends them in one pipelined
// round trip with the next write's statement (or before COMMIT, when that
// needs them), so that a write under a savepoint costs one round trip, as
// a write without one.
type writeTx struct {
	tx pgx.Tx
	s  *Store
	// changes are the Creates and Updates of the batch that succeeded,
	// published once the batch commits.
	changes []mapping.Change
	// pending are the savepoint statements not sent yet, in order.
	pending []string
	// broken is the error of a savepoint statement that failed: the
	// batch's transaction is unusable and must fail as a whole.
	broken error
	// failed is set when a write's statement failed, which leaves the
	// transaction aborted until it rolls back to the savepoint: the next
	// statement could not even be prepared, so the rollback goes at once.
	failed bool
}

// The savepoint statements; one name serves, as savepoints never nest.
const (
	savepointStmt  = `SAVEPOINT write`
	rollbackToStmt = `ROLLBACK TO SAVEPOINT write`
	releaseStmt    = `RELEASE SAVEPOINT write`
)

// begin begins a batch's transaction on a pool connection.
func (s *Store) begin(ctx context.Context) (*writeTx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	// The first write carries the setting to the server.
	return &writeTx{tx: tx, s: s, pending: []string{setLockTimeout}}, nil
}

// setLockTimeout sets lockTimeout for a batch's transaction.
var setLockTimeout = fmt.Sprintf(`SET LOCAL lock_timeout = %d`, lockTimeout.Milliseconds())

// Exec sends the pending savepoint statements and then runs sql, in one
// round trip.
func (w *writeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if w.broken != nil {
		return pgconn.CommandTag{}, w.broken
	}
	if len(w.pending) == 0 {
		tag, err := w.tx.Exec(ctx, sql, args...)
		w.failed = err != nil
		return tag, err
	}
	b := &pgx.Batch{}
	for _, p := range w.pending {
		b.Queue(p)
	}
	b.Queue(sql, args...)
	pending := w.pending
	w.pending = w.pending[:0]
	br := w.tx.SendBatch(ctx, b)
	for _, p := range pending {
		if _, err := br.Exec(); err != nil {
			w.broken = fmt.Errorf("%s: %w", p, err)
			_ = br.Close()
			return pgconn.CommandTag{}, w.broken
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	w.failed = err != nil
	return tag, err
}

// QueryRow sends the pending savepoint statements and then runs sql, in
// one round trip, scanning its one row into dest.
func (w *writeTx) QueryRow(ctx context.Context, dest []any, sql string, args ...any) error {
	if w.broken != nil {
		return w.broken
	}
	if len(w.pending) == 0 {
		err := w.tx.QueryRow(ctx, sql, args...).Scan(dest...)
		w.failed = err != nil
		return err
	}
	b := &pgx.Batch{}
	for _, p := range w.pending {
		b.Queue(p)
	}
	b.Queue(sql, args...)
	pending := w.pending
	w.pending = w.pending[:0]
	br := w.tx.SendBatch(ctx, b)
	for _, p := range pending {
		if _, err := br.Exec(); err != nil {
			w.broken = fmt.Errorf("%s: %w", p, err)
			_ = br.Close()
			return w.broken
		}
	}
	err := br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	w.failed = err != nil
	return err
}

// flush sends the pending savepoint statements.
func (w *writeTx) flush(ctx context.Context) error {
	if w.broken != nil {
		return w.broken
	}
	for len(w.pending) > 0 {
		p := w.pending[0]
		w.pending = w.pending[1:]
		if _, err := w.tx.Exec(ctx, p); err != nil {
			w.broken = fmt.Errorf("%s: %w", p, err)
			return w.broken
		}
	}
	return nil
}

// Savepoint implements groupcommit.Tx; the statement goes with the next.
func (w *writeTx) Savepoint(context.Context) error {
	if w.broken != nil {
		return w.broken
	}
	w.pending = append(w.pending, savepointStmt)
	return nil
}

// RollbackToSavepoint implements groupcommit.Tx. A savepoint not sent yet
// has nothing to undo; after a failed statement the rollback goes at once
// (the transaction is aborted until then); otherwise it goes with the next
// statement. It fails if a savepoint statement failed, which leaves the
// transaction unusable.
func (w *writeTx) RollbackToSavepoint(ctx context.Context) error {
	if w.broken != nil {
		return w.broken
	}
	if n := len(w.pending); n > 0 && w.pending[n-1] == savepointStmt {
		return nil
	}
	w.pending = append(w.pending, rollbackToStmt)
	if w.failed {
		w.failed = false
		return w.flush(ctx)
	}
	return nil
}

// ReleaseSavepoint implements groupcommit.Tx; the statement goes with the
// next.
func (w *writeTx) ReleaseSavepoint(context.Context) error {
	if w.broken != nil {
		return w.broken
	}
	w.pending = append(w.pending, releaseStmt)
	return nil
}

// Commit implements groupcommit.Tx. COMMIT releases every savepoint, so
// only a pending rollback needs sending first.
func (w *writeTx) Commit(ctx context.Context) error {
	for n := len(w.pending); n > 0 && (w.pending[n-1] == releaseStmt || w.pending[n-1] == savepointStmt); n-- {
		w.pending = w.pending[:n-1]
	}
	if err := w.flush(ctx); err != nil {
		_ = w.tx.Rollback(ctx)
		return err
	}
	if err := w.tx.Commit(ctx); err != nil {
		return err
	}
	// On the committer's goroutine, so in commit order, before the
	// writers are answered.
	for _, c := range w.changes {
		w.s.feed.Publish(c)
	}
	return nil
}

// changed records a write's change, to be published if the batch commits.
// A write calls it last, once nothing can fail it any more.
func (w *writeTx) changed(key mapping.Key, version int64) {
	w.changes = append(w.changes, mapping.Change{Key: key, Version: version})
}

// Rollback implements groupcommit.Tx.
func (w *writeTx) Rollback(ctx context.Context) error { return w.tx.Rollback(ctx) }

// write runs fn in a group commit batch, retrying it in a later batch when
// it lost a deadlock (up to deadlockRetries times) or waited lockTimeout
// for a lock (as long as ctx lasts): a savepoint undid it, the others of its
// batch went on.
func (s *Store) write(ctx context.Context, fn groupcommit.Write[*writeTx]) error {
	deadlocks := 0
	for {
		err := s.commits.Do(ctx, fn)
		pgErr := (*pgconn.PgError)(nil)
		switch {
		case !errors.As(err, &pgErr):
		case pgErr.Code == deadlockDetected && deadlocks < deadlockRetries:
			deadlocks++
			continue
		case pgErr.Code == lockNotAvailable && ctx.Err() == nil:
			continue
		}
		return err
	}
}

// columns lists the tasks columns in the order scanTask reads them and Create
// binds them.
const columns = `key, principal, tool, args_digest, args, server_build, catalog_revision,
	backend, job_ref, correlation_id, phase, status, status_message,
	created_at, updated_at, ttl_ms, expires_at, poll_interval_ms,
	cancel_requested_at, cancel_forwarded_at, cancel_sent_at, input_requests, answered_keys,
	observation, observed_at, missing_since, outcome, version, submitted_at, sealed_id,
	job_id, event_at, cancel_by,
	cancel_attempts, cancel_next_at,
	cancel_problem_class, cancel_problem_call, cancel_problem_status, cancel_problem_message, cancel_problem_since, cancel_problem_count,
	problem_class, problem_call, problem_status, problem_message, problem_since, problem_count,
	backend_state, state_since, state_seen_at, first_observed_at, job_message`

// liveCondition selects the tasks in the tasks_live index, the live ones.
const liveCondition = `status IN ('working', 'input_required')`

// notTerminal is Update's condition: the row is not completed, failed or
// cancelled.
const notTerminal = `status NOT IN ('completed', 'failed', 'cancelled')`

// liveOrder is the order of ListLive and ClaimLive, the tasks_live index's:
// never-observed tasks first, then by oldest observation, then by creation.
const liveOrder = `observed_at ASC NULLS FIRST, created_at, key`

// createQuery inserts a task, binding columns in order, if its principal
// ($2) has fewer than $29 live tasks or $29 is not positive, and has
// created fewer than $32 tasks in the rate window starting at $33 or $32 is
// not positive; otherwise it inserts nothing. It returns whether the live
// count let it through and whether it inserted the task.
//
// It first locks the principal's live count (creating it at zero if there
// is none), so that concurrent creates of one principal take turns and each
// sees the count the previous one left; the insert trigger then adds the
// new task to it. Then, with a rate limit and only past the live limit, it
// counts the task in the principal's create_counts row (starting the
// window afresh when $33 is newer than the row's; a task of an older
// window counts in the row's), unless that window holds $32 tasks already;
// only a counted task is inserted. Every part of the statement commits or
// fails together: a duplicate key leaves no count behind.
const createQuery = `WITH slot AS (
		INSERT INTO live_counts AS c (principal, n) VALUES ($2, 0)
		ON CONFLICT (principal) DO UPDATE SET n = c.n
		WHERE $29::bigint <= 0 OR c.n < $29::bigint
		RETURNING n
	), counted AS (
		INSERT INTO create_counts AS r (principal, window_start, n)
		SELECT $2, $33::timestamptz, 1 FROM slot WHERE $32::bigint > 0
		ON CONFLICT (principal) DO UPDATE SET
			window_start = greatest(r.window_start, excluded.window_start),
			n = CASE WHEN excluded.window_start > r.window_start THEN 1 ELSE r.n + 1 END
		WHERE excluded.window_start > r.window_start OR r.n < $32::bigint
		RETURNING n
	), admitted AS (
		SELECT 1 FROM slot WHERE $32::bigint <= 0
		UNION ALL
		SELECT 1 FROM counted
	), inserted AS (
		INSERT INTO tasks (` + columns + `)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
			$19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $30, $31, $34, $35, $36,
			$37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55
		FROM admitted
		RETURNING 1
	)
	SELECT EXISTS (SELECT FROM slot), EXISTS (SELECT FROM inserted)`

// purgeCountsQuery deletes the counts of the rate windows that started
// before $1, along the create_counts_window index.
const purgeCountsQuery = `DELETE FROM create_counts WHERE window_start < $1`

// updateQuery writes the mutable columns of a task if its version matches
// and it is not terminal. Under read committed, a writer that waited for
// another's row lock re-evaluates the condition on the row the other wrote,
// so only one of the writers holding the same version succeeds.
const updateQuery = `UPDATE tasks SET
	tool = $1, args_digest = $2, args = $3, server_build = $4, catalog_revision = $5,
	backend = $6, job_ref = $7, correlation_id = $8, phase = $9, status = $10, status_message = $11,
	updated_at = $12, ttl_ms = $13, expires_at = $14, poll_interval_ms = $15,
	cancel_requested_at = $16, cancel_forwarded_at = $17, cancel_sent_at = $18,
	input_requests = $19, answered_keys = $20,
	observation = $21, observed_at = $22, missing_since = $23, outcome = $24, submitted_at = $27,
	sealed_id = $28, job_id = $29, event_at = $30, cancel_by = $31,
	cancel_attempts = $32, cancel_next_at = $33,
	cancel_problem_class = $34, cancel_problem_call = $35, cancel_problem_status = $36, cancel_problem_message = $37, cancel_problem_since = $38, cancel_problem_count = $39,
	problem_class = $40, problem_call = $41, problem_status = $42, problem_message = $43, problem_since = $44, problem_count = $45,
	backend_state = $46, state_since = $47, state_seen_at = $48, first_observed_at = $49, job_message = $50,
	version = version + 1
	WHERE key = $25 AND version = $26 AND ` + notTerminal

// getQuery reads a task by primary key.
const getQuery = `SELECT ` + columns + ` FROM tasks
	WHERE key = $1 AND principal = $2 AND expires_at > $3`

// listLiveQuery walks the tasks_live partial index in order.
const listLiveQuery = `SELECT ` + columns + ` FROM tasks
	WHERE ` + liveCondition + ` AND expires_at > $1
	ORDER BY ` + liveOrder + `
	LIMIT $2`

// listPrincipalQuery reads up to $3 unexpired (at $2) tasks of principal
// $1, newest first, walking the tasks_principal_created index in its order.
const listPrincipalQuery = `SELECT ` + columns + ` FROM tasks
	WHERE principal = $1 AND expires_at > $2
	ORDER BY created_at DESC, key
	LIMIT $3`

// listPrincipalAfterQuery is listPrincipalQuery from after the cursor ($4,
// $5): the index scan starts at the cursor's created_at (which
// created_at <= $4 bounds) and skips its ties up to the cursor's key.
const listPrincipalAfterQuery = `SELECT ` + columns + ` FROM tasks
	WHERE principal = $1 AND expires_at > $2
		AND created_at <= $4 AND (created_at < $4 OR key > $5)
	ORDER BY created_at DESC, key
	LIMIT $3`

// purgeQuery deletes along the tasks_expires_at index.
const purgeQuery = `DELETE FROM tasks WHERE expires_at <= $1`

// findJobQuery reads the unexpired (at $3) tasks of backend $1 and job $2
// from the tasks_job index.
const findJobQuery = `SELECT ` + columns + ` FROM tasks
	WHERE backend = $1 AND job_id = $2 AND job_id <> '' AND expires_at > $3
	ORDER BY created_at, key`

// claimDeliveryQuery claims delivery ($1, $2) at $3: it inserts the claim,
// or takes over one made at or before $4 (a claim that no longer counts);
// it changes no row when a claim that counts exists. A concurrent claim of
// the same delivery waits for this one's transaction and then, under read
// committed, sees the committed claim and changes nothing.
const claimDeliveryQuery = `INSERT INTO deliveries AS d (source, id, claimed_at) VALUES ($1, $2, $3)
	ON CONFLICT (source, id) DO UPDATE SET claimed_at = excluded.claimed_at
	WHERE d.claimed_at <= $4`

// purgeDeliveriesQuery forgets the claims made at or before $1, along the
// deliveries_claimed index.
const purgeDeliveriesQuery = `DELETE FROM deliveries WHERE claimed_at <= $1`

// clock is the SQL time of ClaimLive: its $1 argument, or the database's
// clock (the transaction's start, which for a single statement is when it
// started) when that is NULL.
const clock = `coalesce($1::timestamptz, now())`

// claimLiveQuery locks up to $2 live, unexpired tasks whose lease is free,
// in liveOrder, skipping rows that a concurrent claim has locked; leases them
// to $3 for $4 milliseconds; and returns them in liveOrder. A row another
// claim leased and committed after this statement's snapshot is locked and
// then re-checked against the conditions, which its new lease fails. The
// locked set is materialised, so that it is chosen exactly once.
const claimLiveQuery = `WITH due AS MATERIALIZED (
		SELECT key AS due_key FROM tasks
		WHERE ` + liveCondition + ` AND expires_at > ` + clock + `
			AND (lease_until IS NULL OR lease_until <= ` + clock + `)
		ORDER BY ` + liveOrder + `
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE tasks SET lease_owner = $3, lease_until = ` + clock + ` + $4::bigint * interval '1 millisecond'
		FROM due WHERE key = due_key
		RETURNING ` + columns + `
	)
	SELECT ` + columns + ` FROM claimed ORDER BY ` + liveOrder

// releaseQuery frees the leases $1 holds, on the tasks with keys $2 or, when
// $2 is NULL, on every task.
const releaseQuery = `UPDATE tasks SET lease_owner = NULL, lease_until = NULL
	WHERE lease_owner = $1 AND ($2::bytea[] IS NULL OR key = ANY($2::bytea[]))`

// Create inserts t. A key that already exists is an error.
//
// When limits.MaxLive is positive and t.Principal already has MaxLive live
// tasks, it returns mapping.ErrLiveLimit and inserts nothing. A task is
// live from its creation until an Update makes it terminal or PurgeExpired
// deletes it: a task whose ExpiresAt has passed still counts until a sweep
// (every 10 s by default, on any replica) purges it. The check reads one
// counter, whatever the number of tasks, and holds its row lock until the
// insert commits, so concurrent creates on any number of replicas never
// exceed the limit.
//
// When limits.PerMinute is positive and t.Principal already created
// PerMinute tasks in its newest rate window (t.CreatedAt's, or a newer one
// another replica started), it returns mapping.ErrRateLimit and inserts
// nothing; the count is one row, locked until the insert commits, like the
// live count. The insert shares its commit with the concurrent writes of
// the store (see the package comment).
func (s *Store) Create(ctx context.Context, t *mapping.Task, limits mapping.CreateLimits) error {
	args := []any{
		t.Key[:], t.Principal, t.Tool, t.ArgsDigest, blob(t.Args), t.ServerBuild, t.CatalogRevision,
		t.Backend, blob(t.JobRef), t.CorrelationID, string(t.Phase), string(t.Status), t.StatusMessage,
		ts(t.CreatedAt), ts(t.UpdatedAt), t.TTL.Milliseconds(), ts(t.ExpiresAt), t.PollInterval.Milliseconds(),
		tsPtr(t.CancelRequestedAt), tsPtr(t.CancelForwardedAt), tsPtr(t.CancelSentAt), blob(t.InputRequests), blob(t.AnsweredKeys),
		blob(t.Observation), tsPtr(t.ObservedAt), tsPtr(t.MissingSince), blob(t.Outcome), t.Version,
		max(limits.MaxLive, 0), tsPtr(t.SubmittedAt), blob(t.SealedID),
		max(limits.PerMinute, 0), mapping.RateWindowOf(t.CreatedAt),
		t.JobID, tsPtr(t.EventAt), t.CancelBy,
	}
	args = append(args, lifecycleArgs(t)...)
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var live, inserted bool
		if err := tx.QueryRow(ctx, []any{&live, &inserted}, createQuery, args...); err != nil {
			return err
		}
		switch {
		case !live:
			return mapping.ErrLiveLimit
		case !inserted:
			return mapping.ErrRateLimit
		}
		tx.changed(t.Key, t.Version)
		return nil
	})
	if err != nil && !errors.Is(err, mapping.ErrLiveLimit) && !errors.Is(err, mapping.ErrRateLimit) {
		return fmt.Errorf("creating task: %w", err)
	}
	return err
}

// Get returns the task with key if it belongs to principal and has not
// expired at now; otherwise it returns mapping.ErrNotFound.
func (s *Store) Get(ctx context.Context, key mapping.Key, principal string, now time.Time) (*mapping.Task, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, getQuery, key[:], principal, ts(now)))
	if errors.Is(err, pgx.ErrNoRows) {
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
// mapping.ErrConflict. It leaves the task's sweep lease alone: a lease only
// spreads sweeps, and any replica may update a task whoever holds it.
//
// An Update to a terminal status frees a slot of the stored principal's
// live-task limit (the update trigger, in the same transaction); since only
// a task that is not terminal yet can be updated, that happens once per
// task. It runs read committed, sharing its commit with the concurrent
// writes of the store (see the package comment).
func (s *Store) Update(ctx context.Context, t *mapping.Task) error {
	args := []any{
		t.Tool, t.ArgsDigest, blob(t.Args), t.ServerBuild, t.CatalogRevision,
		t.Backend, blob(t.JobRef), t.CorrelationID, string(t.Phase), string(t.Status), t.StatusMessage,
		ts(t.UpdatedAt), t.TTL.Milliseconds(), ts(t.ExpiresAt), t.PollInterval.Milliseconds(),
		tsPtr(t.CancelRequestedAt), tsPtr(t.CancelForwardedAt), tsPtr(t.CancelSentAt), blob(t.InputRequests), blob(t.AnsweredKeys),
		blob(t.Observation), tsPtr(t.ObservedAt), tsPtr(t.MissingSince), blob(t.Outcome),
		t.Key[:], t.Version, tsPtr(t.SubmittedAt), blob(t.SealedID),
		t.JobID, tsPtr(t.EventAt), t.CancelBy,
	}
	args = append(args, lifecycleArgs(t)...)
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		tag, err := tx.Exec(ctx, updateQuery, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return mapping.ErrConflict
		}
		tx.changed(t.Key, t.Version+1)
		return nil
	})
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == serializationFailure {
		// The connection string chose a stricter isolation level, under
		// which a concurrent writer fails the update instead of leaving
		// it no row to match.
		return mapping.ErrConflict
	}
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
// creation. It ignores sweep leases.
func (s *Store) ListLive(ctx context.Context, now time.Time, limit int) ([]*mapping.Task, error) {
	if limit <= 0 {
		return nil, nil
	}
	tasks, err := s.queryTasks(ctx, listLiveQuery, ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("listing live tasks: %w", err)
	}
	return tasks, nil
}

// ListByPrincipal returns up to limit (1 to mapping.MaxListLimit) of
// principal's tasks that have not expired at now, newest first (then by
// key), beginning after the cursor after (nil: from the newest), and the
// cursor of the page's last task, or nil if no task follows it. It reads
// one row more than limit to know whether one follows, along the
// tasks_principal_created index, in one statement (one snapshot).
func (s *Store) ListByPrincipal(ctx context.Context, principal string, now time.Time, after *mapping.Cursor, limit int) ([]*mapping.Task, *mapping.Cursor, error) {
	if limit < 1 || limit > mapping.MaxListLimit {
		return nil, nil, fmt.Errorf("listing tasks: limit %d is not between 1 and %d", limit, mapping.MaxListLimit)
	}
	var (
		tasks []*mapping.Task
		err   error
	)
	if after == nil {
		tasks, err = s.queryTasks(ctx, listPrincipalQuery, principal, ts(now), limit+1)
	} else {
		tasks, err = s.queryTasks(ctx, listPrincipalAfterQuery, principal, ts(now), limit+1, ts(after.CreatedAt), after.Key[:])
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	page, next := mapping.Page(tasks, limit)
	return page, next, nil
}

// List returns up to limit (1 to mapping.MaxListLimit) of the tasks of any
// principal that match f and have not expired at now, newest first (then
// by key), beginning after the cursor after (nil: from the newest), and the
// cursor of the page's last task, or nil if no task follows it, in one
// statement (one snapshot). Filtered by principal it walks the
// tasks_principal_created index from the cursor; by correlation ID it
// searches tasks_correlation; otherwise it reads the unexpired tasks.
func (s *Store) List(ctx context.Context, f mapping.Filter, now time.Time, after *mapping.Cursor, limit int) ([]*mapping.Task, *mapping.Cursor, error) {
	query, args, err := listQuery(f, now, after, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	tasks, err := s.queryTasks(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	page, next := mapping.Page(tasks, limit)
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
	args := []any{ts(now)}
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	b.WriteString(`SELECT ` + columns + ` FROM tasks WHERE expires_at > $1`)
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
			b.WriteString(` AND ` + c.column + ` = ` + param(c.value))
		}
	}
	if after != nil {
		at := param(ts(after.CreatedAt))
		b.WriteString(` AND created_at <= ` + at + ` AND (created_at < ` + at + ` OR key > ` + param(after.Key[:]) + `)`)
	}
	b.WriteString(` ORDER BY created_at DESC, key LIMIT ` + param(limit+1))
	return b.String(), args, nil
}

// FindByJob returns the tasks of backend's job jobID that have not expired
// at now, oldest first, from the tasks_job index. An empty jobID matches
// no task.
func (s *Store) FindByJob(ctx context.Context, backend, jobID string, now time.Time) ([]*mapping.Task, error) {
	if jobID == "" {
		return nil, nil
	}
	tasks, err := s.queryTasks(ctx, findJobQuery, backend, jobID, ts(now))
	if err != nil {
		return nil, fmt.Errorf("finding the tasks of job %s: %w", jobID, err)
	}
	return tasks, nil
}

// ClaimDelivery claims the pushed event id from source at now and reports
// whether it is the first claim that counts (see mapping.Store): one
// statement, sharing its commit with the concurrent writes of the store;
// concurrent claims of one delivery on any replica queue on its key, and
// exactly one of them inserts. Replicas compare claim times, so they
// should pass the same clock (their own, kept in sync, or Now's).
func (s *Store) ClaimDelivery(ctx context.Context, source, id string, now time.Time) (bool, error) {
	var first bool
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		tag, err := tx.Exec(ctx, claimDeliveryQuery, source, id, ts(now), ts(now.Add(-mapping.DeliveryRetention)))
		if err != nil {
			return err
		}
		first = tag.RowsAffected() > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("claiming delivery %s: %w", id, err)
	}
	return first, nil
}

// Subscribe calls fn with each Create and Update of any store on the
// database once it committed (see mapping.Store and the package comment).
func (s *Store) Subscribe(fn func(mapping.Change)) (unsubscribe func()) {
	return s.feed.Subscribe(fn)
}

// PurgeExpired deletes the tasks whose ExpiresAt is not after now (the ones
// Get no longer returns) and returns how many it deleted. It deletes them in
// one statement, which also frees the live-task slots of those that were
// still live (the delete trigger), so that an error leaves every row and
// count in place; replicas purging at the same time each delete a row at
// most once between them.
//
// First it deletes the creation counts of the rate windows that ended by
// now and the delivery claims that no longer count, each in a statement of
// its own (holding no lock on a live count, so that it never deadlocks with
// a Create): a Create of a task created since starts its window afresh
// over such a row anyway, and a ClaimDelivery takes such a claim over, so
// that deleting them changes nothing either sees, even when the tasks'
// delete fails.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	if _, err := s.pool.Exec(ctx, purgeCountsQuery, mapping.RateWindowOf(now)); err != nil {
		return 0, fmt.Errorf("purging creation counts: %w", err)
	}
	if _, err := s.pool.Exec(ctx, purgeDeliveriesQuery, ts(now.Add(-mapping.DeliveryRetention))); err != nil {
		return 0, fmt.Errorf("purging delivery claims: %w", err)
	}
	var n int64
	err := s.readCommitted(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, purgeQuery, ts(now))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purging expired tasks: %w", err)
	}
	return int(n), nil
}

// ClaimLive leases up to limit tasks to owner for a sweep and returns them:
// tasks that are not terminal, have not expired at now, and whose lease is
// free (never taken, released, or run out: a lease taken at T for d is held
// while now is before T+d). It takes them in ListLive's order and sets their
// lease to owner until now+lease.
//
// The claim is one statement that locks the rows it takes and skips rows a
// concurrent claim has locked (FOR UPDATE SKIP LOCKED), so concurrent claims
// by several replicas never return the same task while its lease holds; a
// claim may return fewer than limit tasks when it raced with another. A
// replica that dies keeps its leases until they run out, after which other
// replicas claim its tasks. Leases are advisory: they keep sweeps apart, but
// Update ignores them, so the conditional Update still decides every write.
//
// When now is the zero time, the database's clock decides expiry and
// leases, so that replicas with skewed clocks agree; ClaimLive then uses the
// time its statement started (SQL now()). Replicas sharing a database should
// all pass the zero time, or all pass their own clocks: lease ends are
// compared across replicas. An owner's own unexpired leases are not claimed
// again either; Release makes them free early. owner must not be empty and
// lease must be positive.
func (s *Store) ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error) {
	if owner == "" {
		return nil, errors.New("claiming live tasks: empty lease owner")
	}
	if lease <= 0 {
		return nil, fmt.Errorf("claiming live tasks: lease %v is not positive", lease)
	}
	if limit <= 0 {
		return nil, nil
	}
	var at any // NULL: the database's clock
	if !now.IsZero() {
		at = ts(now)
	}
	// Leases below a millisecond would store as an instant lease.
	tasks, err := s.queryTasks(ctx, claimLiveQuery, at, limit, owner, max(lease.Milliseconds(), 1))
	if err != nil {
		return nil, fmt.Errorf("claiming live tasks: %w", err)
	}
	return tasks, nil
}

// Release frees the leases owner holds on the tasks with the given keys, or
// on all its tasks when no key is given (a replica shutting down), so that
// the next claim by any replica may take them at once. Leases held by other
// owners are left alone. It returns how many leases it freed. Releasing all
// of an owner's leases reads the whole table.
func (s *Store) Release(ctx context.Context, owner string, keys ...mapping.Key) (int, error) {
	var ks [][]byte // nil: every task
	if len(keys) > 0 {
		ks = make([][]byte, len(keys))
		for i := range keys {
			ks[i] = keys[i][:]
		}
	}
	tag, err := s.pool.Exec(ctx, releaseQuery, owner, ks)
	if err != nil {
		return 0, fmt.Errorf("releasing leases: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReleaseOwner frees every lease owner holds, so that the next claim by
// any replica, owner included, may take those tasks at once. A replica that
// restarts under the same name calls it before its first sweep: the leases
// its previous process left would otherwise hold its share of the tasks
// until they run out, since ClaimLive does not hand an owner its own
// unexpired leases. It reads the whole table, which is fine once per start.
func (s *Store) ReleaseOwner(ctx context.Context, owner string) error {
	if owner == "" {
		return errors.New("releasing leases: empty lease owner")
	}
	if _, err := s.Release(ctx, owner); err != nil {
		return err
	}
	return nil
}

// Now returns the database's clock (SQL now()) in UTC, at the microsecond
// precision PostgreSQL keeps. Replicas that compare times among themselves,
// such as lease expiries, use it rather than their own clocks.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("reading the database clock: %w", err)
	}
	return now.UTC(), nil
}

// execer is a *pgxpool.Pool or a pgx.Tx.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// readCommitted runs fn in a read committed transaction, whatever the
// connection's default isolation, and commits it if fn returns nil.
func (s *Store) readCommitted(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// Close waits for the writes already queued to commit, stops the listener,
// ends the subscriptions, then closes the connection pool, waiting for
// queries in progress to end; Create and Update called after Close fail.
// Further calls do nothing and return nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		_ = s.commits.Close()
		s.listener.close()
		s.feed.Close()
		s.pool.Close()
	})
	return nil
}

// queryTasks runs a query returning columns.
func (s *Store) queryTasks(ctx context.Context, query string, args ...any) ([]*mapping.Task, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tasks []*mapping.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return tasks, nil
}

// scanTask reads one row of columns.
func scanTask(row pgx.Row) (*mapping.Task, error) {
	var (
		t                                                               mapping.Task
		key                                                             []byte
		phase, status                                                   string
		createdAt, updatedAt, expiresAt                                 time.Time
		ttl, pollInterval                                               int64
		cancelRequestedAt, cancelForwardedAt, cancelSentAt, submittedAt *time.Time
		observedAt, missingSince, eventAt                               *time.Time
		args, jobRef, inputRequests, answeredKeys, observation, outcome []byte
		sealedID                                                        []byte
		cancelNextAt, cancelProblemSince, problemSince                  *time.Time
		stateSince, stateSeenAt, firstObservedAt                        *time.Time
	)
	err := row.Scan(
		&key, &t.Principal, &t.Tool, &t.ArgsDigest, &args, &t.ServerBuild, &t.CatalogRevision,
		&t.Backend, &jobRef, &t.CorrelationID, &phase, &status, &t.StatusMessage,
		&createdAt, &updatedAt, &ttl, &expiresAt, &pollInterval,
		&cancelRequestedAt, &cancelForwardedAt, &cancelSentAt, &inputRequests, &answeredKeys,
		&observation, &observedAt, &missingSince, &outcome, &t.Version, &submittedAt, &sealedID,
		&t.JobID, &eventAt, &t.CancelBy,
		&t.CancelAttempts, &cancelNextAt,
		&t.CancelProblem.Class, &t.CancelProblem.Call, &t.CancelProblem.Status, &t.CancelProblem.Message, &cancelProblemSince, &t.CancelProblem.Count,
		&t.Problem.Class, &t.Problem.Call, &t.Problem.Status, &t.Problem.Message, &problemSince, &t.Problem.Count,
		&t.BackendState, &stateSince, &stateSeenAt, &firstObservedAt, &t.JobMessage,
	)
	if err != nil {
		return nil, err
	}
	t.CancelNextAt = utcPtr(cancelNextAt)
	t.CancelProblem.Since = utcPtr(cancelProblemSince)
	t.Problem.Since = utcPtr(problemSince)
	t.StateSince = utcPtr(stateSince)
	t.StateSeenAt = utcPtr(stateSeenAt)
	t.FirstObservedAt = utcPtr(firstObservedAt)
	if len(key) != len(t.Key) {
		return nil, fmt.Errorf("stored key has %d bytes, want %d", len(key), len(t.Key))
	}
	copy(t.Key[:], key)
	t.Phase = mapping.Phase(phase)
	t.Status = mapping.Status(status)
	t.CreatedAt = createdAt.UTC()
	t.UpdatedAt = updatedAt.UTC()
	t.TTL = time.Duration(ttl) * time.Millisecond
	t.ExpiresAt = expiresAt.UTC()
	t.PollInterval = time.Duration(pollInterval) * time.Millisecond
	t.CancelRequestedAt = utcPtr(cancelRequestedAt)
	t.CancelForwardedAt = utcPtr(cancelForwardedAt)
	t.CancelSentAt = utcPtr(cancelSentAt)
	t.SubmittedAt = utcPtr(submittedAt)
	t.ObservedAt = utcPtr(observedAt)
	t.MissingSince = utcPtr(missingSince)
	t.EventAt = utcPtr(eventAt)
	// pgx scans NULL as nil and an empty BYTEA as a non-nil empty slice,
	// each into its own copy.
	t.Args = args
	t.JobRef = jobRef
	t.InputRequests = inputRequests
	t.AnsweredKeys = answeredKeys
	t.Observation = observation
	t.Outcome = outcome
	t.SealedID = sealedID
	return &t, nil
}

// lifecycleArgs returns the values of the lifecycle state columns of t, in
// the order of columns (Create's $37..$55, Update's $32..$50).
func lifecycleArgs(t *mapping.Task) []any {
	return []any{
		t.CancelAttempts, tsPtr(t.CancelNextAt),
		t.CancelProblem.Class, t.CancelProblem.Call, t.CancelProblem.Status, t.CancelProblem.Message, tsPtr(t.CancelProblem.Since), t.CancelProblem.Count,
		t.Problem.Class, t.Problem.Call, t.Problem.Status, t.Problem.Message, tsPtr(t.Problem.Since), t.Problem.Count,
		t.BackendState, tsPtr(t.StateSince), tsPtr(t.StateSeenAt), tsPtr(t.FirstObservedAt), t.JobMessage,
	}
}

// blob returns b as a column value: NULL for nil, a (possibly empty) BYTEA
// otherwise.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// ts returns t as a column value: UTC at millisecond precision, as the
// SQLite store keeps times.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// tsPtr returns t as a column value: NULL for nil, ts(*t) otherwise.
func tsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

// utcPtr returns t in UTC, nil for nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Ping reports whether the database answers on a pool connection: the
// readiness check of a server on it.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("the PostgreSQL store does not answer: %w", err)
	}
	return nil
}
