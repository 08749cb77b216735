package examples_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/scripted"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// served runs the example's catalog through the bridge, as `jobbridge
// serve` does (a SQLite store, the MCP endpoint over HTTP), with the real
// REST adapter against the example's fake. tune adjusts the catalog's
// timings so that a scenario lasts seconds.
func served(t *testing.T, e *env, tune func(*env)) *taskclient.Client {
	t.Helper()
	if tune != nil {
		tune(e)
	}
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Options{
		Catalog:       e.cat,
		Store:         store,
		Adapters:      map[string]adapters.Adapter{e.backend: e.adapter},
		Build:         "test",
		SweepInterval: 50 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		srv.Close()
		b.Close()
		store.Close()
	})
	return &taskclient.Client{URL: srv.URL, Tasks: true, Elicitation: true}
}

// timings sets every tool's poll and refresh interval and missing grace.
func timings(refresh, grace time.Duration) func(*env) {
	return func(e *env) {
		for _, tl := range e.cat.Tools {
			tl.PollInterval, tl.RefreshInterval, tl.MissingGrace = refresh, refresh, grace
		}
	}
}

func createTask(t *testing.T, c *taskclient.Client, tool string, args map[string]any) string {
	t.Helper()
	res, err := c.CallTool(t.Context(), tool, args, nil)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if res.Task == nil {
		t.Fatalf("calling %s: want a task, got %+v", tool, res)
	}
	return res.Task.TaskID
}

