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
	// The fake's listing lags its submissions, as many job APIs' do.
	srv := jobapi.New(&jobapi.Options{ListingLag: 300 * time.Millisecond})
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the job API fake: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	adaptertest.Run(t, adaptertest.Harness{
		ListingLag: defaultListingLag,
		New:        func(t *testing.T) adapters.Adapter { return newFakeAdapter(t, BackendConfig{BaseURL: base}) },
		Job:        fakeJob,
		Purge:      func(_ *testing.T, ref adapters.JobRef) { srv.Purge(ref.ID) },
		Answer: func(string, adapters.InputRequest) adapters.Answer {
			return adapters.Answer{Action: "accept", Content: map[string]any{"sure": true}}
		},
		Throttle: func(_ *testing.T, d time.Duration) func() {
			return srv.InjectUntil(jobapi.Fault{Status: http.StatusTooManyRequests, RetryAfter: d})
		},
		Fail: func(_ *testing.T, status int) func() {
			return srv.InjectUntil(jobapi.Fault{Status: status})
		},
	})
}

// TestRuntimeAnswersAgainstJobAPIFake drives the fake into the answers the
// adapter must report truthfully: a created job it cannot address, a
// refused start with the backend's message, an unreadable status, a cancel
// that comes too late or is refused.
func TestRuntimeAnswersAgainstJobAPIFake(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any // merged into a RunsLong job's arguments
		fault   *jobapi.Fault
		op      string // "start", "poll" or "cancel"
		want    error
		text    []string
		jobs    int  // jobs the fake created for the correlation ID
		waitEnd bool // wait for the job to succeed before the op
	}{
		{
			name:  "201 without a Location",
			fault: &jobapi.Fault{Method: http.MethodPost, Path: "/jobs", Status: http.StatusCreated, AfterHandling: true, Body: `{"accepted":true}`},
			op:    "start", want: adapters.ErrJobUnaddressable, text: []string{"no Location header", "HTTP 201", `{"accepted":true}`}, jobs: 1,
		},
		{
			name:  "Location on another origin",
			fault: &jobapi.Fault{Method: http.MethodPost, Path: "/jobs", Status: http.StatusCreated, AfterHandling: true, Location: "http://elsewhere.example/jobs/{id}"},
			op:    "start", want: adapters.ErrJobUnaddressable, text: []string{"http://elsewhere.example/jobs/job-000001", "outside base_url"}, jobs: 1,
		},
		{
			name:  "refused with a JSON message",
			fault: &jobapi.Fault{Method: http.MethodPost, Path: "/jobs", Status: http.StatusUnprocessableEntity, Body: `{"message":"quota exceeded for team a"}`},
			op:    "start", want: errPlain, text: []string{"answered 422", "quota exceeded for team a"},
		},
		{
			name: "refused by the fake's own validation",
			args: map[string]any{"outcome": "maybe"},
			op:   "start", want: errPlain, text: []string{"answered 422", `outcome: unknown value "maybe"`},
		},
		{
			name:  "status answer without the status field",
			fault: &jobapi.Fault{Method: http.MethodGet, Path: "/jobs/", Status: http.StatusOK, Body: `{"id":"{id}","state":"running"}`},
			op:    "poll", want: adapters.ErrUnreadableStatus, text: []string{`no field "status"`, `"state":"running"`}, jobs: 1,
		},
		{
			name: "cancel of a finished job",
			args: map[string]any{"duration": 0},
			op:   "cancel", want: adapters.ErrAlreadyFinished, text: []string{"already finished", "answered 409", "succeeded"}, jobs: 1, waitEnd: true,
		},
		{
			name: "cancel refused while the job runs",
			args: map[string]any{"on_cancel": "refuse"},
			op:   "cancel", want: adapters.ErrCancelRefused, text: []string{"cannot be cancelled while it runs", "still working"}, jobs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, base := startFake(t)
			job := loadJob(t)
			job.Start.Body.(map[string]any)["on_cancel"] = "{args.on_cancel}"
			a, err := New("jobapi", BackendConfig{BaseURL: base, AllowNetworks: []string{"127.0.0.0/8"}},
				map[string]JobConfig{"job": job}, &Options{RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			req, _ := fakeJob(adaptertest.RunsLong)
			for k, v := range tt.args {
				req.Arguments[k] = v
			}
			req.CorrelationID = "corr-runtime"
			if tt.op == "start" && tt.fault != nil {
				srv.Inject(*tt.fault)
			}
			ref, err := a.Start(t.Context(), req)
			if tt.op != "start" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				if tt.waitEnd {
					waitFakeState(t, a, ref, adapters.StateSucceeded)
				}
				if tt.fault != nil {
					srv.Inject(*tt.fault)
				}
				switch tt.op {
				case "poll":
					obs, perr := a.Poll(t.Context(), []adapters.JobRef{ref})
					if perr != nil {
						t.Fatalf("Poll: %v", perr)
					}
					err = obs[0].Err
				case "cancel":
					err = a.Cancel(t.Context(), ref)
				}
			}
			checkKind(t, err, tt.want)
			wantText(t, err, tt.text...)
			if got := srv.Submissions(req.CorrelationID); got != tt.jobs {
				t.Errorf("the fake created %d jobs, want %d", got, tt.jobs)
			}
		})
	}
}

