// Package storetest is the contract suite of mapping.Store: every
// implementation runs it from its own tests, so that the bridge can rely on
// the same behaviour from each of them.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: openStore, Reopen: reopenStore, Peer: openPeer})
//	}
//
// A task is live while now is before its ExpiresAt: at ExpiresAt, Get no
// longer returns it, ListLive and ListByPrincipal leave it out and
// PurgeExpired may delete it.
//
// The suite uses only the mapping.Store interface. It never hands the store a
// task ID, only keys made with mapping.KeyOf.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/mapping"
)

// Harness tells the suite how to get stores.
type Harness struct {
	// Open returns a new, empty store. It arranges (with t.Cleanup) for the
	// store to be closed; closing a store twice must be harmless.
	Open func(t *testing.T) mapping.Store
	// Reopen closes old and returns a new store over the same data, as a
	// restarted process would see it. If Reopen is nil the suite leaves out
	// its durability case.
	Reopen func(t *testing.T, old mapping.Store) mapping.Store
	// Peer returns another store over the same data as s, open at the same
	// time, as another process (a replica) would have it, and arranges for
	// it to be closed. Only a store several processes share has one; if
	// Peer is nil the suite checks the change feed through one store only.
	Peer func(t *testing.T, s mapping.Store) mapping.Store
}

// Run runs the contract suite; each case opens a fresh store.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	t.Run("CreateThenGet", func(t *testing.T) { testCreateThenGet(t, h) })
	t.Run("StoreKeepsItsOwnCopy", func(t *testing.T) { testOwnCopy(t, h) })
	t.Run("GetNotFound", func(t *testing.T) { testGetNotFound(t, h) })
	t.Run("CreateDuplicate", func(t *testing.T) { testCreateDuplicate(t, h) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, h) })
	t.Run("UpdateConflict", func(t *testing.T) { testUpdateConflict(t, h) })
	t.Run("TerminalIsAbsorbing", func(t *testing.T) { testTerminalIsAbsorbing(t, h) })
	t.Run("ConcurrentUpdates", func(t *testing.T) { testConcurrentUpdates(t, h) })
	t.Run("CancelClaim", func(t *testing.T) { testCancelClaim(t, h) })
	t.Run("ListLive", func(t *testing.T) { testListLive(t, h) })
	t.Run("ListByPrincipal", func(t *testing.T) { testListByPrincipal(t, h) })
	t.Run("ListByPrincipalTies", func(t *testing.T) { testListByPrincipalTies(t, h) })
	t.Run("ListByPrincipalConcurrentChanges", func(t *testing.T) { testListByPrincipalConcurrentChanges(t, h) })
	t.Run("PurgeExpired", func(t *testing.T) { testPurgeExpired(t, h) })
	t.Run("LiveLimit", func(t *testing.T) { testLiveLimit(t, h) })
	t.Run("LiveLimitConcurrent", func(t *testing.T) { testLiveLimitConcurrent(t, h) })
	t.Run("RateLimit", func(t *testing.T) { testRateLimit(t, h) })
	t.Run("RateLimitConcurrent", func(t *testing.T) { testRateLimitConcurrent(t, h) })
	t.Run("FindByJob", func(t *testing.T) { testFindByJob(t, h) })
	t.Run("List", func(t *testing.T) { testList(t, h) })
	t.Run("ListPages", func(t *testing.T) { testListPages(t, h) })
	t.Run("ClaimDelivery", func(t *testing.T) { testClaimDelivery(t, h) })
	t.Run("ClaimDeliveryConcurrent", func(t *testing.T) { testClaimDeliveryConcurrent(t, h) })
	t.Run("SubscribeCreateAndUpdate", func(t *testing.T) { testSubscribeCreateAndUpdate(t, h) })
	t.Run("SubscribeFailedWrites", func(t *testing.T) { testSubscribeFailedWrites(t, h) })
	t.Run("SubscribeVersionsGrow", func(t *testing.T) { testSubscribeVersionsGrow(t, h) })
	t.Run("SubscribeReadsInCallback", func(t *testing.T) { testSubscribeReadsInCallback(t, h) })
	t.Run("Unsubscribe", func(t *testing.T) { testUnsubscribe(t, h) })
	if h.Peer != nil {
		t.Run("SubscribeSeesPeer", func(t *testing.T) { testSubscribeSeesPeer(t, h) })
		t.Run("ClaimDeliveryAcrossPeers", func(t *testing.T) { testClaimDeliveryAcrossPeers(t, h) })
	}
	if h.Reopen != nil {
		t.Run("SurvivesReopen", func(t *testing.T) { testSurvivesReopen(t, h) })
		t.Run("LiveLimitSurvivesReopen", func(t *testing.T) { testLiveLimitSurvivesReopen(t, h) })
		t.Run("RateLimitSurvivesReopen", func(t *testing.T) { testRateLimitSurvivesReopen(t, h) })
	}
}

