package githubactions

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

func longScripts() map[string]githubfake.Script {
	return map[string]githubfake.Script{"long": {
		RunName: "Long [{inputs.correlation_id}]",
		Jobs:    []githubfake.JobScript{{Name: "one", Duration: time.Hour}, {Name: "two", Duration: time.Hour}},
	}}
}

// TestRateLimitStorm checks that rate-limit answers hold every request back
// for as long as GitHub asks (a minute when it does not say), that each Poll
// in the meantime fails at once with an adapters.ThrottledError carrying
// the remaining pause (wrapping ErrRateLimited too) and never reports a
// state, and that polling resumes afterwards.
func TestRateLimitStorm(t *testing.T) {
	tests := []struct {
		name  string
		fault githubfake.Fault
		wait  time.Duration // how long requests are held back
	}{
		{name: "secondary 403 with retry-after", fault: githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, RetryAfter: 30 * time.Second}, wait: 30 * time.Second},
		{name: "secondary 429 without retry-after", fault: githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, Status: 429}, wait: time.Minute},
		{name: "secondary 403 without retry-after", fault: githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit}, wait: time.Minute},
		{name: "primary 403, remaining 0", fault: githubfake.Fault{Kind: githubfake.FaultPrimaryRateLimit, RetryAfter: 45 * time.Second}, wait: 45 * time.Second},
		{name: "primary 429, remaining 0", fault: githubfake.Fault{Kind: githubfake.FaultPrimaryRateLimit, Status: 429, RetryAfter: 10 * time.Minute}, wait: 10 * time.Minute},
		{name: "plain 429", fault: githubfake.Fault{Status: 429}, wait: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{scripts: longScripts()})
			a := f.adapter(nil)
			refs := make([]adapters.JobRef, 20)
			for i := range refs {
				refs[i] = f.start(a, "scripted", map[string]any{"script": "long"}, fmt.Sprintf("corr-storm-%d", i))
			}
			tt.fault.Path, tt.fault.Times = "/actions/runs/", 1000
			f.gh.Inject(tt.fault)

			before := f.gh.Requests()
			for range 10 {
				obs, err := a.Poll(t.Context(), refs)
				if !errors.Is(err, adapters.ErrThrottled) || !errors.Is(err, ErrRateLimited) || obs != nil {
					t.Fatalf("Poll during the storm = %v, %v; want no observations and an error wrapping adapters.ErrThrottled and ErrRateLimited", obs, err)
				}
				if d, _ := adapters.RetryAfter(err); d != tt.wait {
					t.Fatalf("Poll during the storm: RetryAfter = %v, want %v", d, tt.wait)
				}
			}
			if got := f.gh.Requests() - before; got > pollConcurrency {
				t.Errorf("200 polls during the storm sent %d requests, want at most %d (those in flight when the first answer came)", got, pollConcurrency)
			}

			f.clock.Advance(tt.wait - time.Second)
			before = f.gh.Requests()
			_, err := a.Poll(t.Context(), refs[:1])
			if d, ok := adapters.RetryAfter(err); !ok || d != time.Second || f.gh.Requests() != before {
				t.Errorf("a second before the wait ends: %v (retry after %v), %d requests; want held back for 1s", err, d, f.gh.Requests()-before)
			}

			// The storm has passed.
			f.gh.ClearFaults()
			f.clock.Advance(time.Second)
			for i, o := range f.pollAll(a, refs) {
				if o.Err != nil || o.State != adapters.StateWorking {
					t.Errorf("observation %d after the storm: %v %v, want working", i, o.State, o.Err)
				}
			}
		})
	}
}

func (f *fixture) pollAll(a *Adapter, refs []adapters.JobRef) []adapters.Observation {
	f.t.Helper()
	obs, err := a.Poll(f.t.Context(), refs)
	if err != nil {
		f.t.Fatalf("Poll: %v", err)
	}
	return obs
}

// TestConditionalPolling checks that an unchanged run costs one conditional
// request answered 304 (which does not count against the primary limit) and
// nothing else, and that a changed run is read again with its jobs.
func TestConditionalPolling(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: longScripts()})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-etag")
	first := f.poll(a, ref)

	reqs, counted, notModified := f.gh.Requests(), f.gh.Counted(), f.gh.NotModified()
	for range 10 {
		if o := f.poll(a, ref); !cmp.Equal(o, first) {
			t.Fatalf("an unchanged run observed differently: %+v, first %+v", o, first)
		}
	}
	got := []int{f.gh.Requests() - reqs, f.gh.NotModified() - notModified, f.gh.Counted() - counted}
	// Every rereadEvery-th poll also reads the jobs, conditionally (see
	// TestJobsReadWhileRunUnchanged): 10 polls send 12 requests, all 304.
	if diff := cmp.Diff([]int{12, 12, 0}, got); diff != "" {
		t.Errorf("10 polls of an unchanged run: [requests, 304s, counted] (-want +got):\n%s", diff)
	}

	f.clock.Advance(61 * time.Minute) // job two starts: the run changes
	reqs, counted = f.gh.Requests(), f.gh.Counted()
	o := f.poll(a, ref)
	if o.Message != "in_progress: job two (1 of 2 jobs done)" {
		t.Errorf("changed run: %q", o.Message)
	}
	if got := []int{f.gh.Requests() - reqs, f.gh.Counted() - counted}; !cmp.Equal(got, []int{2, 2}) {
		t.Errorf("a changed run: [requests, counted] = %v, want [2 2] (the run and its jobs)", got)
	}
}

