package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

// The package's tests share one throwaway PostgreSQL server; each test
// gets databases of its own.
func TestMain(m *testing.M) { pgtest.Main(m) }

// newDatabase returns the connection string of a new, empty database that
// is dropped when t ends.
func newDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.Shared(t).NewDatabase(t)
}

// openAt opens the store at dsn and closes it when the test ends.
func openAt(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openFresh opens a store on a new database.
func openFresh(t testing.TB) *Store {
	t.Helper()
	return openAt(t, newDatabase(t))
}

func TestStoreContract(t *testing.T) {
	var dsns sync.Map // *Store → its connection string
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) mapping.Store {
			dsn := newDatabase(t)
			s := openAt(t, dsn)
			dsns.Store(s, dsn)
			return s
		},
		Reopen: func(t *testing.T, old mapping.Store) mapping.Store {
			dsn, ok := dsns.Load(old)
			if !ok {
				t.Fatal("Reopen of a store the harness did not open")
			}
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, dsn.(string))
		},
		Peer: func(t *testing.T, s mapping.Store) mapping.Store {
			dsn, ok := dsns.Load(s)
			if !ok {
				t.Fatal("Peer of a store the harness did not open")
			}
			return openAt(t, dsn.(string))
		},
	})
}

// task returns a live, never-observed task created at now.
func task(id string, now time.Time) *mapping.Task {
	now = now.UTC().Truncate(time.Millisecond)
	return &mapping.Task{
		Key:           mapping.KeyOf(id),
		Principal:     "alice",
		Tool:          "deploy",
		ArgsDigest:    "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef",
		Backend:       "rest",
		JobRef:        json.RawMessage(`{"id":"job-1"}`),
		JobID:         "job-1",
		CorrelationID: "corr-" + id,
		Phase:         mapping.PhaseSubmitted,
		Status:        mapping.StatusWorking,
		CreatedAt:     now,
		UpdatedAt:     now,
		TTL:           time.Hour,
		ExpiresAt:     now.Add(time.Hour),
		PollInterval:  5 * time.Second,
	}
}

func mustCreate(t testing.TB, s *Store, tasks ...*mapping.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.Create(t.Context(), task.Clone(), mapping.CreateLimits{}); err != nil {
			t.Fatalf("Create(%s): %v", task.CorrelationID, err)
		}
	}
}

// querier is a *pgxpool.Pool or *pgxpool.Conn.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryColumn returns the single column of query's rows.
func queryColumn[T any](t *testing.T, db querier, query string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return vs
}

