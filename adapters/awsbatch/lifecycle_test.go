package awsbatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

// TestCancelHeldByDependency checks a cancel of a job that waits for a
// running dependency: Batch cancels a PENDING job only once its
// dependencies have completed, so the task stays working and says so until
// the dependency finishes, then ends cancelled.
func TestCancelHeldByDependency(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	after := testTool()
	after.DependsOn = []Dependency{{JobID: "{args.after}"}}
	f.a = f.adapter(BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": testTool(), "after": after})
	dep := f.start(job(quick(2*time.Minute, 0)))
	req := job(quick(time.Hour, 0))
	req.Tool, req.Arguments["after"] = "after", dep.ID
	held := f.start(req)
	f.clock.Advance(30 * time.Second)
	if o := f.poll(held)[0]; o.Message != "pending: waiting for the jobs it depends on" {
		t.Fatalf("before the cancel: %+v", o)
	}
	if err := f.a.Cancel(t.Context(), held); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantWaiting := adapters.Observation{State: adapters.StateWorking,
		Message: "pending: cancel requested; Batch cancels a job that waits for other jobs only once the jobs it depends on have finished, so it stays pending until then"}
	for _, at := range []time.Duration{0, 89 * time.Second} {
		f.clock.Advance(at)
		f.a.poller.invalidate(held.ID)
		if diff := cmp.Diff(wantWaiting, f.poll(held)[0]); diff != "" {
			t.Errorf("%v after the cancel (-want +got):\n%s", at, diff)
		}
	}
	f.clock.Advance(time.Second) // the dependency finishes at 2m
	f.a.poller.invalidate(held.ID)
	o := f.poll(held)[0]
	want := adapters.Observation{State: adapters.StateCancelled, Message: CancelReason, FinishedAt: t0.Add(2 * time.Minute)}
	if diff := cmp.Diff(want, o, cmpopts.IgnoreFields(adapters.Observation{}, "Result")); diff != "" {
		t.Errorf("once the dependency finished (-want +got):\n%s", diff)
	}
	if got := f.fake.Calls(batchfake.OpTerminateJob); got != 1 {
		t.Errorf("TerminateJob calls = %d, want 1", got)
	}
}

// TestRetryObservations follows a job through its retries: each failed
// attempt with attempts left sends it back to RUNNABLE, and every
// observation says which attempt it is on and how the last one ended. A
// single job has no measurable progress, so none is reported (a retry
// never makes progress go backwards).
func TestRetryObservations(t *testing.T) {
	f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
	tool := testTool()
	tool.RetryAttempts = 3
	f.a = f.adapter(BackendConfig{Region: "eu-west-1", DescribeInterval: minDescribeInterval}, map[string]JobConfig{"job": tool})
	// Each attempt: 2s RUNNABLE, 1s STARTING, 10s RUNNING, exit code 1.
	ref := f.start(job("submitted=0s,runnable=2s,starting=1s,running=10s,exit=1"))
	steps := []struct {
		at    time.Duration
		state adapters.State
		msg   string
	}{
		{5 * time.Second, adapters.StateWorking, "running for 2s (attempt 1 of 3)"},
		{14 * time.Second, adapters.StateWorking, "runnable: waiting for capacity in queue default; retrying: attempt 1 of 3 failed with exit code 1"},
		{15500 * time.Millisecond, adapters.StateWorking, "starting: placing the container and pulling its image (attempt 2 of 3; attempt 1 of 3 failed with exit code 1)"},
		{20 * time.Second, adapters.StateWorking, "running (attempt 2 of 3; attempt 1 of 3 failed with exit code 1)"},
		{27 * time.Second, adapters.StateWorking, "runnable: waiting for capacity in queue default; retrying: attempt 2 of 3 failed with exit code 1"},
		{35 * time.Second, adapters.StateWorking, "running (attempt 3 of 3; attempt 2 of 3 failed with exit code 1)"},
		{45 * time.Second, adapters.StateToolError, "failed: Essential container in task exited (exit code 1) after 3 attempts"},
	}
	var elapsed time.Duration
	for _, s := range steps {
		f.clock.Advance(s.at - elapsed)
		elapsed = s.at
		o := f.poll(ref)[0]
		if o.State != s.state || o.Message != s.msg || o.Progress != nil {
			t.Errorf("at %v: %v %q (progress %+v), want %v %q and no progress", s.at, o.State, o.Message, o.Progress, s.state, s.msg)
		}
		if o.State.Terminal() && (o.Result == nil || o.Result.Structured["attempts"] != 3) {
			t.Errorf("at %v: result %+v, want 3 attempts", s.at, o.Result)
		}
	}
}

// TestRunningSinceCurrentAttempt checks that "running for" counts from
// the current attempt's start when Batch's startedAt is that, and is left
// out when startedAt is the first attempt's.
func TestRunningSinceCurrentAttempt(t *testing.T) {
	now := t0.Add(time.Hour)
	a := &Adapter{now: func() time.Time { return now }, cancels: map[string]time.Time{}}
	failed := types.AttemptDetail{StoppedAt: aws.Int64(now.Add(-time.Minute).UnixMilli()), Container: &types.AttemptContainerDetail{ExitCode: aws.Int32(2)}}
	tests := []struct {
		name    string
		started time.Time
		want    string
	}{
		{"startedAt of the current attempt", now.Add(-5 * time.Second), "running for 5s (attempt 2 of 3; attempt 1 of 3 failed with exit code 2)"},
		{"startedAt of the first attempt", now.Add(-10 * time.Minute), "running (attempt 2 of 3; attempt 1 of 3 failed with exit code 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &types.JobDetail{JobId: aws.String("j"), Status: types.JobStatusRunning, StartedAt: aws.Int64(tc.started.UnixMilli()),
				RetryStrategy: &types.RetryStrategy{Attempts: aws.Int32(3)}, Attempts: []types.AttemptDetail{failed}}
			if got := a.observe(description{detail: d}).Message; got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFindListingLag checks the Finder rule: finding nothing proves that no
// job exists only once listing_lag has passed since SubmittedAt (zero
// meaning now), also in a process that never saw the submission (a
// restart); before that Find wraps adapters.ErrNotListedYet. A job the
// fake does not list yet is found once it is listed.
func TestFindListingLag(t *testing.T) {
	tests := []struct {
		name    string
		lag     time.Duration // listing_lag; 0 for the default
		sentAgo time.Duration // SubmittedAt before now; -1 for zero
		want    error         // nil: not found, no error
	}{
		{"no SubmittedAt", 0, -1, adapters.ErrNotListedYet},
		{"sent 30s ago", 0, 30 * time.Second, adapters.ErrNotListedYet},
		{"sent just under the default lag ago", 0, 59 * time.Second, adapters.ErrNotListedYet},
		{"sent the default lag ago", 0, time.Minute, nil},
		{"sent 61s ago, listing_lag 2m", 2 * time.Minute, 61 * time.Second, adapters.ErrNotListedYet},
		{"sent 2m ago, listing_lag 2m", 2 * time.Minute, 2 * time.Minute, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
			f.clock.Advance(time.Hour)
			// A fresh adapter, as after a restart: it never saw the submission.
			a := f.adapter(BackendConfig{Region: "eu-west-1", ListingLag: tc.lag}, map[string]JobConfig{"job": testTool()})
			req := job(quick(time.Minute, 0))
			if tc.sentAgo >= 0 {
				req.SubmittedAt = f.clock.Now().Add(-tc.sentAgo)
			}
			_, found, err := a.Find(t.Context(), req)
			switch {
			case found:
				t.Errorf("Find found a job that was never submitted")
			case tc.want == nil && err != nil:
				t.Errorf("Find = %v, want not found and no error", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Find = %v, want an error wrapping %q", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), "queue default"):
				t.Errorf("Find = %v, want it to name the queue searched", err)
			}
		})
	}

	t.Run("a job listed late is found", func(t *testing.T) {
		f := newFixture(t, &clock{base: t0}, BackendConfig{}, &batchfake.Options{ListingLag: 5 * time.Second})
		req := job(quick(time.Minute, 0))
		req.SubmittedAt = t0
		ref := f.start(req)
		f.clock.Advance(4 * time.Second)
		if _, found, err := f.a.Find(t.Context(), req); found || !errors.Is(err, adapters.ErrNotListedYet) {
			t.Errorf("Find before ListJobs lists it = found %v, %v; want adapters.ErrNotListedYet", found, err)
		}
		f.clock.Advance(time.Second)
		if got, found, err := f.a.Find(t.Context(), req); !found || err != nil || got.ID != ref.ID {
			t.Errorf("Find once listed = %+v, %v, %v; want %s", got, found, err, ref.ID)
		}
	})
}
