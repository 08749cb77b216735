package githubactions

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// TestStartSendsRefAndInputs checks what a dispatch carries: the rendered
// ref and inputs, and the correlation input.
func TestStartSendsRefAndInputs(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(nil)
	ref := f.start(a, "succeeds", map[string]any{"branch": "release/1.2"}, "corr-inputs")
	want := map[string]string{"message": "build release/1.2", "correlation_id": "corr-inputs"}
	if diff := cmp.Diff(want, f.gh.Inputs(runID(t, ref))); diff != "" {
		t.Errorf("dispatch inputs (-want +got):\n%s", diff)
	}
	if ref.ID == "" || f.gh.Dispatches("corr-inputs") != 1 {
		t.Errorf("ref %+v, dispatches %d; want one run", ref, f.gh.Dispatches("corr-inputs"))
	}

	// A workflow given by numeric ID, without a correlation input.
	ref = f.start(a, "no_correlation", nil, "corr-numbered")
	if o := f.poll(a, ref); o.State != adapters.StateSucceeded {
		t.Errorf("numbered workflow run: %v %q", o.State, o.Message)
	}
	if in := f.gh.Inputs(runID(t, ref)); len(in) != 0 {
		t.Errorf("a tool without inputs sent %v", in)
	}
}

// TestEnterpriseFallback checks the per-backend fallback for servers that
// refuse return_run_details (GitHub Enterprise Server 3.20 and older): the
// refused dispatch created nothing, the repeated one without the field is
// found by its correlation input, and later dispatches skip the field.
func TestEnterpriseFallback(t *testing.T) {
	for _, status := range []int{http.StatusUnprocessableEntity, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{fake: func(o *githubfake.Options) {
				o.RejectRunDetails = status
				o.ListDelay = githubfake.NoListDelay // the fake clock stands still while Start searches
			}})
			a := f.adapter(nil)

			before := f.gh.Requests()
			ref := f.start(a, "succeeds", map[string]any{"branch": "main"}, "corr-ghes-1")
			first := f.gh.Requests() - before
			if got := f.gh.Dispatches("corr-ghes-1"); got != 1 {
				t.Fatalf("dispatches with the correlation ID = %d, want 1", got)
			}
			if got := f.gh.Inputs(runID(t, ref))["correlation_id"]; got != "corr-ghes-1" {
				t.Errorf("the found run carries correlation %q", got)
			}
			// refused dispatch, dispatch, one search
			if first != 3 {
				t.Errorf("the first start sent %d requests, want 3 (refused dispatch, dispatch, search)", first)
			}

			before = f.gh.Requests()
			ref2 := f.start(a, "succeeds", map[string]any{"branch": "main"}, "corr-ghes-2")
			if got := f.gh.Requests() - before; got != 2 {
				t.Errorf("the second start sent %d requests, want 2 (dispatch without the field, search)", got)
			}
			if ref2.ID == ref.ID {
				t.Errorf("both starts found run %s", ref.ID)
			}
			if o := f.poll(a, ref2); o.State != adapters.StateWorking {
				t.Errorf("found run: %v %q", o.State, o.Message)
			}

			// A tool without a correlation input cannot fall back.
			a2 := f.adapter(nil)
			_, err := a2.Start(t.Context(), adapters.StartRequest{Tool: "no_correlation", CorrelationID: "corr-ghes-3"})
			if err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "correlation_input") {
				t.Errorf("Start without a correlation input on GHES: %v; want a definite refusal naming correlation_input", err)
			}
		})
	}
}