// waitTask polls tasks/get until cond holds.
func waitTask(t *testing.T, c *taskclient.Client, id, what string, cond func(*taskclient.Task) bool) *taskclient.Task {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		task, err := c.GetTask(t.Context(), id)
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task never became %s; last: %s %q", what, task.Status, task.StatusMessage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resultText is the text a finished task gives: its result's, else its
// status message.
func resultText(task *taskclient.Task) string {
	if task.Result != nil {
		return task.Result.Text()
	}
	return task.StatusMessage
}

// TestJenkinsQueuedRequestThroughTheBridge: a Jenkins build request that
// never leaves the queue ends as the README's rule says (failed only for
// the bridge's own errors): cancelled when the task's cancel removed it
// from the queue, else completed with isError saying the job was never
// started, in Jenkins' words; a queue item that vanishes ends the same way
// after the tool's missing_grace.
func TestJenkinsQueuedRequestThroughTheBridge(t *testing.T) {
	jenkins := examples[0]
	if jenkins.dir != "jenkins" {
		t.Fatalf("examples[0] is %s, want jenkins", jenkins.dir)
	}
	t.Run("a queue cancel forwarded and honoured ends cancelled", func(t *testing.T) {
		e := setUp(t, jenkins)
		// Observed once when it is called, and again only after the cancel.
		c := served(t, e, timings(time.Hour, time.Minute))
		id := createTask(t, c, e.tool, map[string]any{"job": "app", "branch": "main"})
		waitTask(t, c, id, "queued", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, "queued at the backend") })
		if err := c.CancelTask(t.Context(), id); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		got := waitTask(t, c, id, "terminal", (*taskclient.Task).Terminal)
		if got.Status != taskclient.StatusCancelled || !strings.Contains(got.StatusMessage, "was cancelled: the job was never started") {
			t.Errorf("%s %q; want cancelled, saying the job was never started", got.Status, got.StatusMessage)
		}
		if n := len(e.requests("cancel_item")); n != 1 {
			t.Errorf("%d queue cancels, want 1", n)
		}
		if rs := e.requests("stop"); len(rs) != 0 {
			t.Errorf("build stops %+v, want none: no build started", rs)
		}
	})
	t.Run("a queued request Jenkins cancels on its own ends completed, never started", func(t *testing.T) {
		e := setUp(t, jenkins)
		c := served(t, e, timings(50*time.Millisecond, time.Minute))
		id := createTask(t, c, e.tool, map[string]any{"job": "app", "branch": "doomed"})
		got := waitTask(t, c, id, "terminal", (*taskclient.Task).Terminal)
		want := `The backend "jenkins" did not start the job: GET /queue/item/101/api/json answered 200: cancelled in the queue`
		if got.Status != taskclient.StatusCompleted || got.Result == nil || !got.Result.IsError || !strings.Contains(resultText(got), want) {
			t.Errorf("%s %q; want completed with isError, %q", got.Status, resultText(got), want)
		}
		if !strings.Contains(got.StatusMessage, "the job was never started: GET /queue/item/101/api/json answered 200: cancelled in the queue") {
			t.Errorf("status message %q; want it to say the job was never started, in Jenkins' words", got.StatusMessage)
		}
	})
	t.Run("a queue item that vanishes ends completed, never started, after missing_grace", func(t *testing.T) {
		e := setUp(t, jenkins)
		const grace = time.Second
		c := served(t, e, timings(50*time.Millisecond, grace))
		// The first answer shows the item queued; every later one is a 404
		// (the controller lost its queue).
		for at := 2; at < 1000; at++ {
			e.fake.Inject(scripted.Fault{Route: "queue", At: at, Response: scripted.Response{Status: 404}})
		}
		id := createTask(t, c, e.tool, map[string]any{"job": "app", "branch": "main"})
		missing := waitTask(t, c, id, "told the queue item is missing", func(tk *taskclient.Task) bool {
			return tk.Terminal() || strings.Contains(tk.StatusMessage, "answered 404")
		})
		seen := time.Now()
		t.Logf("while missing: %s %q", missing.Status, missing.StatusMessage)
		if missing.Status != taskclient.StatusWorking {
			t.Fatalf("%s %q; want working while the missing grace lasts", missing.Status, missing.StatusMessage)
		}
		got := waitTask(t, c, id, "terminal", (*taskclient.Task).Terminal)
		if waited := time.Since(seen); waited < grace/2 {
			t.Errorf("ended %s after the first 404 was told; want about the missing grace (%s)", waited, grace)
		}
		want := `The backend "jenkins" did not start the job: GET /queue/item/101/api/json answered 404: the queue item is gone and no job was ever named for it`
		if got.Status != taskclient.StatusCompleted || got.Result == nil || !got.Result.IsError || !strings.Contains(resultText(got), want) {
			t.Errorf("%s %q; want completed with isError, %q", got.Status, resultText(got), want)
		}
	})
	t.Run("a queue item never seen is a catalog or path mistake: failed after missing_grace", func(t *testing.T) {
		e := setUp(t, jenkins)
		c := served(t, e, timings(50*time.Millisecond, 500*time.Millisecond))
		for at := 1; at < 1000; at++ {
			e.fake.Inject(scripted.Fault{Route: "queue", At: at, Response: scripted.Response{Status: 404}})
		}
		id := createTask(t, c, e.tool, map[string]any{"job": "app", "branch": "main"})
		got := waitTask(t, c, id, "terminal", (*taskclient.Task).Terminal)
		want := "GET /queue/item/101/api/json answered 404"
		if got.Status != taskclient.StatusFailed || !strings.Contains(got.StatusMessage, "was never listed") || !strings.Contains(got.StatusMessage, want) {
			t.Errorf("%s %q; want failed, saying the queue item was never listed: %q", got.Status, got.StatusMessage, want)
		}
	})
}

// A queue rule's `is:` is checked as the others are, with its position in
// the catalog: `cancelled` is a meaning of the job_id.queue call.
func TestJenkinsQueueRuleIsChecked(t *testing.T) {
	path := filepath.Join("jenkins", "catalog.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "is: cancelled ", "is: canceled  ", 1)
	if text == string(data) {
		t.Fatal("the Jenkins catalog has no queue rule saying is: cancelled")
	}
	_, err = catalog.Parse(path, []byte(text), restType)
	before, _, _ := strings.Cut(text, "is: canceled")
	line, col := strings.Count(before, "\n")+1, len(before)-strings.LastIndex(before, "\n")+len("is: ")
	want := fmt.Sprintf(`jenkins/catalog.yaml:%d:%d: tools[0].job.job_id.queue.outcomes[0].is: "canceled" is not an outcome of a job_id.queue call (use one of success, not_found, cancelled, refused, retry_later)`, line, col)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse = %v;\nwant %s", err, want)
	}
}
