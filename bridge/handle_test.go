package bridge_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// handleTools makes the named tools of the test catalog return handles,
// with the given sync budget.
func handleTools(budget time.Duration, names ...string) func(*catalog.Catalog) {
	return func(c *catalog.Catalog) {
		for _, n := range names {
			tl := c.Tool(n)
			tl.Task = catalog.TaskOptional
			tl.AfterSyncBudget = catalog.AfterBudgetHandle
			tl.SyncBudget = budget
		}
	}
}

// envelope is the structured content of a result, as a client reads it.
type envelope struct {
	Summary string `json:"summary"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Task    *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"task"`
	Job *struct {
		Backend string `json:"backend"`
		ID      string `json:"id"`
	} `json:"job"`
	InputRequests map[string]json.RawMessage `json:"input_requests"`
	Next          []struct {
		Tool string `json:"tool"`
	} `json:"next"`
}

func envelopeOf(t *testing.T, r *taskclient.ToolResult) envelope {
	t.Helper()
	var e envelope
	if r == nil || json.Unmarshal(r.StructuredContent, &e) != nil || e.Summary == "" || e.Outcome == "" {
		t.Fatalf("result %+v has no structured envelope", r)
	}
	return e
}

// call makes a tools/call without tasks and returns its tool result.
func call(t *testing.T, c *taskclient.Client, tool string, args any) *taskclient.ToolResult {
	t.Helper()
	res, err := c.CallTool(t.Context(), tool, args, nil)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if res.Result == nil {
		t.Fatalf("calling %s: want a tool result, got %+v", tool, res)
	}
	return res.Result
}

// statusUntil calls task_status until the task's outcome is no longer
// running (or input_required), and returns that result.
func statusUntil(t *testing.T, c *taskclient.Client, id string) *taskclient.ToolResult {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := call(t, c, "task_status", map[string]any{"task_id": id})
		if e := envelopeOf(t, r); e.Outcome != "running" && e.Outcome != "input_required" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running: %s", id, r.Text())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHandleAtTheBudget checks a call without tasks of a tool that returns
// handles: at the budget it answers the task's handle (not an error, with
// what to call next), the job goes on, and task_status gives its result,
// the same task tasks/get shows.
func TestHandleAtTheBudget(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(300*time.Millisecond, "slow_compute")})
	r := call(t, h.plain, "slow_compute", map[string]any{"seconds": 1.5, "label": "later"})
	e := envelopeOf(t, r)
	if r.IsError || e.Outcome != "running" || e.Task == nil || e.Task.ID == "" {
		t.Fatalf("at the budget: isError %v, %+v; want a running handle", r.IsError, e)
	}
	id := e.Task.ID
	for _, s := range []string{id, "task_status", "still running"} {
		if !strings.Contains(r.Text(), s) || !strings.Contains(e.Summary, s) {
			t.Errorf("handle text %q / summary %q lacks %q", r.Text(), e.Summary, s)
		}
	}
	if tools := nextTools(e); !slices.Equal(tools, []string{"task_status", "task_cancel"}) {
		t.Errorf("next calls %v, want task_status and task_cancel", tools)
	}
	done := statusUntil(t, h.plain, id)
	de := envelopeOf(t, done)
	if done.IsError || de.Outcome != "succeeded" || !strings.Contains(done.Text(), "Computed later in 1.5s.") || de.Task == nil || de.Task.ID != id || de.Job == nil || de.Job.Backend != "jobs" {
		t.Errorf("task_status at the end: isError %v, %s, %+v; want the job's result with its task and job", done.IsError, done.Text(), de)
	}
	if got, err := h.tasks.GetTask(t.Context(), id); err != nil || got.Status != "completed" || got.Result.Text() != done.Text() {
		t.Errorf("tasks/get of the handle: %v, %+v; want the same completed task", err, got)
	}
}