// TestRequestBudget checks the hourly budget: answers 304 cost nothing,
// other requests spend it, and when it is spent polls are held back (an
// adapters.ThrottledError, wrapping ErrRateLimited, saying when the budget
// has a request again) until it refills.
func TestRequestBudget(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: longScripts()})
	a := f.adapter(func(b *BackendConfig, _ map[string]JobConfig) { b.RequestsPerHour = 120 }) // burst 10, one every 30s
	refs := make([]adapters.JobRef, 8)
	for i := range refs {
		refs[i] = f.start(a, "scripted", map[string]any{"script": "long"}, fmt.Sprintf("corr-budget-%d", i))
	}
	// 8 dispatches spent 8 of 10: one first read (the run and its jobs)
	// fits.
	ok := 0
	for _, ref := range refs {
		switch _, err := a.Poll(t.Context(), []adapters.JobRef{ref}); {
		case err == nil:
			ok++
		case !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "request budget"):
			t.Errorf("Poll error %v, want the budget", err)
		default:
			// 120 an hour is one every 30s; what is left of the last
			// request is a fraction of one.
			if d, ok := adapters.RetryAfter(err); !ok || d <= 0 || d > 30*time.Second {
				t.Errorf("Poll with the budget spent: RetryAfter = %v, %v; want up to 30s", d, ok)
			}
		}
	}
	if ok != 1 {
		t.Errorf("%d runs observed with 2 requests of budget left, want 1", ok)
	}
	// Conditional requests for unchanged runs are free: poll the observed
	// one many times.
	for range 20 {
		if o := f.poll(a, refs[0]); o.State != adapters.StateWorking {
			t.Fatalf("unchanged run with the budget spent: %v %v", o.State, o.Err)
		}
	}
	reqs := f.gh.Requests()
	if _, err := a.Poll(t.Context(), refs[7:]); !errors.Is(err, adapters.ErrThrottled) || f.gh.Requests() != reqs {
		t.Errorf("a new run with the budget spent: %v, %d requests; want held back", err, f.gh.Requests()-reqs)
	}
	f.clock.Advance(10 * time.Minute) // 20 requests' worth, capped at the burst of 10
	for i, o := range f.pollAll(a, refs[:5]) {
		if o.Err != nil {
			t.Errorf("observation %d after the budget refilled: %v", i, o.Err)
		}
	}
}

// TestAPIVersionPinned checks that every request carries the configured
// X-GitHub-Api-Version.
func TestAPIVersionPinned(t *testing.T) {
	for _, version := range []string{"", "2026-03-10"} {
		f := newFixture(t, fixtureOptions{scripts: longScripts()})
		a := f.adapter(func(b *BackendConfig, _ map[string]JobConfig) { b.APIVersion = version })
		ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-version")
		f.poll(a, ref)
		if err := a.Cancel(t.Context(), ref); err != nil {
			t.Fatal(err)
		}
		f.poll(a, ref)
		want := version
		if want == "" {
			want = DefaultAPIVersion
		}
		if diff := cmp.Diff(map[string]int{want: f.gh.Requests()}, f.gh.APIVersions()); diff != "" {
			t.Errorf("api_version %q: versions sent (-want +got):\n%s", version, diff)
		}
	}
}

// memTransport serves requests from a handler in memory. While armed, GETs of
// a run wait at the gate.
type memTransport struct {
	h    http.Handler
	gate chan struct{}

	mu     sync.Mutex
	armed  bool
	gated  int
	served int
}

func (m *memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	m.mu.Lock()
	m.served++
	wait := m.armed && req.Method == http.MethodGet && strings.Count(req.URL.Path, "/") == 6
	if wait {
		m.gated++
	}
	m.mu.Unlock()
	if wait {
		<-m.gate
	}
	if req.Body == nil {
		req = req.Clone(req.Context())
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// TestConcurrentPollsShareOneRequest checks that concurrent polls of one run
// send one request. It runs in a synctest bubble so that "all pollers are
// waiting" is known, not guessed.
func TestConcurrentPollsShareOneRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := githubfake.New(&githubfake.Options{Workflows: testWorkflows(), Tokens: []string{testToken}})
		tr := &memTransport{h: gh, gate: make(chan struct{})}
		cfg := loadConfig(t)
		cfg.Backend.APIURL = "http://127.0.0.1:9/"
		a, err := New("github", cfg.Backend, cfg.Tools, &Options{
			HTTPClient: &http.Client{Transport: tr},
			Getenv:     func(string) (string, bool) { return testToken, true },
		})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "long", CorrelationID: "corr-shared"})
		if err != nil {
			t.Fatal(err)
		}
		tr.mu.Lock()
		tr.armed = true
		tr.mu.Unlock()

		const pollers = 6
		obs := make([]adapters.Observation, pollers)
		var wg sync.WaitGroup
		for i := range pollers {
			wg.Go(func() {
				o, err := a.Poll(t.Context(), []adapters.JobRef{ref, ref})
				if err == nil {
					obs[i] = o[1]
				}
			})
		}
		synctest.Wait() // every poller is blocked: one at the gate, the rest sharing its call
		tr.mu.Lock()
		gated := tr.gated
		tr.mu.Unlock()
		close(tr.gate)
		wg.Wait()
		if gated != 1 {
			t.Errorf("%d concurrent polls sent %d requests for the run, want 1", 2*pollers, gated)
		}
		for i, o := range obs {
			if o.Err != nil || o.State != adapters.StateWorking {
				t.Errorf("poller %d: %v %v", i, o.State, o.Err)
			}
		}
	})
}
