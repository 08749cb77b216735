package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// The failure paths of issue 21: every problem that keeps a task from being
// a faithful view of its job reaches the caller, in the backend's words,
// and the task ends when docs/failures.md says.

// waitSubmitted waits until the task's row holds its job, without a
// tasks/get (which would observe the job).
func waitSubmitted(t *testing.T, h *harness, id string) *mapping.Task {
	t.Helper()
	var row *mapping.Task
	waitUntil(t, "the job submitted", func() bool {
		r, err := h.store.Get(t.Context(), mapping.KeyOf(id), "anonymous", time.Now().Add(-time.Hour))
		row = r
		return err == nil && r.Phase == mapping.PhaseSubmitted
	})
	return row
}

// getTask is tasks/get, failing the test on an error.
func getTask(t *testing.T, h *harness, id string) *taskclient.Task {
	t.Helper()
	got, err := h.tasks.GetTask(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// untilTerminal advances the clock by step and polls until the task ends
// (at most n steps).
func untilTerminal(t *testing.T, h *harness, clk *clock, id string, step time.Duration, n int) *taskclient.Task {
	t.Helper()
	for range n {
		clk.Advance(step)
		if got := getTask(t, h, id); got.Status != "working" && got.Status != "input_required" {
			return got
		}
	}
	t.Fatalf("task still live after %s", time.Duration(n)*step)
	return nil
}

// Item 1: a status call that keeps failing is told with its class, the
// call and its HTTP status, the backend's words, how long and what happens
// next; a job observed before stays alive within its TTL.
func TestFailingStatusCallIsTold(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour, tune: func(c *catalog.Catalog) {
		c.Tool("long_job").MissingGrace = time.Minute
	}})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	mem.setObsErr("mem-1", &adapters.CallError{Class: adapters.ProblemError, Method: "GET", Path: "/jobs/mem-1", Status: 500,
		Message: "an expired or rejected token", Err: errors.New("is: error")})
	clk.Advance(time.Second)
	got := getTask(t, h, task.TaskID)
	for _, want := range []string{"RUNNING", "checking the job failed", "GET /jobs/mem-1 answered 500: an expired or rejected token", "the backend answered with an error", "stays alive"} {
		if !strings.Contains(got.StatusMessage, want) {
			t.Errorf("status message %q lacks %q", got.StatusMessage, want)
		}
	}
	for range 5 {
		clk.Advance(30 * time.Second)
		got = getTask(t, h, task.TaskID)
	}
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "calls in a row, for 2m30s") || !strings.Contains(got.StatusMessage, "TTL ends in") {
		t.Errorf("after 2m30s past the missing grace: %s %q; want working, saying how long and that it stays alive", got.Status, got.StatusMessage)
	}
	// The problem clears with the next good answer.
	mem.setObsErr("mem-1", nil)
	clk.Advance(time.Second)
	if got = getTask(t, h, task.TaskID); got.StatusMessage != "RUNNING" {
		t.Errorf("after the backend recovered: %q, want RUNNING", got.StatusMessage)
	}
}

// Item 1: a job whose status calls fail from the first poll was never
// observed (most likely a catalog or credential mistake): it ends failed
// after the tool's missing grace, with the reason.
func TestNeverObservedJobFailsAfterGrace(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour, tune: func(c *catalog.Catalog) {
		c.Tool("long_job").MissingGrace = time.Minute
	}})
	mem.set(func(m *memBackend) {
		m.missing = &adapters.CallError{Class: adapters.ProblemRefused, Method: "GET", Path: "/api/jobs/mem-1", Status: 401, Message: "token expired"}
	})
	task := h.createTask("long_job", nil)
	waitSubmitted(t, h, task.TaskID)
	mem.forget("mem-1")
	clk.Advance(time.Second)
	got := getTask(t, h, task.TaskID)
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "GET /api/jobs/mem-1 answered 401: token expired") || !strings.Contains(got.StatusMessage, "the task fails in") {
		t.Errorf("first poll: %s %q; want working, saying the call, its answer and when the task fails", got.Status, got.StatusMessage)
	}
	got = untilTerminal(t, h, clk, task.TaskID, 10*time.Second, 20)
	if got.Status != "failed" || got.Error == nil || !strings.Contains(got.Error.Message, "GET /api/jobs/mem-1 answered 401: token expired") || !strings.Contains(got.Error.Message, "never observed") {
		t.Errorf("got %s %+v; want failed saying the job was never observed and why", got.Status, got.Error)
	}
}

