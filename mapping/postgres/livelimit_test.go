package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

// TestLiveLimitAcrossReplicas races creations of one principal through two
// stores (two pools, as two replicas) on one database, under each isolation
// level a connection string may choose: exactly the limit succeed, the
// others are refused with ErrLiveLimit and nothing else.
func TestLiveLimitAcrossReplicas(t *testing.T) {
	const (
		creators = 50
		limit    = 10
	)
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			dsn := newDatabase(t) + "&default_transaction_isolation=" + url.PathEscape(level)
			replicas := []*Store{openAt(t, dsn), openAt(t, dsn)}
			now := time.Now()
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				created = make([]int, len(replicas))
				errs    []error
			)
			for i := range creators {
				r := i % len(replicas)
				tk := task(fmt.Sprintf("race-%d", i), now)
				wg.Go(func() {
					<-start
					err := replicas[r].Create(t.Context(), tk, mapping.CreateLimits{MaxLive: limit})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						created[r]++
					case !errors.Is(err, mapping.ErrLiveLimit):
						errs = append(errs, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("Create errors other than ErrLiveLimit: %v", errors.Join(errs...))
			}
			if total := created[0] + created[1]; total != limit {
				t.Errorf("%d + %d creates succeeded on the two replicas, want %d in all", created[0], created[1], limit)
			}
			if n := queryColumn[int](t, replicas[0].pool, `SELECT count(*)::int FROM tasks`); n[0] != limit {
				t.Errorf("%d tasks stored, want %d", n[0], limit)
			}

			// Terminal updates on one replica free slots for the other.
			live, err := replicas[0].ListLive(t.Context(), now, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range live[:3] {
				u.Phase, u.Status = mapping.PhaseDone, mapping.StatusCompleted
				if err := replicas[0].Update(t.Context(), u); err != nil {
					t.Fatalf("Update: %v", err)
				}
			}
			if got := storetest.Room(t, replicas[1], "alice", limit); got != 3 {
				t.Errorf("after 3 tasks finished the other replica may create %d, want 3", got)
			}
		})
	}
}

