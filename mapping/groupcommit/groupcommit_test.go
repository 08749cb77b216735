package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeDB is an in-memory key/value database with transactions and
// savepoints, counting its commits. A commit waits for gate (when set)
// after it has been entered, so that a test can queue writes while one
// batch commits.
type fakeDB struct {
	mu        sync.Mutex
	rows      map[string]int
	batches   [][]string // the keys each committed transaction wrote
	open      int        // transactions begun and not ended
	failBegin error
	failSave  error
	failCmt   error

	entered chan struct{} // receives when a commit is entered, if set
	gate    chan struct{} // a commit waits for it, if set
}

func newFakeDB() *fakeDB { return &fakeDB{rows: map[string]int{}} }

func (db *fakeDB) begin(context.Context) (*fakeTx, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.failBegin != nil {
		return nil, db.failBegin
	}
	db.open++
	return &fakeTx{db: db, rows: maps.Clone(db.rows)}, nil
}

func (db *fakeDB) committed() map[string]int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return maps.Clone(db.rows)
}

func (db *fakeDB) commits() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.batches)
}

// fakeTx is a transaction of fakeDB.
type fakeTx struct {
	db     *fakeDB
	rows   map[string]int
	keys   []string
	saved  map[string]int
	nsaved int
	ended  bool
}

func (tx *fakeTx) set(k string, v int) {
	tx.rows[k] = v
	tx.keys = append(tx.keys, k)
}

func (tx *fakeTx) Savepoint(context.Context) error {
	if tx.db.failSave != nil {
		return tx.db.failSave
	}
	if tx.saved != nil {
		return errors.New("nested savepoint")
	}
	tx.saved, tx.nsaved = maps.Clone(tx.rows), len(tx.keys)
	return nil
}

func (tx *fakeTx) RollbackToSavepoint(context.Context) error {
	if tx.saved == nil {
		return errors.New("no savepoint")
	}
	tx.rows, tx.keys = maps.Clone(tx.saved), tx.keys[:tx.nsaved]
	return nil
}

func (tx *fakeTx) ReleaseSavepoint(context.Context) error {
	if tx.saved == nil {
		return errors.New("no savepoint")
	}
	tx.saved = nil
	return nil
}

func (tx *fakeTx) Commit(context.Context) error {
	if tx.db.entered != nil {
		tx.db.entered <- struct{}{}
	}
	if tx.db.gate != nil {
		<-tx.db.gate
	}
	tx.db.mu.Lock()
	defer tx.db.mu.Unlock()
	if tx.ended {
		return errors.New("commit after end")
	}
	tx.ended = true
	tx.db.open--
	if tx.db.failCmt != nil {
		return tx.db.failCmt
	}
	tx.db.rows = tx.rows
	tx.db.batches = append(tx.db.batches, tx.keys)
	return nil
}

func (tx *fakeTx) Rollback(context.Context) error {
	tx.db.mu.Lock()
	defer tx.db.mu.Unlock()
	if !tx.ended {
		tx.ended = true
		tx.db.open--
	}
	return nil
}

// set returns a write that stores k = v.
func set(k string, v int) Write[*fakeTx] {
	return func(_ context.Context, tx *fakeTx) error {
		tx.set(k, v)
		return nil
	}
}

// setThenFail returns a write that stores k = v and then fails with err.
func setThenFail(k string, v int, err error) Write[*fakeTx] {
	return func(_ context.Context, tx *fakeTx) error {
		tx.set(k, v)
		return err
	}
}