func nextTools(e envelope) []string {
	var names []string
	for _, n := range e.Next {
		names = append(names, n.Tool)
	}
	return names
}

// TestHandleQuickJobAnswersInline checks that a job that ends within the
// budget is answered as a synchronous call always was: its result.
func TestHandleQuickJobAnswersInline(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(10*time.Second, "slow_compute", "failing_job")})
	r := call(t, h.plain, "slow_compute", map[string]any{"seconds": 0.2, "label": "now"})
	if e := envelopeOf(t, r); r.IsError || e.Outcome != "succeeded" || e.Task != nil || r.Text() != "Computed now in 0.2s." {
		t.Errorf("quick job: isError %v, %q, %+v; want its result inline", r.IsError, r.Text(), e)
	}
	r = call(t, h.plain, "failing_job", nil)
	if e := envelopeOf(t, r); !r.IsError || e.Outcome != "failed" || e.Reason != "the job failed on purpose" {
		t.Errorf("failing job: isError %v, %+v; want the failure with its reason", r.IsError, e)
	}
}

// TestCompanionsListedOnlyWithHandles checks that the companion tools
// appear only when some tool returns handles, and that the default at the
// budget stays: the job cancelled, said in words.
func TestCompanionsListedOnlyWithHandles(t *testing.T) {
	companions := []string{"task_answer", "task_cancel", "task_status"}
	for _, tc := range []struct {
		name string
		tune func(*catalog.Catalog)
		want bool
	}{
		{"no tool returns handles", nil, false},
		{"one tool returns handles", handleTools(time.Second, "slow_compute"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{tune: tc.tune})
			tools, err := h.plain.ListTools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range companions {
				if got := slices.ContainsFunc(tools, func(tl taskclient.Tool) bool { return tl.Name == name }); got != tc.want {
					t.Errorf("%s listed: %v, want %v", name, got, tc.want)
				}
			}
			r := call(t, h.plain, "long_job", nil)
			if e := envelopeOf(t, r); !r.IsError || !strings.Contains(r.Text(), "so it was cancelled") || !strings.Contains(e.Reason, "so it was cancelled") {
				t.Errorf("long_job at its budget: isError %v, %q, %+v; want it cancelled, said in words", r.IsError, r.Text(), e)
			}
		})
	}
}

// TestHandleConfirmation checks a confirmation the client cannot be asked
// for: the call answers the handle of a task waiting for it, no job is
// submitted until task_answer says an explicit true, and an answer that is
// not one says why.
func TestHandleConfirmation(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(5*time.Second, "confirm_delete")})
	r := call(t, h.plain, "confirm_delete", map[string]any{"filename": "a.txt"})
	e := envelopeOf(t, r)
	if r.IsError || e.Outcome != "input_required" || e.Task == nil || e.InputRequests["jobbridge.confirm"] == nil || !strings.Contains(r.Text(), "Delete a.txt?") {
		t.Fatalf("confirm_delete without elicitation: isError %v, %q, %+v; want a handle waiting for the confirmation", r.IsError, r.Text(), e)
	}
	id := e.Task.ID
	row, err := h.store.Get(t.Context(), mapping.KeyOf(id), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		answers any
		says    string
	}{
		{map[string]any{"jobbridge.confirm": map[string]any{"confirm": false}}, "confirm: false"},
		{map[string]any{"confirm": "yes"}, "confirm must be true or false"},
	} {
		a := call(t, h.plain, "task_answer", map[string]any{"task_id": id, "answers": tc.answers})
		if ae := envelopeOf(t, a); ae.Outcome != "input_required" || !strings.Contains(a.Text(), tc.says) {
			t.Errorf("answer %v: %q, %+v; want the question still open, saying %q", tc.answers, a.Text(), ae, tc.says)
		}
		if n := h.fake.Submissions(row.CorrelationID); n != 0 {
			t.Fatalf("answer %v submitted %d jobs, want none", tc.answers, n)
		}
	}
	a := call(t, h.plain, "task_answer", map[string]any{"task_id": id, "answers": map[string]any{"jobbridge.confirm": map[string]any{"confirm": true}}})
	if a.IsError {
		t.Fatalf("confirming: %q", a.Text())
	}
	done := statusUntil(t, h.plain, id)
	if de := envelopeOf(t, done); done.IsError || de.Outcome != "succeeded" || !strings.HasPrefix(done.Text(), "Deleted a.txt.") {
		t.Errorf("after confirm: true: %q, %+v; want the job's result", done.Text(), de)
	}
	if n := h.fake.Submissions(row.CorrelationID); n != 1 {
		t.Errorf("%d jobs submitted after the confirmation, want 1", n)
	}
}