// Item 2: a job never observed that the backend does not list is "not
// listed yet", in the backend's words (the not_found rule's message), and
// fails with them after the missing grace; a job observed before that
// vanishes says so, and ends with its outcome unknown.
func TestNotFoundKeepsItsWords(t *testing.T) {
	const words = "Invalid job id specified; jobs are purged after MinJobAge"
	notFound := &adapters.CallError{Class: adapters.ProblemNotFound, Method: "GET", Path: "/slurm/v0.0.40/job/mem-1", Status: 404, Message: words, Err: adapters.ErrJobNotFound}
	for _, tt := range []struct {
		name       string
		observed   bool
		wantLive   string
		wantStatus string
		wantEnd    string
	}{
		{"never listed", false, "the job is not listed by jobs yet", "failed", "was never listed"},
		{"vanished", true, "the job vanished from jobs", "completed", "no longer reports job mem-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{now: time.Now()}
			mem := newMemBackend(clk.Now)
			mem.missing = notFound
			h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour, tune: func(c *catalog.Catalog) {
				c.Tool("long_job").MissingGrace = time.Minute
			}})
			task := h.createTask("long_job", nil)
			if tt.observed {
				h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
			} else {
				waitSubmitted(t, h, task.TaskID)
			}
			mem.forget("mem-1")
			clk.Advance(time.Second)
			got := getTask(t, h, task.TaskID)
			if got.Status != "working" || !strings.Contains(got.StatusMessage, tt.wantLive) || !strings.Contains(got.StatusMessage, words) || !strings.Contains(got.StatusMessage, "answered 404") {
				t.Errorf("within the grace: %s %q; want working saying %q in the backend's words", got.Status, got.StatusMessage, tt.wantLive)
			}
			got = untilTerminal(t, h, clk, task.TaskID, 10*time.Second, 20)
			text := got.StatusMessage
			if got.Error != nil {
				text = got.Error.Message
			}
			if got.Status != tt.wantStatus || !strings.Contains(text, tt.wantEnd) || !strings.Contains(text, words) {
				t.Errorf("after the grace: %s %q; want %s saying %q with the backend's words", got.Status, text, tt.wantStatus, tt.wantEnd)
			}
		})
	}
}

// Item 3: a status call answered 404 with no rule (a typo in status.path)
// names the call and its answer from the first poll, through the real REST
// adapter; the job was never observed, so the task fails after the grace.
func TestStatusPathTypoIsNamedFromTheFirstPoll(t *testing.T) {
	h := newHarness(t, harnessOptions{sweep: time.Hour})
	remove := h.fake.InjectUntil(jobapi.Fault{Method: "GET", Path: "/jobs/", Status: 404})
	defer remove()
	task := h.createTask("long_job", nil)
	waitSubmitted(t, h, task.TaskID)
	got := getTask(t, h, task.TaskID)
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "404") || !strings.Contains(got.StatusMessage, "not listed") {
		t.Errorf("first poll: %s %q; want working, naming the 404", got.Status, got.StatusMessage)
	}
	got = h.waitTerminal(task.TaskID)
	if got.Status != "failed" || got.Error == nil || !strings.Contains(got.Error.Message, "404") {
		t.Errorf("got %s %+v; want failed naming the 404", got.Status, got.Error)
	}
}

