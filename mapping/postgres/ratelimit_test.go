package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// TestRateLimitAcrossReplicas races creations of one principal through two
// stores (two pools, as two replicas) on one database, under each isolation
// level a connection string may choose: exactly the rate limit succeed in
// one window, the others are refused with ErrRateLimit and nothing else,
// and one replica's purge keeps the window the other counts in.
func TestRateLimitAcrossReplicas(t *testing.T) {
	const (
		creators  = 40
		perMinute = 10
	)
	limits := mapping.CreateLimits{PerMinute: perMinute}
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			dsn := newDatabase(t) + "&default_transaction_isolation=" + url.PathEscape(level)
			replicas := []*Store{openAt(t, dsn), openAt(t, dsn)}
			// Early in a minute, so that every task shares its window.
			now := time.Now().UTC().Truncate(time.Minute).Add(time.Second)
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
					err := replicas[r].Create(t.Context(), tk, limits)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						created[r]++
					case !errors.Is(err, mapping.ErrRateLimit):
						errs = append(errs, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("Create errors other than ErrRateLimit: %v", errors.Join(errs...))
			}
			if total := created[0] + created[1]; total != perMinute {
				t.Errorf("%d + %d creates succeeded on the two replicas, want %d in all", created[0], created[1], perMinute)
			}
			if n := queryColumn[int](t, replicas[0].pool, `SELECT count(*)::int FROM tasks`); n[0] != perMinute {
				t.Errorf("%d tasks stored, want %d", n[0], perMinute)
			}

			if _, err := replicas[0].PurgeExpired(t.Context(), now.Add(30*time.Second)); err != nil {
				t.Fatalf("PurgeExpired: %v", err)
			}
			if err := replicas[1].Create(t.Context(), task("after-purge", now.Add(40*time.Second)), limits); !errors.Is(err, mapping.ErrRateLimit) {
				t.Errorf("Create later in the window after a purge = %v, want ErrRateLimit", err)
			}
			next := now.Add(time.Minute)
			if err := replicas[1].Create(t.Context(), task("next-window", next), limits); err != nil {
				t.Errorf("Create in the next window: %v", err)
			}
			// The purge after the window forgets its count.
			if _, err := replicas[0].PurgeExpired(t.Context(), next.Add(time.Minute)); err != nil {
				t.Fatalf("PurgeExpired: %v", err)
			}
			if n := queryColumn[int](t, replicas[0].pool, `SELECT count(*)::int FROM create_counts`); n[0] != 0 {
				t.Errorf("%d creation counts left after their windows ended and a purge, want 0", n[0])
			}
		})
	}
}
