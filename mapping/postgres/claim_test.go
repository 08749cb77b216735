package postgres

import (
	"encoding/json"
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

// claimBase is the clock origin of the claim tests.
var claimBase = time.Date(2026, 7, 28, 9, 30, 0, 0, time.UTC)

// claimAt returns claimBase+d.
func claimAt(d time.Duration) time.Time { return claimBase.Add(d) }

// sweepFixture creates, at claimBase, four live tasks (in the order the
// sweep takes them) and five that are terminal or expired at claimAt(20m),
// and returns the live ones.
func sweepFixture(t *testing.T, s *Store) []*mapping.Task {
	t.Helper()
	mk := func(id string, created, expires time.Duration) *mapping.Task {
		tk := task(id, claimAt(created))
		tk.ExpiresAt = claimAt(expires)
		tk.TTL = tk.ExpiresAt.Sub(tk.CreatedAt)
		return tk
	}
	observed := func(d time.Duration) *time.Time { o := claimAt(d); return &o }

	unobservedOlder := mk("unobserved-older", time.Minute, time.Hour)
	unobservedNewer := mk("unobserved-newer", 2*time.Minute, time.Hour)
	unobservedNewer.Principal = "bob"
	observedEarlier := mk("observed-earlier", 3*time.Minute, time.Hour)
	observedEarlier.ObservedAt = observed(5 * time.Minute)
	observedLater := mk("observed-later", 0, time.Hour)
	observedLater.Status = mapping.StatusInputRequired
	observedLater.InputRequests = json.RawMessage(`{"approve":{}}`)
	observedLater.ObservedAt = observed(10 * time.Minute)
	live := []*mapping.Task{unobservedOlder, unobservedNewer, observedEarlier, observedLater}

	var dead []*mapping.Task
	for _, status := range []mapping.Status{mapping.StatusCompleted, mapping.StatusFailed, mapping.StatusCancelled} {
		tk := mk(string(status), 0, time.Hour)
		tk.Phase, tk.Status = mapping.PhaseDone, status
		dead = append(dead, tk)
	}
	dead = append(dead,
		mk("expired", -2*time.Hour, -time.Hour),
		mk("expires-at-claim-time", -40*time.Minute, 20*time.Minute),
	)
	// Create in an order unrelated to the expected one.
	mustCreate(t, s, dead[0], observedLater, dead[3], unobservedNewer, dead[1], observedEarlier, dead[4], unobservedOlder, dead[2])
	return live
}

// claim calls ClaimLive and fails t on an error.
func claim(t *testing.T, s *Store, owner string, now time.Time, lease time.Duration, limit int) []*mapping.Task {
	t.Helper()
	got, err := s.ClaimLive(t.Context(), owner, now, lease, limit)
	if err != nil {
		t.Fatalf("ClaimLive(%s, %v): %v", owner, now, err)
	}
	return got
}

// keysOf returns the correlation IDs of tasks, which name them in failures.
func keysOf(tasks []*mapping.Task) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.CorrelationID
	}
	return ids
}

func TestClaimLive(t *testing.T) {
	now := claimAt(20 * time.Minute)
	tests := []struct {
		limit int
		want  []int // indexes into the live tasks
	}{
		{limit: 0, want: nil},
		{limit: 1, want: []int{0}},
		{limit: 3, want: []int{0, 1, 2}},
		{limit: 4, want: []int{0, 1, 2, 3}},
		{limit: 100, want: []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			s := openFresh(t)
			live := sweepFixture(t, s)
			var want []*mapping.Task
			for _, i := range tt.want {
				want = append(want, live[i])
			}
			// Like ListLive: live, unexpired tasks in sweep order, as stored.
			got := claim(t, s, "replica-a", now, time.Minute, tt.limit)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ClaimLive mismatch (-want +got):\n%s", diff)
			}
			listed, err := s.ListLive(t.Context(), now, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(listed, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ClaimLive differs from ListLive (-ListLive +ClaimLive):\n%s", diff)
			}
		})
	}
}

