package awsbatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

// quick is a script that runs at once for d and exits with code exit.
func quick(d time.Duration, exit int) string {
	return fmt.Sprintf("submitted=0s,runnable=0s,starting=0s,running=%s,exit=%d", d, exit)
}

func TestContract(t *testing.T) {
	c := &clock{} // real time: the suite waits for jobs to finish
	f := newFixture(t, c, BackendConfig{DescribeInterval: minDescribeInterval}, &batchfake.Options{ListingLag: 300 * time.Millisecond, TerminateGrace: -1})
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) adapters.Adapter {
			a := f.adapter(BackendConfig{Region: "eu-west-1", DescribeInterval: minDescribeInterval, DescribeRate: 100, SubmitRate: 50}, map[string]JobConfig{"job": testTool()})
			return a
		},
		ListingLag: defaultListingLag,
		Job: func(kind adaptertest.JobKind) (adapters.StartRequest, bool) {
			switch kind {
			case adaptertest.Succeeds:
				return job(quick(50*time.Millisecond, 0)), true
			case adaptertest.FailsWithToolError:
				return job(quick(50*time.Millisecond, 2)), true
			case adaptertest.RunsLong:
				return job(quick(time.Hour, 0)), true
			}
			return adapters.StartRequest{}, false // Batch jobs ask no questions
		},
		Purge: func(_ *testing.T, ref adapters.JobRef) {
			f.fake.Purge(ref.ID)
			// Let the poller's cached description age out.
			c.Advance(time.Second)
		},
		Throttle: func(_ *testing.T, d time.Duration) func() {
			f.fake.Inject(batchfake.Fault{Times: 1 << 20, Status: http.StatusTooManyRequests, RetryAfter: d})
			return f.fake.ClearFaults
		},
		Fail: func(_ *testing.T, status int) func() {
			f.fake.Inject(batchfake.Fault{Times: 1 << 20, Status: status})
			return f.fake.ClearFaults
		},
		Now: c.Now,
	})
}

// TestStatusMapping checks the observation of a job in every Batch state,
// with Batch's stoppedAt as FinishedAt once it has finished.
func TestStatusMapping(t *testing.T) {
	tools := map[string]JobConfig{"job": testTool()}
	retry := testTool()
	retry.RetryAttempts = 3
	tools["retry"] = retry
	timeout := testTool()
	timeout.TimeoutSeconds = 60
	tools["timeout"] = timeout
	after := testTool()
	after.DependsOn = []Dependency{{JobID: "{args.after}"}}
	tools["after"] = after

	tests := []struct {
		name    string
		tool    string
		script  string
		advance time.Duration
		act     func(f *fixture, id string)
		want    adapters.Observation
	}{
		{name: "submitted", script: "submitted=1h",
			want: adapters.Observation{State: adapters.StateWorking, Message: "submitted; waiting for the Batch scheduler"}},
		{name: "pending", script: "submitted=0s,pending=1h",
			want: adapters.Observation{State: adapters.StateWorking, Message: "pending"}},
		{name: "pending on a dependency", tool: "after", script: "submitted=0s",
			want: adapters.Observation{State: adapters.StateWorking, Message: "pending: waiting for the jobs it depends on"}},
		{name: "runnable without capacity", script: "submitted=0s,runnable=1h,runnable_reason=CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", advance: time.Minute,
			want: adapters.Observation{State: adapters.StateWorking, Message: "runnable: waiting for capacity in queue default; CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}},
		{name: "starting", script: "submitted=0s,runnable=0s,starting=1h",
			want: adapters.Observation{State: adapters.StateWorking, Message: "starting: placing the container and pulling its image"}},
		{name: "running", script: quick(time.Hour, 0), advance: 90 * time.Second,
			want: adapters.Observation{State: adapters.StateWorking, Message: "running for 1m30s"}},
		{name: "running a retry", tool: "retry", script: quick(10*time.Second, 1), advance: 15 * time.Second,
			want: adapters.Observation{State: adapters.StateWorking, Message: "running (attempt 2 of 3; attempt 1 of 3 failed with exit code 1)"}},
		{name: "succeeded", script: quick(time.Second, 0), advance: time.Minute,
			want: adapters.Observation{State: adapters.StateSucceeded, Message: "succeeded", FinishedAt: t0.Add(time.Second)}},
		{name: "failed with an exit code", script: quick(time.Second, 3), advance: time.Minute,
			want: adapters.Observation{State: adapters.StateToolError, Message: "failed: Essential container in task exited (exit code 3)", FinishedAt: t0.Add(time.Second)}},
		{name: "failed after retries", tool: "retry", script: quick(time.Second, 4), advance: time.Minute,
			want: adapters.Observation{State: adapters.StateToolError, Message: "failed: Essential container in task exited (exit code 4) after 3 attempts", FinishedAt: t0.Add(3 * time.Second)}},
		{name: "timed out", tool: "timeout", script: quick(time.Hour, 0), advance: 2 * time.Minute,
			want: adapters.Observation{State: adapters.StateToolError, Message: "failed: Job attempt duration exceeded timeout", FinishedAt: t0.Add(time.Minute)}},
		{name: "terminated by an operator", script: quick(time.Hour, 0), advance: time.Minute,
			act: func(f *fixture, id string) {
				if _, err := f.client.TerminateJob(f.t.Context(), &batch.TerminateJobInput{JobId: &id, Reason: aws.String("operator: wrong input")}); err != nil {
					f.t.Fatalf("TerminateJob: %v", err)
				}
				f.clock.Advance(30 * time.Second) // the SIGTERM grace
			},
			want: adapters.Observation{State: adapters.StateCancelled, Message: "operator: wrong input", FinishedAt: t0.Add(90 * time.Second)}},
		{name: "cancelled while runnable", script: "submitted=0s,runnable=1h", advance: time.Minute,
			act: func(f *fixture, id string) {
				if _, err := f.client.CancelJob(f.t.Context(), &batch.CancelJobInput{JobId: &id, Reason: aws.String("queue drained")}); err != nil {
					f.t.Fatalf("CancelJob: %v", err)
				}
			},
			want: adapters.Observation{State: adapters.StateCancelled, Message: "queue drained", FinishedAt: t0.Add(time.Minute)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
			f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, tools)
			var afterID string
			if tc.tool == "after" {
				afterID = f.start(job("submitted=0s,runnable=1h")).ID
			}
			req := job(tc.script)
			if tc.tool != "" {
				req.Tool = tc.tool
				req.Arguments["after"] = afterID
			}
			ref := f.start(req)
			f.clock.Advance(tc.advance)
			if tc.act != nil {
				tc.act(f, ref.ID)
				f.clock.Advance(defaultDescribeInterval)
			}
			got := f.poll(ref)[0]
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Observation{}, "Result")); diff != "" {
				t.Errorf("observation (-want +got):\n%s", diff)
			}
			if got.State.Terminal() != (got.Result != nil) {
				t.Errorf("state %v with result %+v: a finished job needs a result, a working one none", got.State, got.Result)
			}
		})
	}
}

