package bridge

import (
	"encoding/json"

	"github.com/jobbridge/jobbridge/adapters"
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
