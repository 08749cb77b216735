package githubactions

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// TestCallProblems drives the GitHub fake into failed calls and checks the
// problem the adapter reports through go-github: the request's method and
// path, the HTTP status, GitHub's message as its words, and the class the
// caller is told: refused (a 401, a 403 that is no rate limit), not_found,
// throttled (a rate limit), error.
func TestCallProblems(t *testing.T) {
	tests := []struct {
		name  string
		fault *githubfake.Fault
		// wrongToken makes the fake know another token than the adapter's.
		wrongToken bool
		op         string // "start", "poll" or "cancel"
		class      adapters.ProblemClass
		kind       error
		status     int
		text       string // with {run} for the run's ID
	}{
		{
			name:  "a run answered 500",
			fault: &githubfake.Fault{Method: http.MethodGet, Path: "/actions/runs/", Status: http.StatusInternalServerError, Message: "Server Error"},
			op:    "poll", class: adapters.ProblemError, status: 500,
			text: "GET /repos/octo-org/app/actions/runs/{run} answered 500: Server Error",
		},
		{
			name:  "a run GitHub does not know",
			fault: &githubfake.Fault{Method: http.MethodGet, Path: "/actions/runs/", Status: http.StatusNotFound, Message: "Not Found"},
			op:    "poll", class: adapters.ProblemNotFound, kind: adapters.ErrJobNotFound, status: 404,
			text: "GET /repos/octo-org/app/actions/runs/{run} answered 404: Not Found",
		},
		{
			name:  "a token without the permission",
			fault: &githubfake.Fault{Method: http.MethodGet, Path: "/actions/runs/", Status: http.StatusForbidden, Message: "Resource not accessible by integration"},
			op:    "poll", class: adapters.ProblemRefused, status: 403,
			text: "GET /repos/octo-org/app/actions/runs/{run} answered 403: Resource not accessible by integration",
		},
		{
			name:  "a cancel answered 500",
			fault: &githubfake.Fault{Method: http.MethodPost, Path: "/cancel", Status: http.StatusInternalServerError, Message: "Server Error"},
			op:    "cancel", class: adapters.ProblemError, status: 500,
			text: "POST /repos/octo-org/app/actions/runs/{run}/cancel answered 500: Server Error",
		},
		{
			name:  "a dispatch refused",
			fault: &githubfake.Fault{Method: http.MethodPost, Path: "/dispatches", Status: http.StatusUnprocessableEntity, Message: "No ref found for: main"},
			op:    "start", class: adapters.ProblemError, status: 422,
			text: "POST /repos/octo-org/app/actions/workflows/long.yml/dispatches answered 422: No ref found for: main",
		},
		{
			name:       "a dispatch with bad credentials",
			wrongToken: true,
			op:         "start", class: adapters.ProblemRefused, status: 401,
			text: "POST /repos/octo-org/app/actions/workflows/long.yml/dispatches answered 401: Bad credentials",
		},
		{
			name:  "a primary rate limit",
			fault: &githubfake.Fault{Method: http.MethodGet, Path: "/actions/runs/", Kind: githubfake.FaultPrimaryRateLimit},
			op:    "poll", class: adapters.ProblemThrottled, kind: adapters.ErrThrottled, status: 403,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o fixtureOptions
			if tt.wrongToken {
				o.fake = func(fo *githubfake.Options) { fo.Tokens = []string{"ghp_AnotherTokenEntirely"} }
			}
			f := newFixture(t, o)
			a := f.adapter(nil)
			var ref adapters.JobRef
			if tt.op != "start" {
				ref = f.start(a, "long", nil, "corr-problem")
			}
			if tt.fault != nil {
				f.gh.Inject(*tt.fault)
			}
			var err error
			switch tt.op {
			case "start":
				_, err = a.Start(t.Context(), adapters.StartRequest{Tool: "long", CorrelationID: "corr-start"})
			case "poll":
				obs, perr := a.Poll(t.Context(), []adapters.JobRef{ref})
				switch {
				case errors.Is(perr, adapters.ErrThrottled):
					err = perr
				case perr != nil:
					t.Fatalf("Poll: %v; want the problem in the run's observation", perr)
				default:
					err = obs[0].Err
				}
			case "cancel":
				err = a.Cancel(t.Context(), ref)
			}
			if adaptertest.CheckProblem(t, tt.op, err, tt.class, tt.status, tt.kind) == nil {
				return
			}
			if want := strings.ReplaceAll(tt.text, "{run}", ref.ID); tt.text != "" && err.Error() != want {
				t.Errorf("problem reads\n  %s\nwant\n  %s", err, want)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("problem %q quotes the token", err)
			}
		})
	}
}

// TestHeldBackCallProblem: while a rate limit is in force the adapter sends
// nothing; the problem says so (throttled, "was not sent"), not that GitHub
// gave no answer.
func TestHeldBackCallProblem(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(nil)
	ref := f.start(a, "long", nil, "corr-held")
	f.gh.Inject(githubfake.Fault{Method: http.MethodGet, Path: "/actions/runs/", Kind: githubfake.FaultPrimaryRateLimit, RetryAfter: time.Hour})
	if _, err := a.Poll(t.Context(), []adapters.JobRef{ref}); !errors.Is(err, adapters.ErrThrottled) {
		t.Fatalf("Poll against a spent rate limit: %v, want throttled", err)
	}
	_, err := a.Poll(t.Context(), []adapters.JobRef{ref})
	p := adaptertest.CheckProblem(t, "Poll while the rate limit is in force", err, adapters.ProblemThrottled, 0, adapters.ErrThrottled)
	if p != nil && !strings.Contains(err.Error(), "GET /repos/octo-org/app/actions/runs/"+ref.ID+" was not sent: rate limited until") {
		t.Errorf("Poll while the rate limit is in force = %q, want it to say that the call was not sent", err)
	}
}