// TestHandleCancelAndFailure checks task_cancel (forwarded downstream, said
// in words, then the task reads cancelled) and a job that fails after the
// budget (task_status gives the failure with its reason).
func TestHandleCancelAndFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(200*time.Millisecond, "long_job", "failing_job")})
	r := call(t, h.plain, "long_job", nil)
	id := envelopeOf(t, r).Task.ID
	h.waitFor(id, "submitted", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, "running") })
	c := call(t, h.plain, "task_cancel", map[string]any{"task_id": id})
	if ce := envelopeOf(t, c); c.IsError || !strings.Contains(c.Text(), "cancel") || ce.Task == nil || ce.Task.ID != id {
		t.Errorf("task_cancel: isError %v, %q; want it to say what happened", c.IsError, c.Text())
	}
	end := statusUntil(t, h.plain, id)
	if ee := envelopeOf(t, end); ee.Outcome != "cancelled" || !end.IsError {
		t.Errorf("after task_cancel: %q, %+v; want the task cancelled", end.Text(), ee)
	}
	if n := h.fake.Cancels(jobIDOf(t, h, id)); n != 1 {
		t.Errorf("%d cancels reached the backend, want 1", n)
	}
	again := call(t, h.plain, "task_cancel", map[string]any{"task_id": id})
	if !strings.Contains(again.Text(), "already ended") {
		t.Errorf("task_cancel of an ended task: %q, want it to say so", again.Text())
	}

	r = call(t, h.plain, "failing_job", nil)
	fid := envelopeOf(t, r).Task.ID
	failed := statusUntil(t, h.plain, fid)
	if fe := envelopeOf(t, failed); !failed.IsError || fe.Outcome != "failed" || fe.Reason != "the job failed on purpose" || !strings.Contains(failed.Text(), "The job failed on purpose.") {
		t.Errorf("task_status of a failed job: isError %v, %q, %+v; want the failure with its reason", failed.IsError, failed.Text(), fe)
	}
}

// TestCompanionsAreBoundToTheCaller checks that another principal's (or
// another tenant's) handle reads as unknown, exactly like a missing one,
// and that they can neither cancel nor answer it.
func TestCompanionsAreBoundToTheCaller(t *testing.T) {
	h := newAuthHarness(t, handleTools(200*time.Millisecond, "long_job"))
	plain := func(c *taskclient.Client) *taskclient.Client { c.Tasks, c.Elicitation = false, false; return c }
	alice := plain(h.client("alice", nil))
	r := call(t, alice, "long_job", nil)
	id := envelopeOf(t, r).Task.ID
	missing := call(t, alice, "task_status", map[string]any{"task_id": "no-such-task-0000000000000000"})
	for who, c := range map[string]*taskclient.Client{
		"bob, same tenant":        plain(h.client("bob", nil)),
		"alice of another tenant": plain(h.client("alice", map[string]any{"tenant": "globex"})),
	} {
		for _, tool := range []string{"task_status", "task_cancel", "task_answer"} {
			got := call(t, c, tool, map[string]any{"task_id": id, "answers": map[string]any{"confirm": true}})
			if !got.IsError || strings.ReplaceAll(got.Text(), id, "ID") != strings.ReplaceAll(missing.Text(), "no-such-task-0000000000000000", "ID") {
				t.Errorf("%s: %s of alice's task: %q; want the answer for a missing task, %q", who, tool, got.Text(), missing.Text())
			}
		}
	}
	if own := envelopeOf(t, call(t, alice, "task_status", map[string]any{"task_id": id})); own.Outcome != "running" {
		t.Errorf("alice's own task after the others tried: %+v, want it still running", own)
	}
}

