package bridge_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// BenchmarkTasksGetSickBackend measures tasks/get while the backend is sick,
// against calm weather in the same run: the REST adapter talks to the REST
// job API fake, which answers every status call with a fault. Each poll finds
// a stale observation (refresh interval 1ms), so each would observe the
// backend. It reports p50 and p99 latency and backend requests per poll:
//
//	go test -run '^$' -bench TasksGetSickBackend -benchtime 40x ./bridge/
func BenchmarkTasksGetSickBackend(b *testing.B) {
	for _, tt := range []struct {
		name  string
		fault *jobapi.Fault
		hang  bool
	}{
		{name: "calm"},
		{name: "500s", fault: &jobapi.Fault{Method: http.MethodGet, Path: "/jobs/", Status: 500, Times: 1 << 30}},
		{name: "429-retry-after-2s", fault: &jobapi.Fault{Method: http.MethodGet, Path: "/jobs/", Status: 429, RetryAfter: 2 * time.Second, Times: 1 << 30}},
		{name: "hanging", hang: true},
	} {
		b.Run(tt.name, func(b *testing.B) {
			mem := newMemBackend(nil)
			var opts harnessOptions
			opts.tune = func(c *catalog.Catalog) {
				c.Tool("long_job").RefreshInterval = time.Millisecond
				c.Limits.SetDefaults()
				c.Limits.GetsPerSecond = 1 << 20
			}
			if tt.hang {
				opts.adapters = withMem(mem)
			}
			h := newHarness(b, opts)
			task := h.createTask("long_job", nil)
			ctx := b.Context()
			for {
				got, err := h.tasks.GetTask(ctx, task.TaskID)
				if err != nil {
					b.Fatal(err)
				}
				if strings.HasPrefix(strings.ToLower(got.StatusMessage), "running") {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tt.fault != nil {
				h.fake.Inject(*tt.fault)
			}
			if tt.hang {
				mem.set(func(m *memBackend) {
					m.pollHook = func(ctx context.Context, _ int) (error, bool) {
						<-ctx.Done()
						return ctx.Err(), true
					}
				})
			}
			requests := func() int {
				if tt.hang {
					_, polls, _ := mem.counts()
					return polls
				}
				return h.fake.Requests()
			}
			before := requests()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				got, err := h.tasks.GetTask(ctx, task.TaskID)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if got.Status != "working" {
					b.Fatalf("status %s, want working", got.Status)
				}
				time.Sleep(5 * time.Millisecond) // a client's poll interval, shortened
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(requests()-before)/float64(len(lat)), "backend-calls/poll")
		})
	}
}

var _ adapters.Adapter = (*memBackend)(nil)