// TestDispatchRunDetailsOff checks dispatch_run_details: false: the field is
// never sent, runs are found by title, including when they show up in
// listings only after a while.
func TestDispatchRunDetailsOff(t *testing.T) {
	f := newFixture(t, fixtureOptions{realTime: true, fake: func(o *githubfake.Options) {
		o.RejectRunDetails = http.StatusUnprocessableEntity
		o.ListDelay = 100 * time.Millisecond
	}})
	a := f.adapter(func(b *BackendConfig, tools map[string]JobConfig) {
		b.DispatchRunDetails = new(false)
		delete(tools, "no_correlation")
	})
	before := f.gh.Requests()
	ref := f.start(a, "succeeds", map[string]any{"branch": "main"}, "corr-off")
	if got := f.gh.Dispatches("corr-off"); got != 1 {
		t.Errorf("dispatches = %d, want 1", got)
	}
	if got := f.gh.Requests() - before; got < 3 {
		t.Errorf("start sent %d requests; want a dispatch and repeated searches while the run is not listed", got)
	}
	if got := f.gh.Inputs(runID(t, ref))["correlation_id"]; got != "corr-off" {
		t.Errorf("found run carries correlation %q", got)
	}

	_, err := f.newAdapter(func(b *BackendConfig, tools map[string]JobConfig) { b.DispatchRunDetails = new(false) })
	if err == nil || !strings.Contains(err.Error(), `tool "no_correlation": correlation_input: required`) {
		t.Errorf("New with dispatch_run_details false and a tool without correlation_input: %v", err)
	}
}

// TestStartOutcomes checks how dispatch failures are classified, that an
// ambiguous dispatch is never re-sent, and that Find reconciles it.
func TestStartOutcomes(t *testing.T) {
	tests := []struct {
		name        string
		fault       githubfake.Fault
		wantUnknown bool
		wantLimited bool
		wantRetry   time.Duration // the pause a throttled Start reports
		wantRuns    int
	}{
		{name: "503 after dispatching", fault: githubfake.Fault{Status: 503, AfterHandling: true}, wantUnknown: true, wantRuns: 1},
		{name: "connection dropped after dispatching", fault: githubfake.Fault{Drop: true, AfterHandling: true}, wantUnknown: true, wantRuns: 1},
		{name: "502 before dispatching", fault: githubfake.Fault{Status: 502}, wantUnknown: true, wantRuns: 0},
		{name: "404 workflow", fault: githubfake.Fault{Status: 404}, wantRuns: 0},
		{name: "403 forbidden", fault: githubfake.Fault{Status: 403}, wantRuns: 0},
		{name: "secondary rate limit", fault: githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, RetryAfter: 40 * time.Second}, wantLimited: true, wantRetry: 40 * time.Second},
		{name: "secondary rate limit without retry-after", fault: githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, Status: 429}, wantLimited: true, wantRetry: time.Minute},
		{name: "secondary rate limit known by its message", fault: githubfake.Fault{Status: 403,
			Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}, wantLimited: true, wantRetry: time.Minute},
		{name: "primary rate limit", fault: githubfake.Fault{Kind: githubfake.FaultPrimaryRateLimit, Status: 429, RetryAfter: 90 * time.Second}, wantLimited: true, wantRetry: 90 * time.Second},
		{name: "primary rate limit, 403", fault: githubfake.Fault{Kind: githubfake.FaultPrimaryRateLimit, RetryAfter: time.Minute}, wantLimited: true, wantRetry: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			a := f.adapter(nil)
			tt.fault.Method, tt.fault.Path = http.MethodPost, "/dispatches"
			f.gh.Inject(tt.fault)
			req := adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"branch": "main"}, CorrelationID: "corr-outcome"}
			before := f.gh.Requests()
			_, err := a.Start(t.Context(), req)
			if err == nil {
				t.Fatal("Start succeeded despite the fault")
			}
			if got := errors.Is(err, adapters.ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Errorf("Start: %v; unknown outcome %v, want %v", err, got, tt.wantUnknown)
			}
			if got := errors.Is(err, ErrRateLimited); got != tt.wantLimited {
				t.Errorf("Start: %v; rate limited %v, want %v", err, got, tt.wantLimited)
			}
			if d, got := adapters.RetryAfter(err); got != tt.wantLimited || d != tt.wantRetry {
				t.Errorf("Start: %v; throttled %v (retry after %v), want %v (%v)", err, got, d, tt.wantLimited, tt.wantRetry)
			}
			if got := f.gh.Requests() - before; got != 1 {
				t.Errorf("Start sent %d requests, want 1: an ambiguous dispatch is never re-sent", got)
			}
			if got := f.gh.Dispatches("corr-outcome"); got != tt.wantRuns {
				t.Errorf("runs created = %d, want %d", got, tt.wantRuns)
			}
			f.clock.Advance(2 * time.Minute) // past any rate limit and the listing lag
			req.SubmittedAt = t0
			_, found, err := a.Find(t.Context(), req)
			if err != nil || found != (tt.wantRuns == 1) {
				t.Errorf("Find = found %v, err %v; want found %v", found, err, tt.wantRuns == 1)
			}
		})
	}
}

