package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// The change feed: Subscribe reports each durable Create and Update with
// the version written, never a failed write, in commit order for the
// writes of one store, and also (for a shared store) the writes of another
// store on the same database.

// changeWait bounds how long a test waits for a change it expects: long
// enough for a loaded machine, only ever reached when the change is
// missing.
const changeWait = 30 * time.Second

// recorder collects the changes a subscription reports.
type recorder struct {
	mu      sync.Mutex
	changes []mapping.Change
	calls   int
	// seen is signalled (without blocking) after each change.
	seen chan struct{}
	// unsubscribe ends the subscription.
	unsubscribe func()
}

// record subscribes to s and unsubscribes when t ends.
func record(t *testing.T, s mapping.Store) *recorder {
	t.Helper()
	r := &recorder{seen: make(chan struct{}, 1)}
	r.unsubscribe = s.Subscribe(r.add)
	t.Cleanup(r.unsubscribe)
	return r
}

func (r *recorder) add(c mapping.Change) {
	r.mu.Lock()
	r.calls++
	r.changes = append(r.changes, c)
	r.mu.Unlock()
	select {
	case r.seen <- struct{}{}:
	default:
	}
}

// versions returns the versions reported for key, in order of arrival.
func (r *recorder) versions(key mapping.Key) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var vs []int64
	for _, c := range r.changes {
		if !c.Resync && c.Key == key {
			vs = append(vs, c.Version)
		}
	}
	return vs
}

// count returns how many calls the subscription made.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// has reports whether a change of key to version was reported.
func (r *recorder) has(key mapping.Key, version int64) bool {
	for _, v := range r.versions(key) {
		if v == version {
			return true
		}
	}
	return false
}

// waitFor waits until a change of key to version was reported, failing t
// after changeWait.
func (r *recorder) waitFor(t *testing.T, key mapping.Key, version int64) {
	t.Helper()
	deadline := time.NewTimer(changeWait)
	defer deadline.Stop()
	for !r.has(key, version) {
		select {
		case <-r.seen:
		case <-deadline.C:
			t.Fatalf("no change to version %d reported within %v; versions of the key: %v", version, changeWait, r.versions(key))
		}
	}
}

// marker creates a task of its own through s and waits until r saw it: the
// changes s committed before it have been reported by then (they come in
// commit order).
func marker(t *testing.T, s mapping.Store, r *recorder, id string) {
	t.Helper()
	task := newTask(id, "marker")
	mustCreate(t, s, task)
	r.waitFor(t, task.Key, task.Version)
}

func testSubscribeCreateAndUpdate(t *testing.T, h Harness) {
	s := h.Open(t)
	r := record(t, s)
	task := newTask("task-1", "alice")
	task.Version = 7 // a Create reports the version created
	mustCreate(t, s, task)
	r.waitFor(t, task.Key, 7)

	u := mustGet(t, s, task.Key, "alice", at(0))
	u.StatusMessage = "running"
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatalf("Update: %v", err)
	}
	r.waitFor(t, task.Key, 8)
	u.Phase, u.Status, u.Outcome = mapping.PhaseDone, mapping.StatusCompleted, []byte(`{}`)
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatalf("Update to completed: %v", err)
	}
	r.waitFor(t, task.Key, 9)
	if got := r.versions(task.Key); len(got) != 3 {
		t.Errorf("versions reported %v, want [7 8 9] once each", got)
	}
}

func testSubscribeFailedWrites(t *testing.T, h Harness) {
	s := h.Open(t)
	task := newTask("task-1", "alice")
	mustCreate(t, s, task)
	done := mustGet(t, s, task.Key, "alice", at(0))
	stale := done.Clone()
	done.Phase, done.Status, done.Outcome = mapping.PhaseDone, mapping.StatusCompleted, []byte(`{}`)
	if err := s.Update(t.Context(), done); err != nil {
		t.Fatalf("Update: %v", err)
	}
	r := record(t, s)

	// A stale version, a terminal row, an unknown key, a duplicate key and
	// refused limits: none of them changed anything, none is reported.
	if err := s.Update(t.Context(), stale); !errors.Is(err, mapping.ErrConflict) {
		t.Fatalf("Update with a stale version = %v, want ErrConflict", err)
	}
	again := done.Clone()
	again.StatusMessage = "rewritten"
	if err := s.Update(t.Context(), again); !errors.Is(err, mapping.ErrConflict) {
		t.Fatalf("Update of a terminal task = %v, want ErrConflict", err)
	}
	ghost := newTask("ghost", "alice")
	if err := s.Update(t.Context(), ghost); !errors.Is(err, mapping.ErrConflict) {
		t.Fatalf("Update of an unknown key = %v, want ErrConflict", err)
	}
	if err := s.Create(t.Context(), newTask("task-1", "alice"), mapping.CreateLimits{}); err == nil {
		t.Fatal("Create of an existing key succeeded")
	}
	limited := newTask("limited", "bob")
	if err := s.Create(t.Context(), newTask("bob-1", "bob"), mapping.CreateLimits{MaxLive: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), limited, mapping.CreateLimits{MaxLive: 1}); !errors.Is(err, mapping.ErrLiveLimit) {
		t.Fatalf("Create over the live limit = %v, want ErrLiveLimit", err)
	}
	marker(t, s, r, "marker")

	for _, key := range []mapping.Key{task.Key, ghost.Key, limited.Key} {
		if vs := r.versions(key); len(vs) > 0 {
			t.Errorf("failed writes reported versions %v", vs)
		}
	}
	if !r.has(mapping.KeyOf("bob-1"), 0) {
		t.Error("the Create that succeeded between the failed ones was not reported")
	}
}