// startBlocked returns a committer on db whose first batch (one write of
// "first") is committing, held at db's gate, so that writes queued now form
// the next batch. release lets every commit through from then on.
func startBlocked(t *testing.T, db *fakeDB, opts Options) (c *Committer[*fakeTx], first chan error, release func()) {
	t.Helper()
	db.entered = make(chan struct{}, 1000)
	db.gate = make(chan struct{})
	c = New(db.begin, opts)
	first = make(chan error, 1)
	go func() { first <- c.Do(t.Context(), set("first", 1)) }()
	<-db.entered
	var once sync.Once
	release = func() { once.Do(func() { close(db.gate) }) }
	t.Cleanup(func() {
		release()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, first, release
}

// queue starts n writes (key prefix-i = i, or the write write(i) returns
// when write is not nil) and returns their results in order once all are
// done. It queues them in order and returns once all n are in c's queue.
func queue(t *testing.T, c *Committer[*fakeTx], n int, write func(i int) Write[*fakeTx]) func() []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		w := set(fmt.Sprintf("w%d", i), i)
		if write != nil {
			w = write(i)
		}
		wg.Go(func() { errs[i] = c.Do(t.Context(), w) })
		waitQueued(t, c, i+1) // in order
	}
	return func() []error { wg.Wait(); return errs }
}

// waitQueued waits until c's queue holds n requests.
func waitQueued(t *testing.T, c *Committer[*fakeTx], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.Queued()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d writes, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLoneWriteIsOneCommit(t *testing.T) {
	db := newFakeDB()
	c := New(db.begin, Options{})
	defer c.Close()
	if err := c.Do(t.Context(), set("a", 1)); err != nil {
		t.Fatal(err)
	}
	// Do returned: the write is committed, not only queued.
	if diff := cmp.Diff(map[string]int{"a": 1}, db.committed()); diff != "" {
		t.Errorf("committed rows (-want +got):\n%s", diff)
	}
	if n := db.commits(); n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
}

func TestWritesQueuedDuringACommitShareTheNext(t *testing.T) {
	db := newFakeDB()
	c, first, release := startBlocked(t, db, Options{})
	wait := queue(t, c, 20, nil)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.batches) != 2 || len(db.batches[1]) != 20 {
		t.Errorf("batches = %v, want [first] and then all 20 writes in one", db.batches)
	}
	if len(db.rows) != 21 {
		t.Errorf("%d rows committed, want 21", len(db.rows))
	}
}

func TestBatchIsBounded(t *testing.T) {
	db := newFakeDB()
	c, first, release := startBlocked(t, db, Options{MaxBatch: 3})
	wait := queue(t, c, 10, nil)
	release()
	<-first
	for i, err := range wait() {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	var sizes []int
	for _, b := range db.batches[1:] {
		sizes = append(sizes, len(b))
	}
	if diff := cmp.Diff([]int{3, 3, 3, 1}, sizes); diff != "" {
		t.Errorf("batch sizes after the first (-want +got):\n%s", diff)
	}
}

func TestFailingWriteFailsAlone(t *testing.T) {
	errOwn := errors.New("version check lost")
	db := newFakeDB()
	c, first, release := startBlocked(t, db, Options{})
	wait := queue(t, c, 5, func(i int) Write[*fakeTx] {
		if i == 2 {
			return setThenFail("w2", 2, errOwn)
		}
		return set(fmt.Sprintf("w%d", i), i)
	})
	release()
	<-first
	errs := wait()
	for i, err := range errs {
		want := error(nil)
		if i == 2 {
			want = errOwn
		}
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("write %d = %v, want %v", i, err, want)
		}
	}
	want := map[string]int{"first": 1, "w0": 0, "w1": 1, "w3": 3, "w4": 4}
	if diff := cmp.Diff(want, db.committed()); diff != "" {
		t.Errorf("committed rows (-want +got):\n%s", diff)
	}
}

func TestLoneFailingWriteRollsBack(t *testing.T) {
	errOwn := errors.New("duplicate key")
	db := newFakeDB()
	c := New(db.begin, Options{})
	defer c.Close()
	if err := c.Do(t.Context(), setThenFail("a", 1, errOwn)); !errors.Is(err, errOwn) {
		t.Fatalf("Do = %v, want %v", err, errOwn)
	}
	if got := db.committed(); len(got) != 0 {
		t.Errorf("committed rows = %v, want none", got)
	}
	if db.open != 0 {
		t.Errorf("%d transactions left open", db.open)
	}
}

