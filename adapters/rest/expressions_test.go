package rest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// TestExpressionsReadAnswers: what one JSON path per field cannot say — a
// state derived from several fields, a raw wait status, a message combining
// fields, a Kubernetes-style conditions array — is written as an expression.
func TestExpressionsReadAnswers(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*StatusConfig)
		body   string
		want   adapters.Observation
	}{
		{
			name: "building plus a null result",
			mutate: func(s *StatusConfig) {
				s.Field = `= body.building ? "BUILDING" : body.result`
				s.States = map[string]string{"BUILDING": "working", "SUCCESS": "succeeded", "FAILURE": "tool_error", "ABORTED": "cancelled"}
				s.Message = `= body.building ? "build #" + string(body.number) + " running" : "build #" + string(body.number) + ": " + body.result`
			},
			body: `{"building":true,"result":null,"number":45}`,
			want: adapters.Observation{State: adapters.StateWorking, Message: "build #45 running"},
		},
		{
			name: "a raw wait status",
			mutate: func(s *StatusConfig) {
				s.Field = `= body.state != "COMPLETED" ? body.state : (int(body.exit_code) / 256 == 0 ? "OK" : "EXIT")`
				s.States = map[string]string{"RUNNING": "working", "OK": "succeeded", "EXIT": "tool_error"}
				s.Message = `= "exit " + string(int(body.exit_code) / 256)`
				s.Result = nil
			},
			body: `{"state":"COMPLETED","exit_code":768}`,
			want: adapters.Observation{State: adapters.StateToolError, Message: "exit 3", Result: &adapters.Result{Text: "exit 3"}},
		},
		{
			name: "a message combining fields",
			mutate: func(s *StatusConfig) {
				s.Field = "state"
				s.States = map[string]string{"RUNNING": "working", "DONE": "succeeded"}
				s.Message = `= body.state + ": " + body.reason`
			},
			body: `{"state":"RUNNING","reason":"waiting for resources"}`,
			want: adapters.Observation{State: adapters.StateWorking, Message: "RUNNING: waiting for resources"},
		},
		{
			name: "conditions and counters",
			mutate: func(s *StatusConfig) {
				s.Field = `= body.status.?conditions.orValue([]).exists(c, c.type == "Complete" && c.status == "True") ? "Complete" : (body.status.?conditions.orValue([]).exists(c, c.type == "Failed" && c.status == "True") ? "Failed" : "Running")`
				s.States = map[string]string{"Running": "working", "Complete": "succeeded", "Failed": "tool_error"}
				s.Message = `= body.status.?conditions.orValue([]).filter(c, c.status == "True").map(c, c.type + ": " + c.?message.orValue("")).join("; ")`
				s.Progress = &ProgressConfig{Done: "= body.status.?succeeded.orValue(0)", Total: "spec.completions"}
				s.Result = &ResultConfig{Text: `= "succeeded " + string(body.status.succeeded) + " of " + string(body.spec.completions)`}
			},
			body: `{"spec":{"completions":3},"status":{"succeeded":3,"conditions":[{"type":"Complete","status":"True","message":"all pods done"}]}}`,
			want: adapters.Observation{State: adapters.StateSucceeded, Message: "Complete: all pods done",
				Progress: &adapters.Progress{Done: 3, Total: 3}, Result: &adapters.Result{Text: "succeeded 3 of 3"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := testJob()
			job.Status.Progress, job.Status.Links, job.Status.Error = nil, nil, nil
			job.Status.Result = &ResultConfig{Text: "result.text"}
			tt.mutate(&job.Status)
			f := newFixture(t, testBackend(), job)
			f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, tt.body))
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil || obs[0].Err != nil {
				t.Fatalf("Poll: %v %v", err, obs[0].Err)
			}
			got := obs[0]
			if got.State != tt.want.State || got.Message != tt.want.Message {
				t.Errorf("state %s message %q, want %s %q", got.State, got.Message, tt.want.State, tt.want.Message)
			}
			if (tt.want.Progress == nil) != (got.Progress == nil) || tt.want.Progress != nil && *got.Progress != *tt.want.Progress {
				t.Errorf("progress %+v, want %+v", got.Progress, tt.want.Progress)
			}
			if tt.want.Result != nil && (got.Result == nil || got.Result.Text != tt.want.Result.Text) {
				t.Errorf("result %+v, want %+v", got.Result, tt.want.Result)
			}
		})
	}
}