// tables returns the tables of the public schema.
func tables(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	return queryColumn[string](t, db, `SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	const replicas = 5
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}
	dsn := newDatabase(t)

	// Hold the migration lock until every replica waits for it, so that
	// they all race for it at once.
	holder, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(t.Context())
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		t.Fatal(err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stores []*Store
		errs   []error
	)
	for range replicas {
		wg.Go(func() {
			s, err := Open(t.Context(), dsn, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			stores = append(stores, s)
		})
	}
	for waiting := 0; waiting < replicas; {
		if err := holder.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal("replicas never waited for the migration lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, s := range stores {
		t.Cleanup(func() { _ = s.Close() })
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent Opens failed: %v", len(errs), replicas, errors.Join(errs...))
	}

	db := stores[0].pool
	if diff := cmp.Diff(want, queryColumn[int](t, db, `SELECT version FROM schema_migrations ORDER BY version`)); diff != "" {
		t.Errorf("applied migrations mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"create_counts", "deliveries", "idempotency_keys", "live_counts", "schema_migrations", "settings", "tasks"}, tables(t, db)); diff != "" {
		t.Errorf("tables mismatch (-want +got):\n%s", diff)
	}
	// Every replica sees the others' writes.
	now := time.Now()
	created := task("task-1", now)
	mustCreate(t, stores[1], created)
	for i, s := range stores {
		got, err := s.Get(t.Context(), created.Key, "alice", now)
		if err != nil {
			t.Fatalf("replica %d: Get: %v", i, err)
		}
		if diff := cmp.Diff(created, got); diff != "" {
			t.Errorf("replica %d: task mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestReopenKeepsSchemaAndData(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	dsn := newDatabase(t)
	now := time.Now()
	created := task("task-1", now)
	for i := range 3 {
		s, err := Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if i == 0 {
			mustCreate(t, s, created)
		}
		if got := queryColumn[int](t, s.pool, `SELECT count(*) FROM schema_migrations`); got[0] != len(ms) {
			t.Errorf("Open #%d: %d migrations recorded, want %d", i+1, got[0], len(ms))
		}
		got, err := s.Get(t.Context(), created.Key, "alice", now)
		if err != nil {
			t.Fatalf("Open #%d: Get: %v", i+1, err)
		}
		if diff := cmp.Diff(created, got); diff != "" {
			t.Errorf("Open #%d: task mismatch (-want +got):\n%s", i+1, diff)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dsn := newDatabase(t)
	s := openAt(t, dsn)
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(t.Context(), dsn, nil)
	if err == nil {
		_ = again.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "newer than this build supports") {
		t.Fatalf("Open of a database from a newer build = %v, want a schema version error", err)
	}
}

func TestMigrate(t *testing.T) {
	v1 := &fstest.MapFile{Data: []byte(`CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);`)}
	v2 := &fstest.MapFile{Data: []byte(`CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (2);`)}
	broken := &fstest.MapFile{Data: []byte(`CREATE TABLE c (z INTEGER); INSERT INTO nowhere VALUES (3);`)}

	tests := []struct {
		name string
		// builds are the migration sets of successive builds opening one
		// database; only the last may fail.
		builds  []fstest.MapFS
		wantErr bool
		// wantVersions, wantTables and wantRows describe the database
		// afterwards.
		wantVersions []int
		wantTables   []string
		wantRows     int
	}{
		{
			name:         "one build",
			builds:       []fstest.MapFS{{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2}},
			wantVersions: []int{1, 2},
			wantTables:   []string{"a", "b", "schema_migrations"},
			wantRows:     2,
		},
		{
			name: "same build reopening",
			builds: []fstest.MapFS{
				{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2},
				{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2},
			},
			wantVersions: []int{1, 2},
			wantTables:   []string{"a", "b", "schema_migrations"},
			wantRows:     2,
		},
		{
			name: "upgrade applies only the pending migration",
			builds: []fstest.MapFS{
				{"migrations/0001_a.sql": v1},
				{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2},
			},
			wantVersions: []int{1, 2},
			wantTables:   []string{"a", "b", "schema_migrations"},
			wantRows:     2,
		},
		{
			name: "a failing migration applies nothing",
			builds: []fstest.MapFS{
				{"migrations/0001_a.sql": v1},
				{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2, "migrations/0003_c.sql": broken},
			},
			wantErr:      true,
			wantVersions: []int{1},
			wantTables:   []string{"a", "schema_migrations"},
			wantRows:     1,
		},
		{
			name: "downgrade is refused",
			builds: []fstest.MapFS{
				{"migrations/0001_a.sql": v1, "migrations/0002_b.sql": v2},
				{"migrations/0001_a.sql": v1},
			},
			wantErr:      true,
			wantVersions: []int{1, 2},
			wantTables:   []string{"a", "b", "schema_migrations"},
			wantRows:     2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := pgxpool.New(t.Context(), newDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i, fsys := range tt.builds {
				ms, err := loadMigrations(fsys)
				if err != nil {
					t.Fatal(err)
				}
				err = migrate(t.Context(), db, ms)
				if last := i == len(tt.builds)-1; !last && err != nil {
					t.Fatalf("build %d: migrate: %v", i+1, err)
				} else if last && (err != nil) != tt.wantErr {
					t.Fatalf("build %d: migrate error = %v, want error: %t", i+1, err, tt.wantErr)
				}
			}
			if diff := cmp.Diff(tt.wantVersions, queryColumn[int](t, db, `SELECT version FROM schema_migrations ORDER BY version`)); diff != "" {
				t.Errorf("applied versions mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTables, tables(t, db)); diff != "" {
				t.Errorf("tables mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int64{int64(tt.wantRows)}, queryColumn[int64](t, db, `SELECT count(*) FROM a`)); diff != "" {
				t.Errorf("rows in a mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMigrationsRejects(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte(`SELECT 1;`)}
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"no migrations", fstest.MapFS{"migrations/README": &fstest.MapFile{}}, "migration README"},
		{"no directory", fstest.MapFS{}, "reading migrations"},
		{"missing version", fstest.MapFS{"migrations/tasks.sql": sql}, "not NNNN_description.sql"},
		{"non-numeric version", fstest.MapFS{"migrations/v1_tasks.sql": sql}, "not a positive integer"},
		{"zero version", fstest.MapFS{"migrations/0000_tasks.sql": sql}, "not a positive integer"},
		{"duplicate version", fstest.MapFS{"migrations/0001_a.sql": sql, "migrations/1_b.sql": sql}, "does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadMigrations(tt.fsys)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("loadMigrations = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	const secret = "s3cret-pw"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	srv := pgtest.Shared(t)

	tests := []struct {
		name string
		dsn  string
		want string
	}{
		{"unparsable URL", "postgres://alice:" + secret + "@127.0.0.1:notaport/db", "invalid connection string"},
		{"unparsable key/value string", "host=127.0.0.1 password=" + secret + " port=abc", "invalid connection string"},
		{"unknown setting value", "postgres://alice:" + secret + "@127.0.0.1/db?sslmode=sometimes", "invalid connection string"},
		{"nothing listening", fmt.Sprintf("postgres://alice:%s@127.0.0.1:%d/db?sslmode=disable&connect_timeout=10", secret, closedPort), "connect"},
		{"unknown database", strings.Replace(srv.DatabaseDSN("no_such_database"), "postgres@", "postgres:"+secret+"@", 1), "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.dsn, nil)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "opening postgres store") || !strings.Contains(msg, tt.want) {
				t.Errorf("Open error = %q, want it to start with %q and mention %q", msg, "opening postgres store", tt.want)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("Open error %q carries the password", msg)
			}
		})
	}
}

func TestOptionsMaxConns(t *testing.T) {
	dsn := newDatabase(t)
	tests := []struct {
		name string
		dsn  string
		opts *Options
		want int32
	}{
		{"from Options", dsn, &Options{MaxConns: 3}, 3},
		{"from the connection string", dsn + "&pool_max_conns=7", nil, 7},
		{"Options win", dsn + "&pool_max_conns=7", &Options{MaxConns: 2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.dsn, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.pool.Config().MaxConns; got != tt.want {
				t.Errorf("MaxConns = %d, want %d", got, tt.want)
			}
			if got := queryColumn[string](t, s.pool, `SELECT current_setting('application_name')`); got[0] != "jobbridge" {
				t.Errorf("application_name = %q, want jobbridge", got[0])
			}
		})
	}
}

// TestConflictUnderEveryIsolationLevel has writers holding the current
// version wait for the row lock of another replica's update (one of them
// waiting on the lock, the others queued in the group commit behind it),
// which then commits: under each isolation level a connection string may choose, every
// waiting writer gets ErrConflict, whichever way the server refuses it.
func TestConflictUnderEveryIsolationLevel(t *testing.T) {
	const writers = 3
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			dsn := newDatabase(t) + "&default_transaction_isolation=" + url.PathEscape(level)
			// Room for the writers and the query that watches them.
			s, err := Open(t.Context(), dsn, &Options{MaxConns: writers + 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := queryColumn[string](t, s.pool, `SHOW default_transaction_isolation`); got[0] != level {
				t.Fatalf("isolation level = %q, want %q", got[0], level)
			}
			now := time.Now()
			read := task("task-1", now)
			mustCreate(t, s, read)

			// The other replica updates the row and holds its lock.
			other, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(t.Context())
			tx, err := other.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(t.Context())
			if _, err := tx.Exec(t.Context(), `UPDATE tasks SET status_message = 'other replica', version = version + 1 WHERE key = $1`, read.Key[:]); err != nil {
				t.Fatal(err)
			}

			var (
				wg   sync.WaitGroup
				errs = make(chan error, writers)
			)
			for i := range writers {
				u := read.Clone()
				u.StatusMessage = fmt.Sprintf("writer %d", i)
				wg.Go(func() { errs <- s.Update(t.Context(), u) })
			}
			// The writers share group commits: one of them waits for the
			// lock, the others queue behind it.
			for waiting := 0; waiting < 1; {
				// Not on other: a transaction sees pg_stat_activity as it
				// was when it first looked.
				if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				select {
				case <-t.Context().Done():
					t.Fatal("the writers never waited for the row lock")
				case <-time.After(10 * time.Millisecond):
				}
			}
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, mapping.ErrConflict) {
					t.Errorf("Update after another replica's write = %v, want ErrConflict", err)
				}
			}
			got, err := s.Get(t.Context(), read.Key, "alice", now)
			if err != nil {
				t.Fatal(err)
			}
			if got.StatusMessage != "other replica" || got.Version != 1 {
				t.Errorf("stored task: message %q, version %d; want the other replica's write, version 1", got.StatusMessage, got.Version)
			}
		})
	}
}

func TestEmptyAndNilBlobsStayApart(t *testing.T) {
	s := openFresh(t)
	now := time.Now()
	want := task("task-1", now)
	want.Args = nil
	want.Outcome = json.RawMessage{}
	// Not a Clone: Clone turns empty into nil.
	if err := s.Create(t.Context(), want, mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), want.Key, "alice", now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome == nil || len(got.Outcome) != 0 {
		t.Errorf("Outcome = %#v, want empty and not nil", got.Outcome)
	}
	if got.Args != nil {
		t.Errorf("Args = %#v, want nil", got.Args)
	}
}

func TestTimesReadBackAtMillisecondsInUTC(t *testing.T) {
	s := openFresh(t)
	local := time.FixedZone("UTC+5:30", 5*3600+1800)
	created := time.Date(2026, 7, 28, 15, 0, 0, 123_456_789, local)
	observed := created.Add(time.Minute + 999_999*time.Nanosecond)
	in := task("task-1", created)
	in.CreatedAt = created // not normalised
	in.ObservedAt = &observed
	in.TTL = time.Hour + 1500*time.Microsecond
	mustCreate(t, s, in)

	got, err := s.Get(t.Context(), in.Key, "alice", created)
	if err != nil {
		t.Fatal(err)
	}
	wantCreated := time.Date(2026, 7, 28, 9, 30, 0, 123_000_000, time.UTC)
	if !got.CreatedAt.Equal(wantCreated) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, wantCreated)
	}
	if want := wantCreated.Add(time.Minute + time.Millisecond); !got.ObservedAt.Equal(want) || got.ObservedAt.Location() != time.UTC {
		t.Errorf("ObservedAt = %v, want %v", got.ObservedAt, want)
	}
	if want := time.Hour + time.Millisecond; got.TTL != want {
		t.Errorf("TTL = %v, want %v", got.TTL, want)
	}
}

// TestConcurrentLoad runs creates, reads, updates, listings, claims and
// purges from many goroutines spread over three stores on one database, as
// three replicas would: the only error allowed is ErrConflict.
func TestConcurrentLoad(t *testing.T) {
	const (
		replicas = 3
		workers  = 12
		rounds   = 10
	)
	dsn := newDatabase(t)
	stores := make([]*Store, replicas)
	for i := range stores {
		stores[i] = openAt(t, dsn)
	}
	now := time.Now()
	hot := task("hot", now)
	mustCreate(t, stores[0], hot)

	var (
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for i := range workers {
		s := stores[i%replicas]
		wg.Go(func() {
			errs <- func() error {
				own := task(fmt.Sprintf("task-%d", i), now)
				if err := s.Create(t.Context(), own, mapping.CreateLimits{}); err != nil {
					return err
				}
				for j := range rounds {
					own.StatusMessage = fmt.Sprintf("round %d", j)
					if err := s.Update(t.Context(), own); err != nil {
						return fmt.Errorf("updating own task: %w", err)
					}
					cur, err := s.Get(t.Context(), hot.Key, "alice", now)
					if err != nil {
						return err
					}
					cur.StatusMessage = fmt.Sprintf("worker %d round %d", i, j)
					if err := s.Update(t.Context(), cur); err != nil && !errors.Is(err, mapping.ErrConflict) {
						return fmt.Errorf("updating hot task: %w", err)
					}
					if _, err := s.ListLive(t.Context(), now, 5); err != nil {
						return err
					}
					if _, err := s.ClaimLive(t.Context(), fmt.Sprintf("worker-%d", i), now, time.Millisecond, 3); err != nil {
						return err
					}
					if _, err := s.PurgeExpired(t.Context(), now.Add(-time.Hour)); err != nil {
						return err
					}
				}
				got, err := s.Get(t.Context(), own.Key, "alice", now)
				if err != nil {
					return err
				}
				if got.Version != rounds {
					return fmt.Errorf("own task version = %d, want %d", got.Version, rounds)
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestQueriesUseIndexes checks that each query is answered from its index
// on a table of realistic shape (many finished tasks, few live ones), so
// that its cost does not grow with the table: Get by primary key, ListLive
// by walking tasks_live in order without sorting, ClaimLive from
// tasks_live, PurgeExpired from tasks_expires_at, ListByPrincipal (and List
// by principal) by walking tasks_principal_created in order without
// sorting, FindByJob from tasks_job and List by correlation ID from
// tasks_correlation.
func TestQueriesUseIndexes(t *testing.T) {
	const rows = 20000 // one in 20 live
	s := openFresh(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO tasks (`+columns+`)
		SELECT sha256(i::text::bytea), 'alice', 'deploy', '', NULL, '', '',
			'rest', NULL, 'corr-' || i, 'submitted',
			CASE WHEN i % 20 = 0 THEN 'working' ELSE 'completed' END, '',
			$1::timestamptz - i * interval '1 second', $1, 86400000, $1::timestamptz + interval '1 day' - i * interval '1 second', 5000,
			NULL, NULL, NULL, NULL, NULL,
			NULL, $1::timestamptz - (i % 97) * interval '1 second', NULL, NULL, 0, NULL, NULL,
			'job-' || i, NULL, '',
			0, NULL, '', '', 0, '', NULL, 0, '', '', 0, '', NULL, 0, '', NULL, NULL, NULL, ''
		FROM generate_series(1, `+fmt.Sprint(rows)+`) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	key := mapping.KeyOf("task-1")
	tests := []struct {
		name      string
		query     string
		args      []any
		wantIndex string
		noSort    bool
	}{
		{"Get", getQuery, []any{key[:], "alice", now}, "tasks_pkey", true},
		{"ListLive", listLiveQuery, []any{now, 100}, "tasks_live", true},
		{"ClaimLive", claimLiveQuery, []any{now, 100, "owner", 1000}, "tasks_live", false},
		{"PurgeExpired", purgeQuery, []any{now}, "tasks_expires_at", true},
		{"ListByPrincipal", listPrincipalQuery, []any{"alice", now, 101}, "tasks_principal_created", true},
		{"ListByPrincipal after a cursor", listPrincipalAfterQuery, []any{"alice", now, 101, now.Add(-time.Hour), key[:]}, "tasks_principal_created", true},
		{"FindByJob", findJobQuery, []any{"rest", "job-7", now}, "tasks_job", false},
	}
	for _, l := range []struct {
		name      string
		filter    mapping.Filter
		after     *mapping.Cursor
		wantIndex string
		noSort    bool
	}{
		{"List by principal", mapping.Filter{Principal: "alice"}, nil, "tasks_principal_created", true},
		{"List by principal after a cursor", mapping.Filter{Principal: "alice", Tool: "deploy"}, &mapping.Cursor{CreatedAt: now.Add(-time.Hour), Key: key}, "tasks_principal_created", true},
		{"List by correlation ID", mapping.Filter{CorrelationID: "corr-7", Status: []mapping.Status{mapping.StatusWorking}}, nil, "tasks_correlation", false},
	} {
		query, args, err := listQuery(l.filter, now, l.after, 100)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name      string
			query     string
			args      []any
			wantIndex string
			noSort    bool
		}{l.name, query, args, l.wantIndex, l.noSort})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := strings.Join(queryColumn[string](t, s.pool, "EXPLAIN (COSTS OFF) "+tt.query, tt.args...), "\n")
			if !strings.Contains(plan, tt.wantIndex) {
				t.Errorf("plan does not use index %s:\n%s", tt.wantIndex, plan)
			}
			if strings.Contains(plan, "Seq Scan") {
				t.Errorf("plan reads the whole table:\n%s", plan)
			}
			if tt.noSort && strings.Contains(plan, "Sort") {
				t.Errorf("plan sorts:\n%s", plan)
			}
		})
	}
}

func BenchmarkCreate(b *testing.B) {
	s := openFresh(b)
	now := time.Now()
	i := 0
	for b.Loop() {
		if err := s.Create(b.Context(), task(fmt.Sprintf("task-%d", i), now), mapping.CreateLimits{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// benchTasks creates n tasks and returns their keys.
func benchTasks(b *testing.B, s *Store, n int, now time.Time) []mapping.Key {
	keys := make([]mapping.Key, n)
	for i := range n {
		t := task(fmt.Sprintf("task-%d", i), now)
		keys[i] = t.Key
		if err := s.Create(b.Context(), t, mapping.CreateLimits{}); err != nil {
			b.Fatal(err)
		}
	}
	return keys
}

func BenchmarkGet(b *testing.B) {
	const n = 1000
	s := openFresh(b)
	now := time.Now()
	keys := benchTasks(b, s, n, now)
	i := 0
	for b.Loop() {
		if _, err := s.Get(b.Context(), keys[i%n], "alice", now); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGetParallel reads from GOMAXPROCS goroutines at once, as the
// request handlers of a busy replica do.
func BenchmarkGetParallel(b *testing.B) {
	const n = 1000
	s := openFresh(b)
	now := time.Now()
	keys := benchTasks(b, s, n, now)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.Get(b.Context(), keys[i%n], "alice", now); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	s := openFresh(b)
	now := time.Now()
	t := task("task-1", now)
	if err := s.Create(b.Context(), t, mapping.CreateLimits{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		t.StatusMessage = "running"
		if err := s.Update(b.Context(), t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimLive claims batches of 10 from 1000 live tasks with leases
// that have run out by the next claim, as a sweep does.
func BenchmarkClaimLive(b *testing.B) {
	const n = 1000
	s := openFresh(b)
	now := time.Now()
	benchTasks(b, s, n, now)
	i := 0
	for b.Loop() {
		got, err := s.ClaimLive(b.Context(), "bench", now.Add(time.Duration(i)*time.Second), time.Second, 10)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != 10 {
			b.Fatalf("ClaimLive returned %d tasks, want 10", len(got))
		}
		i++
	}
}

// BenchmarkCreateWithLiveTasks creates tasks under a live-task limit for a
// principal that already has 0 or 50,000 live tasks: the cost of enforcing
// the limit does not grow with them.
func BenchmarkCreateWithLiveTasks(b *testing.B) {
	for _, live := range []int{0, 50_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			s := openFresh(b)
			now := time.Now().UTC().Truncate(time.Millisecond)
			if live > 0 {
				if _, err := s.pool.Exec(b.Context(), `INSERT INTO tasks (`+columns+`)
					SELECT sha256(('bench-' || i)::bytea), 'alice', 'deploy', '', NULL, '', '',
						'rest', NULL, 'corr-' || i, 'submitted', 'working', '',
						$1, $1, 3600000, $1::timestamptz + interval '1 hour', 5000,
						NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL,
						'', NULL, '',
						0, NULL, '', '', 0, '', NULL, 0, '', '', 0, '', NULL, 0, '', NULL, NULL, NULL, ''
					FROM generate_series(1, $2::int) AS i`, now, live); err != nil {
					b.Fatal(err)
				}
				if _, err := s.pool.Exec(b.Context(), `ANALYZE tasks`); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Create(b.Context(), task("over-the-limit", now), mapping.CreateLimits{MaxLive: live}); live > 0 && !errors.Is(err, mapping.ErrLiveLimit) {
				b.Fatalf("Create with %d live tasks and a limit of %d = %v, want ErrLiveLimit", live, live, err)
			}
			i := 0
			for b.Loop() {
				if err := s.Create(b.Context(), task(fmt.Sprintf("task-%d", i), now), mapping.CreateLimits{MaxLive: 1 << 30}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestUpgradeFindsJobIDs opens a database written before the store kept job
// IDs: each task's job ID is read from its job reference (when it is UTF-8
// JSON with a string or number "id"), and FindByJob finds it.
func TestUpgradeFindsJobIDs(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var before []schemaStep
	for _, m := range ms {
		if m.Name == "0008_jobs_deliveries_changes.sql" {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(ms) {
		t.Fatal("no 0008_jobs_deliveries_changes.sql migration")
	}
	dsn := newDatabase(t)
	old, err := pgxpool.New(t.Context(), dsn) // a build of that time
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := migrate(t.Context(), old, before); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		ref    []byte
		wantID string
	}{
		{"string id", []byte(`{"id":"job-1","data":{"url":"/jobs/1"}}`), "job-1"},
		{"numeric id", []byte(`{"id":42}`), "42"},
		{"non-ASCII id", []byte(`{"id":"j\u00e9b"}`), "jéb"},
		{"no id", []byte(`{"data":{}}`), ""},
		{"object id", []byte(`{"id":{"run":1}}`), ""},
		{"not an object", []byte(`["id"]`), ""},
		{"not JSON", []byte(`id=job-1`), ""},
		{"not UTF-8", []byte("{\"id\":\"\xff\xfe\"}"), ""},
		{"empty", []byte{}, ""},
		{"not submitted", nil, ""},
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var names []string
	for _, c := range strings.Split(columns, ",") {
		if c = strings.TrimSpace(c); c == "job_id" {
			break
		}
		names = append(names, c)
	}
	cols, n := strings.Join(names, ", "), len(names)
	params := make([]string, n)
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	insert := `INSERT INTO tasks (` + cols + `) VALUES (` + strings.Join(params, ", ") + `)`
	for i, c := range cases {
		tk := task(fmt.Sprintf("old-%d", i), now)
		tk.JobRef = c.ref
		if _, err := old.Exec(t.Context(), insert, floorInsertArgs(tk)[:n]...); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	s := openAt(t, dsn)
	for i, c := range cases {
		got, err := s.Get(t.Context(), mapping.KeyOf(fmt.Sprintf("old-%d", i)), "alice", now)
		if err != nil {
			t.Fatal(err)
		}
		if got.JobID != c.wantID || got.EventAt != nil || got.CancelBy != "" {
			t.Errorf("%s: after the upgrade job ID %q, event at %v, cancel by %q; want %q, nil, empty", c.name, got.JobID, got.EventAt, got.CancelBy, c.wantID)
		}
	}
	found, err := s.FindByJob(t.Context(), "rest", "job-1", now)
	if err != nil || len(found) != 1 || found[0].Key != mapping.KeyOf("old-0") {
		t.Errorf("FindByJob of an upgraded task = %v, %v; want old-0", found, err)
	}
}

// TestUpgradeCarriesLifecycleState opens a database written before the
// store kept the lifecycle's typed state: a job observed (and not missing)
// is known to have been observed, a cancel the backend accepted counts as
// one attempt, and a live job's own words are kept apart from a pending
// cancel's note.
func TestUpgradeCarriesLifecycleState(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var before []schemaStep
	for _, m := range ms {
		if m.Name == "0009_lifecycle_state.sql" {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(ms) {
		t.Fatal("no 0009_lifecycle_state.sql migration")
	}
	dsn := newDatabase(t)
	old, err := pgxpool.New(t.Context(), dsn) // a build of that time
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := migrate(t.Context(), old, before); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	cases := []struct {
		name         string
		change       func(*mapping.Task)
		wantObserved bool
		wantAttempts int
		wantJobMsg   string
	}{
		{"observed running", func(t *mapping.Task) { t.ObservedAt, t.StatusMessage = &now, "job 7 RUNNING" }, true, 0, "job 7 RUNNING"},
		{"cancel sent", func(t *mapping.Task) {
			t.ObservedAt, t.CancelRequestedAt, t.CancelForwardedAt, t.CancelSentAt = &now, &now, &now, &now
			t.StatusMessage = "cancellation sent to rest; job: job 7 RUNNING"
		}, true, 1, "job 7 RUNNING"},
		{"cancel requested", func(t *mapping.Task) { t.CancelRequestedAt, t.StatusMessage = &now, "cancellation requested" }, false, 0, ""},
		{"missing", func(t *mapping.Task) { t.ObservedAt, t.MissingSince, t.StatusMessage = &now, &now, "not visible yet" }, false, 0, "not visible yet"},
	}
	var names []string
	for _, c := range strings.Split(columns, ",") {
		if c = strings.TrimSpace(c); c == "cancel_attempts" {
			break
		}
		names = append(names, c)
	}
	n := len(names)
	params := make([]string, n)
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	insert := `INSERT INTO tasks (` + strings.Join(names, ", ") + `) VALUES (` + strings.Join(params, ", ") + `)`
	for i, c := range cases {
		tk := task(fmt.Sprintf("old-%d", i), now)
		c.change(tk)
		if _, err := old.Exec(t.Context(), insert, floorInsertArgs(tk)[:n]...); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	s := openAt(t, dsn)
	for i, c := range cases {
		got, err := s.Get(t.Context(), mapping.KeyOf(fmt.Sprintf("old-%d", i)), "alice", now)
		if err != nil {
			t.Fatal(err)
		}
		if (got.FirstObservedAt != nil) != c.wantObserved || got.CancelAttempts != c.wantAttempts || got.JobMessage != c.wantJobMsg || !got.Problem.IsZero() {
			t.Errorf("%s: after the upgrade observed %v, cancel attempts %d, job message %q, problem %+v; want %v, %d, %q, none",
				c.name, got.FirstObservedAt, got.CancelAttempts, got.JobMessage, got.Problem, c.wantObserved, c.wantAttempts, c.wantJobMsg)
		}
	}
}
