package githubactions

import (
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
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
		Throttle: func(_ *testing.T, d time.Duration) func() {
			// GitHub's secondary rate limit, answered 429 with retry-after.
			f.gh.Inject(githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, Status: 429, RetryAfter: d, Times: 1 << 20})
			return f.gh.ClearFaults
		},
		Fail: func(_ *testing.T, status int) func() {
			f.gh.Inject(githubfake.Fault{Status: status, Message: "injected fault", Times: 1 << 20})
			return f.gh.ClearFaults
		},
		Answer: func(string, adapters.InputRequest) adapters.Answer {
			return adapters.Answer{Action: "accept", Content: map[string]any{"decision": "approve", "comment": "ship it"}}
		},
		// The fake lists a run githubfake.DefaultListDelay after its
		// dispatch; the adapter waits DefaultListingLag before "not found".
		ListingLag:   DefaultListingLag,
		PollInterval: 10 * time.Millisecond,
		Timeout:      10 * time.Second,
	})
}
