package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
)

// countingAdapter is the memBackend that counts, for each job, how many
// times it was asked about, and the size of each Poll.
type countingAdapter struct {
	*memBackend
	mu      sync.Mutex
	asked   map[string]int
	batches []int
}

func newCountingAdapter(mem *memBackend) *countingAdapter {
	return &countingAdapter{memBackend: mem, asked: map[string]int{}}
}

func (c *countingAdapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	c.mu.Lock()
	for _, r := range refs {
		c.asked[r.ID]++
	}
	c.batches = append(c.batches, len(refs))
	c.mu.Unlock()
	return c.memBackend.Poll(ctx, refs)
}

// calls returns the number of Poll calls so far and how often each job was
// asked about.
func (c *countingAdapter) calls() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	asked := make(map[string]int, len(c.asked))
	for k, v := range c.asked {
		asked[k] = v
	}
	return len(c.batches), asked
}

// batchedAdapter is a countingAdapter that names its batch size.
type batchedAdapter struct {
	*countingAdapter
	size int
}

func (b batchedAdapter) BatchSize() int { return b.size }

// countingStore is a mapping.Store that counts the calls the bridge makes.
type countingStore struct {
	mapping.Store
	gets, listLive atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key mapping.Key, principal string, now time.Time) (*mapping.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key, principal, now)
}

func (s *countingStore) ListLive(ctx context.Context, now time.Time, limit int) ([]*mapping.Task, error) {
	defer s.listLive.Add(1) // once the list is read
	return s.Store.ListLive(ctx, now, limit)
}

// sweepFixture is a bridge over a SQLite file whose only background sweep
// has run on an empty store: each sweep the test runs (bridge.Sweep) is the
// only one.
type sweepFixture struct {
	t      testing.TB
	clk    *clock
	mem    *memBackend
	store  *countingStore
	bridge *bridge.Bridge
}

func newSweepFixture(t testing.TB, adapter func(*memBackend) adapters.Adapter) *sweepFixture {
	t.Helper()
	f := &sweepFixture{t: t, clk: &clock{now: time.Now()}}
	f.mem = newMemBackend(f.clk.Now)
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.store = &countingStore{Store: s}
	cat := loadCatalog(t, "http://127.0.0.1:9/")
	b, err := bridge.New(bridge.Options{
		Catalog:       cat,
		Store:         f.store,
		Adapters:      map[string]adapters.Adapter{"jobs": adapter(f.mem)},
		Now:           f.clk.Now,
		SweepInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	f.bridge = b
	// The first sweep, at New, lists nothing (the store is empty until the
	// list has been read) and does nothing after that.
	deadline := time.Now().Add(10 * time.Second)
	for f.store.listLive.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first sweep never listed the live tasks")
		}
		time.Sleep(time.Millisecond)
	}
	return f
}