func testSubscribeVersionsGrow(t *testing.T, h Harness) {
	const (
		writers = 8
		writes  = 5
	)
	s := h.Open(t)
	task := newTask("task-1", "alice")
	mustCreate(t, s, task)
	r := record(t, s)

	// Concurrent writers of one task, each re-reading after a conflict:
	// every successful write is reported, in the order they committed.
	var (
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	for i := range writers {
		wg.Go(func() {
			for j := 0; j < writes; {
				cur, err := s.Get(t.Context(), task.Key, "alice", at(0))
				if err != nil {
					errs <- err
					return
				}
				cur.StatusMessage = fmt.Sprintf("writer %d write %d", i, j)
				switch err := s.Update(t.Context(), cur); {
				case err == nil:
					j++
				case !errors.Is(err, mapping.ErrConflict):
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	final := int64(writers * writes)
	r.waitFor(t, task.Key, final)
	got := r.versions(task.Key)
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("versions reported out of order: %v", got)
		}
	}
	if len(got) != int(final) {
		t.Errorf("%d versions reported, want %d (one per write): %v", len(got), final, got)
	}
}

// testSubscribeReadsInCallback re-reads the task from within the
// subscriber's function, as a subscriber that must not miss a state may:
// the store calls it holding nothing that Get needs, and the write it
// reports is visible.
func testSubscribeReadsInCallback(t *testing.T, h Harness) {
	s := h.Open(t)
	type read struct {
		version int64
		err     error
	}
	reads := make(chan read, 16)
	task := newTask("task-1", "alice")
	unsubscribe := s.Subscribe(func(c mapping.Change) {
		if c.Resync || c.Key != task.Key {
			return
		}
		got, err := s.Get(t.Context(), c.Key, "alice", at(0))
		if err != nil {
			reads <- read{err: err}
			return
		}
		reads <- read{version: got.Version}
	})
	defer unsubscribe()
	mustCreate(t, s, task)
	u := mustGet(t, s, task.Key, "alice", at(0))
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(changeWait)
	for want := int64(0); want <= 1; {
		select {
		case r := <-reads:
			if r.err != nil {
				t.Fatalf("Get from the subscriber: %v", r.err)
			}
			if r.version < want {
				t.Fatalf("the subscriber read version %d after being told of version %d", r.version, want)
			}
			want++
		case <-deadline:
			t.Fatalf("the subscriber did not read within %v", changeWait)
		}
	}
}

func testUnsubscribe(t *testing.T, h Harness) {
	s := h.Open(t)
	stopped := record(t, s)
	kept := record(t, s)
	marker(t, s, stopped, "before")
	stopped.unsubscribe()
	stopped.unsubscribe() // again: nothing
	n := stopped.count()

	task := newTask("task-1", "alice")
	mustCreate(t, s, task)
	u := mustGet(t, s, task.Key, "alice", at(0))
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	kept.waitFor(t, task.Key, 1)
	if got := stopped.count(); got != n {
		t.Errorf("the subscription was called %d times after unsubscribe returned", got-n)
	}

	// Close ends the subscriptions still open; a later unsubscribe is
	// harmless.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	kept.unsubscribe()
}

func testSubscribeSeesPeer(t *testing.T, h Harness) {
	s := h.Open(t)
	peer := h.Peer(t, s)
	here, there := record(t, s), record(t, peer)

	// A task created through the peer, updated here, updated there: each
	// store's subscriber hears every write, whichever store made it.
	task := newTask("task-1", "alice")
	mustCreate(t, peer, task)
	here.waitFor(t, task.Key, 0)
	there.waitFor(t, task.Key, 0)
	u := mustGet(t, s, task.Key, "alice", at(0))
	u.StatusMessage = "updated here"
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	here.waitFor(t, task.Key, 1)
	there.waitFor(t, task.Key, 1)
	v := mustGet(t, peer, task.Key, "alice", at(0))
	v.StatusMessage = "updated there"
	if err := peer.Update(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	here.waitFor(t, task.Key, 2)
	there.waitFor(t, task.Key, 2)

	// A write the peer failed is not reported here either.
	stale := u.Clone()
	if err := peer.Update(t.Context(), stale); !errors.Is(err, mapping.ErrConflict) {
		t.Fatalf("stale Update through the peer = %v, want ErrConflict", err)
	}
	marker(t, peer, here, "marker")
	for _, v := range here.versions(task.Key) {
		if v > 2 {
			t.Errorf("a failed write of the peer was reported as version %d", v)
		}
	}
}
