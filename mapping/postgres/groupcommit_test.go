package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

// BenchmarkCreateParallel runs storetest.BenchCreateParallel through one Store
// (default pool), with group commit; compare tasks/s with BenchmarkFloor on
// the same server (internal/pgtest: fsync off).
func BenchmarkCreateParallel(b *testing.B) {
	storetest.BenchCreateParallel(b, func(t testing.TB) mapping.Store { return openFresh(t) })
}

// floorInsert is a plain INSERT of a task row, without the live-count
// check of createQuery.
const floorInsert = `INSERT INTO tasks (` + columns + `) VALUES (
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
	$19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33,
	$34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52)`

// floorInsertArgs returns floorInsert's arguments for t.
func floorInsertArgs(t *mapping.Task) []any {
	return append([]any{
		t.Key[:], t.Principal, t.Tool, t.ArgsDigest, blob(t.Args), t.ServerBuild, t.CatalogRevision,
		t.Backend, blob(t.JobRef), t.CorrelationID, string(t.Phase), string(t.Status), t.StatusMessage,
		ts(t.CreatedAt), ts(t.UpdatedAt), t.TTL.Milliseconds(), ts(t.ExpiresAt), t.PollInterval.Milliseconds(),
		tsPtr(t.CancelRequestedAt), tsPtr(t.CancelForwardedAt), tsPtr(t.CancelSentAt), blob(t.InputRequests), blob(t.AnsweredKeys),
		blob(t.Observation), tsPtr(t.ObservedAt), tsPtr(t.MissingSince), blob(t.Outcome), t.Version,
		tsPtr(t.SubmittedAt), blob(t.SealedID), t.JobID, tsPtr(t.EventAt), t.CancelBy,
	}, lifecycleArgs(t)...)
}

// BenchmarkFloor measures raw PostgreSQL on the same server, schema and
// table, without the store, from 32 goroutines on a pool of 32 connections
// (PostgreSQL's own commits then overlap as much as they can): "insert"
// commits a plain INSERT of a task row on its own, "insert+update" commits
// the insert and then an update of the row (two commits per task, as the
// bridge writes a task without group commit).
func BenchmarkFloor(b *testing.B) {
	for _, updates := range []bool{false, true} {
		name := "insert"
		if updates {
			name = "insert+update"
		}
		b.Run(name, func(b *testing.B) {
			dsn := newDatabase(b)
			openAt(b, dsn).Close() // the schema
			pool := rawPool(b, dsn, 32)
			now := time.Now()
			var next, done atomic.Int64
			b.SetParallelism(storetest.Parallelism(32))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t := task(fmt.Sprintf("task-%d", next.Add(1)), now)
					if _, err := pool.Exec(b.Context(), floorInsert, floorInsertArgs(t)...); err != nil {
						b.Error(err)
						return
					}
					if updates {
						if _, err := pool.Exec(b.Context(), `UPDATE tasks SET job_ref = $1, version = version + 1 WHERE key = $2 AND version = $3`,
							[]byte(`{"id":"job-2"}`), t.Key[:], t.Version); err != nil {
							b.Error(err)
							return
						}
					}
					done.Add(1)
				}
			})
			storetest.ReportTasks(b, done.Load())
		})
	}
}

// rawPool opens a pool of conns connections to dsn, closed when b ends.
func rawPool(b *testing.B, dsn string, conns int32) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(b.Context()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// TestBatchedWritesKeepTheirOwnOutcomes queues writes while the store's
// batch waits for a row lock another connection holds, so that they share
// the next commit: a duplicate key (an SQL error, which aborts the
// statement), a Create over the live-task limit and a stale Update fail
// alone, the others are stored.
func TestBatchedWritesKeepTheirOwnOutcomes(t *testing.T) {
	dsn := newDatabase(t)
	s := openAt(t, dsn)
	now := time.Now()
	existing, blocked := task("existing", now), task("blocked", now)
	mustCreate(t, s, existing, blocked)
	stale, fresh := existing.Clone(), existing.Clone()
	if err := s.Update(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}

	other, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(t.Context())
	lock, err := other.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(t.Context(), `SELECT 1 FROM tasks WHERE key = $1 FOR UPDATE`, blocked.Key[:]); err != nil {
		t.Fatal(err)
	}
	blocker := make(chan error, 1)
	go func() { blocker <- s.Update(t.Context(), blocked) }()
	for waiting := 0; waiting < 1; {
		if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}

	writes := []struct {
		name string
		do   func() error
		want error // nil: succeeds; errDuplicate: any other error
	}{
		{"new", func() error { return s.Create(t.Context(), task("new-1", now), mapping.CreateLimits{}) }, nil},
		{"duplicate", func() error { return s.Create(t.Context(), task("existing", now), mapping.CreateLimits{}) }, errDuplicate},
		{"over the limit", func() error { return s.Create(t.Context(), task("limited", now), mapping.CreateLimits{MaxLive: 2}) }, mapping.ErrLiveLimit},
		{"stale update", func() error { return s.Update(t.Context(), stale) }, mapping.ErrConflict},
		{"current update", func() error { fresh.StatusMessage = "batched"; return s.Update(t.Context(), fresh) }, nil},
		{"another new", func() error { return s.Create(t.Context(), task("new-2", now), mapping.CreateLimits{}) }, nil},
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(writes))
	for i, w := range writes {
		go func() { results <- result{w.name, w.do()} }()
		for s.commits.Queued() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-blocker; err != nil {
		t.Fatalf("blocked update: %v", err)
	}
	got := map[string]error{}
	for range writes {
		r := <-results
		got[r.name] = r.err
	}
	for _, w := range writes {
		err := got[w.name]
		switch {
		case w.want == nil && err != nil:
			t.Errorf("%s: %v, want success", w.name, err)
		case w.want == errDuplicate && (err == nil || errors.Is(err, mapping.ErrLiveLimit)):
			t.Errorf("%s: %v, want a duplicate key error", w.name, err)
		case w.want != nil && w.want != errDuplicate && !errors.Is(err, w.want):
			t.Errorf("%s: %v, want %v", w.name, err, w.want)
		}
	}
	for _, id := range []string{"existing", "blocked", "new-1", "new-2"} {
		if _, err := s.Get(t.Context(), mapping.KeyOf(id), "alice", now); err != nil {
			t.Errorf("Get(%s): %v", id, err)
		}
	}
	if _, err := s.Get(t.Context(), mapping.KeyOf("limited"), "alice", now); !errors.Is(err, mapping.ErrNotFound) {
		t.Errorf("Get(limited) = %v, want ErrNotFound", err)
	}
	if got, err := s.Get(t.Context(), existing.Key, "alice", now); err != nil || got.StatusMessage != "batched" || got.Version != 2 {
		t.Errorf("existing task after the batch: %+v, %v; want the current update (version 2)", got, err)
	}
}

// errDuplicate stands for the error of a Create whose key exists.
var errDuplicate = errors.New("duplicate key")
