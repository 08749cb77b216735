package rest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// startFake serves a jobapi fake on loopback for the test.
func startFake(t *testing.T) (*jobapi.Server, string) {
	t.Helper()
	srv := jobapi.New(nil)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the job API fake: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, base
}

// newFakeAdapter returns an adapter for the fake, whose loopback address it
// allows explicitly (the adapter refuses loopback by default).
func newFakeAdapter(t *testing.T, backend BackendConfig) *Adapter {
	t.Helper()
	backend.MaxRetries = new(2)
	backend.AllowNetworks = []string{"127.0.0.0/8"}
	a, err := New("jobapi", backend, map[string]JobConfig{"job": loadJob(t)}, &Options{
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// fakeJob returns the arguments that script the fake into a job of kind.
func fakeJob(kind adaptertest.JobKind) (adapters.StartRequest, bool) {
	var args map[string]any
	switch kind {
	case adaptertest.Succeeds:
		args = map[string]any{"duration": 0.05, "outcome": "success", "output": "all good", "data": map[string]any{"n": 1}}
	case adaptertest.FailsWithToolError:
		args = map[string]any{"duration": 0.05, "outcome": "tool_error", "error_message": "tests failed"}
	case adaptertest.RunsLong:
		args = map[string]any{"duration": 3600}
	case adaptertest.AsksQuestion:
		args = map[string]any{"duration": 0.05, "questions": []any{map[string]any{
			"key": "approve", "message": "Deploy?",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}}},
		}}}
	default:
		return adapters.StartRequest{}, false
	}
	return adapters.StartRequest{Tool: "job", Arguments: args}, true
}

func TestContractAgainstJobAPIFake(t *testing.T) {
	srv, base := startFake(t)
	adaptertest.Run(t, adaptertest.Harness{
		New:   func(t *testing.T) adapters.Adapter { return newFakeAdapter(t, BackendConfig{BaseURL: base}) },
		Job:   fakeJob,
		Purge: func(_ *testing.T, ref adapters.JobRef) { srv.Purge(ref.ID) },
		Answer: func(string, adapters.InputRequest) adapters.Answer {
			return adapters.Answer{Action: "accept", Content: map[string]any{"sure": true}}
		},
	})
}

// TestStartAmbiguityAgainstJobAPIFake checks, against the fake's injected
// faults, that a start whose outcome is unknown is sent once and reported as
// unknown, that Find then reconciles it, and that an idempotency header
// makes retrying safe.
func TestStartAmbiguityAgainstJobAPIFake(t *testing.T) {
	tests := []struct {
		name        string
		idempotency string
		fault       jobapi.Fault
		wantUnknown bool
		wantPosts   int // requests the start sent
		wantJobs    int // jobs the fake created
	}{
		{name: "503 after creating", fault: jobapi.Fault{Status: 503, AfterHandling: true}, wantUnknown: true, wantPosts: 1, wantJobs: 1},
		{name: "dropped after creating", fault: jobapi.Fault{Drop: true, AfterHandling: true}, wantUnknown: true, wantPosts: 1, wantJobs: 1},
		{name: "503 before creating", fault: jobapi.Fault{Status: 503}, wantUnknown: true, wantPosts: 1, wantJobs: 0},
		{name: "429", fault: jobapi.Fault{Status: 429}, wantUnknown: true, wantPosts: 1, wantJobs: 0},
		{
			name: "idempotent retry after 503", idempotency: "Idempotency-Key",
			fault: jobapi.Fault{Status: 503, AfterHandling: true}, wantPosts: 2, wantJobs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, base := startFake(t)
			a := newFakeAdapter(t, BackendConfig{BaseURL: base, IdempotencyHeader: tt.idempotency})
			tt.fault.Method, tt.fault.Path = http.MethodPost, "/jobs"
			srv.Inject(tt.fault)
			req, _ := fakeJob(adaptertest.Succeeds)
			req.CorrelationID = "corr-" + t.Name()

			before := srv.Requests()
			ref, err := a.Start(t.Context(), req)
			posts := srv.Requests() - before
			if got := errors.Is(err, adapters.ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Fatalf("Start error = %v; unknown outcome %v, want %v", err, got, tt.wantUnknown)
			}
			got := []int{posts, srv.Submissions(req.CorrelationID)}
			if diff := cmp.Diff([]int{tt.wantPosts, tt.wantJobs}, got); diff != "" {
				t.Errorf("[requests sent, jobs created] mismatch (-want +got):\n%s", diff)
			}

			found, ok, err := a.Find(t.Context(), req)
			if err != nil || ok != (tt.wantJobs == 1) {
				t.Fatalf("Find = found %v, err %v; want found %v", ok, err, tt.wantJobs == 1)
			}
			if !tt.wantUnknown && found.ID != ref.ID {
				t.Errorf("Find returned job %q, Start %q", found.ID, ref.ID)
			}
		})
	}
}

func TestPollRetriesAgainstJobAPIFake(t *testing.T) {
	srv, base := startFake(t)
	a := newFakeAdapter(t, BackendConfig{BaseURL: base})
	req, _ := fakeJob(adaptertest.RunsLong)
	req.CorrelationID = "corr-poll"
	ref, err := a.Start(t.Context(), req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	srv.Inject(jobapi.Fault{Method: http.MethodGet, Path: "/jobs/", Times: 2, Status: 503})
	obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
	if err != nil || obs[0].Err != nil {
		t.Fatalf("Poll after two 503s = %v, %v; want an observation", err, obs[0].Err)
	}
	if obs[0].State != adapters.StateWorking {
		t.Errorf("state = %v, want working", obs[0].State)
	}

	srv.Inject(jobapi.Fault{Method: http.MethodGet, Path: "/jobs/", Times: 3, Status: 503})
	obs, _ = a.Poll(t.Context(), []adapters.JobRef{ref})
	if obs[0].Err == nil {
		t.Errorf("Poll after three 503s with 2 retries observed %v, want an error", obs[0].State)
	}
}
