package githubactions

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

func cancelScripts() map[string]githubfake.Script {
	long := githubfake.Script{RunName: "Long [{inputs.correlation_id}]", Jobs: []githubfake.JobScript{{Name: "soak", Duration: time.Hour}}}
	ignores := long
	ignores.OnCancel = githubfake.OnCancelIgnore
	fails := long
	fails.OnCancel = githubfake.OnCancelFail
	quick := githubfake.Script{RunName: "Quick [{inputs.correlation_id}]"}
	return map[string]githubfake.Script{"long": long, "ignores": ignores, "fails": fails, "quick": quick}
}

// TestCancel checks cancel answers: 202 is success and the run ends
// cancelled; 409 (already completed) is ErrAlreadyFinished and the run
// keeps its conclusion; a run that concludes "failure" after our cancel is
// reported cancelled.
func TestCancel(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	a := f.adapter(nil)

	t.Run("202", func(t *testing.T) {
		ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-202")
		if err := a.Cancel(t.Context(), ref); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if o := f.poll(a, ref); o.State != adapters.StateCancelled {
			t.Errorf("after cancel: %v %q", o.State, o.Message)
		}
		if got := f.gh.Cancels(runID(t, ref)); got != 1 {
			t.Errorf("cancels sent = %d, want 1", got)
		}
	})
	t.Run("409", func(t *testing.T) {
		ref := f.start(a, "scripted", map[string]any{"script": "quick"}, "corr-409")
		if o := f.poll(a, ref); o.State != adapters.StateSucceeded {
			t.Fatalf("quick run: %v %q", o.State, o.Message)
		}
		if err := a.Cancel(t.Context(), ref); !errors.Is(err, adapters.ErrAlreadyFinished) {
			t.Errorf("Cancel of a completed run (409): %v, want an error wrapping adapters.ErrAlreadyFinished", err)
		}
		if got := f.gh.Cancels(runID(t, ref)); got != 1 {
			t.Errorf("cancels sent = %d, want 1", got)
		}
		if o := f.poll(a, ref); o.State != adapters.StateSucceeded {
			t.Errorf("after the 409: %v %q, want still succeeded", o.State, o.Message)
		}
	})
	t.Run("failure after cancel", func(t *testing.T) {
		ref := f.start(a, "scripted", map[string]any{"script": "fails"}, "corr-fail")
		if err := a.Cancel(t.Context(), ref); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if o := f.poll(a, ref); o.State != adapters.StateCancelled {
			t.Errorf("a run concluding failure after our cancel: %v %q, want cancelled", o.State, o.Message)
		}
	})
}

// TestCancelAnswers checks how each answer to POST .../cancel is reported,
// and that a run keeps its own outcome when the cancel did not stop it: a
// run that failed before the cancel stays a tool error (with its completion
// time as FinishedAt), not a cancellation.
func TestCancelAnswers(t *testing.T) {
	failed := githubfake.Script{RunName: "Failed [{inputs.correlation_id}]", Conclusion: "failure",
		Jobs: []githubfake.JobScript{{Name: "unit", Duration: time.Minute}}}
	scripts := cancelScripts()
	scripts["failed"] = failed
	tests := []struct {
		name      string
		script    string
		advance   time.Duration     // before the cancel
		fault     *githubfake.Fault // answers the cancel
		wantErr   []error           // the Cancel error wraps each
		wantPlain bool              // the Cancel error wraps none of the contract's errors
		wantState adapters.State    // the next observation
	}{
		{name: "202", script: "long", wantState: adapters.StateCancelled},
		{name: "409 for a run that succeeded", script: "quick", wantErr: []error{adapters.ErrAlreadyFinished}, wantState: adapters.StateSucceeded},
		{name: "409 for a run that failed", script: "failed", advance: 2 * time.Minute, wantErr: []error{adapters.ErrAlreadyFinished}, wantState: adapters.StateToolError},
		{name: "409 for a run still going", script: "long", fault: &githubfake.Fault{Status: 409},
			wantErr: []error{adapters.ErrCancelRefused}, wantState: adapters.StateWorking},
		{name: "403 without a rate limit", script: "long", fault: &githubfake.Fault{Status: 403},
			wantErr: []error{adapters.ErrCancelRefused}, wantState: adapters.StateWorking},
		{name: "422", script: "long", fault: &githubfake.Fault{Status: 422},
			wantErr: []error{adapters.ErrCancelRefused}, wantState: adapters.StateWorking},
		{name: "429", script: "long", fault: &githubfake.Fault{Kind: githubfake.FaultSecondaryRateLimit, Status: 429, RetryAfter: 20 * time.Second},
			wantErr: []error{adapters.ErrThrottled, ErrRateLimited}},
		{name: "503", script: "long", fault: &githubfake.Fault{Status: 503}, wantPlain: true, wantState: adapters.StateWorking},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{scripts: scripts})
			a := f.adapter(nil)
			ref := f.start(a, "scripted", map[string]any{"script": tt.script}, "corr-answers")
			f.clock.Advance(tt.advance)
			before := f.poll(a, ref)
			if tt.fault != nil {
				tt.fault.Method, tt.fault.Path = http.MethodPost, "/cancel"
				f.gh.Inject(*tt.fault)
			}
			f.clock.Advance(time.Second)
			err := a.Cancel(t.Context(), ref)
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("Cancel: %v, want an error wrapping %q", err, want)
				}
			}
			if tt.wantErr == nil && !tt.wantPlain && err != nil {
				t.Errorf("Cancel: %v, want nil", err)
			}
			if tt.wantPlain {
				if err == nil {
					t.Errorf("Cancel: nil, want an error")
				}
				for _, e := range []error{adapters.ErrAlreadyFinished, adapters.ErrCancelRefused, adapters.ErrThrottled} {
					if errors.Is(err, e) {
						t.Errorf("Cancel: %v wraps %q, want a plain error (GitHub could not be asked)", err, e)
					}
				}
			}
			if err != nil && strings.Contains(err.Error(), testToken) {
				t.Errorf("Cancel error carries the token: %v", err)
			}
			if tt.wantState == 0 {
				return
			}
			o := f.poll(a, ref)
			if o.State != tt.wantState {
				t.Errorf("after the cancel: %v %q, want %v", o.State, o.Message, tt.wantState)
			}
			if before.State.Terminal() && !o.FinishedAt.Equal(before.FinishedAt) {
				t.Errorf("FinishedAt after the cancel %v, before it %v; want unchanged", o.FinishedAt, before.FinishedAt)
			}
		})
	}
}