// TestOutcomes: an API that answers 500 with an error body for an unknown
// job or a refused submission is read as the catalog says, not as "outcome
// unknown" or "could not be reached" forever.
func TestOutcomes(t *testing.T) {
	slurmErrors := func(c *Call, unknownIs string) {
		c.Outcomes = []Outcome{
			{Status: []int{500}, When: `body.errors.exists(e, e.error_number == 2017)`, Is: unknownIs, Message: "errors.0.description"},
			{Status: []int{500}, When: `body.errors.exists(e, e.error_number == 2035)`, Is: "error", Message: `= body.errors.map(e, e.description).join("; ")`},
		}
		if c != nil && unknownIs == "refused" {
			c.Outcomes[1].Is = "refused"
		}
	}
	unknownJob := `{"errors":[{"error_number":2017,"description":"Invalid job id specified"}]}`
	refused := `{"errors":[{"error_number":2035,"description":"Job violates accounting/QOS policy"}]}`
	crash := `{"errors":[{"error_number":1,"description":"Unspecified error"}]}`

	t.Run("refused submission quotes the backend", func(t *testing.T) {
		job := testJob()
		slurmErrors(&job.Start, "refused")
		f := newFixture(t, testBackend(), job)
		f.on("POST", "/projects/p/jobs", jsonResponder(500, refused))
		_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
		if errors.Is(err, adapters.ErrOutcomeUnknown) {
			t.Fatalf("error %v wraps ErrOutcomeUnknown, want a refusal", err)
		}
		wantText(t, err, "answered 500", "Job violates accounting/QOS policy")
	})
	t.Run("a 500 no rule matches stays an unknown outcome", func(t *testing.T) {
		job := testJob()
		slurmErrors(&job.Start, "refused")
		f := newFixture(t, testBackend(), job)
		f.on("POST", "/projects/p/jobs", jsonResponder(500, crash))
		_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
		if !errors.Is(err, adapters.ErrOutcomeUnknown) {
			t.Fatalf("error %v, want ErrOutcomeUnknown", err)
		}
	})
	t.Run("a vanished job counts as missing", func(t *testing.T) {
		job := testJob()
		slurmErrors(&job.Status.Call, "not_found")
		f := newFixture(t, testBackend(), job)
		f.on("GET", "/projects/p/jobs/job-1", jsonResponder(500, unknownJob))
		obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(obs[0].Err, adapters.ErrJobNotFound) {
			t.Fatalf("observation error %v, want ErrJobNotFound", obs[0].Err)
		}
		wantText(t, obs[0].Err, "Invalid job id specified")
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d status requests, want 1 (a classified answer is not retried)", n)
		}
	})
	t.Run("cancel of a vanished job is not retried forever", func(t *testing.T) {
		job := testJob()
		slurmErrors(job.Cancel, "not_found")
		job.Cancel.Outcomes[1].Is = "refused"
		f := newFixture(t, testBackend(), job)
		f.on("POST", "/jobs/job-1/cancel", jsonResponder(500, unknownJob))
		err := f.a.Cancel(t.Context(), testRef("job-1"))
		if !errors.Is(err, adapters.ErrAlreadyFinished) {
			t.Fatalf("error %v, want ErrAlreadyFinished", err)
		}
	})
	t.Run("a condition reading a missing field does not match", func(t *testing.T) {
		job := testJob()
		job.Status.Outcomes = []Outcome{{When: `body.error.code == "GONE"`, Is: "not_found"}}
		f := newFixture(t, testBackend(), job)
		f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, `{"status":"running"}`))
		obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
		if err != nil || obs[0].Err != nil || obs[0].State != adapters.StateWorking {
			t.Fatalf("got %+v %v, want working", obs, err)
		}
	})
	t.Run("retry later honours Retry-After", func(t *testing.T) {
		job := testJob()
		job.Status.Outcomes = []Outcome{{Status: []int{200}, When: `body.status == "busy"`, Is: "retry_later"}}
		f := newFixture(t, testBackend(), job)
		f.on("GET", "/projects/p/jobs/job-1", withHeader(jsonResponder(200, `{"status":"busy"}`), "Retry-After", "7"))
		_, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
		if d, ok := adapters.RetryAfter(err); !ok || d != 7*time.Second {
			t.Fatalf("error %v (retry after %v), want throttling for 7s", err, d)
		}
	})
}