// TestStartSearchThrottled checks that a dispatch GitHub accepted without a
// run ID, whose search is then rate-limited, is an unknown outcome and not
// a throttled start: the run exists, and the bridge must reconcile rather
// than dispatch again.
func TestStartSearchThrottled(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(func(b *BackendConfig, tools map[string]JobConfig) {
		b.DispatchRunDetails = new(false)
		delete(tools, "no_correlation")
	})
	f.gh.Inject(githubfake.Fault{Method: http.MethodGet, Path: "/runs", Kind: githubfake.FaultSecondaryRateLimit, Status: 429, RetryAfter: time.Minute})
	_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"branch": "main"}, CorrelationID: "corr-search-429"})
	if !errors.Is(err, adapters.ErrOutcomeUnknown) || errors.Is(err, adapters.ErrThrottled) {
		t.Errorf("Start: %v; want an unknown outcome that does not wrap adapters.ErrThrottled", err)
	}
	if got := f.gh.Dispatches("corr-search-429"); got != 1 {
		t.Errorf("dispatches = %d, want 1", got)
	}
}

// TestStartRefusalCarriesGitHubsMessage checks that a refused dispatch says
// why in GitHub's own words, redacted and cut short, and is not an unknown
// outcome.
func TestStartRefusalCarriesGitHubsMessage(t *testing.T) {
	tests := []struct {
		name    string
		message string
		want    string
		maxLen  int
	}{
		{name: "unexpected inputs", message: "Unexpected inputs provided: [\"colour\"]", want: `answered 422: Unexpected inputs provided: ["colour"]`},
		{name: "token in the message", message: "Bad token " + testToken, want: "Bad token [redacted]"},
		{name: "long message", message: strings.Repeat("x", 5000), want: strings.Repeat("x", 100), maxLen: 800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			a := f.adapter(nil)
			// Only a 422 about return_run_details makes the adapter send
			// the dispatch again without it: this one ends the call.
			f.gh.Inject(githubfake.Fault{Method: http.MethodPost, Path: "/dispatches", Status: 422, Message: tt.message})
			_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"branch": "main"}, CorrelationID: "corr-refused"})
			switch {
			case err == nil:
				t.Fatal("Start succeeded")
			case errors.Is(err, adapters.ErrOutcomeUnknown) || errors.Is(err, adapters.ErrThrottled):
				t.Errorf("Start: %v; want a definite refusal", err)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("Start: %v; want it to carry %q", err, tt.want)
			case strings.Contains(err.Error(), testToken):
				t.Errorf("Start error carries the token: %v", err)
			case tt.maxLen > 0 && len(err.Error()) > tt.maxLen:
				t.Errorf("Start error is %d bytes, want at most %d", len(err.Error()), tt.maxLen)
			}
		})
	}
}

// TestFindUnsupportedWithoutCorrelation checks that a tool without a
// correlation input says it cannot be searched.
func TestFindUnsupportedWithoutCorrelation(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	_, _, err := f.adapter(nil).Find(t.Context(), adapters.StartRequest{Tool: "no_correlation", CorrelationID: "x"})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Find: %v, want errors.ErrUnsupported", err)
	}
}

