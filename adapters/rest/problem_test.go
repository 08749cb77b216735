package rest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// TestCallProblemsAgainstJobAPIFake drives the job API fake into the
// answers a caller must be told about, and checks the problem the adapter
// reports: its class, the call (method and path, no query), the HTTP status
// and the backend's words (the outcome rule's message, or an excerpt of the
// answer), as one sentence.
func TestCallProblemsAgainstJobAPIFake(t *testing.T) {
	tests := []struct {
		name   string
		config func(*JobConfig)
		faults []jobapi.Fault
		op     string // "start", "poll", "cancel", "respond" or "find"
		// closeFake closes the fake before op: nothing answers.
		closeFake bool
		class     adapters.ProblemClass
		kind      error // the sentinel the problem wraps, nil for none
		status    int
		// text is the problem's whole sentence, with "{id}" for the job's
		// ID; prefix, when set instead, is how it starts.
		text, prefix string
	}{
		{
			name: "status 500 read by an is: error rule",
			config: func(j *JobConfig) {
				j.Status.Outcomes = []Outcome{{Status: Statuses{500}, Is: "error", Message: `= "an expired or rejected token"`}}
			},
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 500, Body: `{"errors":[{"error_number":1007}]}`}},
			op:     "poll", class: adapters.ProblemError, status: 500,
			text: "GET /jobs/{id} answered 500: an expired or rejected token",
		},
		{
			name:   "status 500 without a rule",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 500, Times: 3, Body: `{"error":"database unavailable"}`}},
			op:     "poll", class: adapters.ProblemError, status: 500,
			text: "GET /jobs/{id} answered 500: database unavailable",
		},
		{
			name: "is: not_found keeps the rule's message",
			config: func(j *JobConfig) {
				j.Status.Outcomes = []Outcome{{Status: Statuses{500}, When: "body.errors[0].error_number == 2017", Is: "not_found", Message: "errors.0.error"}}
			},
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 500, Body: `{"errors":[{"error_number":2017,"error":"Invalid job id specified; purged after MinJobAge"}]}`}},
			op:     "poll", class: adapters.ProblemNotFound, kind: adapters.ErrJobNotFound, status: 500,
			text: "GET /jobs/{id} answered 500: Invalid job id specified; purged after MinJobAge",
		},
		{
			name:   "a wrong status path answered 404",
			config: func(j *JobConfig) { j.Status.Path = "/job/{job.id}" },
			op:     "poll", class: adapters.ProblemNotFound, kind: adapters.ErrJobNotFound, status: 404,
			prefix: "GET /job/{id} answered 404",
		},
		{
			name: "a proxy's HTML error page",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 502, Times: 3, ContentType: "text/html",
				Body: "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"}},
			op: "poll", class: adapters.ProblemError, status: 502,
			text: `GET /jobs/{id} answered 502: an HTML page titled "502 Bad Gateway"`,
		},
		{
			name:   "a login page where JSON was expected",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 200, ContentType: "text/html", Body: "<html><body><form>Sign in to continue</form></body></html>"}},
			op:     "poll", class: adapters.ProblemUnreadable, kind: adapters.ErrUnreadableStatus, status: 200,
			text: `GET /jobs/{id} answered 200: the status answer is not JSON (answer: an HTML page reading "Sign in to continue")`,
		},
		{
			name:   "a state the catalog does not map",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 200, Body: `{"id":"{id}","status":"finished"}`}},
			op:     "poll", class: adapters.ProblemUnmapped, kind: adapters.ErrUnmappedState,
			text: "the backend reports state `finished`, which the catalog does not map; mapped: queued, running, waiting_input, succeeded, failed, cancelled, error",
		},
		{
			name:   "an expired token",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs/", Status: 401, Body: `{"error":"token expired"}`}},
			op:     "poll", class: adapters.ProblemRefused, status: 401,
			text: "GET /jobs/{id} answered 401: token expired",
		},
		{
			name: "nothing answers",
			op:   "poll", closeFake: true, class: adapters.ProblemUnreachable,
			prefix: "GET /jobs/{id} got no answer: ",
		},
		{
			name:   "a cancel answered 500",
			faults: []jobapi.Fault{{Method: http.MethodPost, Path: "/jobs/", Status: 500, Body: `{"error":"scheduler restarting"}`}},
			op:     "cancel", class: adapters.ProblemError, status: 500,
			text: "POST /jobs/{id}/cancel answered 500: scheduler restarting",
		},
		{
			name:   "an answer to the job's question answered 500",
			faults: []jobapi.Fault{{Method: http.MethodPost, Path: "/jobs/", Status: 500, Body: `{"error":"answers store unavailable"}`}},
			op:     "respond", class: adapters.ProblemError, status: 500,
			text: "POST /jobs/{id}/answers answered 500: answers store unavailable",
		},
		{
			name: "a start refused by a rule, in one sentence",
			config: func(j *JobConfig) {
				j.Start.Outcomes = []Outcome{{Status: Statuses{500}, Is: "refused", Message: "errors.0.description"}}
			},
			faults: []jobapi.Fault{{Method: http.MethodPost, Path: "/jobs", Status: 500, Body: `{"errors":[{"error_number":2035,"description":"Job violates QOS policy"}]}`}},
			op:     "start", class: adapters.ProblemError, status: 500,
			text: "POST /jobs answered 500: Job violates QOS policy",
		},
		{
			name:   "a find answered 503 without Retry-After",
			faults: []jobapi.Fault{{Method: http.MethodGet, Path: "/jobs", Status: 503, Times: 3}},
			op:     "find", class: adapters.ProblemError, status: 503,
			text: "GET /jobs answered 503: injected fault",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, base := startFake(t)
			job := loadJob(t)
			if tt.config != nil {
				tt.config(&job)
			}
			a, err := New("jobapi", BackendConfig{BaseURL: base, AllowNetworks: []string{"127.0.0.0/8"}, MaxRetries: new(2)},
				map[string]JobConfig{"job": job}, &Options{RetryWaitMin: time.Millisecond, RetryWaitMax: 2 * time.Millisecond})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			req, _ := fakeJob(adaptertest.RunsLong)
			req.CorrelationID = "corr-problem"
			var ref adapters.JobRef
			if tt.op != "start" {
				if ref, err = a.Start(t.Context(), req); err != nil {
					t.Fatalf("Start: %v", err)
				}
			}
			for _, f := range tt.faults {
				srv.Inject(f)
			}
			if tt.closeFake {
				srv.Close()
			}
			switch tt.op {
			case "start":
				_, err = a.Start(t.Context(), req)
			case "poll":
				obs, perr := a.Poll(t.Context(), []adapters.JobRef{ref})
				if perr != nil {
					t.Fatalf("Poll: %v; want the problem in the job's observation", perr)
				}
				err = obs[0].Err
			case "cancel":
				err = a.Cancel(t.Context(), ref)
			case "respond":
				err = a.Respond(t.Context(), ref, map[string]adapters.Answer{"approve": {Action: "accept"}})
			case "find":
				req.SubmittedAt = time.Now().Add(-time.Hour)
				_, _, err = a.Find(t.Context(), req)
			}
			if err == nil {
				t.Fatalf("%s succeeded, want a problem", tt.op)
			}
			if adaptertest.CheckProblem(t, tt.op, err, tt.class, tt.status, tt.kind) == nil {
				return
			}
			got := err.Error()
			if want := strings.ReplaceAll(tt.text, "{id}", ref.ID); tt.text != "" && got != want {
				t.Errorf("problem reads\n  %s\nwant\n  %s", got, want)
			}
			if want := strings.ReplaceAll(tt.prefix, "{id}", ref.ID); tt.prefix != "" && !strings.HasPrefix(got, want) {
				t.Errorf("problem reads %q, want it to start %q", got, want)
			}
			if strings.Contains(got, "could not be asked") || strings.Contains(got, "could not be reached") && tt.status != 0 {
				t.Errorf("problem %q says the backend could not be asked, although it answered", got)
			}
		})
	}
}

// TestUnmappedStateIsLoggedOnce checks that a status value states: does not
// map is told on every poll but logged once, as the catalog's mistake.
func TestUnmappedStateIsLoggedOnce(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, `{"status":"PAUSED","message":"paused by admin"}`))
	for i := range 3 {
		obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if !errors.Is(obs[0].Err, adapters.ErrUnmappedState) || obs[0].State != 0 {
			t.Fatalf("poll %d: %+v, want only an error wrapping adapters.ErrUnmappedState", i, obs[0])
		}
		wantText(t, obs[0].Err, "`PAUSED`", "does not map", "mapped: queued, running")
	}
	if n := strings.Count(f.logs.String(), "status=PAUSED"); n != 1 {
		t.Errorf("the unmapped value was logged %d times, want once:\n%s", n, f.logs.String())
	}
}
