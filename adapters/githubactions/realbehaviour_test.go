package githubactions

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// TestFindWaitsForListingLag checks the Finder rule against the fake's
// lagging run listing: after a dispatch with an unknown outcome, Find says
// "not listed yet" (never "not found") until the backend's listing_lag has
// passed since SubmittedAt, and finds the run once it is listed.
func TestFindWaitsForListingLag(t *testing.T) {
	tests := []struct {
		name       string
		lag        time.Duration // listing_lag; 0 for the default
		dispatched bool          // the ambiguous dispatch created a run
		after      time.Duration // since the submission
		wantFound  bool
		wantLag    bool // an error wrapping adapters.ErrNotListedYet
	}{
		{name: "run not listed yet", dispatched: true, after: time.Second, wantLag: true},
		{name: "run listed", dispatched: true, after: githubfake.DefaultListDelay + time.Second, wantFound: true},
		{name: "no run, within the default lag", after: 59 * time.Second, wantLag: true},
		{name: "no run, past the default lag", after: 61 * time.Second},
		{name: "no run, within a configured lag", lag: 5 * time.Minute, after: 4 * time.Minute, wantLag: true},
		{name: "no run, past a configured lag", lag: 5 * time.Minute, after: 5*time.Minute + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{}) // the fake lags by default
			a := f.adapter(func(b *BackendConfig, _ map[string]JobConfig) { b.ListingLag = tt.lag })
			req := adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"branch": "main"}, CorrelationID: "corr-lag", SubmittedAt: f.clock.Now()}
			if tt.dispatched {
				f.gh.Inject(githubfake.Fault{Method: http.MethodPost, Path: "/dispatches", Status: 503, AfterHandling: true})
				if _, err := a.Start(t.Context(), req); !errors.Is(err, adapters.ErrOutcomeUnknown) {
					t.Fatalf("Start: %v, want an unknown outcome", err)
				}
			}
			f.clock.Advance(tt.after)
			ref, found, err := a.Find(t.Context(), req)
			if found != tt.wantFound || errors.Is(err, adapters.ErrNotListedYet) != tt.wantLag || (err != nil && !tt.wantLag) {
				t.Fatalf("Find %v after the submission = found %v, err %v; want found %v, not listed yet %v", tt.after, found, err, tt.wantFound, tt.wantLag)
			}
			if found && f.gh.Inputs(runID(t, ref))["correlation_id"] != "corr-lag" {
				t.Errorf("found run %s carries another correlation ID", ref.ID)
			}
		})
	}
}

// TestListingLagConfig checks the listing_lag key's validation.
func TestListingLagConfig(t *testing.T) {
	for _, tt := range []struct {
		lag  time.Duration
		want string
	}{
		{-time.Second, "listing_lag: must not be negative, and at most 24h0m0s"},
		{25 * time.Hour, "listing_lag: must not be negative, and at most 24h0m0s"},
		{10 * time.Minute, ""},
	} {
		c := BackendConfig{Token: "${T}", ListingLag: tt.lag}
		c.SetDefaults()
		err := c.Validate()
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && !strings.Contains(got, tt.want)) {
			t.Errorf("listing_lag %v: %v, want %q", tt.lag, err, tt.want)
		}
	}
}

// matrixScripts is a run of 150 one-second jobs (more than one page of
// 100), of which job shard-120 fails, with 120 artifacts.
func matrixScripts() map[string]githubfake.Script {
	var jobs []githubfake.JobScript
	for i := range 150 {
		j := githubfake.JobScript{Name: fmt.Sprintf("shard-%03d", i), Duration: time.Second}
		if i == 120 {
			j.Conclusion = "failure"
			j.Log = "compiling\nshard 120: assertion failed: want 3, got 4\n"
		}
		jobs = append(jobs, j)
	}
	var arts []githubfake.ArtifactScript
	for i := range 120 {
		arts = append(arts, githubfake.ArtifactScript{Name: fmt.Sprintf("report-%03d", i), Size: 10})
	}
	return map[string]githubfake.Script{"matrix": {
		RunName: "Matrix [{inputs.correlation_id}]", Jobs: jobs, Artifacts: arts, Conclusion: "failure",
	}}
}