func TestClaimLiveTakesTheNextFreeTasks(t *testing.T) {
	s := openFresh(t)
	live := sweepFixture(t, s)
	now := claimAt(20 * time.Minute)

	a := claim(t, s, "replica-a", now, time.Minute, 2)
	b := claim(t, s, "replica-b", now, time.Minute, 2)
	if diff := cmp.Diff(keysOf(live[:2]), keysOf(a)); diff != "" {
		t.Errorf("replica-a claimed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(keysOf(live[2:]), keysOf(b)); diff != "" {
		t.Errorf("replica-b claimed (-want +got):\n%s", diff)
	}
	// Every live task is leased now, to a holder that claims again too.
	for _, owner := range []string{"replica-a", "replica-b", "replica-c"} {
		if got := claim(t, s, owner, now.Add(59*time.Second), time.Minute, 100); len(got) != 0 {
			t.Errorf("%s claimed %q while every lease holds", owner, keysOf(got))
		}
	}
}

func TestClaimLiveLeasesRunOut(t *testing.T) {
	s := openFresh(t)
	live := sweepFixture(t, s)
	t0 := claimAt(20 * time.Minute)

	// replica-a claims everything, then dies.
	if got := claim(t, s, "replica-a", t0, time.Minute, 100); len(got) != 4 {
		t.Fatalf("replica-a claimed %q, want the 4 live tasks", keysOf(got))
	}
	if got := claim(t, s, "replica-b", t0.Add(time.Minute-time.Millisecond), time.Minute, 100); len(got) != 0 {
		t.Fatalf("replica-b claimed %q a millisecond before replica-a's leases run out", keysOf(got))
	}
	// At t0+1m the leases have run out: replica-b takes over, in order.
	got := claim(t, s, "replica-b", t0.Add(time.Minute), 30*time.Second, 100)
	if diff := cmp.Diff(keysOf(live), keysOf(got)); diff != "" {
		t.Fatalf("replica-b's claim after replica-a's leases ran out (-want +got):\n%s", diff)
	}
	// replica-b's shorter lease holds until t0+1m30s.
	if got := claim(t, s, "replica-a", t0.Add(90*time.Second-time.Millisecond), time.Minute, 100); len(got) != 0 {
		t.Errorf("replica-a claimed %q while replica-b's leases hold", keysOf(got))
	}
	if got := claim(t, s, "replica-a", t0.Add(90*time.Second), time.Minute, 100); len(got) != 4 {
		t.Errorf("replica-a claimed %q after replica-b's leases ran out, want the 4 live tasks", keysOf(got))
	}
}

func TestClaimLiveNeverReturnsFinishedOrExpiredTasks(t *testing.T) {
	s := openFresh(t)
	live := sweepFixture(t, s)
	now := claimAt(20 * time.Minute)

	// Finish one live task; let time pass beyond every lease.
	done, err := s.Get(t.Context(), live[1].Key, live[1].Principal, now)
	if err != nil {
		t.Fatal(err)
	}
	done.Phase, done.Status = mapping.PhaseDone, mapping.StatusCompleted
	if err := s.Update(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{now, now.Add(time.Hour), now.Add(2 * time.Hour)} {
		got := claim(t, s, fmt.Sprintf("replica-%d", i), at, time.Minute, 100)
		var want []string
		if at.Before(claimAt(time.Hour)) { // the live tasks expire at 1h
			want = keysOf([]*mapping.Task{live[0], live[2], live[3]})
		}
		if diff := cmp.Diff(want, keysOf(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("claim at %v (-want +got):\n%s", at, diff)
		}
	}
}

// TestClaimLiveConcurrentOwnersNeverShareATask has replicas claim small
// batches at once until nothing is left: each live task goes to exactly one
// of them.
func TestClaimLiveConcurrentOwnersNeverShareATask(t *testing.T) {
	const (
		tasks    = 60
		replicas = 6
		batch    = 4
	)
	dsn := newDatabase(t)
	stores := make([]*Store, 3) // replicas share stores, as goroutines of one process would
	for i := range stores {
		stores[i] = openAt(t, dsn)
	}
	now := time.Now()
	for i := range tasks {
		mustCreate(t, stores[0], task(fmt.Sprintf("task-%02d", i), now))
	}

	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		ownerOf = map[string][]string{} // task → owners that claimed it
		errs    []error
	)
	for r := range replicas {
		owner := fmt.Sprintf("replica-%d", r)
		s := stores[r%len(stores)]
		wg.Go(func() {
			<-start
			for {
				got, err := s.ClaimLive(t.Context(), owner, now, time.Hour, batch)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, tk := range got {
					ownerOf[tk.CorrelationID] = append(ownerOf[tk.CorrelationID], owner)
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(ownerOf) != tasks {
		t.Errorf("%d of %d tasks were claimed", len(ownerOf), tasks)
	}
	for id, owners := range ownerOf {
		if len(owners) != 1 {
			t.Errorf("%s claimed by %q, want one owner", id, owners)
		}
	}
	// The database agrees: each task is leased to the owner that got it.
	rows := queryColumn[[]string](t, stores[0].pool, `SELECT ARRAY[correlation_id, lease_owner] FROM tasks`)
	for _, row := range rows {
		if owners := ownerOf[row[0]]; len(owners) != 1 || owners[0] != row[1] {
			t.Errorf("%s is leased to %q, but ClaimLive returned it to %q", row[0], row[1], owners)
		}
	}
}

func TestClaimLiveWithTheDatabaseClock(t *testing.T) {
	s := openFresh(t)
	dbNow, err := s.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Live and expired by the database's clock.
	live := task("live", dbNow.Add(-time.Minute))
	expired := task("expired", dbNow.Add(-2*time.Hour))
	mustCreate(t, s, live, expired)

	got := claim(t, s, "replica-a", time.Time{}, time.Hour, 100)
	if diff := cmp.Diff([]string{live.CorrelationID}, keysOf(got)); diff != "" {
		t.Fatalf("claim by the database clock (-want +got):\n%s", diff)
	}
	// The lease runs for an hour from the database's now().
	var owner string
	var held bool
	if err := s.pool.QueryRow(t.Context(),
		`SELECT lease_owner, lease_until > now() + interval '59 minutes' AND lease_until <= now() + interval '1 hour'
		FROM tasks WHERE correlation_id = $1`, live.CorrelationID).Scan(&owner, &held); err != nil {
		t.Fatal(err)
	}
	if owner != "replica-a" || !held {
		t.Errorf("lease = %q, ends within the hour from now(): %t; want replica-a's, true", owner, held)
	}
	if got := claim(t, s, "replica-b", time.Time{}, time.Hour, 100); len(got) != 0 {
		t.Errorf("replica-b claimed %q by the database clock while replica-a's lease holds", keysOf(got))
	}
}

func TestRelease(t *testing.T) {
	s := openFresh(t)
	live := sweepFixture(t, s)
	now := claimAt(20 * time.Minute)
	claim(t, s, "replica-a", now, time.Hour, 3) // live[0:3]
	claim(t, s, "replica-b", now, time.Hour, 1) // live[3]

	release := func(owner string, keys ...mapping.Key) int {
		t.Helper()
		n, err := s.Release(t.Context(), owner, keys...)
		if err != nil {
			t.Fatalf("Release(%s): %v", owner, err)
		}
		return n
	}
	if n := release("replica-a", live[1].Key, live[3].Key); n != 1 {
		t.Errorf("Release of one own and one foreign lease = %d, want 1", n)
	}
	got := claim(t, s, "replica-c", now, time.Hour, 100)
	if diff := cmp.Diff(keysOf(live[1:2]), keysOf(got)); diff != "" {
		t.Errorf("claim after the release (-want +got):\n%s", diff)
	}
	if n := release("replica-a"); n != 2 {
		t.Errorf("Release of all of replica-a's leases = %d, want 2", n)
	}
	if n := release("replica-a"); n != 0 {
		t.Errorf("second Release = %d, want 0", n)
	}
	got = claim(t, s, "replica-c", now, time.Hour, 100)
	if diff := cmp.Diff(keysOf([]*mapping.Task{live[0], live[2]}), keysOf(got)); diff != "" {
		t.Errorf("claim after releasing everything (-want +got):\n%s", diff)
	}
}

// TestLeaseDoesNotBlockUpdates: a lease only spreads sweeps; any replica
// still updates a leased task, and the lease survives the update.
func TestLeaseDoesNotBlockUpdates(t *testing.T) {
	dsn := newDatabase(t)
	a, b := openAt(t, dsn), openAt(t, dsn)
	live := sweepFixture(t, a)
	now := claimAt(20 * time.Minute)
	claim(t, a, "replica-a", now, time.Hour, 100)

	u, err := b.Get(t.Context(), live[0].Key, live[0].Principal, now)
	if err != nil {
		t.Fatal(err)
	}
	u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCancelled
	if err := b.Update(t.Context(), u); err != nil {
		t.Fatalf("Update of a task leased to another replica: %v", err)
	}
	got, err := a.Get(t.Context(), u.Key, u.Principal, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u, got); diff != "" {
		t.Errorf("stored task (-want +got):\n%s", diff)
	}
	owners := queryColumn[string](t, a.pool, `SELECT lease_owner FROM tasks WHERE key = $1`, u.Key[:])
	if diff := cmp.Diff([]string{"replica-a"}, owners); diff != "" {
		t.Errorf("lease after the update (-want +got):\n%s", diff)
	}
}

func TestClaimLiveRejects(t *testing.T) {
	s := openFresh(t)
	sweepFixture(t, s)
	now := claimAt(20 * time.Minute)
	tests := []struct {
		name  string
		owner string
		lease time.Duration
	}{
		{"empty owner", "", time.Minute},
		{"zero lease", "replica-a", 0},
		{"negative lease", "replica-a", -time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ClaimLive(t.Context(), tt.owner, now, tt.lease, 10)
			if err == nil {
				t.Fatalf("ClaimLive = %q, want an error", keysOf(got))
			}
		})
	}
	// Nothing was leased by the refused claims.
	if got := claim(t, s, "replica-b", now, time.Minute, 100); len(got) != 4 {
		t.Errorf("claim after the refused ones = %q, want the 4 live tasks", keysOf(got))
	}
}

func TestNow(t *testing.T) {
	dsn := newDatabase(t)
	a, b := openAt(t, dsn), openAt(t, dsn)
	before := time.Now()
	var clocks []time.Time
	for _, s := range []*Store{a, b, a} {
		now, err := s.Now(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if now.Location() != time.UTC {
			t.Errorf("Now in %v, want UTC", now.Location())
		}
		clocks = append(clocks, now)
	}
	if !slices.IsSortedFunc(clocks, func(x, y time.Time) int { return x.Compare(y) }) {
		t.Errorf("successive Now calls went backwards: %v", clocks)
	}
	// The server runs on this machine: its clock is this machine's.
	if d := clocks[0].Sub(before); d < -time.Minute || d > time.Minute {
		t.Errorf("Now = %v, %v away from this machine's clock", clocks[0], d)
	}
}
