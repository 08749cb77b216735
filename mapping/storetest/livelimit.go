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

// The live-task limit: Create(ctx, task, maxLive) refuses with
// mapping.ErrLiveLimit, inserting nothing, when the principal already has
// maxLive live tasks. A task is live from its creation (if it is created
// live) until an Update makes it terminal or PurgeExpired deletes it; a task
// that expired but is not purged yet still counts.

// roomSeq numbers the tasks Room creates, so that its task IDs never repeat.
var roomSeq atomic.Int64

// Room creates tasks for principal with maxLive until Create refuses with
// ErrLiveLimit, and returns how many it created: the free slots. It fails
// t if Create fails otherwise, or does not refuse within maxLive+1
// attempts. The tasks it creates take the slots it counts. Stores' own
// tests (upgrades, rows written by hand) use it too.
func Room(t *testing.T, s mapping.Store, principal string, maxLive int) int {
	t.Helper()
	for n := 0; n <= maxLive; n++ {
		task := newTask(fmt.Sprintf("room-%s-%d", principal, roomSeq.Add(1)), principal)
		err := s.Create(t.Context(), task, mapping.CreateLimits{MaxLive: maxLive})
		if errors.Is(err, mapping.ErrLiveLimit) {
			// A refused Create inserted nothing.
			if _, err := s.Get(t.Context(), task.Key, principal, at(0)); !errors.Is(err, mapping.ErrNotFound) {
				t.Fatalf("Get of a task refused with ErrLiveLimit = %v, want ErrNotFound", err)
			}
			return n
		}
		if err != nil {
			t.Fatalf("Create(%q, maxLive %d): %v", principal, maxLive, err)
		}
	}
	t.Fatalf("%q could create %d tasks with maxLive %d, want ErrLiveLimit by then", principal, maxLive+1, maxLive)
	return 0
}

// createLive creates n live tasks of principal without a limit and returns
// them as stored.
func createLive(t *testing.T, s mapping.Store, principal string, n int, expires time.Time) []*mapping.Task {
	t.Helper()
	tasks := make([]*mapping.Task, n)
	for i := range tasks {
		tasks[i] = newTask(fmt.Sprintf("live-%s-%d-%d", principal, expires.UnixMilli(), i), principal)
		lifetime(tasks[i], at(0), expires)
		mustCreate(t, s, tasks[i])
	}
	return tasks
}

// finish updates task to status, failing t if the Update fails, and returns
// it as stored.
func finish(t *testing.T, s mapping.Store, task *mapping.Task, status mapping.Status) *mapping.Task {
	t.Helper()
	u := mustGet(t, s, task.Key, task.Principal, at(0))
	u.Phase, u.Status = mapping.PhaseDone, status
	u.Outcome = []byte(`{"content":[]}`)
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatalf("Update to %s: %v", status, err)
	}
	return u
}