// base is the suite's clock origin. Its nanoseconds show that fixtures are
// normalised to what a store keeps: UTC at millisecond precision.
var base = time.Date(2026, 7, 28, 9, 30, 0, 123_456_789, time.UTC)

// at returns base+d, normalised to millisecond precision.
func at(d time.Duration) time.Time { return base.Add(d).UTC().Truncate(time.Millisecond) }

// ptr returns a pointer to at(d).
func ptr(d time.Duration) *time.Time {
	t := at(d)
	return &t
}

// newTask returns a submitted, working task created at base whose optional
// fields are unset.
func newTask(id, principal string) *mapping.Task {
	created := at(0)
	return &mapping.Task{
		Key:             mapping.KeyOf(id),
		Principal:       principal,
		Tool:            "deploy",
		ArgsDigest:      "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef",
		ServerBuild:     "v0.1.0-test",
		CatalogRevision: "rev-1",
		Backend:         "rest",
		JobRef:          json.RawMessage(`{"id":"job-` + id + `"}`),
		JobID:           "job-" + id,
		CorrelationID:   "corr-" + id,
		Phase:           mapping.PhaseSubmitted,
		Status:          mapping.StatusWorking,
		StatusMessage:   "queued",
		CreatedAt:       created,
		UpdatedAt:       created,
		TTL:             time.Hour,
		ExpiresAt:       created.Add(time.Hour),
		PollInterval:    5 * time.Second,
	}
}

// lifetime sets t's creation time and expiry (and so its TTL).
func lifetime(t *mapping.Task, created, expires time.Time) {
	t.CreatedAt, t.UpdatedAt = created, created
	t.ExpiresAt = expires
	t.TTL = expires.Sub(created)
}

// fullTask returns a task with every field set to a value no other field has.
func fullTask(id, principal string) *mapping.Task {
	t := newTask(id, principal)
	t.Args = json.RawMessage(`{"env":"staging","replicas":3}`)
	t.Status = mapping.StatusInputRequired
	t.StatusMessage = "waiting for approval"
	t.CreatedAt = at(-90 * time.Minute)
	t.UpdatedAt = at(-7*time.Minute + 250*time.Millisecond)
	t.TTL = 36*time.Hour + 500*time.Millisecond
	t.ExpiresAt = t.CreatedAt.Add(t.TTL)
	t.PollInterval = 2500 * time.Millisecond
	t.CancelRequestedAt = ptr(-3 * time.Minute)
	t.CancelBy = mapping.CancelByOperator
	t.CancelForwardedAt = ptr(-2*time.Minute - 1*time.Millisecond)
	t.CancelSentAt = ptr(-2*time.Minute + 3*time.Millisecond)
	t.SubmittedAt = ptr(-89*time.Minute + 7*time.Millisecond)
	t.InputRequests = json.RawMessage(`{"approve":{"message":"Deploy to staging?"}}`)
	t.AnsweredKeys = json.RawMessage(`["region"]`)
	t.Observation = json.RawMessage(`{"state":"input_required","progress":0.5}`)
	t.ObservedAt = ptr(-time.Minute)
	t.MissingSince = ptr(-30 * time.Second)
	t.EventAt = ptr(-45 * time.Second)
	t.Outcome = json.RawMessage(`{"content":[{"type":"text","text":"partial"}]}`)
	t.SealedID = []byte("\x00sealed " + id + "\xff")
	t.CancelAttempts = 3
	t.CancelNextAt = ptr(-5*time.Second + 9*time.Millisecond)
	t.CancelProblem = mapping.Problem{Class: "refused", Call: "POST /jobs/7/cancel", Status: 409, Message: "the job is in a state that cannot be cancelled",
		Since: ptr(-110 * time.Second), Count: 2}
	t.Problem = mapping.Problem{Class: "error", Call: "GET /jobs/7", Status: 500, Message: "an expired or rejected token",
		Since: ptr(-70*time.Second + 11*time.Millisecond), Count: 4}
	t.BackendState = "RUNNING"
	t.StateSince = ptr(-80*time.Second + 13*time.Millisecond)
	t.StateSeenAt = ptr(-75*time.Second + 17*time.Millisecond)
	t.FirstObservedAt = ptr(-88*time.Minute + 19*time.Millisecond)
	t.JobMessage = "job 7 RUNNING"
	return t
}