func TestOutcomeValidation(t *testing.T) {
	job := testJob()
	job.Start.Outcomes = []Outcome{{Is: "not_found"}, {Status: []int{1000}, Is: "refused"}, {When: "body.x +", Is: "refused"}}
	job.Cancel.Outcomes = []Outcome{{When: `"x"`, Is: "already_finished"}}
	err := job.Validate()
	for _, want := range []string{
		`start.outcomes[0].is: "not_found" is not an outcome of a start call (use one of success, refused, unknown, retry_later)`,
		"start.outcomes[1].status[0]: 1000 is not an HTTP status",
		"start.outcomes[2].when: ",
		"cancel.outcomes[0].when: the expression gives a string, but a boolean is needed here",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, want)
		}
	}
}

// TestExpressionErrorsArePositioned: a mistake inside an expression is
// reported with its byte offset in the field, so that the catalog can point
// at its line and column.
func TestExpressionErrorsArePositioned(t *testing.T) {
	job := testJob()
	job.Status.Message = `= body.state + `
	job.Start.Query = map[string]string{"x": "a{= args.count +}b"}
	err := job.Validate()
	offsets := map[string]int{}
	for _, e := range leaves(err) {
		var fe *fielderr.Error
		if errors.As(e, &fe) {
			offsets[fe.Path] = fe.Offset
		}
	}
	if got := offsets["status.message"]; got != 16 {
		t.Errorf("status.message offset %d, want 16 (the end of the expression)", got)
	}
	if got := offsets["start.query.x"]; got != 17 {
		t.Errorf("start.query.x offset %d, want 17 (the closing brace), errors: %v", got, err)
	}
}

func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// queueJob is a Jenkins-style job: the start answers 201 with a queue
// item's Location, which names the build once it has left the queue.
func queueJob() JobConfig {
	return JobConfig{
		Start: Call{Path: "/job/{args.name}/buildWithParameters", Query: map[string]string{"BRANCH": "{args.branch}"}},
		JobID: JobIDConfig{FromLocation: true, Queue: &QueueConfig{
			Call:    Call{Path: "{job.location}api/json", Outcomes: []Outcome{{When: "body.cancelled", Is: "cancelled", Message: `= "cancelled in the queue"`}}},
			Field:   "executable.number",
			Message: "why",
			Timeout: time.Hour,
		}},
		Status: StatusConfig{
			Call:    Call{Path: "/job/{args.name}/{job.id}/api/json"},
			Field:   `= body.building ? "BUILDING" : body.result`,
			States:  map[string]string{"BUILDING": "working", "SUCCESS": "succeeded", "FAILURE": "tool_error", "ABORTED": "cancelled"},
			Message: `= "build #" + string(body.number)`,
		},
		Cancel: &Call{Path: "/job/{args.name}/{job.id}/stop"},
	}
}