func testLiveLimit(t *testing.T, h Harness) {
	const limit = 3
	late := at(3 * time.Hour)
	tests := []struct {
		name  string
		setup func(t *testing.T, s mapping.Store)
		// want is the free slots of each principal afterwards, with limit.
		want map[string]int
	}{
		{
			name:  "empty store",
			setup: func(t *testing.T, s mapping.Store) {},
			want:  map[string]int{"alice": limit},
		},
		{
			name:  "live tasks take slots",
			setup: func(t *testing.T, s mapping.Store) { createLive(t, s, "alice", 2, late) },
			want:  map[string]int{"alice": 1},
		},
		{
			name:  "tasks created without a limit count",
			setup: func(t *testing.T, s mapping.Store) { createLive(t, s, "alice", limit+2, late) },
			want:  map[string]int{"alice": 0},
		},
		{
			name: "input_required counts",
			setup: func(t *testing.T, s mapping.Store) {
				task := newTask("waiting", "alice")
				task.Status, task.Phase = mapping.StatusInputRequired, mapping.PhaseConfirming
				mustCreate(t, s, task)
			},
			want: map[string]int{"alice": limit - 1},
		},
		{
			name: "tasks created terminal do not count",
			setup: func(t *testing.T, s mapping.Store) {
				mustCreate(t, s, completedTask("done-1", "alice"), completedTask("done-2", "alice"))
			},
			want: map[string]int{"alice": limit},
		},
		{
			name: "each terminal update frees a slot",
			setup: func(t *testing.T, s mapping.Store) {
				live := createLive(t, s, "alice", limit, late)
				finish(t, s, live[0], mapping.StatusCompleted)
				finish(t, s, live[1], mapping.StatusFailed)
				finish(t, s, live[2], mapping.StatusCancelled)
			},
			want: map[string]int{"alice": limit},
		},
		{
			name: "non-terminal updates free nothing",
			setup: func(t *testing.T, s mapping.Store) {
				live := createLive(t, s, "alice", limit, late)
				for i, status := range []mapping.Status{mapping.StatusInputRequired, mapping.StatusWorking, mapping.StatusWorking} {
					u := mustGet(t, s, live[i].Key, "alice", at(0))
					u.Status = status
					u.StatusMessage = "still running"
					u.ExpiresAt = at(30 * time.Minute)
					if err := s.Update(t.Context(), u); err != nil {
						t.Fatalf("Update to %s: %v", status, err)
					}
				}
			},
			want: map[string]int{"alice": 0},
		},
		{
			name: "a refused second terminal update frees nothing more",
			setup: func(t *testing.T, s mapping.Store) {
				live := createLive(t, s, "alice", limit, late)
				stale := mustGet(t, s, live[0].Key, "alice", at(0))
				done := finish(t, s, live[0], mapping.StatusCompleted)
				attempts := []struct {
					name string
					task *mapping.Task
				}{
					{"stale version", stale},
					{"current version, already terminal", done},
				}
				for _, a := range attempts {
					u := a.task.Clone()
					u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCancelled
					if err := s.Update(t.Context(), u); !errors.Is(err, mapping.ErrConflict) {
						t.Fatalf("second terminal Update (%s) = %v, want ErrConflict", a.name, err)
					}
				}
			},
			want: map[string]int{"alice": 1},
		},
		{
			name: "a terminal update frees the stored principal's slot",
			setup: func(t *testing.T, s mapping.Store) {
				alices := createLive(t, s, "alice", limit, late)
				createLive(t, s, "bob", limit, late)
				// Update never changes the principal, whatever the caller
				// passes.
				u := mustGet(t, s, alices[0].Key, "alice", at(0))
				u.Principal = "bob"
				u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCompleted
				if err := s.Update(t.Context(), u); err != nil {
					t.Fatalf("Update: %v", err)
				}
			},
			want: map[string]int{"alice": 1, "bob": 0},
		},
		{
			name: "other principals are unaffected",
			setup: func(t *testing.T, s mapping.Store) {
				createLive(t, s, "bob", limit, late)
			},
			want: map[string]int{"bob": 0, "alice": limit, "Bob": limit, "": limit},
		},
		{
			name: "expired tasks count until purged",
			setup: func(t *testing.T, s mapping.Store) {
				createLive(t, s, "alice", limit, at(time.Minute))
			},
			want: map[string]int{"alice": 0},
		},
		{
			name: "purging expired live tasks frees their slots",
			setup: func(t *testing.T, s mapping.Store) {
				createLive(t, s, "alice", 2, at(30*time.Minute))
				createLive(t, s, "alice", 1, late)
				createLive(t, s, "bob", 1, at(30*time.Minute))
				expiredDone := completedTask("expired-done", "alice")
				lifetime(expiredDone, at(0), at(30*time.Minute))
				mustCreate(t, s, expiredDone)
				if n, err := s.PurgeExpired(t.Context(), at(time.Hour)); err != nil || n != 4 {
					t.Fatalf("PurgeExpired = %d, %v; want 4, nil", n, err)
				}
			},
			want: map[string]int{"alice": limit - 1, "bob": limit},
		},
		{
			name: "purging finished tasks frees nothing",
			setup: func(t *testing.T, s mapping.Store) {
				live := createLive(t, s, "alice", limit+1, at(30*time.Minute))
				finish(t, s, live[0], mapping.StatusCompleted)
				createLive(t, s, "alice", limit, late)
				if n, err := s.PurgeExpired(t.Context(), at(time.Hour)); err != nil || n != limit+1 {
					t.Fatalf("PurgeExpired = %d, %v; want %d, nil", n, err, limit+1)
				}
				// A second purge finds nothing to free.
				if n, err := s.PurgeExpired(t.Context(), at(time.Hour)); err != nil || n != 0 {
					t.Fatalf("second PurgeExpired = %d, %v; want 0, nil", n, err)
				}
			},
			want: map[string]int{"alice": 0},
		},
		{
			name: "a duplicate create takes no slot",
			setup: func(t *testing.T, s mapping.Store) {
				live := createLive(t, s, "alice", 1, late)
				if err := s.Create(t.Context(), live[0].Clone(), mapping.CreateLimits{MaxLive: limit}); err == nil || errors.Is(err, mapping.ErrLiveLimit) {
					t.Fatalf("Create of an existing key = %v, want a duplicate error", err)
				}
			},
			want: map[string]int{"alice": limit - 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.Open(t)
			tt.setup(t, s)
			for principal, want := range tt.want {
				if got := Room(t, s, principal, limit); got != want {
					t.Errorf("free slots of %q = %d, want %d", principal, got, want)
				}
			}
		})
	}

	t.Run("refused create inserts nothing", func(t *testing.T) {
		s := h.Open(t)
		live := createLive(t, s, "alice", limit, late)
		refused := newTask("refused", "alice")
		if err := s.Create(t.Context(), refused.Clone(), mapping.CreateLimits{MaxLive: limit}); !errors.Is(err, mapping.ErrLiveLimit) {
			t.Fatalf("Create at the limit = %v, want ErrLiveLimit", err)
		}
		if _, err := s.Get(t.Context(), refused.Key, "alice", at(0)); !errors.Is(err, mapping.ErrNotFound) {
			t.Fatalf("Get of the refused task = %v, want ErrNotFound", err)
		}
		// Once a slot is free the same task is created.
		finish(t, s, live[0], mapping.StatusCompleted)
		if err := s.Create(t.Context(), refused.Clone(), mapping.CreateLimits{MaxLive: limit}); err != nil {
			t.Fatalf("Create after a slot was freed: %v", err)
		}
		assertStored(t, s, refused, at(0))
	})

	t.Run("no limit", func(t *testing.T) {
		for _, maxLive := range []int{0, -1} {
			t.Run(fmt.Sprintf("maxLive %d", maxLive), func(t *testing.T) {
				s := h.Open(t)
				createLive(t, s, "alice", limit, late)
				for i := range 2 * limit {
					if err := s.Create(t.Context(), newTask(fmt.Sprintf("unlimited-%d", i), "alice"), mapping.CreateLimits{MaxLive: maxLive}); err != nil {
						t.Fatalf("Create #%d with maxLive %d: %v", i+1, maxLive, err)
					}
				}
				// All of them count against a limit given later.
				if got := Room(t, s, "alice", 3*limit+1); got != 1 {
					t.Errorf("free slots with maxLive %d = %d, want 1", 3*limit+1, got)
				}
			})
		}
	})
}