// Item 3, with the adapters' typed problem: the caller reads the call and
// its status, not patience.
func TestStatus404NamesTheCall(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	mem.missing = &adapters.CallError{Class: adapters.ProblemNotFound, Method: "GET", Path: "/jobs/mem-1", Status: 404, Err: adapters.ErrJobNotFound}
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour})
	task := h.createTask("long_job", nil)
	waitSubmitted(t, h, task.TaskID)
	mem.forget("mem-1")
	if got := getTask(t, h, task.TaskID); !strings.Contains(got.StatusMessage, "GET /jobs/mem-1 answered 404") {
		t.Errorf("first poll: %q; want it to say GET /jobs/mem-1 answered 404", got.StatusMessage)
	}
}

// Item 4: a state the catalog does not map is told at once, logged once as
// a catalog problem, and ends the task failed after the missing grace.
func TestUnmappedStateIsToldAndEnds(t *testing.T) {
	const words = "the backend reports state `finished`, which the catalog does not map; mapped: queued, running, done"
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	var logs syncBuffer
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour, logger: slog.New(slog.NewTextHandler(&logs, nil)), tune: func(c *catalog.Catalog) {
		c.Tool("long_job").MissingGrace = time.Minute
	}})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	mem.setObsErr("mem-1", &adapters.CallError{Class: adapters.ProblemUnmapped, Method: "GET", Path: "/jobs/mem-1", Status: 200, Message: words, Err: adapters.ErrUnmappedState})
	clk.Advance(time.Second)
	got := getTask(t, h, task.TaskID)
	if got.Status != "working" || !strings.Contains(got.StatusMessage, words) || !strings.Contains(got.StatusMessage, "catalog problem") {
		t.Errorf("first poll: %s %q; want working, saying the state is not mapped", got.Status, got.StatusMessage)
	}
	got = untilTerminal(t, h, clk, task.TaskID, 10*time.Second, 20)
	if got.Status != "failed" || got.Error == nil || !strings.Contains(got.Error.Message, words) {
		t.Errorf("after the grace: %s %+v; want failed with the reason", got.Status, got.Error)
	}
	if n := strings.Count(logs.String(), "catalog problem"); n != 1 {
		t.Errorf("%d log lines name the catalog problem over several polls; want 1:\n%s", n, logs.String())
	}
}

// Item 5: a cancel the backend keeps refusing is sent again with an
// exponential backoff (with jitter, capped), not at every sweep; the
// attempts are in the status message and the resends in a metric.
func TestRefusedCancelsBackOff(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	mem.cancelHook = func(*memJob) (error, bool) {
		return fmt.Errorf("%w: HTTP 409: the job is in a protected phase", adapters.ErrCancelRefused), true
	}
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	// A sweep every simulated second for 30 seconds: without backoff that
	// is 30 more cancels (the demo saw 18 in 30s at its sweep interval).
	for range 30 {
		clk.Advance(time.Second)
		h.bridge.Sweep()
	}
	_, _, cancels := mem.counts()
	// Attempts 1..n wait at least 1, 2, 4, 8 s (half of 2, 4, 8, 16 s).
	if cancels < 3 || cancels > 6 {
		t.Errorf("%d cancels in 30s of sweeps every second; want 3 to 6 (backing off)", cancels)
	}
	got := getTask(t, h, task.TaskID)
	want := fmt.Sprintf("%d attempts; trying again in", cancels)
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "refused it") || !strings.Contains(got.StatusMessage, want) {
		t.Errorf("status %s %q; want working, saying the cancel was refused and %q", got.Status, got.StatusMessage, want)
	}
	rec := httptest.NewRecorder()
	h.bridge.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := fmt.Sprintf(`jobbridge_cancel_resends_total{backend="jobs"} %d`, cancels-1); !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %q", want)
	}
}

// Item 1: a cancel answered with an error no rule reads says what the
// backend answered, not that it could not be reached.
func TestCancelErrorIsToldInTheBackendsWords(t *testing.T) {
	mem := newMemBackend(nil)
	mem.cancelHook = func(*memJob) (error, bool) {
		return &adapters.CallError{Class: adapters.ProblemError, Method: "POST", Path: "/jobs/mem-1/cancel", Status: 500, Message: "scheduler busy"}, true
	}
	h := newHarness(t, harnessOptions{adapters: withMem(mem), sweep: time.Hour})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	got := getTask(t, h, task.TaskID)
	want := "jobs answered the cancel with an error (POST /jobs/mem-1/cancel answered 500: scheduler busy); 1 attempt; trying again in"
	if !strings.Contains(got.StatusMessage, want) || strings.Contains(got.StatusMessage, "could not be reached") {
		t.Errorf("status %q; want it to say %q", got.StatusMessage, want)
	}
}

