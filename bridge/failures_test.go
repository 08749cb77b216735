package bridge_test

import (
	"errors"
	"log/slog"
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
	for _, want := range []string{"RUNNING", "checking the job failed", "GET /jobs/mem-1 answered 500: an expired or rejected token", "1 call", "stays alive"} {
		if !strings.Contains(got.StatusMessage, want) {
			t.Errorf("status message %q lacks %q", got.StatusMessage, want)
		}
	}
	for range 5 {
		clk.Advance(30 * time.Second)
		got = getTask(t, h, task.TaskID)
	}
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "calls in 2m30s") || !strings.Contains(got.StatusMessage, "TTL ends in") {
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