// seed stores n live tasks of long_job, each with a running job on the
// backend and no observation yet, and returns their job IDs.
func (f *sweepFixture) seed(n int) []string {
	f.t.Helper()
	now := f.clk.Now().UTC()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				ref := f.mem.create()
				ids[i] = ref.ID
				data, _ := json.Marshal(ref)
				task := &mapping.Task{
					Key:       mapping.KeyOf(fmt.Sprintf("task-%d-%s", i, ref.ID)),
					Principal: "anonymous", Tool: "long_job", Backend: "jobs",
					JobRef: data, Phase: mapping.PhaseSubmitted, Status: mapping.StatusWorking,
					StatusMessage: "submitted", CreatedAt: now, UpdatedAt: now,
					TTL: 24 * time.Hour, ExpiresAt: now.Add(24 * time.Hour), PollInterval: time.Second,
				}
				if err := f.store.Create(f.t.Context(), task, mapping.CreateLimits{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	return ids
}

// observed returns how many live tasks have been observed since at.
func (f *sweepFixture) observed(since time.Time) (observed, live int) {
	f.t.Helper()
	tasks, err := f.store.Store.ListLive(f.t.Context(), f.clk.Now(), 1<<20)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, t := range tasks {
		if t.ObservedAt != nil && !t.ObservedAt.Before(since.Truncate(time.Millisecond)) {
			observed++
		}
	}
	return observed, len(tasks)
}

// TestSweepObservesEveryLiveTaskInBatches checks that one sweep observes
// every live task that is due, each once, in as few Poll calls as the
// adapter's batch size allows, across pages of the store; that a second
// sweep leaves tasks alone until their observations are old enough; and
// that the sweep after that observes every one of them again.
func TestSweepObservesEveryLiveTaskInBatches(t *testing.T) {
	tests := []struct {
		name  string
		tasks int
		batch int // 0: the adapter does not say
		want  int // Poll calls per sweep
	}{
		{name: "default batch", tasks: 120, want: 3},
		{name: "batch of 100", tasks: 250, batch: 100, want: 3},
		{name: "more than a page of the store", tasks: 1100, batch: 100, want: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var counter *countingAdapter
			f := newSweepFixture(t, func(mem *memBackend) adapters.Adapter {
				counter = newCountingAdapter(mem)
				if tt.batch > 0 {
					return batchedAdapter{counter, tt.batch}
				}
				return counter
			})
			ids := f.seed(tt.tasks)
			check := func(sweep string, wantCalls, wantEach int) {
				t.Helper()
				calls, asked := counter.calls()
				if calls != wantCalls {
					t.Errorf("after the %s sweep: %d Poll calls, want %d", sweep, calls, wantCalls)
				}
				for _, id := range ids {
					if asked[id] != wantEach {
						t.Fatalf("after the %s sweep: job %s asked about %d times, want %d", sweep, id, asked[id], wantEach)
					}
				}
			}

			start := f.clk.Now()
			f.bridge.Sweep()
			check("first", tt.want, 1)
			if n, live := f.observed(start); n != tt.tasks || live != tt.tasks {
				t.Errorf("after the first sweep: %d of %d live tasks observed, want all %d", n, live, tt.tasks)
			}

			f.clk.Advance(10 * time.Second)
			f.bridge.Sweep()
			check("second", tt.want, 1)

			f.clk.Advance(time.Minute) // SweepObserveAge
			again := f.clk.Now()
			f.bridge.Sweep()
			check("third", 2*tt.want, 2)
			if n, _ := f.observed(again); n != tt.tasks {
				t.Errorf("after the third sweep: %d of %d live tasks observed again", n, tt.tasks)
			}
		})
	}
}

// TestSweepPausesAThrottlingBackend checks that a throttling answer stops
// the sweep's calls to the backend, in this sweep and the next ones, until
// the pause the backend asked for is over.
func TestSweepPausesAThrottlingBackend(t *testing.T) {
	const tasks, batch = 400, 20
	var counter *countingAdapter
	f := newSweepFixture(t, func(mem *memBackend) adapters.Adapter {
		counter = newCountingAdapter(mem)
		return batchedAdapter{counter, batch}
	})
	f.seed(tasks)
	var throttled atomic.Bool
	throttled.Store(true)
	f.mem.set(func(m *memBackend) {
		m.pollHook = func(context.Context, int) (error, bool) {
			if throttled.Load() {
				return &adapters.ThrottledError{RetryAfter: time.Minute, Err: errors.New("HTTP 429")}, true
			}
			return nil, false
		}
	})

	f.bridge.Sweep()
	first, _ := counter.calls()
	if first == 0 || first >= tasks/batch {
		t.Fatalf("a throttled sweep made %d Poll calls, want at least one and fewer than its %d batches", first, tasks/batch)
	}
	if n, _ := f.observed(f.clk.Now()); n != 0 {
		t.Fatalf("%d tasks observed from throttled calls", n)
	}

	f.clk.Advance(30 * time.Second) // within the minute the backend asked for
	f.bridge.Sweep()
	if calls, _ := counter.calls(); calls != first {
		t.Fatalf("a sweep during the pause made %d Poll calls", calls-first)
	}

	throttled.Store(false)
	f.clk.Advance(time.Minute)
	after := f.clk.Now()
	f.bridge.Sweep()
	if calls, _ := counter.calls(); calls-first != tasks/batch {
		t.Errorf("the sweep after the pause made %d Poll calls, want %d", calls-first, tasks/batch)
	}
	if n, _ := f.observed(after); n != tasks {
		t.Errorf("after the pause, %d of %d tasks observed", n, tasks)
	}
}

// TestSweepObservesTheOthersWhenOneJobFails checks that a job the backend
// cannot report on keeps its last observation while the rest of its batch
// is observed.
func TestSweepObservesTheOthersWhenOneJobFails(t *testing.T) {
	const tasks = 120
	var counter *countingAdapter
	f := newSweepFixture(t, func(mem *memBackend) adapters.Adapter {
		counter = newCountingAdapter(mem)
		return counter
	})
	ids := f.seed(tasks)
	f.mem.setObsErr(ids[7], errors.New("the job's status endpoint answered HTTP 500"))
	f.mem.finish(ids[8], adapters.StateSucceeded, "SUCCEEDED", f.clk.Now())

	start := f.clk.Now()
	f.bridge.Sweep()
	if calls, _ := counter.calls(); calls != 3 {
		t.Errorf("%d Poll calls, want 3", calls)
	}
	// The finished task has left the live tasks; the failing one is still
	// unobserved; every other one is observed.
	if n, live := f.observed(start); n != tasks-2 || live != tasks-1 {
		t.Errorf("%d of %d live tasks observed, want %d of %d", n, live, tasks-2, tasks-1)
	}
}
