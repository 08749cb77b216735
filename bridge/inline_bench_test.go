package bridge_test

import (
	"testing"
	"time"
)

// BenchmarkInlineRoundTrips measures what inline_within saves a client
// that follows tasks: each operation is one quick job (0.2 s or 1 s, with
// the test catalog's poll_interval of 200 ms), called and
// followed as the TypeScript tasks client does (tasks/get at the task's
// pollIntervalMs until it ends), once without inline_within and once with
// 2s, side by side in one run:
//
//	go test -run '^$' -bench InlineRoundTrips -benchtime 20x ./bridge/
//
// requests/job counts the client's requests; ns/op is the time to the
// result.
func BenchmarkInlineRoundTrips(b *testing.B) {
	for _, c := range []struct {
		name    string
		seconds float64
		within  time.Duration
	}{
		{"job=0.2s/task", 0.2, 0}, {"job=0.2s/inline_2s", 0.2, 2 * time.Second},
		{"job=1s/task", 1, 0}, {"job=1s/inline_2s", 1, 2 * time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b, harnessOptions{tune: inlineWithin(c.within, "slow_compute")})
			ctx := b.Context()
			requests := 0
			for b.Loop() {
				res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": c.seconds}, nil)
				requests++
				if err != nil {
					b.Fatal(err)
				}
				if res.Task == nil {
					continue // answered inline
				}
				task := res.Task
				for !task.Terminal() {
					time.Sleep(task.PollInterval())
					if task, err = h.tasks.GetTask(ctx, task.TaskID); err != nil {
						b.Fatal(err)
					}
					requests++
				}
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/job")
		})
	}
}
