package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// The creation rate limit: Create(ctx, task, CreateLimits{PerMinute: m})
// refuses with mapping.ErrRateLimit, inserting nothing, when the principal
// already created m tasks (with a rate limit) in the rate window of the
// task's CreatedAt. Windows are whole minutes (mapping.RateWindow) and only
// move forward.

// windowEnd is where the rate window of at(0) ends: at(windowEnd-time.Millisecond)
// is its last instant and at(windowEnd) the first of the next one.
var windowEnd = mapping.RateWindowOf(base).Add(mapping.RateWindow).Sub(at(0))

// rateSeq numbers the tasks createdAt makes, so that its task IDs never
// repeat.
var rateSeq atomic.Int64

// createdAt returns a new live task of principal created at at(d).
func createdAt(principal string, d time.Duration) *mapping.Task {
	task := newTask(fmt.Sprintf("rate-%s-%d", principal, rateSeq.Add(1)), principal)
	lifetime(task, at(d), at(d+time.Hour))
	return task
}

// Allowance creates tasks of principal created at at(d) with limits until
// Create refuses with ErrRateLimit, and returns how many it created: what
// is left of the principal's window. It fails t if Create fails otherwise,
// if a refused task was stored, or if Create does not refuse within
// limits.PerMinute+1 attempts.
func Allowance(t *testing.T, s mapping.Store, principal string, d time.Duration, limits mapping.CreateLimits) int {
	t.Helper()
	for n := 0; n <= limits.PerMinute; n++ {
		task := createdAt(principal, d)
		err := s.Create(t.Context(), task, limits)
		if errors.Is(err, mapping.ErrRateLimit) {
			if _, err := s.Get(t.Context(), task.Key, principal, at(d)); !errors.Is(err, mapping.ErrNotFound) {
				t.Fatalf("Get of a task refused with ErrRateLimit = %v, want ErrNotFound", err)
			}
			return n
		}
		if err != nil {
			t.Fatalf("Create(%q at %v, %+v): %v", principal, d, limits, err)
		}
	}
	t.Fatalf("%q could create %d tasks at %v with %+v, want ErrRateLimit by then", principal, limits.PerMinute+1, d, limits)
	return 0
}