// TestStartMissingArgument checks that a ref naming an absent argument is
// refused before anything is sent.
func TestStartMissingArgument(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(nil)
	before := f.gh.Requests()
	_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "succeeds", CorrelationID: "c"})
	if err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) || f.gh.Requests() != before {
		t.Errorf("Start without the ref's argument: %v, %d requests; want a refusal without requests", err, f.gh.Requests()-before)
	}
}

// TestStartRendersExpressions checks {= ...} expressions in a tool's ref
// and inputs: each input carries its expression's value as text, and an
// input whose expression gives null is left out so the workflow's default
// applies.
func TestStartRendersExpressions(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(func(_ *BackendConfig, tools map[string]JobConfig) {
		c := tools["succeeds"]
		c.Ref = `{= has(args.branch) ? args.branch : "main"}`
		c.Inputs = map[string]string{
			"priority": `{= args.env == "prod" ? "high" : "low"}`,
			"replicas": "{= args.replicas * 2}",
			"command":  "run {= shell_quote(args.target)}",
			"note":     `{= has(args.note) ? args.note : null}`,
		}
		tools["succeeds"] = c
	})
	for _, tc := range []struct {
		name string
		args map[string]any
		want map[string]string
	}{
		{"prod", map[string]any{"env": "prod", "replicas": 3.0, "target": "a b", "note": "n"},
			map[string]string{"priority": "high", "replicas": "6", "command": "run 'a b'", "note": "n"}},
		{"staging without a note", map[string]any{"env": "staging", "replicas": 1.0, "target": "$(id)", "branch": "dev"},
			map[string]string{"priority": "low", "replicas": "2", "command": "run '$(id)'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			corr := "corr-expr-" + strings.ReplaceAll(tc.name, " ", "-")
			ref := f.start(a, "succeeds", tc.args, corr)
			tc.want["correlation_id"] = corr
			if diff := cmp.Diff(tc.want, f.gh.Inputs(runID(t, ref))); diff != "" {
				t.Errorf("dispatch inputs (-want +got):\n%s", diff)
			}
		})
	}

	// An expression that fails on the call's arguments dispatches nothing.
	before := f.gh.Dispatched()
	_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "succeeds", Arguments: map[string]any{"env": "prod", "target": "x"}, CorrelationID: "corr-expr-bad"})
	if err == nil || !strings.Contains(err.Error(), "rendering input replicas") {
		t.Errorf("Start with replicas missing: %v, want an error naming input replicas", err)
	}
	if f.gh.Dispatched() != before {
		t.Errorf("a failed rendering dispatched a run")
	}
}

// TestTemplateErrorPositions checks that a template's mistake is reported at
// its field, at the byte of the value where it is.
func TestTemplateErrorPositions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*JobConfig)
		path   string
		offset int
		msg    string
	}{
		{"expression syntax in an input", func(c *JobConfig) { c.Inputs = map[string]string{"p": `x {= args.env == }`} }, "inputs.p", 18, "Syntax error"},
		{"unknown variable in the ref", func(c *JobConfig) { c.Ref = "{= job.id}" }, "ref", 4, "unknown name job"},
		{"correlation ID in the ref", func(c *JobConfig) { c.Ref = `{= correlation_id + "x"}` }, "ref", 4, "correlation_id is not available here"},
		{"misspelt placeholder", func(c *JobConfig) { c.Inputs = map[string]string{"p": "v-{arg.version}"} }, "inputs.p", 3, "did you mean {args.version}?"},
		{"unterminated expression", func(c *JobConfig) { c.Inputs = map[string]string{"p": "{= args.a"} }, "inputs.p", 1, "unterminated {= expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validJob()
			tc.edit(&c)
			var fe *adapters.FieldError
			if err := c.Validate(); !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a FieldError", err)
			}
			if fe.Path != tc.path || fe.Offset != tc.offset || !strings.Contains(fe.Err.Error(), tc.msg) {
				t.Errorf("got %s at offset %d, want %s at offset %d containing %q", fe, fe.Offset, tc.path, tc.offset, tc.msg)
			}
		})
	}
}