// insertV2Query inserts a task with the columns the schema had before live
// counts (migration 0003), as a build of that time did.
var insertV2Query = `INSERT INTO tasks (` + strings.TrimSuffix(strings.Split(columns, "submitted_at")[0], ", ") + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
		$19, $20, $21, $22, $23, $24, $25, $26, $27, $28)`

// insertByHand inserts t with insertV2Query on db.
func insertByHand(t *testing.T, db execer, tk *mapping.Task) {
	t.Helper()
	if _, err := db.Exec(t.Context(), insertV2Query,
		tk.Key[:], tk.Principal, tk.Tool, tk.ArgsDigest, blob(tk.Args), tk.ServerBuild, tk.CatalogRevision,
		tk.Backend, blob(tk.JobRef), tk.CorrelationID, string(tk.Phase), string(tk.Status), tk.StatusMessage,
		ts(tk.CreatedAt), ts(tk.UpdatedAt), tk.TTL.Milliseconds(), ts(tk.ExpiresAt), tk.PollInterval.Milliseconds(),
		tsPtr(tk.CancelRequestedAt), tsPtr(tk.CancelForwardedAt), tsPtr(tk.CancelSentAt), blob(tk.InputRequests), blob(tk.AnsweredKeys),
		blob(tk.Observation), tsPtr(tk.ObservedAt), tsPtr(tk.MissingSince), blob(tk.Outcome), tk.Version,
	); err != nil {
		t.Fatalf("inserting %s by hand: %v", tk.CorrelationID, err)
	}
}

// TestUpgradeCountsLiveTasks opens a database written before the store kept
// live counts: the tasks already live (expired or not) count against the
// limit, finished ones do not.
func TestUpgradeCountsLiveTasks(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	var before []schemaStep
	for _, m := range ms {
		if m.Name == "0003_live_counts.sql" {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(ms) {
		t.Fatal("no 0003_live_counts.sql migration")
	}
	dsn := newDatabase(t)
	old, err := pgxpool.New(t.Context(), dsn) // a build of that time
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := migrate(t.Context(), old, before); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, o := range []struct {
		id, principal string
		status        mapping.Status
		age           time.Duration
	}{
		{"alice-working", "alice", mapping.StatusWorking, 0},
		{"alice-input", "alice", mapping.StatusInputRequired, 0},
		{"alice-expired", "alice", mapping.StatusWorking, 2 * time.Hour},
		{"alice-completed", "alice", mapping.StatusCompleted, 0},
		{"alice-cancelled", "alice", mapping.StatusCancelled, 0},
		{"bob-failed", "bob", mapping.StatusFailed, 0},
		{"carol-working", "carol", mapping.StatusWorking, 0},
	} {
		tk := task(o.id, now.Add(-o.age))
		tk.Principal, tk.Status = o.principal, o.status
		insertByHand(t, old, tk)
	}
	old.Close()

	s := openAt(t, dsn)
	for principal, want := range map[string]int{"alice": 2, "bob": 5, "carol": 4, "dave": 5} {
		if got := storetest.Room(t, s, principal, 5); got != want {
			t.Errorf("after the upgrade %s may create %d tasks with a limit of 5, want %d", principal, got, want)
		}
	}
}

// TestLiveCountsFollowWritesByHand: rows written by something other than
// this build's store (a replica of an older build during a rolling upgrade,
// an operator cleaning up) still count, or stop counting, as they should.
func TestLiveCountsFollowWritesByHand(t *testing.T) {
	const limit = 5
	s := openFresh(t)
	now := time.Now()
	for i := range 4 {
		insertByHand(t, s.pool, task(fmt.Sprintf("by-hand-%d", i), now))
	}
	done := task("by-hand-done", now)
	done.Status = mapping.StatusCompleted
	insertByHand(t, s.pool, done)
	if got := storetest.Room(t, s, "alice", limit); got != 1 {
		t.Fatalf("after 4 live inserts by hand alice may create %d, want 1", got)
	}
	for _, q := range []string{
		`UPDATE tasks SET status = 'cancelled' WHERE correlation_id = 'corr-by-hand-0'`,
		`UPDATE tasks SET principal = 'bob' WHERE correlation_id = 'corr-by-hand-1'`,
		`DELETE FROM tasks WHERE correlation_id IN ('corr-by-hand-2', 'corr-by-hand-done')`,
		// Not a change of liveness: counts nothing.
		`UPDATE tasks SET status = 'input_required' WHERE correlation_id = 'corr-by-hand-3'`,
	} {
		if _, err := s.pool.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for principal, want := range map[string]int{"alice": 3, "bob": limit - 1} {
		if got := storetest.Room(t, s, principal, limit); got != want {
			t.Errorf("after the writes by hand %s may create %d, want %d", principal, got, want)
		}
	}
}

// TestReleaseOwner: a replica that restarts under the same name gets its
// previous process's leases back at once, without touching other replicas'
// leases.
func TestReleaseOwner(t *testing.T) {
	dsn := newDatabase(t)
	before := openAt(t, dsn)
	live := sweepFixture(t, before)
	now := claimAt(20 * time.Minute)
	claim(t, before, "replica-a", now, time.Hour, 3) // live[0:3]
	claim(t, before, "replica-b", now, time.Hour, 1) // live[3]
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}

	restarted := openAt(t, dsn)
	if got := claim(t, restarted, "replica-a", now, time.Hour, 100); len(got) != 0 {
		t.Fatalf("claim before ReleaseOwner = %q, want none: the old process's leases hold", keysOf(got))
	}
	if err := restarted.ReleaseOwner(t.Context(), "replica-a"); err != nil {
		t.Fatalf("ReleaseOwner: %v", err)
	}
	got := claim(t, restarted, "replica-a", now, time.Hour, 100)
	if want := keysOf(live[:3]); fmt.Sprint(keysOf(got)) != fmt.Sprint(want) {
		t.Errorf("claim after ReleaseOwner = %q, want %q (replica-b's lease holds)", keysOf(got), want)
	}
	// Releasing again frees nothing more and is not an error.
	if err := restarted.ReleaseOwner(t.Context(), "replica-c"); err != nil {
		t.Errorf("ReleaseOwner of an owner without leases: %v", err)
	}
	if err := restarted.ReleaseOwner(t.Context(), ""); err == nil {
		t.Error("ReleaseOwner of the empty owner succeeded, want an error")
	}
}
