package rest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/jobbridge/jobbridge/adapters"
)

// TestQueuedRequestNeverStarted: a queued request the backend cancels,
// refuses or drops, or that stays queued past job_id.queue.timeout, is
// reported as never started (adapters.ErrNeverStarted, in a CallError with
// the call and the backend's words), not as a failed job: the lifecycle
// ends the task cancelled when it asked to cancel, else completed with
// isError. A queue item that is gone is also not found, so that the
// tool's missing_grace applies.
func TestQueuedRequestNeverStarted(t *testing.T) {
	for _, tt := range []struct {
		name     string
		outcomes []Outcome
		status   int
		answer   string
		late     bool // polled after job_id.queue.timeout
		notFound bool
		want     adapters.CallError
	}{
		{
			name:     "cancelled in the queue, in the rule's words",
			outcomes: []Outcome{{When: "body.cancelled", Is: "cancelled", Message: `= "cancelled in the queue"`}},
			status:   200, answer: `{"cancelled":true,"executable":null}`,
			want: adapters.CallError{Class: adapters.ProblemError, Method: "GET", Path: "/api/v1/queue/item/7/api/json", Status: 200, Message: "cancelled in the queue"},
		},
		{
			name:     "cancelled in the queue, without a message",
			outcomes: []Outcome{{When: "body.cancelled", Is: "cancelled"}},
			status:   200, answer: `{"cancelled":true,"executable":null,"why":null}`,
			want: adapters.CallError{Class: adapters.ProblemError, Method: "GET", Path: "/api/v1/queue/item/7/api/json", Status: 200, Message: "the queued request was cancelled"},
		},
		{
			name:     "refused by the backend, in its words",
			outcomes: []Outcome{{Status: []int{409}, Is: "refused"}},
			status:   409, answer: `{"message":"the pipeline is disabled"}`,
			want: adapters.CallError{Class: adapters.ProblemError, Method: "GET", Path: "/api/v1/queue/item/7/api/json", Status: 409, Message: "the pipeline is disabled"},
		},
		{
			name:   "dropped: the queue item is gone",
			status: 404, answer: `{"message":"no such queue item"}`, notFound: true,
			want: adapters.CallError{Class: adapters.ProblemNotFound, Method: "GET", Path: "/api/v1/queue/item/7/api/json", Status: 404,
				Message: "no such queue item; the queue item is gone and no job was ever named for it"},
		},
		{
			name:     "dropped, as a not_found rule reads it",
			outcomes: []Outcome{{Status: []int{200}, When: `body._class == "hudson.model.Queue$LeftItem" && !has(body.executable.number)`, Is: "not_found", Message: `= "left the queue without a build"`}},
			status:   200, answer: `{"_class":"hudson.model.Queue$LeftItem","executable":{}}`, notFound: true,
			want: adapters.CallError{Class: adapters.ProblemNotFound, Method: "GET", Path: "/api/v1/queue/item/7/api/json", Status: 200,
				Message: "left the queue without a build; the queue item is gone and no job was ever named for it"},
		},
		{
			name:   "still queued after job_id.queue.timeout",
			status: 200, answer: `{"why":"Waiting for next available executor","executable":null}`, late: true,
			want: adapters.CallError{Class: adapters.ProblemError,
				Message: "the job was still queued at the backend 1h0m0s after its submission (job_id.queue.timeout), so it never started (queue item 7)"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := queueJob()
			job.JobID.Queue.Outcomes = tt.outcomes
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			f := newFixture(t, testBackend(), job)
			f.a.now = func() time.Time { return now }
			f.on("POST", "/job/deploy/buildWithParameters", withHeader(jsonResponder(201, ``), "Location", testBase+"/queue/item/7/"))
			f.on("GET", "/queue/item/7/api/json", jsonResponder(tt.status, tt.answer))
			ref, err := f.a.Start(t.Context(), startReq(map[string]any{"name": "deploy", "branch": "main"}))
			if err != nil {
				t.Fatal(err)
			}
			if tt.late {
				now = now.Add(2 * time.Hour)
			}
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
			if err != nil {
				t.Fatal(err)
			}
			o := obs[0]
			if o.State != 0 || o.Error != nil || o.Ref != nil {
				t.Errorf("observation %+v; want only Err set (never a failed job)", o)
			}
			if !errors.Is(o.Err, adapters.ErrNeverStarted) {
				t.Fatalf("Err = %v; want it to wrap ErrNeverStarted", o.Err)
			}
			if got := errors.Is(o.Err, adapters.ErrJobNotFound); got != tt.notFound {
				t.Errorf("Err wraps ErrJobNotFound: %v, want %v", got, tt.notFound)
			}
			var ce *adapters.CallError
			if !errors.As(o.Err, &ce) {
				t.Fatalf("Err = %T %v; want a *CallError", o.Err, o.Err)
			}
			got := *ce
			got.Err = nil
			if got != tt.want {
				t.Errorf("CallError = %+v\nwant          %+v", got, tt.want)
			}
			if p := adapters.ProblemOf(o.Err); p.Class != tt.want.Class {
				t.Errorf("ProblemOf(Err).Class = %s, want %s", p.Class, tt.want.Class)
			}
		})
	}
}