func testRateLimit(t *testing.T, h Harness) {
	const perMinute = 3
	limits := mapping.CreateLimits{PerMinute: perMinute}
	last := windowEnd - time.Millisecond // the last instant of the first window
	// create makes n tasks of principal at at(d) with limits, failing t if
	// one is refused.
	create := func(t *testing.T, s mapping.Store, principal string, d time.Duration, n int, limits mapping.CreateLimits) []*mapping.Task {
		t.Helper()
		tasks := make([]*mapping.Task, n)
		for i := range tasks {
			tasks[i] = createdAt(principal, d)
			if err := s.Create(t.Context(), tasks[i].Clone(), limits); err != nil {
				t.Fatalf("Create #%d of %q at %v with %+v: %v", i+1, principal, d, limits, err)
			}
		}
		return tasks
	}
	type left struct {
		principal string
		at        time.Duration
		want      int
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, s mapping.Store)
		// want is what is left of windows afterwards, with limits.
		want []left
	}{
		{
			name:  "empty store",
			setup: func(t *testing.T, s mapping.Store) {},
			want:  []left{{"alice", 0, perMinute}},
		},
		{
			name:  "creates take the window's allowance",
			setup: func(t *testing.T, s mapping.Store) { create(t, s, "alice", 0, 2, limits) },
			want:  []left{{"alice", last, 1}},
		},
		{
			name:  "a new window allows again",
			setup: func(t *testing.T, s mapping.Store) { create(t, s, "alice", last, perMinute, limits) },
			want:  []left{{"alice", windowEnd, perMinute}},
		},
		{
			name: "other principals are unaffected",
			setup: func(t *testing.T, s mapping.Store) {
				create(t, s, "bob", 0, perMinute, limits)
			},
			want: []left{{"bob", 0, 0}, {"alice", 0, perMinute}, {"Bob", 0, perMinute}, {"", 0, perMinute}},
		},
		{
			name: "creates without a rate limit are not counted",
			setup: func(t *testing.T, s mapping.Store) {
				create(t, s, "alice", 0, 2*perMinute, mapping.CreateLimits{})
				create(t, s, "alice", 0, 1, mapping.CreateLimits{PerMinute: -1, MaxLive: 100})
			},
			want: []left{{"alice", 0, perMinute}},
		},
		{
			name: "finished and purged tasks still count in their window",
			setup: func(t *testing.T, s mapping.Store) {
				tasks := create(t, s, "alice", 0, 2, limits)
				finish(t, s, tasks[0], mapping.StatusCompleted)
				short := createdAt("alice", 0)
				lifetime(short, at(0), at(time.Second))
				if err := s.Create(t.Context(), short, limits); err != nil {
					t.Fatalf("Create: %v", err)
				}
				if n, err := s.PurgeExpired(t.Context(), at(2*time.Second)); err != nil || n != 1 {
					t.Fatalf("PurgeExpired = %d, %v; want 1, nil", n, err)
				}
			},
			want: []left{{"alice", 2 * time.Second, 0}},
		},
		{
			name: "purging during a window keeps its count",
			setup: func(t *testing.T, s mapping.Store) {
				create(t, s, "alice", 0, 2, limits)
				if _, err := s.PurgeExpired(t.Context(), at(last)); err != nil {
					t.Fatalf("PurgeExpired: %v", err)
				}
			},
			want: []left{{"alice", last, 1}},
		},
		{
			name: "purging after a window ended allows the next",
			setup: func(t *testing.T, s mapping.Store) {
				create(t, s, "alice", 0, perMinute, limits)
				if _, err := s.PurgeExpired(t.Context(), at(windowEnd+time.Second)); err != nil {
					t.Fatalf("PurgeExpired: %v", err)
				}
			},
			want: []left{{"alice", windowEnd + time.Second, perMinute}},
		},
		{
			name: "a task of an older window counts in the newest",
			setup: func(t *testing.T, s mapping.Store) {
				// A replica whose clock lags creates after one whose clock
				// is in the next window: both count in that window.
				create(t, s, "alice", windowEnd, 1, limits)
				create(t, s, "alice", last, 1, limits)
			},
			want: []left{{"alice", last, 1}},
		},
		{
			name: "a create refused by the live-task limit is not counted",
			setup: func(t *testing.T, s mapping.Store) {
				live := create(t, s, "alice", 0, 1, limits)
				both := mapping.CreateLimits{MaxLive: 1, PerMinute: perMinute}
				for range perMinute {
					if err := s.Create(t.Context(), createdAt("alice", 0), both); !errors.Is(err, mapping.ErrLiveLimit) {
						t.Fatalf("Create at the live-task limit = %v, want ErrLiveLimit", err)
					}
				}
				finish(t, s, live[0], mapping.StatusCompleted)
			},
			want: []left{{"alice", 0, perMinute - 1}},
		},
		{
			name: "both limits reached: the live-task limit is reported",
			setup: func(t *testing.T, s mapping.Store) {
				create(t, s, "alice", 0, perMinute, limits)
				both := mapping.CreateLimits{MaxLive: perMinute, PerMinute: perMinute}
				if err := s.Create(t.Context(), createdAt("alice", 0), both); !errors.Is(err, mapping.ErrLiveLimit) {
					t.Fatalf("Create at both limits = %v, want ErrLiveLimit", err)
				}
			},
			want: []left{{"alice", 0, 0}},
		},
		{
			name: "a duplicate create is not counted",
			setup: func(t *testing.T, s mapping.Store) {
				tasks := create(t, s, "alice", 0, 1, limits)
				err := s.Create(t.Context(), tasks[0].Clone(), limits)
				if err == nil || errors.Is(err, mapping.ErrRateLimit) || errors.Is(err, mapping.ErrLiveLimit) {
					t.Fatalf("Create of an existing key = %v, want a duplicate error", err)
				}
			},
			want: []left{{"alice", 0, perMinute - 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.Open(t)
			tt.setup(t, s)
			for _, w := range tt.want {
				if got := Allowance(t, s, w.principal, w.at, limits); got != w.want {
					t.Errorf("%q may create %d more tasks at %v, want %d", w.principal, got, w.at, w.want)
				}
			}
		})
	}

	t.Run("refused create inserts nothing", func(t *testing.T) {
		s := h.Open(t)
		create(t, s, "alice", 0, perMinute, limits)
		refused := createdAt("alice", time.Second)
		if err := s.Create(t.Context(), refused.Clone(), limits); !errors.Is(err, mapping.ErrRateLimit) {
			t.Fatalf("Create over the rate limit = %v, want ErrRateLimit", err)
		}
		if _, err := s.Get(t.Context(), refused.Key, "alice", at(time.Second)); !errors.Is(err, mapping.ErrNotFound) {
			t.Fatalf("Get of the refused task = %v, want ErrNotFound", err)
		}
		if n := liveOf(t, s, "alice"); n != perMinute {
			t.Errorf("alice has %d live tasks stored, want %d", n, perMinute)
		}
		// The refusal takes no live-task slot either.
		if got := Room(t, s, "alice", perMinute+1); got != 1 {
			t.Errorf("free live-task slots = %d, want 1", got)
		}
		// In the next window the same task is created.
		lifetime(refused, at(windowEnd), at(windowEnd+time.Hour))
		if err := s.Create(t.Context(), refused.Clone(), limits); err != nil {
			t.Fatalf("Create in the next window: %v", err)
		}
		assertStored(t, s, refused, at(windowEnd))
	})
}