func TestResultContent(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	f.a = f.adapter(BackendConfig{Region: "eu-west-1", ConsoleURL: "http://127.0.0.1:1/batch?region={region}#jobs/detail/{job_id}"}, map[string]JobConfig{"job": testTool()})
	ok := f.start(job(quick(time.Minute, 0)))
	bad := f.start(job(quick(time.Minute, 5)))
	f.clock.Advance(2 * time.Minute)
	obs := f.poll(ok, bad)

	console := "http://127.0.0.1:1/batch?region=eu-west-1#jobs/detail/"
	start, stop := t0.Format(time.RFC3339Nano), t0.Add(time.Minute).Format(time.RFC3339Nano)
	want := []adapters.Observation{{
		State:      adapters.StateSucceeded,
		Message:    "succeeded",
		Links:      []adapters.Link{{Title: "AWS Batch console", URL: console + ok.ID}},
		FinishedAt: t0.Add(time.Minute),
		Result: &adapters.Result{
			Text: "AWS Batch job jb-Test-test (" + ok.ID + ") SUCCEEDED: Essential container in task exited. Exit code 0 after 1 attempt." +
				" Log stream: sleeper/default/00000001000000000000000000000001. Console: " + console + ok.ID,
			Structured: map[string]any{
				"job_id": ok.ID, "job_name": "jb-Test-test", "job_arn": "arn:aws:batch:eu-west-1:123456789012:job/" + ok.ID,
				"job_queue": "arn:aws:batch:eu-west-1:123456789012:job-queue/default", "status": "SUCCEEDED",
				"status_reason": "Essential container in task exited", "region": "eu-west-1", "attempts": 1, "exit_code": 0,
				"log_stream": "sleeper/default/00000001000000000000000000000001",
				"created_at": start, "started_at": start, "stopped_at": stop, "console_url": console + ok.ID,
			},
		},
	}, {
		State:      adapters.StateToolError,
		Message:    "failed: Essential container in task exited (exit code 5)",
		Links:      []adapters.Link{{Title: "AWS Batch console", URL: console + bad.ID}},
		FinishedAt: t0.Add(time.Minute),
	}}
	// Names carry the test's correlation IDs; compare them by shape.
	for i := range obs {
		if r := obs[i].Result; r != nil {
			name, _ := r.Structured["job_name"].(string)
			r.Text = strings.ReplaceAll(r.Text, name, "jb-Test-test")
			r.Structured["job_name"] = "jb-Test-test"
		}
	}
	if diff := cmp.Diff(want[0], obs[0]); diff != "" {
		t.Errorf("succeeded job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1], obs[1], cmpopts.IgnoreFields(adapters.Observation{}, "Result")); diff != "" {
		t.Errorf("failed job (-want +got):\n%s", diff)
	}
	if r := obs[1].Result; r == nil || r.Structured["exit_code"] != 5 || !strings.Contains(r.Text, "Exit code 5 after 1 attempt") {
		t.Errorf("failed job's result = %+v, want exit code 5", r)
	}
}

func TestArrayJob(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	tool := testTool()
	tool.ArraySize = "{args.shards}"
	f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": tool})
	req := job("submitted=1s,runnable=0s,starting=0s,running=10s,stagger=10s,fail_children=1")
	req.Arguments["shards"] = 4
	ref := f.start(req)

	steps := []struct {
		at   time.Duration
		want adapters.Observation
	}{
		{0, adapters.Observation{State: adapters.StateWorking, Progress: &adapters.Progress{Done: 0, Total: 4},
			Message: "submitted; waiting for the Batch scheduler"}},
		{5 * time.Second, adapters.Observation{State: adapters.StateWorking, Progress: &adapters.Progress{Done: 0, Total: 4},
			Message: "array job: 0 of 4 children finished (0 succeeded, 0 failed), 1 running, 3 waiting"}},
		{25 * time.Second, adapters.Observation{State: adapters.StateWorking, Progress: &adapters.Progress{Done: 2, Total: 4},
			Message: "array job: 2 of 4 children finished (1 succeeded, 1 failed), 1 running, 1 waiting"}},
		{45 * time.Second, adapters.Observation{State: adapters.StateToolError, Progress: &adapters.Progress{Done: 4, Total: 4},
			Message: "failed: Array Child Job failed", FinishedAt: t0.Add(41 * time.Second)}}, // the last child's end
	}
	var elapsed time.Duration
	var last adapters.Observation
	for _, s := range steps {
		f.clock.Advance(s.at - elapsed)
		elapsed = s.at
		last = f.poll(ref)[0]
		if diff := cmp.Diff(s.want, last, cmpopts.IgnoreFields(adapters.Observation{}, "Result")); diff != "" {
			t.Errorf("at %v (-want +got):\n%s", s.at, diff)
		}
	}
	if r := last.Result; r == nil || !strings.Contains(r.Text, "Array of 4 children: 3 succeeded, 1 failed.") {
		t.Errorf("array result = %+v, want the children's tally", r)
	} else if arr, _ := r.Structured["array"].(map[string]any); arr["size"] != 4 {
		t.Errorf("structured array = %v, want size 4", r.Structured["array"])
	}

	t.Run("one child is a single job", func(t *testing.T) {
		req := job(quick(time.Second, 0))
		req.Arguments["shards"] = 1
		ref := f.start(req)
		d, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{ref.ID}})
		if err != nil || len(d.Jobs) != 1 || d.Jobs[0].ArrayProperties != nil {
			t.Errorf("array_size 1 submitted %+v (%v), want a single job", d, err)
		}
	})
}