// A queued request cancelled in the queue after the task's own cancel: the
// cancel goes to job_id.queue.cancel, nothing is sent to the build's
// cancel, and the queue's answer is then reported as never started.
func TestQueueCancelHonoured(t *testing.T) {
	job := queueJob()
	job.JobID.Queue.Outcomes = []Outcome{{When: "body.cancelled", Is: "cancelled", Message: `= "cancelled in the queue"`}}
	job.JobID.Queue.Cancel = &Call{Method: "POST", Path: "/queue/cancelItem", Query: map[string]string{"id": "{job.id}"},
		Outcomes: []Outcome{{Status: []int{302, 204}, Is: "success"}}}
	f := newFixture(t, testBackend(), job)
	cancelled := false
	f.on("POST", "/job/deploy/buildWithParameters", withHeader(jsonResponder(201, ``), "Location", testBase+"/queue/item/7/"))
	f.on("POST", "/queue/cancelItem", func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("id") != "7" {
			return httpmock.NewStringResponse(404, ""), nil
		}
		cancelled = true
		return httpmock.NewStringResponse(204, ""), nil
	})
	f.on("GET", "/queue/item/7/api/json", func(*http.Request) (*http.Response, error) {
		if cancelled {
			return httpmock.NewStringResponse(200, `{"cancelled":true,"executable":null}`), nil
		}
		return httpmock.NewStringResponse(200, `{"cancelled":false,"why":"Waiting","executable":null}`), nil
	})
	ref, err := f.a.Start(t.Context(), startReq(map[string]any{"name": "deploy", "branch": "main"}))
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref}); err != nil || obs[0].State != adapters.StateWorking {
		t.Fatalf("before the cancel: %+v %v; want working", obs, err)
	}
	if err := f.a.Cancel(t.Context(), ref); err != nil {
		t.Fatalf("Cancel while queued: %v", err)
	}
	obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
	if err != nil {
		t.Fatal(err)
	}
	if o := obs[0]; !errors.Is(o.Err, adapters.ErrNeverStarted) || errors.Is(o.Err, adapters.ErrJobNotFound) || o.State != 0 ||
		o.Err.Error() != "GET /api/v1/queue/item/7/api/json answered 200: cancelled in the queue" {
		t.Errorf("after the honoured cancel: %+v; want never started, in the rule's words", o)
	}
}

// `is: cancelled` is an outcome of the queue call only.
func TestQueueOutcomeCancelledValidation(t *testing.T) {
	job := queueJob()
	job.JobID.Queue.Outcomes = []Outcome{{When: "body.cancelled", Is: "cancelled"}}
	if err := job.Validate(); err != nil {
		t.Fatalf("Validate() = %v; want is: cancelled accepted in job_id.queue.outcomes", err)
	}
	job.Status.Outcomes = []Outcome{{Is: "cancelled"}}
	want := `status.outcomes[0].is: "cancelled" is not an outcome of a status call`
	if err := job.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate() = %v; want %q", err, want)
	}
}

// A queue item that is gone may have become a job while nobody asked (a
// backend forgets items that left its queue): with a find call, the job is
// looked for by correlation ID and observed, not called never started.
func TestGoneQueueItemIsLookedFor(t *testing.T) {
	job := queueJob()
	job.Find = &FindConfig{
		Call:  Call{Path: "/job/{args.name}/api/json", Query: map[string]string{"tree": "builds[number,correlation]"}},
		Field: `= body.builds.filter(b, b.correlation == correlation_id).map(b, b.number)`,
	}
	job.Start.Query["CORRELATION"] = "{correlation_id}"
	for _, tt := range []struct {
		name   string
		builds string
	}{
		{"found: the build is observed", `{"builds":[{"number":45,"correlation":"corr-1"},{"number":44,"correlation":"other"}]}`},
		{"not found: never started", `{"builds":[{"number":44,"correlation":"other"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), job)
			f.a.listingLag = 0
			f.on("POST", "/job/deploy/buildWithParameters", withHeader(jsonResponder(201, ``), "Location", testBase+"/queue/item/7/"))
			f.on("GET", "/queue/item/7/api/json", jsonResponder(404, `{"message":"no such queue item"}`))
			f.on("GET", "/job/deploy/api/json", jsonResponder(200, tt.builds))
			f.on("GET", "/job/deploy/45/api/json", jsonResponder(200, `{"building":true,"result":null,"number":45}`))
			ref, err := f.a.Start(t.Context(), startReq(map[string]any{"name": "deploy", "branch": "main"}))
			if err != nil {
				t.Fatal(err)
			}
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
			if err != nil {
				t.Fatal(err)
			}
			o := obs[0]
			if strings.HasPrefix(tt.name, "found") {
				if o.Err != nil || o.Ref == nil || o.Ref.ID != "45" || o.State != adapters.StateWorking || o.Message != "build #45" {
					t.Errorf("observation %+v; want build 45 observed under its own reference", o)
				}
				return
			}
			if !errors.Is(o.Err, adapters.ErrNeverStarted) || !errors.Is(o.Err, adapters.ErrJobNotFound) || o.Ref != nil {
				t.Errorf("observation %+v; want the queue item gone, never started", o)
			}
		})
	}
}