func TestQueuedSubmission(t *testing.T) {
	var mu sync.Mutex
	queueAnswer := `{"why":"Waiting for next available executor","executable":null}`
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, testBackend(), queueJob())
	f.a.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f.on("POST", "/job/deploy/buildWithParameters", withHeader(jsonResponder(201, ``), "Location", testBase+"/queue/item/7/"))
	f.on("GET", "/queue/item/7/api/json", func(*http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		return httpmock.NewStringResponse(200, queueAnswer), nil
	})
	f.on("GET", "/job/deploy/45/api/json", jsonResponder(200, `{"building":true,"result":null,"number":45}`))

	ref, err := f.a.Start(t.Context(), startReq(map[string]any{"name": "deploy", "branch": "main"}))
	if err != nil {
		t.Fatal(err)
	}
	if ref.ID != "7" {
		t.Fatalf("ref %+v, want the queue item 7 until the build is known", ref)
	}
	obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
	if err != nil || obs[0].Err != nil {
		t.Fatal(err, obs[0].Err)
	}
	if o := obs[0]; o.State != adapters.StateWorking || o.Message != "queued at the backend: Waiting for next available executor" || o.Ref != nil {
		t.Fatalf("queued observation %+v", o)
	}
	if err := f.a.Cancel(t.Context(), ref); !errors.Is(err, adapters.ErrCancelRefused) || !strings.Contains(err.Error(), "still queued") {
		t.Errorf("cancel while queued = %v, want a refusal saying it is queued", err)
	}

	mu.Lock()
	queueAnswer = `{"why":null,"executable":{"number":45,"url":"` + testBase + `/job/deploy/45/"}}`
	mu.Unlock()
	obs, err = f.a.Poll(t.Context(), []adapters.JobRef{ref})
	if err != nil || obs[0].Err != nil {
		t.Fatal(err, obs[0].Err)
	}
	o := obs[0]
	if o.Ref == nil || o.Ref.ID != "45" {
		t.Fatalf("observation after the queue %+v, want the build's reference 45", o)
	}
	if o.State != adapters.StateWorking || o.Message != "build #45" {
		t.Errorf("observation %+v, want the build observed at once", o)
	}
	// The new reference addresses the build: its cancel goes to the build.
	f.on("POST", "/job/deploy/45/stop", jsonResponder(200, ``))
	if err := f.a.Cancel(t.Context(), *o.Ref); err != nil {
		t.Errorf("cancel of the build: %v", err)
	}

	// What becomes of a queued request that never becomes a job:
	// TestQueuedRequestNeverStarted (queue_test.go).
}

func TestFindSearchesAList(t *testing.T) {
	job := testJob()
	job.Find = &FindConfig{
		Call:  Call{Method: "POST", Path: "/jobs/search", Body: map[string]any{"label": "cid={correlation_id}", "team": "{args.project}"}},
		Field: `= body.items.filter(j, j.labels.cid == correlation_id).map(j, j.name)`,
	}
	backend := testBackend()
	lag := time.Duration(0)
	backend.ListingLag = &lag
	tests := []struct {
		name, answer string
		found        bool
		id           string
		wantErr      error
	}{
		{"one", `{"items":[{"name":"a","labels":{"cid":"other"}},{"name":"job-9","labels":{"cid":"corr-1"}}]}`, true, "job-9", nil},
		{"none", `{"items":[{"name":"a","labels":{"cid":"other"}}]}`, false, "", nil},
		{"two", `{"items":[{"name":"x","labels":{"cid":"corr-1"}},{"name":"y","labels":{"cid":"corr-1"}}]}`, false, "", adapters.ErrJobUnaddressable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, backend, job)
			f.on("POST", "/jobs/search", jsonResponder(200, tt.answer))
			ref, found, err := f.a.Find(t.Context(), startReq(map[string]any{"project": "p"}))
			if !errors.Is(err, tt.wantErr) || found != tt.found || ref.ID != tt.id {
				t.Fatalf("Find = %+v %v %v, want %q %v %v", ref, found, err, tt.id, tt.found, tt.wantErr)
			}
			if body := f.requests()[0].Body; body != `{"label":"cid=corr-1","team":"p"}` {
				t.Errorf("search body %s", body)
			}
		})
	}
}

func TestScriptWarnings(t *testing.T) {
	job := testJob()
	job.Start.Body = map[string]any{
		"script":  "#!/bin/bash\necho {args.branch}\necho {= shell_quote(args.project)}",
		"command": []any{"sh", "-c", "make {= args.target}"},
		"job":     map[string]any{"name": "{args.project}", "note": "#!/bin/sh\nrun {= shell_quote(args.note)}"},
	}
	err := job.Warnings()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{
		"start.body.script: argument branch is interpolated unquoted into a script",
		"start.body.command.2: argument target is interpolated unquoted",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Warnings() = %q, want %q", msg, want)
		}
	}
	for _, not := range []string{"argument project", "argument note", "job.name"} {
		if strings.Contains(msg, not) {
			t.Errorf("Warnings() = %q, want nothing about %s", msg, not)
		}
	}
	if err := job.Validate(); err != nil {
		t.Errorf("a warning is not an error: Validate() = %v", err)
	}
}