// Item 6: a job (a queued request) the backend reports failed after it
// accepted the task's cancel is cancelled, not failed: the cancel wins.
func TestCancelWinsOverAFailureItCaused(t *testing.T) {
	mem := newMemBackend(nil)
	mem.cancelHook = func(j *memJob) (error, bool) { return nil, true } // accepted; the backend reports it later
	h := newHarness(t, harnessOptions{adapters: withMem(mem), sweep: time.Hour})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	mem.finish("mem-1", adapters.StateFailed, "the queued request was cancelled", time.Now())
	if got := h.waitTerminal(task.TaskID); got.Status != "cancelled" || !strings.Contains(got.StatusMessage, "the queued request was cancelled") {
		t.Errorf("%s %q; want cancelled, in the backend's words", got.Status, got.StatusMessage)
	}
}

// Item 6: a queued request the backend never started ends consistently
// with the rule that failed is only for the bridge's own errors: cancelled
// when the task asked to cancel (the cancel wins), else completed with
// isError saying the job was never started.
func TestQueuedRequestNeverStarted(t *testing.T) {
	neverStarted := &adapters.CallError{Class: adapters.ProblemNotFound, Method: "GET", Path: "/queue/item/7", Status: 404,
		Message: "the queued request was cancelled", Err: adapters.ErrNeverStarted}
	for _, tt := range []struct {
		name       string
		cancel     bool
		wantStatus string
		want       string
	}{
		{"after the task's cancel", true, "cancelled", "the job was never started"},
		{"on the backend's own", false, "completed", `The backend "jobs" did not start the job: GET /queue/item/7 answered 404: the queued request was cancelled`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemBackend(nil)
			mem.cancelHook = func(*memJob) (error, bool) { return nil, true } // honoured; the queue item goes
			h := newHarness(t, harnessOptions{adapters: withMem(mem), sweep: time.Hour})
			task := h.createTask("long_job", nil)
			h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
			if tt.cancel {
				if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
					t.Fatal(err)
				}
			}
			mem.setObsErr("mem-1", neverStarted)
			got := h.waitTerminal(task.TaskID)
			text := got.StatusMessage
			if got.Result != nil {
				text = got.Result.Text()
			}
			if got.Status != tt.wantStatus || !strings.Contains(text, tt.want) || got.Status == "completed" && !got.Result.IsError {
				t.Errorf("%s %q; want %s saying %q", got.Status, text, tt.wantStatus, tt.want)
			}
		})
	}
}

// Item 11: a refused start is said in one sentence: what happened, the
// backend's words, what to do; not three wrappers deep.
func TestRefusedStartIsOneSentence(t *testing.T) {
	mem := newMemBackend(nil)
	mem.startHook = func(int) (error, bool) {
		return fmt.Errorf("starting long_job job: %w", &adapters.CallError{Class: adapters.ProblemError, Method: "POST", Path: "/slurm/v0.0.40/job/submit", Status: 500,
			Message: "Invalid partition name specified", Err: errors.New("backend refused it")}), true
	}
	h := newHarness(t, harnessOptions{adapters: withMem(mem), sweep: time.Hour})
	task := h.createTask("long_job", nil)
	got := h.waitTerminal(task.TaskID)
	want := `The backend "jobs" did not start the job: POST /slurm/v0.0.40/job/submit answered 500: Invalid partition name specified. No job was created; check the arguments and call again, or ask the backend's operator.`
	if got.Status != "completed" || got.Result == nil || !got.Result.IsError || got.Result.Text() != want {
		t.Errorf("got %s %+v;\nwant completed, isError, %q", got.Status, got.Result, want)
	}
}