// completedTask returns a terminal task with an outcome.
func completedTask(id, principal string) *mapping.Task {
	t := newTask(id, principal)
	t.Phase = mapping.PhaseDone
	t.Status = mapping.StatusCompleted
	t.StatusMessage = "succeeded"
	t.Observation = json.RawMessage(`{"state":"succeeded"}`)
	t.ObservedAt = ptr(time.Minute)
	t.Outcome = json.RawMessage(`{"content":[{"type":"text","text":"deployed"}],"isError":false}`)
	return t
}

func mustCreate(t *testing.T, s mapping.Store, tasks ...*mapping.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.Create(t.Context(), task.Clone(), mapping.CreateLimits{}); err != nil {
			t.Fatalf("Create(%s): %v", task.CorrelationID, err)
		}
	}
}

func mustGet(t *testing.T, s mapping.Store, key mapping.Key, principal string, now time.Time) *mapping.Task {
	t.Helper()
	got, err := s.Get(t.Context(), key, principal, now)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return got
}

// assertStored checks that the store holds want, read at now by want's
// principal.
func assertStored(t *testing.T, s mapping.Store, want *mapping.Task, now time.Time) {
	t.Helper()
	got := mustGet(t, s, want.Key, want.Principal, now)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored task mismatch (-want +got):\n%s", diff)
	}
}

func testCreateThenGet(t *testing.T, h Harness) {
	tests := []struct {
		name string
		task *mapping.Task
	}{
		{"every field set", fullTask("task-full", "alice")},
		{"optional fields unset", newTask("task-min", "alice")},
		{"terminal with outcome", completedTask("task-done", "alice")},
		{"empty principal", newTask("task-anon", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.Open(t)
			mustCreate(t, s, tt.task)
			assertStored(t, s, tt.task, tt.task.CreatedAt)
		})
	}
}

func testOwnCopy(t *testing.T, h Harness) {
	s := h.Open(t)
	want := fullTask("task-1", "alice")
	in := want.Clone()
	if err := s.Create(t.Context(), in, mapping.CreateLimits{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Scribble over the caller's copy and over a read copy: neither reaches
	// the store.
	in.Args[0] = 'X'
	*in.ObservedAt = at(time.Hour)
	got := mustGet(t, s, want.Key, want.Principal, at(0))
	got.Outcome[0] = 'X'
	got.Status = mapping.StatusFailed
	assertStored(t, s, want, at(0))
}

func testGetNotFound(t *testing.T, h Harness) {
	s := h.Open(t)
	task := newTask("task-1", "alice") // live in [at(0), at(1h))
	mustCreate(t, s, task)
	// A live read resolves, up to the last millisecond before ExpiresAt.
	mustGet(t, s, task.Key, "alice", at(0))
	mustGet(t, s, task.Key, "alice", task.ExpiresAt.Add(-time.Millisecond))

	tests := []struct {
		name      string
		key       mapping.Key
		principal string
		now       time.Time
	}{
		{"other principal", task.Key, "mallory", at(0)},
		{"empty principal", task.Key, "", at(0)},
		{"principal differing in case", task.Key, "Alice", at(0)},
		{"unknown key", mapping.KeyOf("task-2"), "alice", at(0)},
		{"key of the correlation ID", mapping.KeyOf(task.CorrelationID), "alice", at(0)},
		{"expired at exactly ExpiresAt", task.Key, "alice", task.ExpiresAt},
		{"expired long ago", task.Key, "alice", at(48 * time.Hour)},
	}
	var first error
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Get(t.Context(), tt.key, tt.principal, tt.now)
			if !errors.Is(err, mapping.ErrNotFound) {
				t.Fatalf("Get = %v, %v; want ErrNotFound", got, err)
			}
			if got != nil {
				t.Errorf("Get returned task %+v along with ErrNotFound", got)
			}
			// Every miss must read the same, so that a caller cannot tell a
			// foreign task from a missing or expired one.
			if first == nil {
				first = err
			} else if err.Error() != first.Error() {
				t.Errorf("Get error = %q, want the same as for other misses, %q", err, first)
			}
		})
	}
}

