package bridge

import (
	"encoding/json"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// results renders the tool results the lifecycle stores (results.go), for
// lifecycle.Options.Results: a task's result is rendered with the tool it
// runs under (its output schema), or as a bare result when the tool is gone.
type results struct{ b *Bridge }

func (r results) Result(t *mapping.Task, o adapters.Observation, ref adapters.JobRef) json.RawMessage {
	if tl := r.b.toolOf(t); tl != nil {
		return r.b.toolResultOf(tl, o, ref)
	}
	raw, _ := renderResult(resultInput{obs: o, ref: ref, backend: t.Backend, maxBytes: r.b.limits.MaxResultBytes})
	return raw
}

func (r results) Text(text string, isError bool) json.RawMessage {
	return toolResultText(text, isError)
}

func (r results) Failure(o adapters.Observation) (int, string) { return failure(o) }

// lifecycleTools gives the lifecycle each task's tool from the catalog
// generations (reload.go), for lifecycle.Options.Tools.
type lifecycleTools struct{ b *Bridge }

func (lt lifecycleTools) ToolOf(t *mapping.Task) (lifecycle.Tool, bool) {
	tl := lt.b.toolOf(t)
	if tl == nil {
		return lifecycle.Tool{}, false
	}
	return *tl.lifecycleTool(), true
}

func (lt lifecycleTools) Current() []lifecycle.Tool {
	cur := lt.b.currentTools()
	out := make([]lifecycle.Tool, 0, len(cur))
	for _, tl := range cur {
		out = append(out, *tl.lifecycleTool())
	}
	return out
}

// lifecycleTool is what the lifecycle needs of t: its catalog entry and its
// (metered) adapter.
func (t *tool) lifecycleTool() *lifecycle.Tool {
	return &lifecycle.Tool{Tool: t.Tool, Adapter: t.adapter}
}

// lifecycleMetrics exports what the lifecycle counts, for
// lifecycle.Options.Metrics.
type lifecycleMetrics struct{ m *metrics }

func (lm lifecycleMetrics) Throttled(backend string) {
	lm.m.throttled.WithLabelValues(backend).Inc()
}

func (lm lifecycleMetrics) CancelForwarded(backend string, err error) {
	lm.m.cancelForwarded(backend, err)
}

func (lm lifecycleMetrics) CancelAttempt(backend string, attempt int) {
	lm.m.cancelAttempt(backend, attempt)
}

func (lm lifecycleMetrics) CancelDeferred(backend string) { lm.m.cancelDeferred(backend) }

func (lm lifecycleMetrics) ObserveBudgetSpent(tool string) {
	lm.m.observeBudget.WithLabelValues(tool).Inc()
}

func (lm lifecycleMetrics) SweepDone(took time.Duration, due, observed int) {
	lm.m.sweepDone(took, due, observed)
}

func (lm lifecycleMetrics) InputExpired() { lm.m.reject("input_wait") }