// TestFinishedAt checks that a completed run's observation carries the
// time it completed (its updated_at, in whole seconds), and a running one
// none.
func TestFinishedAt(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-finished")
	f.clock.Advance(1500 * time.Millisecond)
	if o := f.poll(a, ref); o.State != adapters.StateWorking || !o.FinishedAt.IsZero() {
		t.Fatalf("a running run: %v, FinishedAt %v; want working, none", o.State, o.FinishedAt)
	}
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	cancelledAt := t0.Add(1500 * time.Millisecond)
	f.clock.Advance(time.Minute)
	o := f.poll(a, ref)
	if want := cancelledAt.Truncate(time.Second); o.State != adapters.StateCancelled || !o.FinishedAt.Equal(want) {
		t.Errorf("a cancelled run: %v, FinishedAt %v; want cancelled, %v", o.State, o.FinishedAt, want)
	}
}

// TestForceCancel checks the escalation: a run that ignores the cancel is
// force-cancelled once, by the first poll after force_cancel_after, however
// often it is polled.
func TestForceCancel(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	a := f.adapter(nil) // scripted_approvals has force_cancel_after: 2m
	ref := f.start(a, "scripted_approvals", map[string]any{"script": "ignores"}, "corr-force")
	id := runID(t, ref)
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	f.clock.Advance(time.Minute)
	o := f.poll(a, ref)
	if o.State != adapters.StateWorking || !strings.Contains(o.Message, "cancel requested") || f.gh.ForceCancels(id) != 0 {
		t.Fatalf("within the grace: %v %q, %d force-cancels; want working, no force-cancel", o.State, o.Message, f.gh.ForceCancels(id))
	}
	f.clock.Advance(time.Minute)
	o = f.poll(a, ref)
	if f.gh.ForceCancels(id) != 1 || !strings.Contains(o.Message, "force-cancel sent") {
		t.Fatalf("after the grace: %q, %d force-cancels; want one", o.Message, f.gh.ForceCancels(id))
	}
	for range 5 {
		o = f.poll(a, ref)
	}
	if o.State != adapters.StateCancelled || f.gh.ForceCancels(id) != 1 {
		t.Errorf("after the force-cancel: %v %q, %d force-cancels; want cancelled, one", o.State, o.Message, f.gh.ForceCancels(id))
	}
	if err := a.Cancel(t.Context(), ref); err != nil || f.gh.ForceCancels(id) != 1 {
		t.Errorf("a later Cancel: %v, %d force-cancels; want nil, still one", err, f.gh.ForceCancels(id))
	}
}

// TestForceCancelBySecondCancel checks the other path: a bridge that calls
// Cancel again after the grace escalates without a poll.
func TestForceCancelBySecondCancel(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	a := f.adapter(nil)
	ref := f.start(a, "scripted_approvals", map[string]any{"script": "ignores"}, "corr-force-2")
	id := runID(t, ref)
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(3 * time.Minute)
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if got := []int{f.gh.Cancels(id), f.gh.ForceCancels(id)}; !cmp.Equal(got, []int{1, 1}) {
		t.Errorf("[cancels, force-cancels] = %v, want [1 1]", got)
	}
	if o := f.poll(a, ref); o.State != adapters.StateCancelled {
		t.Errorf("after the force-cancel: %v %q", o.State, o.Message)
	}
}

