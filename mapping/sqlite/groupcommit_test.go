package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

// killChildEnv, when set to a database path, makes
// TestCreatedTasksSurviveKill the child process that creates tasks in it
// until it is killed.
const killChildEnv = "JOBBRIDGE_SQLITE_KILL_CHILD"

// TestCreatedTasksSurviveKill: every task whose Create returned is in the
// file after the process is killed (SIGKILL, no Close) in the middle of
// group commits. A child process (this test binary re-executed) creates
// tasks from 32 goroutines and prints each task ID once its Create has
// returned; the test kills it while it creates, reopens the file and reads
// every printed task.
func TestCreatedTasksSurviveKill(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		createUntilKilled(t, path)
		return
	}
	const printedBeforeKill = 2000
	path := filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCreatedTasksSurviveKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		ids    []string
		killed bool
		r      = bufio.NewReader(out)
	)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// A line cut off by the kill was not printed whole: its
			// Create may not have returned.
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading the child's output: %v", err)
			}
			break
		}
		if id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "created "); ok {
			ids = append(ids, id)
		}
		if len(ids) == printedBeforeKill && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the child ended after printing %d tasks, before it was killed: %v", len(ids), err)
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want killed by SIGKILL", err)
	}

	s := openAt(t, path)
	for _, id := range ids {
		if _, err := s.Get(t.Context(), mapping.KeyOf(id), "alice", time.Now()); err != nil {
			t.Errorf("task %s, whose Create returned before the kill: %v", id, err)
		}
	}
	stored := queryInts(t, s.reader, `SELECT count(*) FROM tasks`)[0]
	t.Logf("%d tasks printed before the kill, %d stored", len(ids), stored)
	if stored < len(ids) {
		t.Errorf("%d tasks stored, fewer than the %d printed", stored, len(ids))
	}
}

// createUntilKilled is the child of TestCreatedTasksSurviveKill: it creates
// tasks in the store at path from 32 goroutines, printing "created ID" for
// each whose Create returned, until it is killed.
func createUntilKilled(t *testing.T, path string) {
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // one whole line per write
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("task-%d-%d", g, i)
				if err := s.Create(t.Context(), task(id, time.Now()), mapping.CreateLimits{}); err != nil {
					fmt.Fprintf(os.Stderr, "Create %s: %v\n", id, err)
					os.Exit(2)
				}
				mu.Lock()
				_, err := fmt.Fprintf(os.Stdout, "created %s\n", id) // os.Stdout is unbuffered
				mu.Unlock()
				if err != nil {
					os.Exit(2)
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkCreateParallel runs storetest.BenchCreateParallel on a file store
// (synchronous=FULL), with group commit; compare tasks/s with BenchmarkFloor,
// on the same disk.
func BenchmarkCreateParallel(b *testing.B) {
	storetest.BenchCreateParallel(b, func(t testing.TB) mapping.Store { return openTemp(t) })
}

// BenchmarkFloor measures raw SQLite on the same disk, with the store's
// file, schema and pragmas but without the store: "single-row" commits each
// insert on its own (serially: SQLite has one writer), "insert+update"
// commits an insert and then an update of the row (two commits per task,
// as the store without group commit), and "32-rows" inserts 32 rows per
// commit.
func BenchmarkFloor(b *testing.B) {
	b.Run("single-row", func(b *testing.B) {
		s := openTemp(b)
		now := time.Now()
		var n int64
		for b.Loop() {
			if _, err := s.create.ExecContext(b.Context(), createArgs(task(fmt.Sprintf("task-%d", n), now))...); err != nil {
				b.Fatal(err)
			}
			n++
		}
		storetest.ReportTasks(b, n)
	})
	b.Run("insert+update", func(b *testing.B) {
		s := openTemp(b)
		now := time.Now()
		var n int64
		for b.Loop() {
			t := task(fmt.Sprintf("task-%d", n), now)
			if _, err := s.create.ExecContext(b.Context(), createArgs(t)...); err != nil {
				b.Fatal(err)
			}
			if _, err := s.writer.ExecContext(b.Context(), `UPDATE tasks SET job_ref = ?, version = version + 1 WHERE key = ? AND version = ?`,
				[]byte(`{"id":"job-2"}`), t.Key[:], t.Version); err != nil {
				b.Fatal(err)
			}
			n++
		}
		storetest.ReportTasks(b, n)
	})
	b.Run("32-rows", func(b *testing.B) {
		s := openTemp(b)
		now := time.Now()
		var n int64
		for b.Loop() {
			if err := insertRows(b.Context(), s, now, n, 32); err != nil {
				b.Fatal(err)
			}
			n += 32
		}
		storetest.ReportTasks(b, n)
	})
}

// insertRows inserts tasks first to first+count-1 in one transaction.
func insertRows(ctx context.Context, s *Store, now time.Time, first, count int64) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, s.create)
	for i := first; i < first+count; i++ {
		if _, err := stmt.ExecContext(ctx, createArgs(task(fmt.Sprintf("task-%d", i), now))...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// TestBatchedWritesKeepTheirOwnOutcomes queues writes while another
// connection holds the file's write lock, so that they share one commit:
// a duplicate key, a Create over the live-task limit and a stale Update
// fail alone, the others are stored.
func TestBatchedWritesKeepTheirOwnOutcomes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openAt(t, path)
	now := time.Now()
	existing := task("existing", now)
	if err := s.Create(t.Context(), existing.Clone(), mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	stale := existing.Clone()
	fresh := existing.Clone()
	if err := s.Update(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}

	// Another connection takes the write lock: the next batch waits in
	// BEGIN IMMEDIATE while the writes queue.
	other, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocker := make(chan error, 1)
	go func() { blocker <- s.Create(t.Context(), task("blocker", now), mapping.CreateLimits{}) }()
	waitQueue := func(n int) {
		deadline := time.Now().Add(5 * time.Second)
		for queued(s) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d writes queued, want %d", queued(s), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(20 * time.Millisecond) // the blocker's batch has begun waiting

	type result struct {
		name string
		err  error
	}
	writes := []struct {
		name string
		do   func() error
		want error // nil: succeeds; otherwise errors.Is
	}{
		{"new", func() error { return s.Create(t.Context(), task("new-1", now), mapping.CreateLimits{}) }, nil},
		{"duplicate", func() error { return s.Create(t.Context(), task("existing", now), mapping.CreateLimits{}) }, errDuplicate},
		{"over the limit", func() error { return s.Create(t.Context(), task("limited", now), mapping.CreateLimits{MaxLive: 1}) }, mapping.ErrLiveLimit},
		{"stale update", func() error { return s.Update(t.Context(), stale) }, mapping.ErrConflict},
		{"current update", func() error { fresh.StatusMessage = "batched"; return s.Update(t.Context(), fresh) }, nil},
		{"another new", func() error { return s.Create(t.Context(), task("new-2", now), mapping.CreateLimits{}) }, nil},
	}
	results := make(chan result, len(writes))
	for i, w := range writes {
		go func() { results <- result{w.name, w.do()} }()
		waitQueue(i + 1)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocker; err != nil {
		t.Fatalf("blocker: %v", err)
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
	for _, id := range []string{"existing", "blocker", "new-1", "new-2"} {
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

// queued returns how many writes wait in s's group commit queue.
func queued(s *Store) int { return s.commits.Queued() }