// TestThrottlingStorm checks that DescribeJobs throttling never ends a task:
// each Poll fails at once with an error wrapping adapters.ErrThrottled (so
// that the bridge pauses the backend), the poller backs off exponentially,
// or for as long as a Retry-After asks, and asks nothing meanwhile, and it
// recovers when the storm ends.
func TestThrottlingStorm(t *testing.T) {
	type step struct {
		advance   time.Duration
		calls     int           // DescribeJobs calls so far
		throttled bool          // Poll fails
		retry     time.Duration // the pause it reports
	}
	tests := []struct {
		name       string
		retryAfter time.Duration
		steps      []step
	}{
		{name: "no retry-after", steps: []step{
			{3 * time.Second, 2, true, 0}, // asks, is throttled, backs off 0.75-1.25s
			{0, 2, true, 0},               // backing off: nothing asked
			{700 * time.Millisecond, 2, true, 0},
			{time.Minute, 3, true, 0}, // asks again, throttled again, backs off 1.5-2.5s
			{1400 * time.Millisecond, 3, true, 0},
			{time.Minute, 4, true, 0},  // the third and last 429
			{time.Minute, 5, false, 0}, // the storm is over
		}},
		{name: "retry-after longer than the backoff", retryAfter: 10 * time.Second, steps: []step{
			{3 * time.Second, 2, true, 10 * time.Second},
			{4 * time.Second, 2, true, 6 * time.Second},  // past any backoff, within the pause
			{6 * time.Second, 3, true, 10 * time.Second}, // the pause is over: asks, throttled again
			{10 * time.Second, 4, true, 10 * time.Second},
			{10 * time.Second, 5, false, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
			ref := f.start(job(quick(time.Hour, 0)))
			if o := f.poll(ref)[0]; o.Err != nil || o.State != adapters.StateWorking {
				t.Fatalf("before the storm: %+v", o)
			}
			f.fake.Inject(batchfake.Fault{Operation: batchfake.OpDescribeJobs, Times: 3, Status: http.StatusTooManyRequests, RetryAfter: tt.retryAfter})
			for i, s := range tt.steps {
				f.clock.Advance(s.advance)
				obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
				if got := f.describeCalls(); got != s.calls {
					t.Errorf("step %d: %d DescribeJobs calls, want %d", i, got, s.calls)
				}
				d, throttled := adapters.RetryAfter(err)
				switch {
				case s.throttled && (!throttled || obs != nil):
					t.Errorf("step %d: Poll = %v, %v; want no observations and an error wrapping adapters.ErrThrottled", i, obs, err)
				case s.throttled && !strings.Contains(err.Error(), "TooManyRequestsException"):
					t.Errorf("step %d: error %q does not name the throttling", i, err)
				case s.throttled && d != s.retry:
					t.Errorf("step %d: RetryAfter = %v, want %v", i, d, s.retry)
				case !s.throttled && (err != nil || obs[0].Err != nil || obs[0].State != adapters.StateWorking):
					t.Errorf("step %d: after the storm: %v, %v; want working", i, obs, err)
				}
			}
		})
	}
}

// TestThrottledDescribeReachesEveryPoll checks that when the one
// DescribeJobs call serving many concurrent polls is throttled, every one of
// them fails with adapters.ErrThrottled, and nothing else is asked.
func TestThrottledDescribeReachesEveryPoll(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	refs := make([]adapters.JobRef, 8)
	for i := range refs {
		refs[i] = f.start(job(quick(time.Hour, 0)))
	}
	f.fake.Inject(batchfake.Fault{Operation: batchfake.OpDescribeJobs, Status: http.StatusTooManyRequests, RetryAfter: 5 * time.Second})
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			_, errs[i] = f.a.Poll(t.Context(), []adapters.JobRef{ref})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if d, ok := adapters.RetryAfter(err); !ok || d != 5*time.Second {
			t.Errorf("poll %d: %v (retry after %v), want an error wrapping adapters.ErrThrottled asking for 5s", i, err, d)
		}
	}
	if got := f.describeCalls(); got != 1 {
		t.Errorf("%d DescribeJobs calls, want 1", got)
	}
}

func TestServerErrorsBackOff(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	ref := f.start(job(quick(time.Hour, 0)))
	f.fake.Inject(batchfake.Fault{Operation: batchfake.OpDescribeJobs, Status: http.StatusServiceUnavailable})
	if o := f.poll(ref)[0]; o.Err == nil || !strings.Contains(o.Err.Error(), "503") {
		t.Errorf("poll during a 503: %+v, want an error naming it", o)
	}
	if o := f.poll(ref)[0]; o.Err == nil || f.describeCalls() != 1 {
		t.Errorf("poll while backing off: %+v after %d calls, want an error and no new call", o, f.describeCalls())
	}
	f.clock.Advance(backoffMax)
	if o := f.poll(ref)[0]; o.Err != nil || o.State != adapters.StateWorking {
		t.Errorf("poll after the backoff: %+v, want working", o)
	}
}