// TestManyJobsPaginated checks that jobs beyond GitHub's first page of 100
// count in progress and appear in the result with their failures and log
// tails, and that artifacts beyond the first page are listed.
func TestManyJobsPaginated(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: matrixScripts()})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "matrix"}, "corr-matrix")

	f.clock.Advance(130*time.Second + 500*time.Millisecond) // job 130 runs
	o := f.poll(a, ref)
	if o.Progress == nil || o.Progress.Total != 150 || o.Progress.Done != 130 {
		t.Errorf("progress %+v (%q), want 130 of 150 jobs", o.Progress, o.Message)
	}
	if !strings.Contains(o.Message, "job shard-130") {
		t.Errorf("message %q does not name the running job shard-130", o.Message)
	}

	f.clock.Advance(time.Minute)
	o = f.poll(a, ref)
	if o.State != adapters.StateToolError || o.Result == nil {
		t.Fatalf("finished run: %v %q", o.State, o.Message)
	}
	for _, want := range []string{
		"- shard-119: success",
		"- shard-149: failure", // the last job takes the run's conclusion
		"- shard-120: failure",
		"Last 200 lines of the log of job shard-120:",
		"shard 120: assertion failed: want 3, got 4",
		"- report-119 (10 bytes)",
	} {
		if !strings.Contains(o.Result.Text, want) {
			t.Errorf("result text lacks %q", want)
		}
	}
	if jobs := o.Result.Structured["jobs"].([]any); len(jobs) != 150 {
		t.Errorf("structured result has %d jobs, want 150", len(jobs))
	}
	if arts := o.Result.Structured["artifacts"].([]any); len(arts) != 120 {
		t.Errorf("structured result has %d artifacts, want 120", len(arts))
	}
}

// TestDispatchRefusalsEndTheCall checks that GitHub's 422s for an unknown
// ref, unexpected inputs and a workflow without the workflow_dispatch
// trigger end the call as a refusal quoting GitHub, are not taken for a
// server refusing return_run_details (no second dispatch, no switch to the
// correlation search), and that only that refusal triggers the fallback.
func TestDispatchRefusalsEndTheCall(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"unknown ref", "succeeds", map[string]any{"branch": "no-such-branch"}, "/dispatches answered 422: No ref found for: no-such-branch"},
		{"unexpected inputs", "succeeds", map[string]any{"branch": "main"}, `/dispatches answered 422: Unexpected inputs provided: ["message"]`},
		{"no workflow_dispatch trigger", "fails", nil, "/dispatches answered 422: Workflow does not have 'workflow_dispatch' trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{fake: func(o *githubfake.Options) {
				o.Refs = []string{"main"}
				for i := range o.Workflows {
					switch o.Workflows[i].File {
					case "succeeds.yml":
						if tt.name == "unexpected inputs" {
							o.Workflows[i].Inputs = []string{"correlation_id"}
						}
					case "fails.yml":
						o.Workflows[i].NoDispatchTrigger = true
					}
				}
			}})
			a := f.adapter(nil)
			before := f.gh.Requests()
			_, err := a.Start(t.Context(), adapters.StartRequest{Tool: tt.tool, Arguments: tt.args, CorrelationID: "corr-refused"})
			switch {
			case err == nil:
				t.Fatal("Start succeeded")
			case errors.Is(err, adapters.ErrOutcomeUnknown) || errors.Is(err, adapters.ErrThrottled):
				t.Errorf("Start: %v; want a definite refusal", err)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("Start: %v; want it to quote %q", err, tt.want)
			}
			if got := f.gh.Requests() - before; got != 1 {
				t.Errorf("Start sent %d requests, want 1: the refusal is not about return_run_details", got)
			}
			// The backend still asks for run details: the next start is
			// one request, answered with the run ID.
			before = f.gh.Requests()
			if _, err := a.Start(t.Context(), adapters.StartRequest{Tool: "approval", CorrelationID: "corr-next"}); err != nil {
				t.Fatalf("next Start: %v", err)
			}
			if got := f.gh.Requests() - before; got != 1 {
				t.Errorf("the next Start sent %d requests, want 1: the backend switched to the correlation search", got)
			}
		})
	}
}

// TestJobsReadWhileRunUnchanged checks that job progress reaches the task
// even when a job finishing leaves the run document (and its ETag)
// unchanged, which GitHub does not rule out: the jobs are read again at
// least every rereadEvery polls.
func TestJobsReadWhileRunUnchanged(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: longScripts(), fake: func(o *githubfake.Options) { o.JobsLeaveRunUnchanged = true }})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-quiet")
	o := f.poll(a, ref)
	if o.Progress == nil || o.Progress.Done != 0 {
		t.Fatalf("first poll: %+v %q", o.Progress, o.Message)
	}
	f.clock.Advance(61 * time.Minute) // job one done, job two runs; the run document is unchanged
	for i := 1; i <= rereadEvery; i++ {
		o = f.poll(a, ref)
		if o.Progress != nil && o.Progress.Done == 1 {
			if !strings.Contains(o.Message, "job two") {
				t.Errorf("message %q does not name job two", o.Message)
			}
			return
		}
	}
	t.Errorf("after %d polls the task still says %q: a finished job went unread while the run's ETag held", rereadEvery, o.Message)
}