// checkKind checks that err wraps want and none of the other sentinels;
// errPlain wants an error wrapping none of them.
func checkKind(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	for _, k := range []error{
		adapters.ErrOutcomeUnknown, adapters.ErrJobUnaddressable, adapters.ErrThrottled, adapters.ErrUnreadableStatus,
		adapters.ErrAlreadyFinished, adapters.ErrCancelRefused, adapters.ErrJobNotFound,
	} {
		if got := errors.Is(err, k); got != (k == want) {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, k, got, k == want)
		}
	}
}

// waitFakeState polls until the job reaches want.
func waitFakeState(t *testing.T, a *Adapter, ref adapters.JobRef, want adapters.State) {
	t.Helper()
	for range 500 {
		obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
		if err == nil && obs[0].Err == nil && obs[0].State == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("job %s did not reach %v", ref.ID, want)
}

// TestStartAmbiguityAgainstJobAPIFake checks, against the fake's injected
// faults, that a start whose outcome is unknown is sent once and reported as
// unknown, that Find then reconciles it, and that an idempotency header
// makes retrying safe.
func TestStartAmbiguityAgainstJobAPIFake(t *testing.T) {
	tests := []struct {
		name         string
		idempotency  string
		fault        jobapi.Fault
		wantUnknown  bool
		wantThrottle bool
		wantPosts    int // requests the start sent
		wantJobs     int // jobs the fake created
	}{
		{name: "503 after creating", fault: jobapi.Fault{Status: 503, AfterHandling: true}, wantUnknown: true, wantPosts: 1, wantJobs: 1},
		{name: "dropped after creating", fault: jobapi.Fault{Drop: true, AfterHandling: true}, wantUnknown: true, wantPosts: 1, wantJobs: 1},
		{name: "503 before creating", fault: jobapi.Fault{Status: 503}, wantUnknown: true, wantPosts: 1, wantJobs: 0},
		{name: "429", fault: jobapi.Fault{Status: 429, RetryAfter: 2 * time.Second}, wantThrottle: true, wantPosts: 1, wantJobs: 0},
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
			if d, ok := adapters.RetryAfter(err); ok != tt.wantThrottle || ok && d != 2*time.Second {
				t.Errorf("Start error = %v; throttled %v (retry after %v), want %v (2s)", err, ok, d, tt.wantThrottle)
			}
			got := []int{posts, srv.Submissions(req.CorrelationID)}
			if diff := cmp.Diff([]int{tt.wantPosts, tt.wantJobs}, got); diff != "" {
				t.Errorf("[requests sent, jobs created] mismatch (-want +got):\n%s", diff)
			}

			// Long after the submission: the listing has caught up.
			req.SubmittedAt = time.Now().Add(-2 * time.Minute)
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