// TestStatesWarning: a states table that maps nothing to succeeded is
// warned about at status.states (no job could end successfully); one that
// does is not.
func TestStatesWarning(t *testing.T) {
	job := testJob()
	job.Status.States = map[string]string{"queued": "working", "running": "working", "finished": "tool_error", "failed": "tool_error"}
	err := job.Warnings()
	var fe *adapters.FieldError
	if !errors.As(err, &fe) || fe.Path != "status.states" || !strings.Contains(fe.Err.Error(), "no status value maps to succeeded") {
		t.Errorf("Warnings() = %v, want one at status.states saying that nothing maps to succeeded", err)
	}
	if err := job.Validate(); err != nil {
		t.Errorf("a warning is not an error: Validate() = %v", err)
	}
	if good := testJob(); good.Warnings() != nil {
		err := good.Warnings()
		t.Errorf("Warnings() of a job whose states map a success = %v, want none", err)
	}
}

func TestTraceShowsRequestsAnswersAndRules(t *testing.T) {
	var mu sync.Mutex
	var events []Event
	f := newFixture(t, testBackend(), testJob())
	f.a.trace = func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, `{"status":"running","message":"half way","token":"`+testSecret+`"}`))
	if _, err := f.a.Poll(context.Background(), []adapters.JobRef{testRef("job-1")}); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, e := range events {
		all.WriteString(e.Call + " " + e.Kind + ": " + e.Text + "\n")
	}
	got := all.String()
	for _, want := range []string{
		"status answer: HTTP 200",
		`status rule: status.field status → "running" → working`,
		`status rule: status.message message → "half way"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("trace does not contain %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, testSecret) {
		t.Errorf("trace shows the secret:\n%s", got)
	}
}

// TestRespondAndFindOutcomes: the respond and find calls read their answers
// through their own rules too.
func TestRespondAndFindOutcomes(t *testing.T) {
	gone := `{"error":{"code":"RUN_NOT_FOUND","message":"run 7 does not exist"}}`
	t.Run("respond to a vanished job is not an error", func(t *testing.T) {
		job := testJob()
		job.Respond.Outcomes = []Outcome{{Status: []int{400}, When: `body.error.code == "RUN_NOT_FOUND"`, Is: "not_found"}}
		f := newFixture(t, testBackend(), job)
		f.on("POST", "/jobs/job-1/answers", jsonResponder(400, gone))
		if err := f.a.Respond(t.Context(), testRef("job-1"), map[string]adapters.Answer{"q": {Action: "accept"}}); err != nil {
			t.Fatalf("Respond = %v, want nil: the job no longer waits", err)
		}
	})
	t.Run("a refused answer says why", func(t *testing.T) {
		job := testJob()
		job.Respond.Outcomes = []Outcome{{Status: []int{200}, When: `body.accepted == false`, Is: "refused", Message: "reason"}}
		f := newFixture(t, testBackend(), job)
		f.on("POST", "/jobs/job-1/answers", jsonResponder(200, `{"accepted":false,"reason":"the approval window has closed"}`))
		err := f.a.Respond(t.Context(), testRef("job-1"), map[string]adapters.Answer{"q": {Action: "accept"}})
		wantText(t, err, "POST /api/v1/jobs/job-1/answers answered 200", "the approval window has closed")
	})
	t.Run("find: an error answer that means no such job", func(t *testing.T) {
		job := testJob()
		job.Find.Outcomes = []Outcome{{Status: []int{400}, When: `body.error.code == "RUN_NOT_FOUND"`, Is: "not_found"}}
		backend := testBackend()
		lag := time.Duration(0)
		backend.ListingLag = &lag
		f := newFixture(t, backend, job)
		f.on("GET", "/jobs", jsonResponder(400, gone))
		ref, found, err := f.a.Find(t.Context(), startReq(map[string]any{"project": "p"}))
		if err != nil || found {
			t.Fatalf("Find = %+v %v %v, want not found", ref, found, err)
		}
	})
}