func TestMissingJobs(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	hidden := f.start(job("hidden=5s,submitted=1h"))
	done := f.start(job(quick(time.Second, 0)))
	unknown := adapters.JobRef{ID: "00000000-0000-4000-8000-999999999999"}

	obs := f.poll(hidden, done, unknown)
	for i, o := range []adapters.Observation{obs[0], obs[2]} {
		if !errors.Is(o.Err, adapters.ErrJobNotFound) {
			t.Errorf("observation %d = %+v, want ErrJobNotFound", i, o)
		}
	}
	f.clock.Advance(10 * time.Second)
	obs = f.poll(hidden, done)
	if obs[0].Err != nil || obs[0].State != adapters.StateWorking {
		t.Errorf("the hidden job once visible: %+v, want working", obs[0])
	}
	if obs[1].State != adapters.StateSucceeded {
		t.Fatalf("finished job: %+v", obs[1])
	}
	f.fake.Purge(done.ID)
	f.clock.Advance(defaultDescribeInterval)
	if o := f.poll(done)[0]; !errors.Is(o.Err, adapters.ErrJobNotFound) {
		t.Errorf("purged job: %+v, want ErrJobNotFound", o)
	}
	if o := f.poll(adapters.JobRef{})[0]; o.Err == nil {
		t.Errorf("a reference without an ID: %+v, want an error", o)
	}
}

// TestCancelRunning checks that a cancel terminates a RUNNING job (CancelJob
// would do nothing to it) and that the next poll shows it cancelled.
func TestCancelRunning(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	ref := f.start(job(quick(time.Hour, 0)))
	f.clock.Advance(time.Minute)
	if o := f.poll(ref)[0]; o.State != adapters.StateWorking || !strings.HasPrefix(o.Message, "running") {
		t.Fatalf("before the cancel: %+v", o)
	}
	if err := f.a.Cancel(t.Context(), ref); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if got := f.fake.Calls(batchfake.OpTerminateJob); got != 1 {
		t.Errorf("TerminateJob calls = %d, want 1", got)
	}
	if got := f.fake.Calls(batchfake.OpCancelJob); got != 0 {
		t.Errorf("CancelJob calls = %d, want 0", got)
	}
	// No clock advance: the cancel invalidated the cached description.
	// The container got SIGTERM and has Batch's grace to exit.
	if o := f.poll(ref)[0]; o.State != adapters.StateWorking ||
		o.Message != "running for 1m0s; cancel requested: Batch sent the container SIGTERM and stops it once it exits or its stop timeout (30s by default) has passed" {
		t.Errorf("during the SIGTERM grace: %+v, want working, saying that the stop is under way", o)
	}
	f.clock.Advance(30 * time.Second)
	o := f.poll(ref)[0]
	if o.State != adapters.StateCancelled || o.Message != CancelReason || !o.FinishedAt.Equal(t0.Add(90*time.Second)) {
		t.Errorf("after the cancel: %+v, want cancelled with %q", o, CancelReason)
	}
	if err := f.a.Cancel(t.Context(), ref); err != nil {
		t.Errorf("Cancel of a cancelled job: %v", err)
	}
	f.fake.Purge(ref.ID)
	if err := f.a.Cancel(t.Context(), ref); err != nil {
		t.Errorf("Cancel of a purged job: %v", err)
	}

	t.Run("failure is reported", func(t *testing.T) {
		ref := f.start(job(quick(time.Hour, 0)))
		f.fake.Inject(batchfake.Fault{Operation: batchfake.OpTerminateJob, Times: 3, Status: http.StatusInternalServerError})
		err := f.a.Cancel(t.Context(), ref)
		if p := adapters.ProblemOf(err); err == nil || p.Class != adapters.ProblemError || p.Method != "TerminateJob" || p.Status != http.StatusInternalServerError {
			t.Errorf("Cancel during an outage = %v, want a problem of class error naming TerminateJob and its status 500", err)
		}
	})
}

// TestUnknownOutcome checks how Start classifies submission failures, and
// that a submission whose outcome is unknown is never re-sent: Find adopts
// the job when it exists.
func TestUnknownOutcome(t *testing.T) {
	tests := []struct {
		name    string
		fault   *batchfake.Fault
		queues  []string
		unknown bool // Start wraps ErrOutcomeUnknown
		created bool // the fake created the job
	}{
		{name: "created, then a 500", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob, AfterHandling: true}, unknown: true, created: true},
		{name: "created, then the connection dropped", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob, AfterHandling: true, Drop: true}, unknown: true, created: true},
		{name: "a 500 before creating", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob}, unknown: true},
		{name: "throttled", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob, Status: http.StatusTooManyRequests}},
		{name: "refused", queues: []string{"another"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, &batchfake.Options{Queues: tc.queues})
			if tc.fault != nil {
				f.fake.Inject(*tc.fault)
			}
			req := job(quick(time.Minute, 0))
			_, err := f.a.Start(t.Context(), req)
			if err == nil {
				t.Fatalf("Start succeeded")
			}
			if errors.Is(err, adapters.ErrOutcomeUnknown) != tc.unknown {
				t.Errorf("Start error %q: unknown outcome = %v, want %v", err, !tc.unknown, tc.unknown)
			}
			name := jobName(req.CorrelationID, "test")
			if n := f.fake.JobsNamed(name); n != btoi(tc.created) {
				t.Errorf("%d jobs named %s, want %d", n, name, btoi(tc.created))
			}

			req.SubmittedAt = f.clock.Now()
			f.clock.Advance(3 * time.Second) // past the fake's listing lag
			ref, found, err := f.a.Find(t.Context(), req)
			switch {
			case tc.created:
				if err != nil || !found {
					t.Fatalf("Find = found %v, %v; want the job", found, err)
				}
				f.clock.Advance(time.Hour)
				if o := f.poll(ref)[0]; o.State != adapters.StateSucceeded {
					t.Errorf("the adopted job: %+v, want succeeded", o)
				}
			case tc.unknown:
				// Within the listing lag, not listed is not proof.
				if !errors.Is(err, adapters.ErrNotListedYet) || found {
					t.Errorf("Find right after = found %v, %v; want adapters.ErrNotListedYet (ListJobs lags)", found, err)
				}
				f.clock.Advance(defaultListingLag)
				if _, found, err := f.a.Find(t.Context(), req); err != nil || found {
					t.Errorf("Find once settled = found %v, %v; want not found", found, err)
				}
			default:
				f.clock.Advance(defaultListingLag)
				if _, found, err := f.a.Find(t.Context(), req); err != nil || found {
					t.Errorf("Find = found %v, %v; want not found", found, err)
				}
			}
			if got := f.fake.Calls(batchfake.OpSubmitJob); got != 1 {
				t.Errorf("SubmitJob calls = %d, want exactly 1", got)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStartErrors checks what a failed submission says: a refusal carries
// Batch's own message (cut short) and is no unknown outcome; throttling is
// an adapters.ThrottledError with the pause asked for, sent once.
func TestStartErrors(t *testing.T) {
	tests := []struct {
		name      string
		queues    []string
		fault     *batchfake.Fault
		wantText  string
		wantRetry time.Duration
		throttled bool
	}{
		{name: "unknown queue", queues: []string{"another"}, wantText: "ClientException: Job Queue default not found"},
		{name: "throttled", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob, Status: http.StatusTooManyRequests}, wantText: "TooManyRequestsException", throttled: true},
		{name: "throttled with retry-after", fault: &batchfake.Fault{Operation: batchfake.OpSubmitJob, Status: http.StatusTooManyRequests, RetryAfter: 4 * time.Second},
			wantText: "TooManyRequestsException", throttled: true, wantRetry: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, &batchfake.Options{Queues: tt.queues})
			if tt.fault != nil {
				f.fake.Inject(*tt.fault)
			}
			_, err := f.a.Start(t.Context(), job(quick(time.Minute, 0)))
			d, throttled := adapters.RetryAfter(err)
			switch {
			case err == nil:
				t.Fatal("Start succeeded")
			case errors.Is(err, adapters.ErrOutcomeUnknown):
				t.Errorf("Start: %v; want a known outcome: no job was created", err)
			case !strings.Contains(err.Error(), tt.wantText):
				t.Errorf("Start: %v; want it to carry %q", err, tt.wantText)
			case throttled != tt.throttled || d != tt.wantRetry:
				t.Errorf("Start: %v; throttled %v (retry after %v), want %v (%v)", err, throttled, d, tt.throttled, tt.wantRetry)
			case len(err.Error()) > 2*maxErrorText:
				t.Errorf("Start error is %d bytes long", len(err.Error()))
			}
			if got := f.fake.Calls(batchfake.OpSubmitJob); got != 1 {
				t.Errorf("SubmitJob calls = %d, want 1", got)
			}
		})
	}
}