// testLiveLimitConcurrent races creations of one principal against the
// limit, and creations against terminal updates: the limit holds exactly.
func testLiveLimitConcurrent(t *testing.T, h Harness) {
	t.Run("creates", func(t *testing.T) {
		const (
			creators = 50
			limit    = 10
		)
		s := h.Open(t)
		created, refused := raceCreates(t, s, "alice", "race", creators, limit, nil)
		if created != limit || refused != creators-limit {
			t.Errorf("%d creates succeeded and %d were refused, want %d and %d", created, refused, limit, creators-limit)
		}
		if n := liveOf(t, s, "alice"); n != limit {
			t.Errorf("alice has %d live tasks stored, want %d", n, limit)
		}
		if got := Room(t, s, "alice", limit); got != 0 {
			t.Errorf("free slots after the race = %d, want 0", got)
		}
	})
	t.Run("creates racing terminal updates", func(t *testing.T) {
		const (
			creators = 40
			limit    = 10
		)
		s := h.Open(t)
		live := createLive(t, s, "alice", limit, at(time.Hour))
		created, _ := raceCreates(t, s, "alice", "race", creators, limit, func() {
			// Each finisher frees one slot, once.
			var wg sync.WaitGroup
			for _, task := range live {
				wg.Go(func() {
					u, err := s.Get(t.Context(), task.Key, "alice", at(0))
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCompleted
					if err := s.Update(t.Context(), u); err != nil {
						t.Errorf("Update: %v", err)
					}
				})
			}
			wg.Wait()
		})
		n := liveOf(t, s, "alice")
		if n != created {
			t.Errorf("alice has %d live tasks stored, want the %d created in the race", n, created)
		}
		if n > limit {
			t.Errorf("alice has %d live tasks, more than the limit %d", n, limit)
		}
		if got := Room(t, s, "alice", limit); got != limit-n {
			t.Errorf("free slots after the race = %d, want %d", got, limit-n)
		}
	})
}

// raceCreates starts n goroutines creating one task each for principal
// with maxLive, and also also (when not nil) in its own goroutine, all at
// once; it returns how many creates succeeded and how many were refused
// with ErrLiveLimit, failing t on any other error.
func raceCreates(t *testing.T, s mapping.Store, principal, prefix string, n, maxLive int, also func()) (created, refused int) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		errs  []error
	)
	for i := range n {
		task := newTask(fmt.Sprintf("%s-%s-%d", prefix, principal, i), principal)
		wg.Go(func() {
			<-start
			err := s.Create(t.Context(), task, mapping.CreateLimits{MaxLive: maxLive})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, mapping.ErrLiveLimit):
				refused++
			default:
				errs = append(errs, err)
			}
		})
	}
	if also != nil {
		wg.Go(func() {
			<-start
			also()
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Create errors other than ErrLiveLimit: %v", errors.Join(errs...))
	}
	return created, refused
}

// liveOf returns how many live tasks of principal the store lists at at(0).
func liveOf(t *testing.T, s mapping.Store, principal string) int {
	t.Helper()
	tasks, err := s.ListLive(t.Context(), at(0), 10000)
	if err != nil {
		t.Fatalf("ListLive: %v", err)
	}
	n := 0
	for _, task := range tasks {
		if task.Principal == principal {
			n++
		}
	}
	return n
}

func testLiveLimitSurvivesReopen(t *testing.T, h Harness) {
	const limit = 3
	s := h.Open(t)
	live := createLive(t, s, "alice", limit, at(time.Hour))
	finish(t, s, live[0], mapping.StatusCompleted)
	s = h.Reopen(t, s)
	if got := Room(t, s, "alice", limit); got != 1 {
		t.Errorf("free slots after reopening = %d, want 1", got)
	}
}
