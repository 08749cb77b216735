package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

// openAt opens the store at path and closes it when the test ends.
func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openShared opens the store at path as a tool would (Options.Shared) and
// closes it when the test ends.
func openShared(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, &Options{Shared: true})
	if err != nil {
		t.Fatalf("Open(%s, shared): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "tasks.db"))
}

func TestStoreContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) mapping.Store { return openTemp(t) },
		Reopen: func(t *testing.T, old mapping.Store) mapping.Store {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, s.path)
		},
	})
}

// task returns a live task created at now.
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
		Observation:   json.RawMessage(`{"state":"working"}`),
	}
}

func mustCreate(t *testing.T, s *Store, tasks ...*mapping.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.Create(t.Context(), task.Clone(), mapping.CreateLimits{}); err != nil {
			t.Fatalf("Create(%s): %v", task.CorrelationID, err)
		}
	}
}

// queryColumn returns the single column of query's rows.
func queryColumn[T any](t *testing.T, db *sql.DB, query string) []T {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var vs []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return vs
}

func queryInts(t *testing.T, db *sql.DB, query string) []int { return queryColumn[int](t, db, query) }

func queryStrings(t *testing.T, db *sql.DB, query string) []string {
	return queryColumn[string](t, db, query)
}

func TestReopenKeepsSchemaAndData(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}

	path := filepath.Join(t.TempDir(), "tasks.db")
	now := time.Now()
	created := task("task-1", now)
	for i := range 3 {
		s, err := Open(t.Context(), path, nil)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if i == 0 {
			if err := s.Create(t.Context(), created.Clone(), mapping.CreateLimits{}); err != nil {
				t.Fatalf("Create: %v", err)
			}
		}
		if diff := cmp.Diff(want, queryInts(t, s.reader, `SELECT version FROM schema_migrations ORDER BY version`)); diff != "" {
			t.Errorf("Open #%d: applied migrations mismatch (-want +got):\n%s", i+1, diff)
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
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(t.Context(), `INSERT INTO schema_migrations (version) VALUES (9999)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), path, nil)
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
		// file; only the last may fail.
		builds  []fstest.MapFS
		wantErr bool
		// wantVersions, wantTables and wantRows describe the file afterwards.
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
			db, err := sql.Open("sqlite", dsn(filepath.Join(t.TempDir(), "m.db"), false))
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
			if diff := cmp.Diff(tt.wantVersions, queryInts(t, db, `SELECT version FROM schema_migrations ORDER BY version`)); diff != "" {
				t.Errorf("applied versions mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTables, queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)); diff != "" {
				t.Errorf("tables mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int{tt.wantRows}, queryInts(t, db, `SELECT count(*) FROM a`)); diff != "" {
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
		{"empty directory", fstest.MapFS{"migrations": &fstest.MapFile{Mode: os.ModeDir}}, "none embedded"},
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

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openAt(t, path)
	// A write makes sure the WAL exists.
	if err := s.Create(t.Context(), task("task-1", time.Now()), mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("mode of %s = %v, want -rw-------", filepath.Base(p), got)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"empty path", ""},
		{"missing directory", filepath.Join(t.TempDir(), "missing", "tasks.db")},
		{"directory", t.TempDir()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.path, nil)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !strings.HasPrefix(err.Error(), "opening sqlite store") {
				t.Errorf("Open error = %q, want it to start with %q", err, "opening sqlite store")
			}
		})
	}
}

func TestEmptyAndNilBlobsStayApart(t *testing.T) {
	s := openTemp(t)
	now := time.Now()
	want := task("task-1", now) // Args nil
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

// TestConcurrentLoad runs creates, reads, updates, listings and purges from
// many goroutines at once: the only error allowed is ErrConflict.
func TestConcurrentLoad(t *testing.T) {
	const (
		workers = 20
		rounds  = 10
	)
	s := openTemp(t)
	now := time.Now()
	hot := task("hot", now)
	if err := s.Create(t.Context(), hot.Clone(), mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}

	var (
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for i := range workers {
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

// TestQueriesUseIndexes checks that no query reads the whole table or sorts
// more than a few rows: Get and PurgeExpired search an index, ListLive walks
// the live index in order, ListByPrincipal (and List by principal) walks
// the principal's part of its index in order from the cursor's position,
// Create finds a principal's live count by its key, FindByJob and List by
// correlation ID search their indexes (sorting the job's or correlation
// ID's few tasks), and delivery claims are purged along their time index.
func TestQueriesUseIndexes(t *testing.T) {
	tests := []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"Get", getQuery, []any{[]byte("k"), "p", 0}, []string{"SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (key=?)"}},
		{"ListLive", listLiveQuery, []any{0, 10}, []string{"SCAN tasks USING INDEX tasks_live"}},
		{"ListByPrincipal", listPrincipalQuery, []any{"p", 0, 10}, []string{"SEARCH tasks USING INDEX tasks_principal_created (principal=?)"}},
		{"ListByPrincipal after a cursor", listPrincipalAfterQuery, []any{"p", 0, 10, 0, []byte("k")}, []string{"SEARCH tasks USING INDEX tasks_principal_created (principal=? AND created_at<?)"}},
		{"PurgeExpired", purgeQuery, []any{0}, []string{"SEARCH tasks USING COVERING INDEX tasks_expires_at (expires_at<?)"}},
		{"live count", liveCountQuery, []any{"p"}, []string{"SEARCH live_counts USING PRIMARY KEY (principal=?)"}},
		{"FindByJob", findJobQuery, []any{"rest", "job-1", 0}, []string{"SEARCH tasks USING INDEX tasks_job (backend=? AND job_id=?)", "USE TEMP B-TREE FOR ORDER BY"}},
		{"purge deliveries", purgeDeliveriesQuery, []any{0}, []string{"SEARCH deliveries USING COVERING INDEX deliveries_claimed (claimed_at<?)"}},
	}
	for _, l := range []struct {
		name   string
		filter mapping.Filter
		after  *mapping.Cursor
		want   []string
	}{
		{"List by principal", mapping.Filter{Principal: "p", Tool: "deploy"}, nil, []string{"SEARCH tasks USING INDEX tasks_principal_created (principal=?)"}},
		{"List by principal after a cursor", mapping.Filter{Principal: "p", Status: []mapping.Status{mapping.StatusWorking}}, &mapping.Cursor{}, []string{"SEARCH tasks USING INDEX tasks_principal_created (principal=? AND created_at<?)"}},
		{"List by correlation ID", mapping.Filter{CorrelationID: "c"}, nil, []string{"SEARCH tasks USING INDEX tasks_correlation (correlation_id=?)", "USE TEMP B-TREE FOR ORDER BY"}},
	} {
		query, args, err := listQuery(l.filter, time.UnixMilli(0), l.after, 10)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name  string
			query string
			args  []any
			want  []string
		}{l.name, query, args, l.want})
	}
	s := openTemp(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.reader.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, plan); diff != "" {
				t.Errorf("query plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkCreate(b *testing.B) {
	s := openTemp(b)
	now := time.Now()
	i := 0
	for b.Loop() {
		if err := s.Create(b.Context(), task(fmt.Sprintf("task-%d", i), now), mapping.CreateLimits{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGet(b *testing.B) {
	const n = 1000
	s := openTemp(b)
	now := time.Now()
	keys := make([]mapping.Key, n)
	for i := range n {
		t := task(fmt.Sprintf("task-%d", i), now)
		keys[i] = t.Key
		if err := s.Create(b.Context(), t, mapping.CreateLimits{}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if _, err := s.Get(b.Context(), keys[i%n], "alice", now); err != nil {
			b.Fatal(err)
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
			s := openTemp(b)
			now := time.Now()
			if live > 0 {
				if _, err := s.writer.ExecContext(b.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
					INSERT INTO tasks (`+columns+`)
					SELECT randomblob(32), 'alice', 'deploy', '', NULL, '', '', 'rest', NULL, 'corr-' || i, 'submitted', 'working', '',
						?2, ?2, 3600000, ?2 + 3600000, 5000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL,
						'', NULL, '',
						0, NULL, '', '', 0, '', NULL, 0, '', '', 0, '', NULL, 0, '', NULL, NULL, NULL, ''
					FROM n`, live, now.UnixMilli()); err != nil {
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

// TestUpgradeCountsLiveTasks opens a file written before the store kept
// live counts: the tasks already live (expired or not) count against the
// limit, finished ones do not.
func TestUpgradeCountsLiveTasks(t *testing.T) {
	path, db := dbBefore(t, "0004_live_counts.sql") // the last build without live counts
	now := time.Now()
	old := []struct {
		id, principal string
		status        mapping.Status
		age           time.Duration
	}{
		{"alice-working", "alice", mapping.StatusWorking, 0},
		{"alice-input", "alice", mapping.StatusInputRequired, 0},
		{"alice-expired", "alice", mapping.StatusWorking, 2 * time.Hour},
		{"alice-completed", "alice", mapping.StatusCompleted, 0},
		{"alice-cancelled", "alice", mapping.StatusCancelled, 0},
		{"bob-failed", "bob", mapping.StatusFailed, 0},
		{"carol-working", "carol", mapping.StatusWorking, 0},
	}
	for _, o := range old {
		task := task(o.id, now.Add(-o.age))
		task.Principal, task.Status = o.principal, o.status
		// The columns of that time: no submitted_at or sealed_id yet.
		args := createArgs(task)
		cols := columnsBefore(t, "submitted_at")
		insert := `INSERT INTO tasks (` + cols + `) VALUES (?` + strings.Repeat(", ?", columnCount(cols)-1) + `)`
		if _, err := db.ExecContext(t.Context(), insert, args[:columnCount(cols)]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	for principal, want := range map[string]int{"alice": 2, "bob": 5, "carol": 4, "dave": 5} {
		if got := storetest.Room(t, s, principal, 5); got != want {
			t.Errorf("after the upgrade %s may create %d tasks with a limit of 5, want %d", principal, got, want)
		}
	}
}

// TestLiveLimitAcrossStoresOnOneFile races creations through two stores on
// one file, a server's and a shared one, as two processes would: the limit
// holds for both together.
func TestLiveLimitAcrossStoresOnOneFile(t *testing.T) {
	const (
		creators = 50
		limit    = 10
	)
	path := filepath.Join(t.TempDir(), "tasks.db")
	stores := []*Store{openAt(t, path), openShared(t, path)}
	now := time.Now()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		created int
		errs    []error
	)
	for i := range creators {
		s := stores[i%len(stores)]
		task := task(fmt.Sprintf("race-%d", i), now)
		wg.Go(func() {
			<-start
			err := s.Create(t.Context(), task, mapping.CreateLimits{MaxLive: limit})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case !errors.Is(err, mapping.ErrLiveLimit):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Create errors other than ErrLiveLimit: %v", errors.Join(errs...))
	}
	if created != limit {
		t.Errorf("%d creates succeeded through two stores, want %d", created, limit)
	}
	if n := queryInts(t, stores[0].reader, `SELECT count(*) FROM tasks`); n[0] != limit {
		t.Errorf("%d tasks stored, want %d", n[0], limit)
	}
}

// TestLiveCountsFollowWritesByHand: rows an operator changes or deletes
// with the sqlite3 shell still count, or stop counting, as they should.
func TestLiveCountsFollowWritesByHand(t *testing.T) {
	const limit = 5
	s := openTemp(t)
	now := time.Now()
	for i := range 4 {
		if _, err := s.writer.ExecContext(t.Context(), createQuery, createArgs(task(fmt.Sprintf("by-hand-%d", i), now))...); err != nil {
			t.Fatal(err)
		}
	}
	done := task("by-hand-done", now)
	done.Status = mapping.StatusCompleted
	if _, err := s.writer.ExecContext(t.Context(), createQuery, createArgs(done)...); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Room(t, s, "alice", limit); got != 1 {
		t.Fatalf("after 4 live inserts by hand alice may create %d, want 1", got)
	}
	for _, q := range []string{
		`UPDATE tasks SET status = 'cancelled' WHERE correlation_id = 'corr-by-hand-0'`,
		`UPDATE tasks SET principal = 'bob' WHERE correlation_id = 'corr-by-hand-1'`,
		`DELETE FROM tasks WHERE correlation_id IN ('corr-by-hand-2', 'corr-by-hand-done')`,
		// Not a change of liveness: counts nothing.
		`UPDATE tasks SET status = 'input_required' WHERE correlation_id = 'corr-by-hand-3'`,
	} {
		if _, err := s.writer.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for principal, want := range map[string]int{"alice": 3, "bob": limit - 1} {
		if got := storetest.Room(t, s, principal, limit); got != want {
			t.Errorf("after the writes by hand %s may create %d, want %d", principal, got, want)
		}
	}
}

// TestUpgradeListsOldTasks opens a file written before the store kept sealed
// task IDs or listed tasks by principal: its tasks are listed, newest first,
// with a nil SealedID.
func TestUpgradeListsOldTasks(t *testing.T) {
	path, db := dbBefore(t, "0006_tasks_principal_created.sql") // the last build without listing
	now := time.Now().UTC().Truncate(time.Millisecond)
	var want []*mapping.Task
	for i := range 3 {
		task := task(fmt.Sprintf("old-%d", i), now.Add(-time.Duration(i)*time.Minute))
		task.SealedID = []byte("dropped: the column does not exist yet")
		args := createArgs(task)
		cols := columnsBefore(t, "sealed_id")
		insert := `INSERT INTO tasks (` + cols + `) VALUES (?` + strings.Repeat(", ?", columnCount(cols)-1) + `)`
		if _, err := db.ExecContext(t.Context(), insert, args[:columnCount(cols)]...); err != nil {
			t.Fatal(err)
		}
		task.SealedID = nil
		want = append(want, task)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	got, next, err := s.ListByPrincipal(t.Context(), "alice", now, nil, 10)
	if err != nil {
		t.Fatalf("ListByPrincipal: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" || next != nil {
		t.Errorf("ListByPrincipal after the upgrade = (-want +got):\n%s\nnext cursor %v, want nil", diff, next)
	}
}

// columnsBefore returns the prefix of columns before the column named
// name: the columns of the builds before it was added (createArgs binds
// columns in order).
func columnsBefore(t *testing.T, name string) string {
	t.Helper()
	var before []string
	for _, c := range strings.Split(columns, ",") {
		if c = strings.TrimSpace(c); c == name {
			return strings.Join(before, ", ")
		}
		before = append(before, c)
	}
	t.Fatalf("no column %s in columns", name)
	return ""
}

// columnCount returns how many columns cols lists.
func columnCount(cols string) int { return strings.Count(cols, ",") + 1 }

// dbBefore creates a database file with the schema of the migrations before
// the one called name, as a build that did not have it left it.
func dbBefore(t *testing.T, name string) (string, *sql.DB) {
	t.Helper()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var before []schemaStep
	for _, m := range ms {
		if m.Name == name {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(ms) {
		t.Fatalf("no %s migration", name)
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, before); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// jobRefCases are job references a build before job IDs stored, with the
// job ID the upgrade finds in each. (Adapters write references with
// encoding/json, always UTF-8; SQLite does not check it.)
var jobRefCases = []struct {
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
	{"empty", []byte{}, ""},
	{"not submitted", nil, ""},
}

// TestUpgradeFindsJobIDs opens a file written before the store kept job
// IDs: each task's job ID is read from its job reference, and FindByJob
// finds it.
func TestUpgradeFindsJobIDs(t *testing.T) {
	path, db := dbBefore(t, "0009_jobs_deliveries.sql")
	now := time.Now().UTC().Truncate(time.Millisecond)
	cols := columnsBefore(t, "job_id")
	insert := `INSERT INTO tasks (` + cols + `) VALUES (?` + strings.Repeat(", ?", columnCount(cols)-1) + `)`
	for i, c := range jobRefCases {
		task := task(fmt.Sprintf("old-%d", i), now)
		task.JobRef = c.ref
		if _, err := db.ExecContext(t.Context(), insert, createArgs(task)[:columnCount(cols)]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	for i, c := range jobRefCases {
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

// upgradeStateCases are rows written before the store kept the lifecycle's
// typed state, and the state the upgrade carries over from them.
var upgradeStateCases = []struct {
	name         string
	change       func(*mapping.Task, time.Time)
	wantObserved bool
	wantAttempts int
	wantJobMsg   string
}{
	{"observed running", func(t *mapping.Task, now time.Time) {
		t.ObservedAt, t.StatusMessage = &now, "job 7 RUNNING"
	}, true, 0, "job 7 RUNNING"},
	{"cancel sent", func(t *mapping.Task, now time.Time) {
		t.ObservedAt, t.CancelRequestedAt, t.CancelForwardedAt, t.CancelSentAt = &now, &now, &now, &now
		t.StatusMessage = "cancellation sent to rest; job: job 7 RUNNING"
	}, true, 1, "job 7 RUNNING"},
	{"cancel requested, not observed since", func(t *mapping.Task, now time.Time) {
		t.CancelRequestedAt, t.StatusMessage = &now, "cancellation requested"
	}, false, 0, ""},
	{"missing", func(t *mapping.Task, now time.Time) {
		t.ObservedAt, t.MissingSince, t.StatusMessage = &now, &now, "job job-1 is not visible on rest yet (4s)"
	}, false, 0, "job job-1 is not visible on rest yet (4s)"},
	{"submitting", func(t *mapping.Task, now time.Time) {
		t.Phase, t.JobRef, t.JobID, t.StatusMessage = mapping.PhaseSubmitting, nil, "", "submitting the job to rest"
	}, false, 0, ""},
}

// TestUpgradeCarriesLifecycleState opens a file written before the store
// kept the lifecycle's typed state: a job observed (and not missing) is
// known to have been observed, a cancel the backend accepted counts as one
// attempt, and a live job's own words are kept apart from a pending
// cancel's note.
func TestUpgradeCarriesLifecycleState(t *testing.T) {
	path, db := dbBefore(t, "0010_lifecycle_state.sql")
	now := time.Now().UTC().Truncate(time.Millisecond)
	cols := columnsBefore(t, "cancel_attempts")
	insert := `INSERT INTO tasks (` + cols + `) VALUES (?` + strings.Repeat(", ?", columnCount(cols)-1) + `)`
	for i, c := range upgradeStateCases {
		tk := task(fmt.Sprintf("old-%d", i), now)
		c.change(tk, now)
		if _, err := db.ExecContext(t.Context(), insert, createArgs(tk)[:columnCount(cols)]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path)
	for i, c := range upgradeStateCases {
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