// TestShorten checks that long backend messages are cut to maxErrorText
// bytes, on a character boundary.
func TestShorten(t *testing.T) {
	got := shorten(strings.Repeat("é", maxErrorText))
	if n := len(got); n > maxErrorText+len("…") || !strings.HasSuffix(got, "é…") {
		t.Errorf("shorten: %d bytes, %q…", n, got[:20])
	}
	if shorten("short") != "short" {
		t.Errorf("a short text was changed")
	}
}

// TestCancelAnswers checks Cancel's outcomes: a job it stops is nil; a job
// that had finished on its own (known to the poller, or described after a
// TerminateJob that Batch answers the same way) is adapters.ErrAlreadyFinished
// and keeps its own state and FinishedAt; throttling is an
// adapters.ThrottledError, sent once; a refusal is adapters.ErrCancelRefused
// with Batch's message; an outage is a plain error.
func TestCancelAnswers(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		polled     bool // the poller has described the job before the cancel
		cancelled  bool // cancelled once before
		fault      *batchfake.Fault
		wantErr    error  // nil: Cancel returns nil
		wantText   string // the error carries it
		wantPlain  bool
		terminates int            // TerminateJob calls by this Cancel
		wantState  adapters.State // the next observation; 0: not checked
	}{
		{name: "running", script: quick(time.Hour, 0), terminates: 1, wantState: adapters.StateCancelled},
		{name: "succeeded, known", script: quick(time.Second, 0), polled: true, wantErr: adapters.ErrAlreadyFinished, wantState: adapters.StateSucceeded},
		{name: "succeeded, unknown", script: quick(time.Second, 0), wantErr: adapters.ErrAlreadyFinished, terminates: 1, wantState: adapters.StateSucceeded},
		{name: "failed, known", script: quick(time.Second, 3), polled: true, wantErr: adapters.ErrAlreadyFinished, wantState: adapters.StateToolError},
		{name: "failed, unknown", script: quick(time.Second, 3), wantErr: adapters.ErrAlreadyFinished, terminates: 1, wantState: adapters.StateToolError},
		{name: "cancelled before", script: quick(time.Hour, 0), cancelled: true, wantState: adapters.StateCancelled},
		{name: "throttled", script: quick(time.Hour, 0),
			fault:   &batchfake.Fault{Operation: batchfake.OpTerminateJob, Times: 5, Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second},
			wantErr: adapters.ErrThrottled, wantText: "TooManyRequestsException", terminates: 1},
		{name: "access denied", script: quick(time.Hour, 0),
			fault:   &batchfake.Fault{Operation: batchfake.OpTerminateJob, Status: http.StatusForbidden, Code: "AccessDeniedException"},
			wantErr: adapters.ErrCancelRefused, wantText: "AccessDeniedException", terminates: 1, wantState: adapters.StateWorking},
		{name: "outage", script: quick(time.Hour, 0),
			fault:     &batchfake.Fault{Operation: batchfake.OpTerminateJob, Times: 3, Status: http.StatusInternalServerError},
			wantPlain: true, wantText: "ServerException", terminates: 3, wantState: adapters.StateWorking},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Containers exit at once on SIGTERM; TestCancelRunning covers the grace.
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, &batchfake.Options{TerminateGrace: -1})
			ref := f.start(job(tt.script))
			f.clock.Advance(time.Minute)
			var before adapters.Observation
			if tt.polled {
				before = f.poll(ref)[0]
			}
			if tt.cancelled {
				if err := f.a.Cancel(t.Context(), ref); err != nil {
					t.Fatalf("first Cancel: %v", err)
				}
				before = f.poll(ref)[0]
			}
			if tt.fault != nil {
				f.fake.Inject(*tt.fault)
			}
			calls := f.fake.Calls(batchfake.OpTerminateJob)
			err := f.a.Cancel(t.Context(), ref)
			switch {
			case tt.wantErr == nil && !tt.wantPlain && err != nil:
				t.Errorf("Cancel: %v, want nil", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("Cancel: %v, want an error wrapping %q", err, tt.wantErr)
			case tt.wantPlain && (err == nil || errors.Is(err, adapters.ErrAlreadyFinished) || errors.Is(err, adapters.ErrCancelRefused) || errors.Is(err, adapters.ErrThrottled)):
				t.Errorf("Cancel: %v, want a plain error (Batch could not be asked)", err)
			case tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText):
				t.Errorf("Cancel: %v, want it to carry %q", err, tt.wantText)
			}
			if d, ok := adapters.RetryAfter(err); ok && d != 3*time.Second {
				t.Errorf("Cancel: RetryAfter %v, want 3s", d)
			}
			if got := f.fake.Calls(batchfake.OpTerminateJob) - calls; got != tt.terminates {
				t.Errorf("TerminateJob calls = %d, want %d", got, tt.terminates)
			}
			if tt.wantState == 0 {
				return
			}
			f.fake.ClearFaults()
			o := f.poll(ref)[0]
			if o.State != tt.wantState {
				t.Errorf("after the cancel: %v %q, want %v", o.State, o.Message, tt.wantState)
			}
			if before.State.Terminal() && !o.FinishedAt.Equal(before.FinishedAt) {
				t.Errorf("FinishedAt %v after the cancel, %v before; want unchanged", o.FinishedAt, before.FinishedAt)
			}
			if o.State.Terminal() && o.FinishedAt.IsZero() {
				t.Errorf("a %v observation has no FinishedAt", o.State)
			}
		})
	}
}

func TestStartNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: the dial fails
	a, err := New("batch", BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": testTool()}, &Options{Client: testClient(url)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = a.Start(t.Context(), job(quick(time.Second, 0)))
	if p := adapters.ProblemOf(err); err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) || p.Class != adapters.ProblemUnreachable ||
		!strings.HasPrefix(err.Error(), "SubmitJob got no answer: dial tcp ") {
		t.Errorf("Start to a closed port = %v, want an unreachable problem without an unknown outcome", err)
	}
}

func TestFindMatchesExactly(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	req := job(quick(time.Minute, 0))
	// A job whose name matches case-insensitively only.
	if _, err := f.client.SubmitJob(t.Context(), &batch.SubmitJobInput{
		JobName: aws.String(strings.ToUpper(namePrefix(req.CorrelationID)) + "x"), JobQueue: aws.String("default"), JobDefinition: aws.String("d"),
	}); err != nil {
		t.Fatalf("SubmitJob: %v", err)
	}
	f.clock.Advance(defaultListingLag)
	req.SubmittedAt = t0
	if _, found, err := f.a.Find(t.Context(), req); err != nil || found {
		t.Errorf("Find = found %v, %v; want not found (the other job's name differs in case)", found, err)
	}
	ref := f.start(req)
	f.clock.Advance(3 * time.Second) // past the fake's listing lag
	got, found, err := f.a.Find(t.Context(), req)
	if err != nil || !found || got.ID != ref.ID || string(got.Data) != string(ref.Data) {
		t.Errorf("Find = %+v, %v, %v; want %+v", got, found, err, ref)
	}
	if _, _, err := f.a.Find(t.Context(), adapters.StartRequest{Tool: "nope", CorrelationID: "x"}); err == nil {
		t.Errorf("Find for an unknown tool succeeded")
	}
}

// TestSubmitRendering checks the SubmitJob request a tool with every key
// makes, as the fake received it.
func TestSubmitRendering(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	dep := f.start(job(quick(time.Hour, 0)))
	tool := JobConfig{
		JobQueue:      "arn:aws:batch:eu-west-1:123456789012:job-queue/etl",
		JobDefinition: "etl:3",
		JobName:       "etl {args.date}/ü",
		Parameters:    map[string]string{"date": "{args.date}", "unset": "{args.missing}"},
		ContainerOverrides: &ContainerOverrides{
			Command:     []string{"etl", "--date", "{args.date}", "--limit", "{args.limit}"},
			Environment: map[string]string{"CORRELATION": "{correlation_id}", "EMPTY": "{args.missing}", "FLAG": "{args.flag}"},
			VCPUs:       "{args.cpus}",
			Memory:      "2048",
			GPUs:        "0",
		},
		DependsOn:          []Dependency{{JobID: "{args.after}"}, {JobID: "{args.missing}"}},
		RetryAttempts:      2,
		TimeoutSeconds:     600,
		Tags:               map[string]string{"team": "data", "date": "{args.date}"},
		PropagateTags:      aws.Bool(true),
		ShareIdentifier:    "{args.share}",
		SchedulingPriority: new(5),
	}
	f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"etl": tool})
	req := adapters.StartRequest{Tool: "etl", CorrelationID: "jb-Render01", Arguments: map[string]any{
		"date": "2026-03-04", "limit": float64(1000), "flag": true, "cpus": 0.5, "after": dep.ID, "share": "blue",
	}}
	ref := f.start(req)
	out, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{ref.ID}})
	if err != nil || len(out.Jobs) != 1 {
		t.Fatalf("DescribeJobs: %v", err)
	}
	d := out.Jobs[0]
	env := map[string]string{}
	for _, kv := range d.Container.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	res := map[string]string{}
	for _, r := range d.Container.ResourceRequirements {
		res[string(r.Type)] = aws.ToString(r.Value)
	}
	got := map[string]any{
		"name": aws.ToString(d.JobName), "queue": aws.ToString(d.JobQueue), "definition": aws.ToString(d.JobDefinition),
		"parameters": d.Parameters, "command": d.Container.Command, "environment": env, "resources": res,
		"dependsOn": aws.ToString(d.DependsOn[0].JobId), "dependencies": len(d.DependsOn),
		"attempts": aws.ToInt32(d.RetryStrategy.Attempts), "timeout": aws.ToInt32(d.Timeout.AttemptDurationSeconds),
		"tags": d.Tags, "propagate": aws.ToBool(d.PropagateTags), "share": aws.ToString(d.ShareIdentifier),
		"priority": aws.ToInt32(d.SchedulingPriority),
	}
	want := map[string]any{
		"name":        "jb-Render01-etl_2026-03-04__",
		"queue":       "arn:aws:batch:eu-west-1:123456789012:job-queue/etl",
		"definition":  "arn:aws:batch:eu-west-1:123456789012:job-definition/etl:3",
		"parameters":  map[string]string{"date": "2026-03-04"},
		"command":     []string{"etl", "--date", "2026-03-04", "--limit", "1000"},
		"environment": map[string]string{"CORRELATION": "jb-Render01", "FLAG": "true"},
		"resources":   map[string]string{"VCPU": "0.5", "MEMORY": "2048"},
		"dependsOn":   dep.ID, "dependencies": 1,
		"attempts": int32(2), "timeout": int32(600),
		"tags":      map[string]string{"team": "data", "date": "2026-03-04", tagCorrelation: "jb-Render01"},
		"propagate": true, "share": "blue", "priority": int32(5),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("submitted job (-want +got):\n%s", diff)
	}

	t.Run("long names are cut to 128", func(t *testing.T) {
		name := jobName("jb-Render02", strings.Repeat("x", 300))
		if len(name) != maxJobName || !strings.HasPrefix(name, "jb-Render02-x") {
			t.Errorf("jobName = %q (%d), want 128 characters after the prefix", name, len(name))
		}
		if got := namePrefix("_odd id"); got != "j_odd_id-" {
			t.Errorf("namePrefix(_odd id) = %q, want j_odd_id-", got)
		}
	})
}

