package githubactions

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// BenchmarkPolling models the bridge polling 1,000 live runs: every virtual
// second, each run whose last observation is older than the refresh interval
// is polled (as tasks/get does through the bridge's refresh_interval). Runs
// queue for 2 minutes, then run three jobs of 20-38 minutes each; a run that
// finishes is replaced by a new dispatch, so 1,000 runs stay live. Before the
// measured window, runs are dispatched over an hour (so their transitions are
// spread out) and observed once.
//
// It reports, extrapolated from a 15-minute virtual window to an hour, the
// GitHub requests sent (req/h), those counting against the primary rate
// limit (counted/h: everything not answered 304, dispatches of replacement
// runs included), the share answered 304, and the polls made. The adapter
// talks to the GitHub fake through go-github in memory (no sockets), on a
// virtual clock.
//
//	go test -run '^$' -bench BenchmarkPolling -benchtime 1x ./adapters/githubactions/
func BenchmarkPolling(b *testing.B) {
	for _, refresh := range []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute} {
		b.Run("refresh="+refresh.String(), func(b *testing.B) { benchPolling(b, 1000, refresh, 15*time.Minute) })
	}
}

func benchPolling(b *testing.B, live int, refresh, window time.Duration) {
	var reqs, counted, notModified, polls float64
	for range b.N {
		b.StopTimer()
		clk := &clock{now: t0}
		scripts := map[string]githubfake.Script{}
		for k := range 10 {
			d := time.Duration(20+2*k) * time.Minute
			scripts[fmt.Sprint(k)] = githubfake.Script{
				RunName: "Bench [{inputs.correlation_id}]", Queued: 2 * time.Minute,
				Jobs: []githubfake.JobScript{{Name: "build", Duration: d}, {Name: "test", Duration: d}, {Name: "deploy", Duration: d}},
			}
		}
		gh := githubfake.New(&githubfake.Options{Now: clk.Now, Workflows: testWorkflows(), Scripts: scripts, Tokens: []string{testToken}, RateLimit: 1 << 30})
		cfg := loadConfig(b)
		cfg.Backend.APIURL = "http://127.0.0.1:9/"
		cfg.Backend.RequestsPerHour = maxRequestsPerHour // measure the demand, not the budget
		a, err := New("github", cfg.Backend, cfg.Tools, &Options{
			HTTPClient: &http.Client{Transport: &memTransport{h: gh}},
			Getenv:     func(string) (string, bool) { return testToken, true },
			Now:        clk.Now,
		})
		if err != nil {
			b.Fatal(err)
		}
		seq := 0
		dispatch := func() adapters.JobRef {
			seq++
			ref, err := a.Start(b.Context(), adapters.StartRequest{
				Tool: "scripted", Arguments: map[string]any{"script": fmt.Sprint(seq % 10)},
				CorrelationID: fmt.Sprintf("bench-%d", seq),
			})
			if err != nil {
				b.Fatal(err)
			}
			return ref
		}
		type task struct {
			ref      adapters.JobRef
			observed time.Time
		}
		tasks := make([]task, 0, live)
		for i := range live {
			if i%(live/60) == 0 {
				clk.Advance(time.Minute)
			}
			tasks = append(tasks, task{ref: dispatch()})
		}
		for i := range tasks {
			if o := a.poll(b.Context(), tasks[i].ref); o.Err != nil {
				b.Fatal(o.Err)
			}
			tasks[i].observed = clk.Now()
		}

		r0, c0, n0 := gh.Requests(), gh.Counted(), gh.NotModified()
		b.StartTimer()
		var due []int
		refs := make([]adapters.JobRef, 0, live)
		for tick := time.Duration(0); tick < window; tick += time.Second {
			clk.Advance(time.Second)
			now := clk.Now()
			due, refs = due[:0], refs[:0]
			for i, t := range tasks {
				if now.Sub(t.observed) >= refresh {
					due = append(due, i)
					refs = append(refs, t.ref)
				}
			}
			if len(refs) == 0 {
				continue
			}
			obs, err := a.Poll(b.Context(), refs)
			if err != nil {
				b.Fatal(err)
			}
			polls += float64(len(refs))
			for j, o := range obs {
				i := due[j]
				if o.Err != nil {
					b.Fatalf("poll: %v", o.Err)
				}
				tasks[i].observed = now
				if o.State.Terminal() {
					tasks[i] = task{ref: dispatch(), observed: now.Add(-refresh)}
				}
			}
		}
		b.StopTimer()
		reqs += float64(gh.Requests() - r0)
		counted += float64(gh.Counted() - c0)
		notModified += float64(gh.NotModified() - n0)
	}
	perHour := float64(time.Hour) / float64(window) / float64(b.N)
	b.ReportMetric(reqs*perHour, "req/h")
	b.ReportMetric(counted*perHour, "counted/h")
	b.ReportMetric(100*notModified/max(reqs, 1), "%304")
	b.ReportMetric(polls*perHour, "polls/h")
}
