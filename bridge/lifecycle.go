package bridge

import (
	"encoding/json"

	"github.com/jobbridge/jobbridge/adapters"
)

// results renders the tool results the lifecycle stores (results.go), for
// lifecycle.Options.Results.
type results struct{ maxBytes int }

func (r results) Result(o adapters.Observation, ref adapters.JobRef) json.RawMessage {
	return toolResultJSON(o, ref, r.maxBytes)
}

func (r results) Text(text string, isError bool) json.RawMessage {
	return toolResultText(text, isError)
}

func (r results) Failure(o adapters.Observation) (int, string) { return failure(o) }