func TestStartRefusesBadArguments(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	tool := testTool()
	tool.ContainerOverrides = &ContainerOverrides{VCPUs: "{args.cpus}"}
	tool.ArraySize = "{args.shards}"
	f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": tool})
	req := job(quick(time.Second, 0))
	req.Arguments["cpus"] = "lots"
	req.Arguments["shards"] = 20000
	_, err := f.a.Start(t.Context(), req)
	if err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) ||
		!strings.Contains(err.Error(), `container_overrides.vcpus: "lots" is not a positive number`) ||
		!strings.Contains(err.Error(), "array_size: 20000 is not an array size") {
		t.Errorf("Start = %v, want a refusal naming both fields", err)
	}
	if got := f.fake.Calls(batchfake.OpSubmitJob); got != 0 {
		t.Errorf("SubmitJob calls = %d, want 0", got)
	}
	if _, err := f.a.Start(t.Context(), adapters.StartRequest{Tool: "nope"}); err == nil {
		t.Errorf("Start of an unknown tool succeeded")
	}
}

// TestPollBatching checks that one Poll of 250 jobs costs three DescribeJobs
// calls, and that many concurrent polls share calls.
func TestPollBatching(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	// Submitted directly: the adapter's submit limiter would take seconds.
	refs := make([]adapters.JobRef, 250)
	for i := range refs {
		out, err := f.client.SubmitJob(t.Context(), &batch.SubmitJobInput{
			JobName: aws.String("many"), JobQueue: aws.String("default"), JobDefinition: aws.String("sleeper"),
			Parameters: map[string]string{"jobbridge_script": quick(time.Hour, 0)},
		})
		if err != nil {
			t.Fatalf("SubmitJob: %v", err)
		}
		refs[i] = adapters.JobRef{ID: aws.ToString(out.JobId)}
	}
	obs := f.poll(refs...)
	for i, o := range obs {
		if o.Err != nil || o.State != adapters.StateWorking {
			t.Fatalf("observation %d: %+v", i, o)
		}
	}
	if got := f.describeCalls(); got != 3 {
		t.Errorf("one Poll of 250 jobs made %d DescribeJobs calls, want 3", got)
	}
	if f.poll(refs...); f.describeCalls() != 3 {
		t.Errorf("a second Poll within describe_interval made calls")
	}

	f.clock.Advance(defaultDescribeInterval)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			obs, err := f.a.Poll(t.Context(), refs[i*5:i*5+5])
			if err != nil {
				t.Errorf("Poll: %v", err)
				return
			}
			for _, o := range obs {
				if o.Err != nil || o.State != adapters.StateWorking {
					t.Errorf("observation: %+v", o)
				}
			}
		})
	}
	wg.Wait()
	// The first call carries the first caller's jobs and fills up with
	// others; the rest wait for at most three more calls.
	if got := f.describeCalls() - 3; got > 4 {
		t.Errorf("50 concurrent polls of 250 jobs made %d DescribeJobs calls, want at most 4", got)
	}
}

// TestPollFillsCalls checks that a DescribeJobs call made for one job also
// refreshes other known jobs, so their next polls are answered from the
// cache.
func TestPollFillsCalls(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	a := f.start(job(quick(time.Hour, 0)))
	b := f.start(job(quick(time.Hour, 0)))
	f.poll(a, b)
	f.clock.Advance(defaultDescribeInterval)
	f.poll(a)
	f.poll(b)
	if got := f.describeCalls(); got != 2 {
		t.Errorf("%d DescribeJobs calls, want 2 (b rode along with a)", got)
	}
	f.clock.Advance(defaultDescribeInterval / 4)
	f.poll(a) // fresh: no call
	if got := f.describeCalls(); got != 2 {
		t.Errorf("%d DescribeJobs calls, want 2 (a is fresh)", got)
	}
}

