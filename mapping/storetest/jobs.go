package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/mapping"
)

// Finding tasks for operators and pushed events: FindByJob looks tasks up by
// backend and job ID, List pages through the tasks of every principal by
// filter, and ClaimDelivery remembers which pushed events were applied.

// oldestFirst returns tasks in FindByJob's order.
func oldestFirst(tasks ...*mapping.Task) []*mapping.Task {
	s := newestFirst(tasks...)
	slices.Reverse(s)
	return s
}

func testFindByJob(t *testing.T, h Harness) {
	now := at(30 * time.Minute)
	job := func(id, principal, backend, jobID string, created time.Duration) *mapping.Task {
		task := newTask(id, principal)
		task.Backend, task.JobID = backend, jobID
		lifetime(task, at(created), at(2*time.Hour))
		return task
	}
	first := job("first", "alice", "batch", "job-7", time.Minute)
	// Another principal's task of the same job (a job two tasks share, or
	// a backend reusing IDs): both are found.
	second := job("second", "bob", "batch", "job-7", 2*time.Minute)
	done := job("done", "alice", "batch", "job-7", 3*time.Minute)
	done.Phase, done.Status, done.Outcome = mapping.PhaseDone, mapping.StatusCompleted, []byte(`{}`)
	otherBackend := job("other-backend", "alice", "rest", "job-7", time.Minute)
	otherJob := job("other-job", "alice", "batch", "job-70", time.Minute)
	expired := job("expired", "alice", "batch", "job-7", -2*time.Hour)
	lifetime(expired, at(-2*time.Hour), now)
	unsubmitted := job("unsubmitted", "alice", "batch", "", time.Minute)
	unsubmitted.Phase, unsubmitted.JobRef = mapping.PhaseSubmitting, nil

	s := h.Open(t)
	mustCreate(t, s, done, otherBackend, second, expired, otherJob, first, unsubmitted)

	tests := []struct {
		name, backend, jobID string
		want                 []*mapping.Task
	}{
		{"every unexpired task of the job", "batch", "job-7", oldestFirst(first, second, done)},
		{"the job of another backend", "rest", "job-7", []*mapping.Task{otherBackend}},
		{"a job ID that is a prefix of another", "batch", "job-70", []*mapping.Task{otherJob}},
		{"an unknown job", "batch", "job-8", nil},
		{"an unknown backend", "github", "job-7", nil},
		{"an empty job ID matches no unsubmitted task", "batch", "", nil},
		{"job IDs are case-sensitive", "batch", "JOB-7", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.FindByJob(t.Context(), tt.backend, tt.jobID, now)
			if err != nil {
				t.Fatalf("FindByJob(%q, %q): %v", tt.backend, tt.jobID, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("FindByJob(%q, %q) mismatch (-want +got):\n%s", tt.backend, tt.jobID, diff)
			}
		})
	}

	t.Run("before its expiry", func(t *testing.T) {
		got, err := s.FindByJob(t.Context(), "batch", "job-7", now.Add(-time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(keysOf(oldestFirst(first, second, done, expired)), keysOf(got)); diff != "" {
			t.Errorf("FindByJob a millisecond before the expiry mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("found once submitted", func(t *testing.T) {
		u := mustGet(t, s, unsubmitted.Key, "alice", now)
		u.Phase, u.JobRef, u.JobID = mapping.PhaseSubmitted, []byte(`{"id":"job-9"}`), "job-9"
		if err := s.Update(t.Context(), u); err != nil {
			t.Fatalf("Update: %v", err)
		}
		got, err := s.FindByJob(t.Context(), "batch", "job-9", now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]*mapping.Task{u}, got); diff != "" {
			t.Errorf("FindByJob after the job ID was written mismatch (-want +got):\n%s", diff)
		}
	})
}

// listFixture creates tasks of several principals, tools and states and
// returns them with the time to list them at, and a task of alice's that
// expires at that time.
func listFixture(t *testing.T, s mapping.Store) (now time.Time, all []*mapping.Task, expired *mapping.Task) {
	t.Helper()
	now = at(30 * time.Minute)
	add := func(id, principal, tool string, status mapping.Status, minute int) *mapping.Task {
		task := newTask(id, principal)
		task.Tool, task.Status = tool, status
		if status.Terminal() {
			task.Phase = mapping.PhaseDone
		}
		lifetime(task, at(time.Duration(minute)*time.Minute), at(2*time.Hour))
		all = append(all, task)
		return task
	}
	add("a-deploy-working", "alice", "deploy", mapping.StatusWorking, 1)
	add("a-deploy-done", "alice", "deploy", mapping.StatusCompleted, 2)
	add("a-test-input", "alice", "test", mapping.StatusInputRequired, 3)
	add("b-deploy-working", "bob", "deploy", mapping.StatusWorking, 4)
	add("b-test-failed", "bob", "test", mapping.StatusFailed, 5)
	add("b-test-cancelled", "bob", "test", mapping.StatusCancelled, 6)
	add("c-deploy-working", "carol", "deploy", mapping.StatusWorking, 6) // same time as b-test-cancelled
	add("anon-test-working", "", "test", mapping.StatusWorking, 7)
	mustCreate(t, s, all...)
	expired = newTask("a-expired", "alice")
	lifetime(expired, at(-2*time.Hour), now)
	mustCreate(t, s, expired)
	return now, all, expired
}

func testList(t *testing.T, h Harness) {
	s := h.Open(t)
	now, all, expired := listFixture(t, s)
	byID := map[string]*mapping.Task{}
	for _, task := range all {
		byID[task.CorrelationID] = task
	}
	pick := func(ids ...string) []*mapping.Task {
		var tasks []*mapping.Task
		for _, id := range ids {
			tasks = append(tasks, byID["corr-"+id])
		}
		return newestFirst(tasks...)
	}
	live := []mapping.Status{mapping.StatusWorking, mapping.StatusInputRequired}

	tests := []struct {
		name   string
		filter mapping.Filter
		want   []*mapping.Task
	}{
		{"everything", mapping.Filter{}, newestFirst(all...)},
		{"one status", mapping.Filter{Status: []mapping.Status{mapping.StatusWorking}},
			pick("a-deploy-working", "b-deploy-working", "c-deploy-working", "anon-test-working")},
		{"live statuses", mapping.Filter{Status: live},
			pick("a-deploy-working", "a-test-input", "b-deploy-working", "c-deploy-working", "anon-test-working")},
		{"terminal statuses", mapping.Filter{Status: []mapping.Status{mapping.StatusCompleted, mapping.StatusFailed, mapping.StatusCancelled}},
			pick("a-deploy-done", "b-test-failed", "b-test-cancelled")},
		{"a tool", mapping.Filter{Tool: "test"}, pick("a-test-input", "b-test-failed", "b-test-cancelled", "anon-test-working")},
		{"a principal", mapping.Filter{Principal: "bob"}, pick("b-deploy-working", "b-test-failed", "b-test-cancelled")},
		{"a principal differing in case", mapping.Filter{Principal: "Bob"}, nil},
		{"a correlation ID", mapping.Filter{CorrelationID: "corr-b-test-failed"}, pick("b-test-failed")},
		{"an unknown correlation ID", mapping.Filter{CorrelationID: "corr-nobody"}, nil},
		{"every condition", mapping.Filter{Status: live, Tool: "deploy", Principal: "alice", CorrelationID: "corr-a-deploy-working"},
			pick("a-deploy-working")},
		{"conditions that exclude each other", mapping.Filter{Principal: "alice", CorrelationID: "corr-b-test-failed"}, nil},
		{"status and tool", mapping.Filter{Status: live, Tool: "test"}, pick("a-test-input", "anon-test-working")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, mapping.MaxListLimit} {
				got, pages := listAllFiltered(t, s, tt.filter, now, limit)
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("limit %d: tasks over all pages mismatch (-want +got):\n%s", limit, diff)
				}
				if wantPages := max((len(tt.want)+limit-1)/limit, 1); pages != wantPages {
					t.Errorf("limit %d: read %d pages, want %d", limit, pages, wantPages)
				}
			}
		})
	}

	t.Run("expiry follows now", func(t *testing.T) {
		got, _ := listAllFiltered(t, s, mapping.Filter{Principal: "alice"}, now.Add(-time.Millisecond), 10)
		want := newestFirst(append(pick("a-deploy-working", "a-deploy-done", "a-test-input"), expired)...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tasks a millisecond before the expiry mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("rejects", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			filter mapping.Filter
			limit  int
		}{
			{"unknown status", mapping.Filter{Status: []mapping.Status{"done"}}, 10},
			{"unknown status among known ones", mapping.Filter{Status: []mapping.Status{mapping.StatusWorking, "Working"}}, 10},
			{"status with a quote", mapping.Filter{Status: []mapping.Status{"working') OR ('1' = '1"}}, 10},
			{"zero limit", mapping.Filter{}, 0},
			{"limit above the maximum", mapping.Filter{}, mapping.MaxListLimit + 1},
		} {
			tasks, next, err := s.List(t.Context(), tt.filter, now, nil, tt.limit)
			if err == nil || len(tasks) != 0 || next != nil {
				t.Errorf("%s: List = %v, %v, %v; want an error and no tasks", tt.name, keysOf(tasks), next, err)
			}
		}
	})

	t.Run("values are not SQL", func(t *testing.T) {
		for _, f := range []mapping.Filter{
			{Principal: "alice' OR '1' = '1"},
			{Tool: "deploy' --"},
			{CorrelationID: "x' OR 'a' = 'a"},
		} {
			got, err := listFiltered(t, s, f, now)
			if err != nil || len(got) != 0 {
				t.Errorf("List(%+v) = %v, %v; want no tasks", f, keysOf(got), err)
			}
		}
	})
}

// listFiltered reads the first page of List with f.
func listFiltered(t *testing.T, s mapping.Store, f mapping.Filter, now time.Time) ([]*mapping.Task, error) {
	tasks, _, err := s.List(t.Context(), f, now, nil, mapping.MaxListLimit)
	return tasks, err
}

// listAllFiltered walks every page of List with f, checking that each page
// but the last is full and that the cursors survive encoding, and returns
// the tasks and how many pages there were.
func listAllFiltered(t *testing.T, s mapping.Store, f mapping.Filter, now time.Time, limit int) ([]*mapping.Task, int) {
	t.Helper()
	var (
		all   []*mapping.Task
		after *mapping.Cursor
	)
	for pages := 1; ; pages++ {
		tasks, next, err := s.List(t.Context(), f, now, after, limit)
		if err != nil {
			t.Fatalf("List(%+v, limit %d): %v", f, limit, err)
		}
		if len(tasks) > limit {
			t.Fatalf("List(limit %d) returned %d tasks", limit, len(tasks))
		}
		all = append(all, tasks...)
		if next == nil {
			return all, pages
		}
		if len(tasks) != limit {
			t.Fatalf("page %d has %d tasks and a next cursor, want %d", pages, len(tasks), limit)
		}
		if pages > 1000 {
			t.Fatalf("still paging after %d pages", pages)
		}
		c, err := mapping.ParseCursor(next.Encode())
		if err != nil {
			t.Fatalf("ParseCursor of a cursor List returned: %v", err)
		}
		after = c
	}
}

// testListPages checks that List's pages are positions, as
// ListByPrincipal's are: tasks created between two reads are newer than
// the cursor and never repeat an older one, and tasks created in the same
// millisecond split across pages by key.
func testListPages(t *testing.T, h Harness) {
	s := h.Open(t)
	now := at(30 * time.Minute)
	var tasks []*mapping.Task
	for i := range 7 {
		task := newTask(fmt.Sprintf("tied-%d", i), []string{"alice", "bob", "carol"}[i%3])
		tasks = append(tasks, task) // all created at(0)
	}
	mustCreate(t, s, tasks...)
	want := newestFirst(tasks...)

	first, next, err := s.List(t.Context(), mapping.Filter{}, now, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keysOf(want[:3]), keysOf(first)); diff != "" || next == nil {
		t.Fatalf("first page mismatch (-want +got):\n%s\nnext %v", diff, next)
	}
	newer := newTask("newer", "dave")
	lifetime(newer, at(time.Minute), at(2*time.Hour))
	mustCreate(t, s, newer)
	var rest []*mapping.Task
	for after := next; after != nil; {
		page, n, err := s.List(t.Context(), mapping.Filter{}, now, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, page...)
		after = n
	}
	if diff := cmp.Diff(keysOf(want[3:]), keysOf(rest)); diff != "" {
		t.Errorf("later pages mismatch (-want +got):\n%s", diff)
	}
}

func testClaimDelivery(t *testing.T, h Harness) {
	s := h.Open(t)
	claimedAt := at(0)
	claim := func(source, id string, now time.Time) bool {
		t.Helper()
		first, err := s.ClaimDelivery(t.Context(), source, id, now)
		if err != nil {
			t.Fatalf("ClaimDelivery(%q, %q): %v", source, id, err)
		}
		return first
	}
	if !claim("github", "delivery-1", claimedAt) {
		t.Fatal("the first claim of a delivery was not first")
	}
	steps := []struct {
		name       string
		source, id string
		now        time.Time
		want       bool
	}{
		{"a redelivery", "github", "delivery-1", claimedAt.Add(time.Second), false},
		{"a replay at the same instant", "github", "delivery-1", claimedAt, false},
		{"the same ID from another source", "batch", "delivery-1", claimedAt, true},
		{"another ID", "github", "delivery-2", claimedAt, true},
		{"IDs are case-sensitive", "github", "DELIVERY-1", claimedAt, true},
		{"just within the retention", "github", "delivery-1", claimedAt.Add(mapping.DeliveryRetention - time.Millisecond), false},
	}
	for _, st := range steps {
		if got := claim(st.source, st.id, st.now); got != st.want {
			t.Errorf("%s: ClaimDelivery(%q, %q) = %v, want %v", st.name, st.source, st.id, got, st.want)
		}
	}

	// A purge forgets only the claims that no longer count.
	if _, err := s.PurgeExpired(t.Context(), claimedAt.Add(time.Hour)); err != nil {
		t.Fatalf("PurgeExpired: %v", err)
	}
	if claim("github", "delivery-2", claimedAt.Add(2*time.Hour)) {
		t.Error("a claim an hour old counted as first after a purge")
	}

	// Once the retention has passed, the delivery is new again (whether
	// or not a purge ran), and the new claim counts from then on.
	later := claimedAt.Add(mapping.DeliveryRetention)
	if !claim("github", "delivery-1", later) {
		t.Error("a claim after the retention was not first")
	}
	if claim("github", "delivery-1", later.Add(time.Minute)) {
		t.Error("a redelivery after the renewed claim was first")
	}
	if _, err := s.PurgeExpired(t.Context(), claimedAt.Add(2*mapping.DeliveryRetention)); err != nil {
		t.Fatalf("PurgeExpired: %v", err)
	}
	if !claim("batch", "delivery-1", claimedAt.Add(2*mapping.DeliveryRetention)) {
		t.Error("a purged claim still counted")
	}
}

// claimRace claims one delivery from many goroutines spread over stores
// and returns how many claims were first.
func claimRace(t *testing.T, stores []mapping.Store) int {
	t.Helper()
	const claimers = 24
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		firsts int
		errs   []error
	)
	for i := range claimers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			first, err := s.ClaimDelivery(t.Context(), "github", "raced", at(time.Duration(i)*time.Millisecond))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if first {
				firsts++
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("ClaimDelivery: %v", err)
	}
	return firsts
}

func testClaimDeliveryConcurrent(t *testing.T, h Harness) {
	s := h.Open(t)
	if n := claimRace(t, []mapping.Store{s}); n != 1 {
		t.Errorf("%d concurrent claims of one delivery were first, want 1", n)
	}
}

func testClaimDeliveryAcrossPeers(t *testing.T, h Harness) {
	s := h.Open(t)
	peer := h.Peer(t, s)
	if n := claimRace(t, []mapping.Store{s, peer}); n != 1 {
		t.Errorf("%d concurrent claims of one delivery through two stores were first, want 1", n)
	}
}