// A later write of a batch sees what the earlier ones wrote, as after a
// commit, and nothing of a write that failed.
func TestWritesSeeEarlierWritesOfTheBatch(t *testing.T) {
	db := newFakeDB()
	c, first, release := startBlocked(t, db, Options{})
	seen := make(chan map[string]int, 1)
	wait := queue(t, c, 3, func(i int) Write[*fakeTx] {
		switch i {
		case 0:
			return set("a", 1)
		case 1:
			return setThenFail("b", 2, errors.New("refused"))
		default:
			return func(_ context.Context, tx *fakeTx) error {
				seen <- maps.Clone(tx.rows)
				return nil
			}
		}
	})
	release()
	<-first
	wait()
	if diff := cmp.Diff(map[string]int{"first": 1, "a": 1}, <-seen); diff != "" {
		t.Errorf("rows seen by the third write (-want +got):\n%s", diff)
	}
}

func TestBatchFailureFailsEveryWrite(t *testing.T) {
	errDisk := errors.New("disk I/O error")
	errOwn := errors.New("refused")
	tests := []struct {
		name  string
		setup func(db *fakeDB)
	}{
		{"commit", func(db *fakeDB) { db.failCmt = errDisk }},
		{"begin", func(db *fakeDB) { db.failBegin = errDisk }},
		{"savepoint", func(db *fakeDB) { db.failSave = errDisk }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newFakeDB()
			c, first, release := startBlocked(t, db, Options{})
			wait := queue(t, c, 4, func(i int) Write[*fakeTx] {
				if i == 3 {
					return setThenFail("w3", 3, errOwn)
				}
				return set(fmt.Sprintf("w%d", i), i)
			})
			db.mu.Lock()
			tt.setup(db)
			db.mu.Unlock()
			release()
			<-first
			for i, err := range wait() {
				if err == nil {
					t.Errorf("write %d succeeded, want an error", i)
				}
				if i < 3 && !errors.Is(err, errDisk) {
					t.Errorf("write %d = %v, want %v", i, err, errDisk)
				}
			}
			got := db.committed()
			delete(got, "first")
			if len(got) != 0 {
				t.Errorf("committed rows of the failed batch = %v, want none", got)
			}
			if db.open != 0 {
				t.Errorf("%d transactions left open", db.open)
			}
		})
	}
}

func TestContextEndedWhileQueuedWithdrawsTheWrite(t *testing.T) {
	db := newFakeDB()
	c, first, release := startBlocked(t, db, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.Do(ctx, func(_ context.Context, tx *fakeTx) error {
			ran <- struct{}{}
			return nil
		})
	}()
	waitQueued(t, c, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
	release()
	<-first
	if err := c.Do(t.Context(), set("after", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Error("the withdrawn write ran")
	default:
	}
}

func TestContextEndedDuringBatchWaitsForTheOutcome(t *testing.T) {
	db := newFakeDB()
	db.entered = make(chan struct{}, 1)
	db.gate = make(chan struct{})
	c := New(db.begin, Options{})
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Do(ctx, set("a", 1)) }()
	<-db.entered // the write's batch is committing
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Do returned %v while its batch was committing", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(db.gate)
	if err := <-done; err != nil {
		t.Errorf("Do = %v, want nil (the write committed)", err)
	}
	if got := db.committed(); got["a"] != 1 {
		t.Errorf("committed rows = %v, want a", got)
	}
}

func TestCloseDrainsTheQueue(t *testing.T) {
	db := newFakeDB()
	db.entered = make(chan struct{}, 1000)
	db.gate = make(chan struct{})
	c := New(db.begin, Options{MaxBatch: 4})
	first := make(chan error, 1)
	go func() { first <- c.Do(t.Context(), set("first", 1)) }()
	<-db.entered
	wait := queue(t, c, 10, nil)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for {
		c.mu.Lock()
		closing := c.closed
		c.mu.Unlock()
		if closing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Do(t.Context(), set("late", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Do while closing = %v, want ErrClosed", err)
	}
	close(db.gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-first; err != nil {
		t.Error(err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("write %d queued before Close: %v", i, err)
		}
	}
	if got := db.committed(); len(got) != 11 {
		t.Errorf("%d rows committed, want the 11 queued before Close", len(got))
	}
	if err := c.Do(t.Context(), set("after", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}