// Item 8, 2026-07-28: an answer that does not confirm is asked again: the
// next tasks/get carries the question with the reason in its message.
func TestUnconfirmedAnswerIsAskedAgainWithTheReason(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("confirm_delete", map[string]any{"filename": "prod.db"})
	key := confirmKeyOf(t, h.waitStatus(task.TaskID, "input_required"))
	if err := h.tasks.UpdateTask(t.Context(), task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{}}}); err != nil {
		t.Fatal(err)
	}
	got := getTask(t, h, task.TaskID)
	if got.Status != "input_required" || len(got.InputRequests) != 1 {
		t.Fatalf("got %s with %d requests; want the question again", got.Status, len(got.InputRequests))
	}
	e, err := got.InputRequests[key].Elicitation()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Message, "Not confirmed: the answer did not say confirm: true (the box was not ticked)") || !strings.Contains(e.Message, "prod.db") {
		t.Errorf("question %q; want the reason, then the question", e.Message)
	}
}

// Item 8, 2025-11-25: a form answered without the box is asked again
// through tasks/result, with the reason, and a decline then ends the task
// cancelled with no job.
func TestLegacyUnconfirmedFormIsAskedAgain(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := newLegacyClient(t, h.srv.URL, `{"elicitation":{}}`)
	var asked []string
	c.elicit = func(params json.RawMessage) any {
		var p struct {
			Message string `json:"message"`
		}
		json.Unmarshal(params, &p)
		asked = append(asked, p.Message)
		if len(asked) == 1 {
			return map[string]any{"action": "accept", "content": map[string]any{"confirm": false}} // the box left unticked
		}
		return map[string]any{"action": "decline"}
	}
	task := c.createTask("confirm_delete", map[string]any{"filename": "prod.db"})
	res, rerr := c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if rerr != nil {
		t.Fatalf("tasks/result: %+v", rerr)
	}
	if len(asked) != 2 || !strings.HasPrefix(asked[1], "Not confirmed: the answer said confirm: false") || !strings.Contains(asked[1], "prod.db") {
		t.Fatalf("asked %q; want the question twice, the second with the reason", asked)
	}
	if !strings.Contains(string(res), "declined") || h.fake.Submissions("") != 0 {
		t.Errorf("tasks/result %s; want the decline, and no job", res)
	}
	if got := c.waitTerminal(task.TaskID); got.Status != "cancelled" {
		t.Errorf("task %s; want cancelled", got.Status)
	}
}

// failingFinder is a backend whose lookups fail with err.
type failingFinder struct {
	*memBackend
	err error
}

func (f *failingFinder) Find(context.Context, adapters.StartRequest) (adapters.JobRef, bool, error) {
	return adapters.JobRef{}, false, f.err
}

// Item 1, find: a lookup that fails after an unknown outcome says why, in
// the backend's words, not only that it failed.
func TestFailingLookupSaysWhy(t *testing.T) {
	mem := newMemBackend(nil)
	mem.startHook = func(int) (error, bool) { return fmt.Errorf("%w: connection reset", adapters.ErrOutcomeUnknown), true }
	f := &failingFinder{memBackend: mem, err: &adapters.CallError{Class: adapters.ProblemError, Method: "GET", Path: "/jobs", Status: 500, Message: "database locked"}}
	h := newHarness(t, harnessOptions{adapters: func(map[string]adapters.Adapter) map[string]adapters.Adapter {
		return map[string]adapters.Adapter{"jobs": f}
	}, sweep: time.Hour, lookupBackoff: 20 * time.Millisecond})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "told why", func(tk *taskclient.Task) bool {
		return strings.Contains(tk.StatusMessage, `looking the job up on "jobs" failed (GET /jobs answered 500: database locked); trying again`)
	})
	// The problem is typed in the row, not only in the text.
	row, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p := row.Problem; p.Class != "error" || p.Call != "GET /jobs" || p.Status != 500 || p.Message != "database locked" || p.Since == nil || p.Count < 1 {
		t.Errorf("stored problem %+v; want the failed lookup", p)
	}
}
