package githubactions

import (
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
)

// TestContractAgainstGitHubFake runs the shared adapter contract suite with
// go-github talking to the GitHub fake over loopback HTTP, on the real clock.
func TestContractAgainstGitHubFake(t *testing.T) {
	f := newFixture(t, fixtureOptions{realTime: true})
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adapters.Adapter { return f.adapter(nil) },
		Job: func(kind adaptertest.JobKind) (adapters.StartRequest, bool) {
			switch kind {
			case adaptertest.Succeeds:
				return adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"branch": "main"}}, true
			case adaptertest.FailsWithToolError:
				return adapters.StartRequest{Tool: "fails"}, true
			case adaptertest.RunsLong:
				return adapters.StartRequest{Tool: "long"}, true
			case adaptertest.AsksQuestion:
				return adapters.StartRequest{Tool: "approval"}, true
			}
			return adapters.StartRequest{}, false
		},
		Purge: func(t *testing.T, ref adapters.JobRef) { f.gh.Purge(runID(t, ref)) },
		Answer: func(string, adapters.InputRequest) adapters.Answer {
			return adapters.Answer{Action: "accept", Content: map[string]any{"decision": "approve", "comment": "ship it"}}
		},
		PollInterval: 10 * time.Millisecond,
		Timeout:      10 * time.Second,
	})
}