func testCreateDuplicate(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		second *mapping.Task
	}{
		{"same task again", newTask("task-1", "alice")},
		{"same key, other principal", fullTask("task-1", "mallory")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.Open(t)
			first := newTask("task-1", "alice")
			mustCreate(t, s, first)
			if err := s.Create(t.Context(), tt.second.Clone(), mapping.CreateLimits{}); err == nil {
				t.Fatal("second Create with the same key succeeded, want an error")
			}
			assertStored(t, s, first, at(0))
			if _, err := s.Get(t.Context(), tt.second.Key, "mallory", at(0)); !errors.Is(err, mapping.ErrNotFound) {
				t.Errorf("Get by the second creator's principal = %v, want ErrNotFound", err)
			}
		})
	}
}

func testUpdate(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		start  *mapping.Task
		change func(*mapping.Task)
		// want is the stored task expected after the update; nil means the
		// updated task itself.
		want func(updated *mapping.Task) *mapping.Task
	}{
		{
			name:  "sets every mutable field",
			start: newTask("task-1", "alice"),
			change: func(u *mapping.Task) {
				f := fullTask("other", "alice")
				f.Key, f.Principal, f.CreatedAt, f.Version = u.Key, u.Principal, u.CreatedAt, u.Version
				f.Tool = "rollback"
				f.ArgsDigest = "0000000000000000000000000000000000000000000000000000000000000000"
				f.ServerBuild = "v0.2.0-test"
				f.CatalogRevision = "rev-2"
				f.Backend = "batch"
				f.CorrelationID = "corr-changed"
				f.Phase = mapping.PhaseSubmitting
				*u = *f
			},
		},
		{
			name:  "clears fields set to nil",
			start: fullTask("task-1", "alice"),
			change: func(u *mapping.Task) {
				u.Args = nil
				u.JobRef = nil
				u.CancelRequestedAt = nil
				u.CancelForwardedAt = nil
				u.CancelSentAt = nil
				u.InputRequests = nil
				u.AnsweredKeys = nil
				u.Observation = nil
				u.ObservedAt = nil
				u.MissingSince = nil
				u.EventAt = nil
				u.Outcome = nil
				u.SealedID = nil
				u.StatusMessage = ""
				u.JobID = ""
				u.CancelBy = ""
				u.CancelAttempts = 0
				u.CancelNextAt = nil
				u.CancelProblem = mapping.Problem{}
				u.Problem = mapping.Problem{}
				u.BackendState = ""
				u.StateSince = nil
				u.StateSeenAt = nil
				u.FirstObservedAt = nil
				u.JobMessage = ""
			},
		},
		{
			name:  "keeps key principal and creation time",
			start: newTask("task-1", "alice"),
			change: func(u *mapping.Task) {
				u.Principal = "mallory"
				u.CreatedAt = at(-24 * time.Hour)
				u.UpdatedAt = at(time.Minute)
				u.StatusMessage = "running"
			},
			want: func(u *mapping.Task) *mapping.Task {
				w := u.Clone()
				w.Principal = "alice"
				w.CreatedAt = at(0)
				return w
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := h.Open(t)
			mustCreate(t, s, tt.start)
			u := mustGet(t, s, tt.start.Key, tt.start.Principal, at(0))
			before := u.Version
			tt.change(u)
			if err := s.Update(t.Context(), u); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if u.Version != before+1 {
				t.Errorf("Version after Update = %d, want %d", u.Version, before+1)
			}
			want := u
			if tt.want != nil {
				want = tt.want(u)
			}
			assertStored(t, s, want, at(0))
		})
	}
}

