package githubactions

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

// TestConcurrentPollsReuseConnections checks that the adapter's default
// transport keeps enough idle connections for concurrent polls: 32 callers
// polling their runs over and over open about 32 TCP connections to the API,
// not one per request.
func TestConcurrentPollsReuseConnections(t *testing.T) {
	const callers, rounds = 32, 8
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(f.gh)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f.cfg.Backend.APIURL = srv.URL + "/"
	a := f.adapter(nil)
	refs := make([]adapters.JobRef, callers)
	for i := range refs {
		refs[i] = f.start(a, "scripted", map[string]any{"script": "long"}, fmt.Sprintf("corr-%d", i))
	}
	before, requests := opened.Load(), f.gh.Requests()
	var wg sync.WaitGroup
	errs := make(chan error, callers*rounds)
	for _, ref := range refs {
		wg.Go(func() {
			for range rounds {
				obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
				switch {
				case err != nil:
					errs <- err
				case obs[0].Err != nil:
					errs <- obs[0].Err
				}
				f.clock.Advance(time.Second) // past any answer kept as fresh
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("poll: %v", err)
	}
	n, sent := opened.Load()-before, f.gh.Requests()-requests
	if sent < callers*rounds {
		t.Fatalf("%d polls sent %d requests, want at least one each", callers*rounds, sent)
	}
	if n > 2*callers {
		t.Errorf("%d requests by %d callers opened %d connections, want about %d", sent, callers, n, callers)
	}
	t.Logf("%d requests by %d callers opened %d connections", sent, callers, n)
}
