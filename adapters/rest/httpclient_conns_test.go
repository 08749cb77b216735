package rest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// TestConcurrentPollsReuseConnections checks that the adapter's own
// transport keeps enough idle connections for concurrent polls: 32 callers
// polling over and over open about 32 TCP connections, not one per call.
func TestConcurrentPollsReuseConnections(t *testing.T) {
	const callers, rounds = 32, 10
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // let the callers overlap
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"running","message":"busy"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	backend := testBackend()
	backend.BaseURL = srv.URL + "/api/v1"
	a, err := New("jobs", backend, map[string]JobConfig{"deploy": testJob()}, &Options{Getenv: testEnv})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers*rounds)
	for c := range callers {
		wg.Go(func() {
			ref := testRef(fmt.Sprintf("job-%d", c))
			for range rounds {
				obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
				switch {
				case err != nil:
					errs <- err
				case obs[0].Err != nil:
					errs <- obs[0].Err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("poll: %v", err)
	}
	// Each caller needs one connection; a few more may open while others
	// are still being returned to the pool.
	if n := opened.Load(); n > 2*callers {
		t.Errorf("%d calls by %d callers opened %d connections, want about %d", callers*rounds, callers, n, callers)
	}
	t.Logf("%d calls by %d callers opened %d connections", callers*rounds, callers, opened.Load())
}