func testUpdateConflict(t *testing.T, h Harness) {
	t.Run("stale version", func(t *testing.T) {
		s := h.Open(t)
		task := newTask("task-1", "alice")
		mustCreate(t, s, task)
		first := mustGet(t, s, task.Key, "alice", at(0))
		stale := first.Clone()

		first.StatusMessage = "first writer"
		if err := s.Update(t.Context(), first); err != nil {
			t.Fatalf("first Update: %v", err)
		}
		stale.StatusMessage = "second writer"
		stale.Status = mapping.StatusCompleted
		staleVersion := stale.Version
		if err := s.Update(t.Context(), stale); !errors.Is(err, mapping.ErrConflict) {
			t.Fatalf("Update with a stale version = %v, want ErrConflict", err)
		}
		if stale.Version != staleVersion {
			t.Errorf("Version after a conflicting Update = %d, want it unchanged at %d", stale.Version, staleVersion)
		}
		assertStored(t, s, first, at(0))

		// Re-reading and deciding again succeeds.
		again := mustGet(t, s, task.Key, "alice", at(0))
		again.StatusMessage = "second writer, after re-reading"
		if err := s.Update(t.Context(), again); err != nil {
			t.Fatalf("Update after re-reading: %v", err)
		}
		assertStored(t, s, again, at(0))
	})
	t.Run("unknown key", func(t *testing.T) {
		s := h.Open(t)
		mustCreate(t, s, newTask("task-1", "alice"))
		ghost := newTask("task-2", "alice")
		if err := s.Update(t.Context(), ghost); !errors.Is(err, mapping.ErrConflict) {
			t.Fatalf("Update of an unknown key = %v, want ErrConflict", err)
		}
		if _, err := s.Get(t.Context(), ghost.Key, "alice", at(0)); !errors.Is(err, mapping.ErrNotFound) {
			t.Errorf("Get after updating an unknown key = %v, want ErrNotFound", err)
		}
	})
}

func testTerminalIsAbsorbing(t *testing.T, h Harness) {
	terminal := []mapping.Status{mapping.StatusCompleted, mapping.StatusFailed, mapping.StatusCancelled}
	attempts := []struct {
		name   string
		change func(*mapping.Task)
	}{
		{"back to working", func(u *mapping.Task) {
			u.Status = mapping.StatusWorking
			u.Phase = mapping.PhaseSubmitted
			u.Outcome = nil
		}},
		{"another outcome", func(u *mapping.Task) {
			u.Outcome = json.RawMessage(`{"content":[],"isError":true}`)
			u.StatusMessage = "rewritten"
		}},
		{"another terminal status", func(u *mapping.Task) {
			if u.Status == mapping.StatusFailed {
				u.Status = mapping.StatusCancelled
			} else {
				u.Status = mapping.StatusFailed
			}
		}},
		{"record a cancel request", func(u *mapping.Task) {
			u.CancelRequestedAt = ptr(2 * time.Minute)
		}},
	}
	for _, status := range terminal {
		for _, a := range attempts {
			t.Run(string(status)+"/"+a.name, func(t *testing.T) {
				s := h.Open(t)
				task := newTask("task-1", "alice")
				mustCreate(t, s, task)

				done := mustGet(t, s, task.Key, "alice", at(0))
				done.Phase = mapping.PhaseDone
				done.Status = status
				done.StatusMessage = "finished"
				done.Outcome = json.RawMessage(`{"content":[{"type":"text","text":"first outcome"}]}`)
				if err := s.Update(t.Context(), done); err != nil {
					t.Fatalf("Update to %s: %v", status, err)
				}

				// The writer holds the current version: only terminality
				// can refuse it.
				later := done.Clone()
				a.change(later)
				if err := s.Update(t.Context(), later); !errors.Is(err, mapping.ErrConflict) {
					t.Fatalf("Update after %s = %v, want ErrConflict", status, err)
				}
				assertStored(t, s, done, at(0))
			})
		}
	}
}