// TestSharedPollers checks that two backends of one account and region,
// built from their configs, share one poller.
func TestSharedPollers(t *testing.T) {
	f := newFixture(t, nil, BackendConfig{}, nil)
	pollers := NewPollers()
	backend := BackendConfig{Region: "eu-west-1", Endpoint: f.url, DescribeRate: 100, SubmitRate: 50}
	var as []*Adapter
	for _, name := range []string{"one", "two"} {
		a, err := New(name, backend, map[string]JobConfig{"job": testTool()}, &Options{Credentials: staticCredentials, Pollers: pollers})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		as = append(as, a)
	}
	if as[0].poller != as[1].poller {
		t.Fatalf("the adapters have separate pollers")
	}
	one, err := as[0].Start(t.Context(), job(quick(time.Hour, 0)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	two, err := as[1].Start(t.Context(), job(quick(time.Hour, 0)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := as[0].Poll(t.Context(), []adapters.JobRef{one, two}); err != nil {
		t.Fatalf("Poll: %v", err)
	}
	obs, err := as[1].Poll(t.Context(), []adapters.JobRef{two})
	if err != nil || obs[0].State != adapters.StateWorking {
		t.Fatalf("Poll: %+v, %v", obs, err)
	}
	// These adapters build their own SDK clients, so count at the fake.
	if got := f.fake.Calls(batchfake.OpDescribeJobs); got != 1 {
		t.Errorf("%d DescribeJobs calls, want 1 (shared cache)", got)
	}
	other, err := New("three", BackendConfig{Region: "eu-central-1", Endpoint: f.url}, map[string]JobConfig{"job": testTool()}, &Options{Credentials: staticCredentials, Pollers: pollers})
	if err != nil || other.poller == as[0].poller {
		t.Errorf("another region shares the poller (err %v)", err)
	}
}

func TestQueuePosition(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	f.a = f.adapter(BackendConfig{Region: "eu-west-1", QueuePosition: true}, map[string]JobConfig{"job": testTool()})
	first := f.start(job("submitted=0s,runnable=1h"))
	f.clock.Advance(time.Second)
	second := f.start(job("submitted=0s,runnable=1h"))
	f.clock.Advance(time.Second)
	f.poll(first, second) // describes, then takes a queue snapshot
	f.clock.Advance(defaultDescribeInterval)
	obs := f.poll(first, second)
	for i, want := range []string{"(position 1)", "(position 2)"} {
		if !strings.Contains(obs[i].Message, want) {
			t.Errorf("job %d: %q, want %s", i, obs[i].Message, want)
		}
	}
	if got := f.fake.Calls(batchfake.OpGetJobQueueSnapshot); got != 1 {
		t.Errorf("GetJobQueueSnapshot calls = %d, want 1 (once per queue and interval)", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New("batch", BackendConfig{}, map[string]JobConfig{"job": {JobQueue: "q"}}, &Options{Client: testClient("http://127.0.0.1:1")})
	for _, want := range []string{"region: required", `tool "job"`, "job_definition: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want an error containing %q", err, want)
		}
	}
}

func TestPollCancelledContext(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	ref := f.start(job(quick(time.Hour, 0)))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.a.Poll(ctx, []adapters.JobRef{ref}); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestSubmitExpressions checks {= ...} expressions in a tool's templates:
// the SubmitJob request carries their values, as the fake received it, and
// an expression that fails on the call's arguments submits nothing.
func TestSubmitExpressions(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	tool := testTool()
	tool.JobName = `{= args.env == "prod" ? "release" : "trial"}-{args.name}`
	tool.Parameters["shards"] = "{= args.shards * 2}"
	tool.ContainerOverrides = &ContainerOverrides{
		Command:     []string{"sh", "-c", "run {= shell_quote(args.target)}"},
		Environment: map[string]string{"NOTE": `{= has(args.note) ? args.note : null}`},
		VCPUs:       `{= args.env == "prod" ? 2.0 : 0.5}`,
	}
	tool.Tags = map[string]string{"tier": `{= args.env == "prod" ? "high" : "low"}`}
	f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": tool})

	for _, tc := range []struct {
		name string
		args map[string]any
		want map[string]any
	}{
		{"prod", map[string]any{"env": "prod", "shards": float64(3), "target": "a b", "note": "hi"}, map[string]any{
			"name": "release-test", "shards": "6", "command": []string{"sh", "-c", "run 'a b'"},
			"environment": map[string]string{"NOTE": "hi"}, "vcpus": "2", "tier": "high"}},
		{"staging without a note", map[string]any{"env": "staging", "shards": float64(1), "target": "$(id)"}, map[string]any{
			"name": "trial-test", "shards": "2", "command": []string{"sh", "-c", "run '$(id)'"},
			"environment": map[string]string{}, "vcpus": "0.5", "tier": "low"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := job(quick(time.Hour, 0))
			maps.Copy(req.Arguments, tc.args)
			ref := f.start(req)
			out, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{ref.ID}})
			if err != nil || len(out.Jobs) != 1 {
				t.Fatalf("DescribeJobs: %v", err)
			}
			d := out.Jobs[0]
			env := map[string]string{}
			for _, kv := range d.Container.Environment {
				env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
			}
			vcpus := ""
			for _, r := range d.Container.ResourceRequirements {
				if r.Type == types.ResourceTypeVcpu {
					vcpus = aws.ToString(r.Value)
				}
			}
			got := map[string]any{
				"name": strings.TrimPrefix(aws.ToString(d.JobName), req.CorrelationID+"-"), "shards": d.Parameters["shards"],
				"command": d.Container.Command, "environment": env, "vcpus": vcpus, "tier": d.Tags["tier"],
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("submitted job (-want +got):\n%s", diff)
			}
		})
	}

	before := f.fake.Calls(batchfake.OpSubmitJob)
	req := job(quick(time.Hour, 0))
	req.Arguments["env"], req.Arguments["target"] = "prod", "x" // no shards
	_, err := f.a.Start(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "parameters.shards: ") || !strings.Contains(err.Error(), "no such key: shards") {
		t.Errorf("Start without shards = %v, want an error naming parameters.shards", err)
	}
	if got := f.fake.Calls(batchfake.OpSubmitJob); got != before {
		t.Errorf("a failed rendering submitted %d jobs", got-before)
	}
}