// testRateLimitConcurrent races creations of one principal against the
// rate limit: the limit holds exactly, and a refused create stores nothing.
func testRateLimitConcurrent(t *testing.T, h Harness) {
	const (
		creators  = 32
		perMinute = 10
	)
	s := h.Open(t)
	var (
		wg               sync.WaitGroup
		start            = make(chan struct{})
		created, refused atomic.Int64
		mu               sync.Mutex
		errs             []error
	)
	for range creators {
		task := createdAt("alice", time.Second)
		wg.Go(func() {
			<-start
			err := s.Create(t.Context(), task, mapping.CreateLimits{PerMinute: perMinute, MaxLive: creators})
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, mapping.ErrRateLimit):
				refused.Add(1)
			default:
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Create errors other than ErrRateLimit: %v", errors.Join(errs...))
	}
	if created.Load() != perMinute || refused.Load() != creators-perMinute {
		t.Errorf("%d creates succeeded and %d were refused, want %d and %d", created.Load(), refused.Load(), perMinute, creators-perMinute)
	}
	if n := liveOf(t, s, "alice"); n != perMinute {
		t.Errorf("alice has %d tasks stored, want %d", n, perMinute)
	}
	if got := Allowance(t, s, "alice", 2*time.Second, mapping.CreateLimits{PerMinute: perMinute}); got != 0 {
		t.Errorf("alice may create %d more tasks in the window after the race, want 0", got)
	}
}

func testRateLimitSurvivesReopen(t *testing.T, h Harness) {
	const perMinute = 3
	limits := mapping.CreateLimits{PerMinute: perMinute}
	s := h.Open(t)
	for range 2 {
		if err := s.Create(t.Context(), createdAt("alice", 0), limits); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	s = h.Reopen(t, s)
	if got := Allowance(t, s, "alice", time.Second, limits); got != 1 {
		t.Errorf("alice may create %d more tasks after reopening, want 1", got)
	}
}
