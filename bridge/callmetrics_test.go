package bridge_test

import (
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

// TestCallsAreCountedByAnswer checks that jobbridge_calls_total tells an
// operator how each call was answered: a task, a result inline, a handle,
// a synchronous result; and that a retry answered by its idempotency key
// is counted as a reuse, not as a second job.
func TestCallsAreCountedByAnswer(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		inlineWithin(time.Second, "slow_compute")(c)
		handleTools(300*time.Millisecond, "long_job")(c)
	}})

	// Task-capable calls: a quick job inline, a slow one as a task.
	if res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 0.05, "label": "quick"}, nil); err != nil || res.Result == nil {
		t.Fatalf("quick call: %v, %+v; want an inline result", err, res)
	}
	slow, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 3, "label": "slow"}, nil)
	if err != nil || slow.Task == nil {
		t.Fatalf("slow call: %v, %+v; want a task", err, slow)
	}
	// Calls without tasks: a result within the budget, a handle past it.
	call(t, h.plain, "slow_compute", map[string]any{"seconds": 0.05, "label": "plain"})
	if e := envelopeOf(t, call(t, h.plain, "long_job", map[string]any{"seconds": 2})); e.Task == nil {
		t.Fatalf("long_job without tasks: %+v, want a handle", e)
	}
	// A retry with the same idempotency key gets the first task.
	key := &taskclient.CallOptions{Meta: map[string]any{bridge.IdempotencyKeyMeta: "count-me"}}
	first, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 3, "label": "keyed"}, key)
	if err != nil || first.Task == nil {
		t.Fatalf("keyed call: %v, %+v", err, first)
	}
	again, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 3, "label": "keyed"}, key)
	if err != nil || again.Task == nil || again.Task.TaskID != first.Task.TaskID {
		t.Fatalf("retry: %v, %+v; want task %s again", err, again, first.Task.TaskID)
	}

	s := scrapeMetrics(t, h)
	s.want(t, 1, "jobbridge_calls_total", "tool=slow_compute", "answer=inline")
	s.want(t, 3, "jobbridge_calls_total", "tool=slow_compute", "answer=task")
	s.want(t, 1, "jobbridge_calls_total", "tool=slow_compute", "answer=sync")
	s.want(t, 1, "jobbridge_calls_total", "tool=long_job", "answer=handle")
	s.want(t, 1, "jobbridge_idempotent_reuses_total", "tool=slow_compute")
	s.want(t, 0, "jobbridge_idempotent_reuses_total", "tool=long_job")
}