// TestCompanionsCountAgainstThePollLimit checks that the companion tools
// count against gets_per_second like tasks/* requests.
func TestCompanionsCountAgainstThePollLimit(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		handleTools(200*time.Millisecond, "long_job")(c)
		c.Limits.GetsPerSecond = 1
	}})
	id := envelopeOf(t, call(t, h.plain, "long_job", nil)).Task.ID
	var refused *taskclient.ToolResult
	for range 5 {
		if r := call(t, h.plain, "task_status", map[string]any{"task_id": id}); r.IsError {
			refused = r
			break
		}
	}
	if refused == nil || !strings.Contains(refused.Text(), "too many task requests") {
		t.Errorf("5 quick task_status calls at gets_per_second 1: last %+v; want one refused as too many", refused)
	}
}

// TestHandleCallerGoesAway checks that a call in the handle mode whose
// client goes away before it got an answer (its own time-out, say) does not
// leave a job nobody can follow: the task is cancelled, and so is the job.
func TestHandleCallerGoesAway(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(time.Minute, "slow_compute")})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		time.Sleep(400 * time.Millisecond)
		cancel()
	}()
	if res, err := h.plain.CallTool(ctx, "slow_compute", map[string]any{"seconds": 30}, nil); err == nil {
		t.Fatalf("the call answered %+v although the client went away", res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, _, err := h.store.ListByPrincipal(t.Context(), "anonymous", time.Now(), nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		// The cancel is recorded and sent; the task reads cancelled once the
		// job's end is next observed.
		if len(rows) == 1 && rows[0].CancelRequestedAt != nil && rows[0].JobID != "" && h.fake.Cancels(rows[0].JobID) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task of the abandoned call was not cancelled with its job: %+v", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHandleJobQuestions checks a job that asks questions while a call
// without tasks waits for it: the call answers the handle at once with the
// questions, task_answer delivers the answers (the two at once, or one by
// one), and the job then finishes.
func TestHandleJobQuestions(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: handleTools(time.Minute, "multi_input")})
	r := call(t, h.plain, "multi_input", nil)
	e := envelopeOf(t, r)
	if r.IsError || e.Outcome != "input_required" || len(e.InputRequests) != 2 || !strings.Contains(r.Text(), "What is your name?") {
		t.Fatalf("multi_input: isError %v, %q, %+v; want the handle with both questions", r.IsError, r.Text(), e)
	}
	id := e.Task.ID
	a := call(t, h.plain, "task_answer", map[string]any{"task_id": id, "answers": map[string]any{"name": map[string]any{"name": "Ada"}, "nosuch": map[string]any{}}})
	if ae := envelopeOf(t, a); a.IsError || ae.Outcome != "input_required" || len(ae.InputRequests) != 1 || !strings.Contains(a.Text(), `Ignored (no open question by that key, or not a form's content): "nosuch"`) {
		t.Errorf("answering one question: %q, %+v; want the other still open and the unknown key named", a.Text(), ae)
	}
	call(t, h.plain, "task_answer", map[string]any{"task_id": id, "answers": map[string]any{"confirm": true}})
	done := statusUntil(t, h.plain, id)
	if de := envelopeOf(t, done); done.IsError || de.Outcome != "succeeded" || !strings.HasPrefix(done.Text(), "All questions answered.") {
		t.Errorf("after both answers: %q, %+v; want the job's result", done.Text(), de)
	}
}