func approvalScripts(canApprove bool) map[string]githubfake.Script {
	return map[string]githubfake.Script{"deploy": {
		RunName: "Deploy [{inputs.correlation_id}]",
		Jobs:    []githubfake.JobScript{{Name: "build", Duration: time.Minute}, {Name: "deploy", Duration: time.Minute}},
		Approval: &githubfake.Approval{Job: 1, Environment: "production", EnvironmentID: 42,
			Reviewers: []string{"octocat", "team:release"}, CanApprove: canApprove},
	}}
}

// TestApprovals checks deployment reviews: an approvable waiting run asks
// for a decision; the answer becomes a review with the environment IDs and
// the comment; a rejection fails the run; "cancel" sends nothing.
func TestApprovals(t *testing.T) {
	tests := []struct {
		name       string
		answer     adapters.Answer
		want       []githubfake.Review
		wantFinal  adapters.State
		finalAfter time.Duration
	}{
		{name: "approve", answer: adapters.Answer{Action: "accept", Content: map[string]any{"decision": "approve", "comment": "LGTM"}},
			want: []githubfake.Review{{EnvironmentIDs: []int64{42}, State: "approved", Comment: "LGTM"}}, wantFinal: adapters.StateSucceeded, finalAfter: 2 * time.Minute},
		{name: "reject", answer: adapters.Answer{Action: "accept", Content: map[string]any{"decision": "reject", "comment": "not today"}},
			want: []githubfake.Review{{EnvironmentIDs: []int64{42}, State: "rejected", Comment: "not today"}}, wantFinal: adapters.StateToolError},
		{name: "decline", answer: adapters.Answer{Action: "decline"},
			want: []githubfake.Review{{EnvironmentIDs: []int64{42}, State: "rejected", Comment: "Rejected through jobbridge."}}, wantFinal: adapters.StateToolError},
		{name: "accept without a decision", answer: adapters.Answer{Action: "accept", Content: map[string]any{}},
			want: []githubfake.Review{{EnvironmentIDs: []int64{42}, State: "rejected", Comment: "Rejected through jobbridge: the answer made no decision."}}, wantFinal: adapters.StateToolError},
		{name: "cancel", answer: adapters.Answer{Action: "cancel"}, wantFinal: adapters.StateInputRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{scripts: approvalScripts(true)})
			a := f.adapter(nil)
			ref := f.start(a, "scripted_approvals", map[string]any{"script": "deploy"}, "corr-approve")
			f.clock.Advance(90 * time.Second)
			o := f.poll(a, ref)
			if o.State != adapters.StateInputRequired || len(o.InputRequests) != 1 {
				t.Fatalf("waiting run: %v %q %v, want one input request", o.State, o.Message, o.InputRequests)
			}
			var key string
			var req adapters.InputRequest
			for key, req = range o.InputRequests {
			}
			if key != "deployment.1.42" || !strings.Contains(req.Message, "Approve the deployment of Scripted run #1 (Deploy [corr-approve]) to production?") {
				t.Errorf("input request %q: %q", key, req.Message)
			}
			var schema map[string]any
			if err := json.Unmarshal(req.Schema, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("schema %s is not an object schema", req.Schema)
			}
			if err := a.Respond(t.Context(), ref, map[string]adapters.Answer{key: tt.answer}); err != nil {
				t.Fatalf("Respond: %v", err)
			}
			if diff := cmp.Diff(tt.want, f.gh.Reviews(runID(t, ref)), cmpopts.IgnoreFields(githubfake.Review{}, "At"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("reviews (-want +got):\n%s", diff)
			}
			f.clock.Advance(tt.finalAfter)
			if o := f.poll(a, ref); o.State != tt.wantFinal {
				t.Errorf("after the answer: %v %q, want %v", o.State, o.Message, tt.wantFinal)
			}
			// A replayed answer for a deployment that no longer waits is
			// not an error.
			if tt.wantFinal.Terminal() {
				if err := a.Respond(t.Context(), ref, map[string]adapters.Answer{key: tt.answer}); err != nil {
					t.Errorf("replayed Respond: %v, want nil", err)
				}
			}
		})
	}
}

// TestApprovalsNotApprovable checks that a run waiting for reviewers this
// token cannot stand in for stays working and names who must approve, and
// that a tool without approvals never asks.
func TestApprovalsNotApprovable(t *testing.T) {
	for _, c := range []struct {
		tool       string
		canApprove bool
	}{{"scripted_approvals", false}, {"scripted", true}} {
		f := newFixture(t, fixtureOptions{scripts: approvalScripts(c.canApprove)})
		a := f.adapter(nil)
		ref := f.start(a, c.tool, map[string]any{"script": "deploy"}, "corr-no-approve")
		f.clock.Advance(90 * time.Second)
		o := f.poll(a, ref)
		want := "waiting: deployment to production awaits approval by octocat, team release"
		if o.State != adapters.StateWorking || o.Message != want || o.InputRequests != nil {
			t.Errorf("%s (can approve %v): %v %q %v; want working %q", c.tool, c.canApprove, o.State, o.Message, o.InputRequests, want)
		}
	}
}