func testConcurrentUpdates(t *testing.T, h Harness) {
	const writers = 16
	s := h.Open(t)
	task := newTask("task-1", "alice")
	mustCreate(t, s, task)
	read := mustGet(t, s, task.Key, "alice", at(0))

	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		wins   []*mapping.Task
		others []error
		lost   int
	)
	for i := range writers {
		u := read.Clone()
		u.StatusMessage = fmt.Sprintf("writer %d", i)
		u.ObservedAt = ptr(time.Duration(i) * time.Second)
		wg.Go(func() {
			<-start
			err := s.Update(t.Context(), u)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, u)
			case errors.Is(err, mapping.ErrConflict):
				lost++
			default:
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()

	if len(others) > 0 {
		t.Fatalf("Update errors other than ErrConflict: %v", errors.Join(others...))
	}
	if len(wins) != 1 || lost != writers-1 {
		t.Fatalf("%d updates won and %d conflicted, want 1 and %d", len(wins), lost, writers-1)
	}
	assertStored(t, s, wins[0], at(0))
}

func testCancelClaim(t *testing.T, h Harness) {
	const (
		claimers    = 16
		observers   = 4
		observes    = 10
		maxAttempts = 1000
	)
	s := h.Open(t)
	task := newTask("task-1", "alice")
	mustCreate(t, s, task)
	now := at(time.Minute)
	forwardedAt := at(time.Minute)

	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		claims atomic.Int32
		winner atomic.Int32
		errs   = make(chan error, claimers+observers)
	)
	// retry re-reads the task, lets decide change it, and writes it, until
	// an Update succeeds or decide declines (returns false).
	retry := func(decide func(*mapping.Task) bool) (bool, error) {
		for range maxAttempts {
			cur, err := s.Get(t.Context(), task.Key, "alice", now)
			if err != nil {
				return false, err
			}
			if !decide(cur) {
				return false, nil
			}
			switch err := s.Update(t.Context(), cur); {
			case err == nil:
				return true, nil
			case !errors.Is(err, mapping.ErrConflict):
				return false, err
			}
		}
		return false, fmt.Errorf("no decision after %d attempts", maxAttempts)
	}
	for i := range claimers {
		wg.Go(func() {
			<-start
			claimed, err := retry(func(cur *mapping.Task) bool {
				if cur.CancelForwardedAt != nil {
					return false // someone else claimed it
				}
				cur.CancelForwardedAt = &forwardedAt
				cur.StatusMessage = fmt.Sprintf("cancel forwarded by claimer %d", i)
				return true
			})
			if err != nil {
				errs <- fmt.Errorf("claimer %d: %w", i, err)
			}
			if claimed {
				claims.Add(1)
				winner.Store(int32(i))
			}
		})
	}
	// Observers keep writing unrelated fields, so that claims also race
	// with ordinary updates.
	for i := range observers {
		wg.Go(func() {
			<-start
			for j := range observes {
				_, err := retry(func(cur *mapping.Task) bool {
					cur.Observation = json.RawMessage(fmt.Sprintf(`{"observer":%d,"n":%d}`, i, j))
					cur.ObservedAt = &now
					return true
				})
				if err != nil {
					errs <- fmt.Errorf("observer %d: %w", i, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if n := claims.Load(); n != 1 {
		t.Fatalf("%d claimers forwarded the cancel, want exactly 1", n)
	}
	got := mustGet(t, s, task.Key, "alice", now)
	if got.CancelForwardedAt == nil || !got.CancelForwardedAt.Equal(forwardedAt) {
		t.Errorf("stored CancelForwardedAt = %v, want %v", got.CancelForwardedAt, forwardedAt)
	}
	if want := fmt.Sprintf("cancel forwarded by claimer %d", winner.Load()); got.StatusMessage != want {
		t.Errorf("stored StatusMessage = %q, want %q", got.StatusMessage, want)
	}
	if want := int64(1 + observers*observes); got.Version != want {
		t.Errorf("stored Version = %d, want %d (one claim and every observation)", got.Version, want)
	}
}

func testListLive(t *testing.T, h Harness) {
	now := at(20 * time.Minute)

	unobservedOlder := newTask("unobserved-older", "alice")
	lifetime(unobservedOlder, at(time.Minute), at(time.Hour))
	unobservedNewer := newTask("unobserved-newer", "bob")
	lifetime(unobservedNewer, at(2*time.Minute), at(time.Hour))
	observedEarlier := newTask("observed-earlier", "bob")
	lifetime(observedEarlier, at(3*time.Minute), at(time.Hour))
	observedEarlier.ObservedAt = ptr(5 * time.Minute)
	observedLater := newTask("observed-later", "alice")
	observedLater.Status = mapping.StatusInputRequired
	observedLater.InputRequests = json.RawMessage(`{"approve":{}}`)
	observedLater.ObservedAt = ptr(10 * time.Minute)
	live := []*mapping.Task{unobservedOlder, unobservedNewer, observedEarlier, observedLater}

	completed := completedTask("completed", "alice")
	failed := newTask("failed", "alice")
	failed.Phase, failed.Status = mapping.PhaseDone, mapping.StatusFailed
	cancelled := newTask("cancelled", "alice")
	cancelled.Phase, cancelled.Status = mapping.PhaseDone, mapping.StatusCancelled
	expired := newTask("expired", "alice")
	lifetime(expired, at(-2*time.Hour), at(-time.Hour))
	expiresNow := newTask("expires-now", "alice")
	lifetime(expiresNow, at(-40*time.Minute), now)

	s := h.Open(t)
	// Create in an order unrelated to the expected one.
	mustCreate(t, s, observedLater, completed, unobservedNewer, expired, observedEarlier,
		failed, expiresNow, unobservedOlder, cancelled)

	tests := []struct {
		limit int
		want  []*mapping.Task
	}{
		{limit: 0, want: nil},
		{limit: 1, want: live[:1]},
		{limit: 3, want: live[:3]},
		{limit: 4, want: live},
		{limit: 100, want: live},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			got, err := s.ListLive(t.Context(), now, tt.limit)
			if err != nil {
				t.Fatalf("ListLive: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListLive mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func testPurgeExpired(t *testing.T, h Harness) {
	now := at(2 * time.Hour)

	expiredWorking := newTask("expired-working", "alice")
	lifetime(expiredWorking, at(-3*time.Hour), at(-2*time.Hour))
	expiredCompleted := completedTask("expired-completed", "bob") // expires at(1h)
	expiredJustNow := newTask("expired-just-now", "alice")
	lifetime(expiredJustNow, at(0), now.Add(-time.Millisecond))
	liveWorking := newTask("live-working", "alice")
	lifetime(liveWorking, at(0), at(3*time.Hour))
	liveCompleted := completedTask("live-completed", "bob")
	lifetime(liveCompleted, at(0), at(24*time.Hour))

	s := h.Open(t)
	if n, err := s.PurgeExpired(t.Context(), now); err != nil || n != 0 {
		t.Fatalf("PurgeExpired on an empty store = %d, %v; want 0, nil", n, err)
	}
	mustCreate(t, s, expiredWorking, liveWorking, expiredCompleted, liveCompleted, expiredJustNow)

	n, err := s.PurgeExpired(t.Context(), now)
	if err != nil {
		t.Fatalf("PurgeExpired: %v", err)
	}
	if n != 3 {
		t.Errorf("PurgeExpired = %d, want 3", n)
	}
	if n, err := s.PurgeExpired(t.Context(), now); err != nil || n != 0 {
		t.Errorf("second PurgeExpired = %d, %v; want 0, nil", n, err)
	}

	// Read each task at its creation time, when it was live: purged rows
	// are gone, the others are intact.
	for _, gone := range []*mapping.Task{expiredWorking, expiredCompleted, expiredJustNow} {
		if _, err := s.Get(t.Context(), gone.Key, gone.Principal, gone.CreatedAt); !errors.Is(err, mapping.ErrNotFound) {
			t.Errorf("Get(%s) after purge = %v, want ErrNotFound", gone.CorrelationID, err)
		}
	}
	for _, kept := range []*mapping.Task{liveWorking, liveCompleted} {
		assertStored(t, s, kept, kept.CreatedAt)
	}
}

func testSurvivesReopen(t *testing.T, h Harness) {
	s := h.Open(t)
	full := fullTask("task-full", "alice")
	done := newTask("task-done", "bob")
	mustCreate(t, s, full, done)

	u := mustGet(t, s, done.Key, "bob", at(0))
	u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCompleted
	u.Outcome = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	if err := s.Update(t.Context(), u); err != nil {
		t.Fatalf("Update: %v", err)
	}
	done = u

	s = h.Reopen(t, s)
	assertStored(t, s, full, at(0))
	assertStored(t, s, done, at(0))

	// Versions and terminality survive too.
	again := done.Clone()
	again.Status = mapping.StatusWorking
	if err := s.Update(t.Context(), again); !errors.Is(err, mapping.ErrConflict) {
		t.Errorf("Update of a terminal task after reopening = %v, want ErrConflict", err)
	}
	next := mustGet(t, s, full.Key, "alice", at(0))
	next.StatusMessage = "approved"
	if err := s.Update(t.Context(), next); err != nil {
		t.Fatalf("Update after reopening: %v", err)
	}
	assertStored(t, s, next, at(0))
}
