package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// harness runs a bridge over HTTP against the REST job API fake, with a
// SQLite store, as `jobbridge serve` does.
type harness struct {
	t         testing.TB
	fake      *jobapi.Server
	cat       *catalog.Catalog
	storePath string
	store     mapping.Store
	bridge    *bridge.Bridge
	srv       *httptest.Server
	tasks     *taskclient.Client // declares tasks and elicitation
	plain     *taskclient.Client // declares nothing
}

type harnessOptions struct {
	principal     string
	storePath     string
	fake          *jobapi.Server
	submitTimeout time.Duration
	sweep         time.Duration
	now           func() time.Time
	tune          func(*catalog.Catalog)
	auth          *auth.Authenticator
	adapters      func(map[string]adapters.Adapter) map[string]adapters.Adapter
	lookupBackoff time.Duration
	logger        *slog.Logger
	// sharedStore opens the store beside another harness's on the same file
	// (sqlite.Options.Shared): a second writer such as the operator's CLI.
	sharedStore bool
	// wrapStore, when set, wraps the store the bridge uses.
	wrapStore func(mapping.Store) mapping.Store
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, fake: o.fake}
	if h.fake == nil {
		h.fake = jobapi.New(nil)
		url, err := h.fake.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.fake.Close() })
		h.cat = loadCatalog(t, url)
	} else {
		h.cat = loadCatalog(t, fakeURL(t, h.fake))
	}
	h.storePath = o.storePath
	if h.storePath == "" {
		h.storePath = filepath.Join(t.TempDir(), "tasks.db")
	}
	h.start(o)
	return h
}

var fakeURLs sync.Map // *jobapi.Server -> base URL

func fakeURL(t testing.TB, s *jobapi.Server) string {
	v, ok := fakeURLs.Load(s)
	if !ok {
		t.Fatal("fake not started by the harness")
	}
	return v.(string)
}

// restType is the REST backend type, as jobbridge serve hands it to the
// catalog loader.
var restType = catalog.BackendType{
	Name:      "rest",
	NewConfig: func() catalog.Block { return new(rest.BackendConfig) },
	NewJob:    func() catalog.JobBlock { return new(rest.JobConfig) },
}

// restBackend returns the config of the catalog's REST backend called name.
func restBackend(cat *catalog.Catalog, name string) *rest.BackendConfig {
	return cat.Backends[name].Config.(*rest.BackendConfig)
}

func loadCatalog(t testing.TB, baseURL string) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load("testdata/catalog.yaml", restType)
	if err != nil {
		t.Fatalf("loading catalog: %v", err)
	}
	for _, be := range cat.Backends {
		be.Config.(*rest.BackendConfig).BaseURL = baseURL
	}
	return cat
}

func (h *harness) start(o harnessOptions) {
	t := h.t
	fakeURLs.Store(h.fake, restBackend(h.cat, "jobs").BaseURL)
	if o.tune != nil {
		o.tune(h.cat)
	}
	store, err := sqlite.Open(t.Context(), h.storePath, &sqlite.Options{Shared: o.sharedStore})
	if err != nil {
		t.Fatal(err)
	}
	h.store = store
	var bridgeStore mapping.Store = store
	if o.wrapStore != nil {
		bridgeStore = o.wrapStore(store)
	}
	jobs := map[string]rest.JobConfig{}
	for _, tl := range h.cat.Tools {
		jobs[tl.Name] = *tl.Job.(*rest.JobConfig)
	}
	a, err := rest.New("jobs", *restBackend(h.cat, "jobs"), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]adapters.Adapter{"jobs": a}
	if o.adapters != nil {
		set = o.adapters(set)
	}
	b, err := bridge.New(bridge.Options{
		Catalog:       h.cat,
		Store:         bridgeStore,
		Adapters:      set,
		Build:         "test",
		HTTPPrincipal: o.principal,
		SubmitTimeout: o.submitTimeout,
		SweepInterval: o.sweep,
		LookupBackoff: o.lookupBackoff,
		Now:           o.now,
		Auth:          o.auth,
		Logger:        o.logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.bridge = b
	h.srv = httptest.NewServer(b.Handler())
	h.tasks = &taskclient.Client{URL: h.srv.URL, Tasks: true, Elicitation: true}
	h.plain = &taskclient.Client{URL: h.srv.URL}
	t.Cleanup(h.stop)
}

// stop shuts the server down as a process exit would (the store file stays).
func (h *harness) stop() {
	if h.srv == nil {
		return
	}
	h.srv.Close()
	h.bridge.Close()
	h.store.Close()
	h.srv = nil
}

func (h *harness) createTask(tool string, args any) *taskclient.Task {
	h.t.Helper()
	res, err := h.tasks.CallTool(h.t.Context(), tool, args, nil)
	if err != nil {
		h.t.Fatalf("calling %s: %v", tool, err)
	}
	if res.Task == nil {
		h.t.Fatalf("calling %s: want a task, got %+v", tool, res)
	}
	return res.Task
}

// waitFor polls tasks/get until cond holds or the test's deadline nears.
func (h *harness) waitFor(id string, what string, cond func(*taskclient.Task) bool) *taskclient.Task {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		task, err := h.tasks.GetTask(h.t.Context(), id)
		if err != nil {
			h.t.Fatalf("tasks/get: %v", err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task never became %s; last: status=%s message=%q", what, task.Status, task.StatusMessage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) waitTerminal(id string) *taskclient.Task {
	return h.waitFor(id, "terminal", (*taskclient.Task).Terminal)
}

func (h *harness) waitStatus(id, status string) *taskclient.Task {
	return h.waitFor(id, status, func(t *taskclient.Task) bool { return t.Status == status })
}

func rpcCode(t *testing.T, err error) int {
	t.Helper()
	var rpc *taskclient.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return rpc.Code
}

func TestDiscoverAdvertisesTasksExtension(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	d, err := h.plain.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ext, ok := d.Extension(bridge.TasksExtension)
	if !ok || string(ext) != "{}" {
		t.Errorf("extension %s = %s, %v; want exactly {}", bridge.TasksExtension, ext, ok)
	}
	tools, err := h.plain.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != len(h.cat.Tools) {
		t.Errorf("tools/list has %d tools, catalog %d", len(tools), len(h.cat.Tools))
	}
}

func TestCallModes(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()

	t.Run("never is synchronous even with the extension", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "greet", map[string]any{"name": "Ada"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result == nil || res.Result.Text() != "Hello, Ada!" || res.Result.ResultType != "complete" {
			t.Fatalf("got %+v, want the sync result Hello, Ada!", res)
		}
	})
	t.Run("optional without the extension waits for the job", func(t *testing.T) {
		res, err := h.plain.CallTool(ctx, "slow_compute", map[string]any{"seconds": 0.1, "label": "x"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result == nil || !strings.Contains(res.Result.Text(), "Computed x") {
			t.Fatalf("got %+v, want the job's result", res)
		}
	})
	t.Run("optional with the extension returns a task", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 0.1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Task == nil {
			t.Fatalf("got %+v, want a task", res)
		}
		var raw map[string]any
		if err := json.Unmarshal(res.Task.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		if raw["resultType"] != "task" {
			t.Errorf("resultType = %v, want task", raw["resultType"])
		}
		for _, k := range []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("CreateTaskResult lacks %s: %s", k, res.Task.Raw)
			}
		}
		for _, k := range []string{"task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"} {
			if _, ok := raw[k]; ok {
				t.Errorf("CreateTaskResult carries %s: %s", k, res.Task.Raw)
			}
		}
		if len(res.Task.TaskID) < 22 {
			t.Errorf("task ID %q is shorter than 128 bits of base64", res.Task.TaskID)
		}
		// Durable before the answer: an immediate tasks/get resolves.
		got, err := h.tasks.GetTask(ctx, res.Task.TaskID)
		if err != nil || got.TaskID != res.Task.TaskID {
			t.Fatalf("immediate tasks/get: %v %+v", err, got)
		}
	})
	t.Run("required without the extension is -32021", func(t *testing.T) {
		_, err := h.plain.CallTool(ctx, "failing_job", nil, nil)
		if code := rpcCode(t, err); code != -32021 {
			t.Fatalf("code %d, want -32021", code)
		}
		var rpc *taskclient.RPCError
		errors.As(err, &rpc)
		var data struct {
			RequiredCapabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"requiredCapabilities"`
		}
		if err := json.Unmarshal(rpc.Data, &data); err != nil || data.RequiredCapabilities.Extensions[bridge.TasksExtension] == nil {
			t.Errorf("error data %s lacks requiredCapabilities.extensions[%s]", rpc.Data, bridge.TasksExtension)
		}
	})
	t.Run("invalid arguments are a tool error and start nothing", func(t *testing.T) {
		before := h.fake.Requests()
		res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": "soon"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), "invalid arguments") {
			t.Fatalf("got %+v, want an isError result about invalid arguments", res)
		}
		if n := h.fake.Requests() - before; n != 0 {
			t.Errorf("%d backend requests for invalid arguments, want 0", n)
		}
	})
}

func TestTaskLifecycle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	tests := []struct {
		tool      string
		args      map[string]any
		status    string
		isError   bool
		text      string
		errorCode int
	}{
		{tool: "slow_compute", args: map[string]any{"seconds": 0.2, "label": "life"}, status: "completed", text: "Computed life in 0.2s."},
		{tool: "failing_job", status: "completed", isError: true, text: "The job failed on purpose."},
		{tool: "protocol_error_job", status: "failed", errorCode: -32603},
		{tool: "test_tool_with_task", args: map[string]any{"name": "Bo"}, status: "completed", text: "Hello, Bo! The task is done."},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			task := h.createTask(tc.tool, tc.args)
			got := h.waitTerminal(task.TaskID)
			if got.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", got.Status, got.StatusMessage, tc.status)
			}
			if got.ResultType != "complete" {
				t.Errorf("tasks/get resultType %q, want complete", got.ResultType)
			}
			switch tc.status {
			case "completed":
				if got.Result == nil || got.Error != nil {
					t.Fatalf("completed task: result %v error %v", got.Result, got.Error)
				}
				if got.Result.IsError != tc.isError || !strings.Contains(got.Result.Text(), tc.text) {
					t.Errorf("result isError=%v text=%q, want %v %q", got.Result.IsError, got.Result.Text(), tc.isError, tc.text)
				}
				if got.Result.ResultType != "complete" {
					t.Errorf("inlined result resultType %q, want complete", got.Result.ResultType)
				}
			case "failed":
				if got.Error == nil || got.Result != nil || got.Error.Code != tc.errorCode || got.Error.Message == "" {
					t.Errorf("failed task: error %+v result %v, want code %d and no result", got.Error, got.Result, tc.errorCode)
				}
			}
		})
	}
}

func TestTerminalOutcomeIsKept(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "kept"})
	first := h.waitTerminal(task.TaskID)
	jobID := jobIDOf(t, h, task.TaskID)
	h.fake.Purge(jobID) // the backend forgets the job
	time.Sleep(150 * time.Millisecond)
	again, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != first.Status || again.Result.Text() != first.Result.Text() {
		t.Errorf("terminal task changed after the backend purged its job: %s %q → %s %q", first.Status, first.Result.Text(), again.Status, again.Result.Text())
	}
}

// jobIDOf reads the backend job ID of a task from its row.
func jobIDOf(t *testing.T, h *harness, taskID string) string {
	t.Helper()
	row, err := h.store.Get(t.Context(), mapping.KeyOf(taskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ref adapters.JobRef
	if err := json.Unmarshal(row.JobRef, &ref); err != nil {
		t.Fatalf("task has no job reference: %v", err)
	}
	return ref.ID
}

func TestTasksMethodsNeedTheExtension(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "submitted", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, "running") })
	calls := map[string]func() error{
		"tasks/get":    func() error { _, err := h.plain.GetTask(ctx, task.TaskID); return err },
		"tasks/update": func() error { return h.plain.UpdateTask(ctx, task.TaskID, map[string]any{}) },
		"tasks/cancel": func() error { return h.plain.CancelTask(ctx, task.TaskID) },
	}
	for name, call := range calls {
		if code := rpcCode(t, call()); code != -32021 {
			t.Errorf("%s without the extension: code %d, want -32021", name, code)
		}
	}
	if h.fake.Cancels(jobIDOf(t, h, task.TaskID)) != 0 {
		t.Error("a rejected tasks/cancel reached the backend")
	}
}

func TestUnknownAndForeignTasksLookAlike(t *testing.T) {
	alice := newHarness(t, harnessOptions{principal: "alice"})
	alice.stop()
	// Bob's server shares Alice's store, as a second replica would.
	task := func() string {
		h := newHarness(t, harnessOptions{principal: "alice", storePath: alice.storePath, fake: alice.fake})
		defer h.stop()
		return h.createTask("long_job", nil).TaskID
	}()
	bob := newHarness(t, harnessOptions{principal: "bob", storePath: alice.storePath, fake: alice.fake})
	ctx := t.Context()
	probe := func(id string) []string {
		var out []string
		_, err := bob.tasks.GetTask(ctx, id)
		out = append(out, fmt.Sprint(err))
		out = append(out, fmt.Sprint(bob.tasks.UpdateTask(ctx, id, map[string]any{"x": map[string]any{"action": "accept"}})))
		out = append(out, fmt.Sprint(bob.tasks.CancelTask(ctx, id)))
		return out
	}
	foreign, unknown := probe(task), probe("bm90LWEtcmVhbC10YXNrLWlkLWF0LWFsbA")
	for i := range foreign {
		if foreign[i] != unknown[i] {
			t.Errorf("call %d: foreign task answered %q, unknown task %q", i, foreign[i], unknown[i])
		}
		if !strings.Contains(foreign[i], "-32602") {
			t.Errorf("call %d: %q, want -32602", i, foreign[i])
		}
	}
	row, err := bob.store.Get(ctx, mapping.KeyOf(task), "alice", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if row.CancelRequestedAt != nil {
		t.Error("Bob's tasks/cancel changed Alice's task")
	}
}

func TestMcpNameHeader(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("long_job", nil)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"mismatch", http.Header{"Mcp-Name": {"another-task"}}, -32020},
		{"match", http.Header{"Mcp-Name": {task.TaskID}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := h.tasks.Raw(t.Context(), "tasks/get", map[string]any{"taskId": task.TaskID}, tc.header)
			if tc.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if code := rpcCode(t, err); code != tc.want {
				t.Errorf("code %d, want %d", code, tc.want)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", resp.StatusCode)
			}
		})
	}
}

func TestRemovedMethods(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, m := range []string{"tasks/list", "tasks/result"} {
		_, _, err := h.tasks.Raw(t.Context(), m, map[string]any{"taskId": "x"}, nil)
		if code := rpcCode(t, err); code != -32601 {
			t.Errorf("%s: code %d, want -32601", m, code)
		}
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "submitted", func(tk *taskclient.Task) bool {
		return strings.Contains(tk.StatusMessage, "job-") || strings.Contains(tk.StatusMessage, "running")
	})

	// Many clients cancel at once: the backend hears about it once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- h.tasks.CancelTask(ctx, task.TaskID) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
	}
	got := h.waitTerminal(task.TaskID)
	if got.Status != "cancelled" {
		t.Fatalf("status %s, want cancelled", got.Status)
	}
	if n := h.fake.Cancels(jobIDOf(t, h, task.TaskID)); n != 1 {
		t.Errorf("backend received %d cancels, want 1", n)
	}
	// Cancelling a terminal task is the same empty ack.
	raw, _, err := h.tasks.Raw(ctx, "tasks/cancel", map[string]any{"taskId": task.TaskID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ack map[string]any
	json.Unmarshal(raw, &ack)
	delete(ack, "_meta")
	if len(ack) != 1 || ack["resultType"] != "complete" {
		t.Errorf("ack %s, want exactly {resultType: complete}", raw)
	}
}

func TestConfirmation(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	t.Run("accept submits the job", func(t *testing.T) {
		task := h.createTask("confirm_delete", map[string]any{"filename": "a.txt"})
		if task.Status != "input_required" {
			t.Fatalf("status %s, want input_required", task.Status)
		}
		got := h.waitStatus(task.TaskID, "input_required")
		if len(got.InputRequests) != 1 {
			t.Fatalf("inputRequests %v, want one", got.InputRequests)
		}
		var key string
		for k, r := range got.InputRequests {
			key = k
			e, err := r.Elicitation()
			if err != nil || r.Method != "elicitation/create" || !strings.Contains(e.Message, "Delete a.txt?") {
				t.Errorf("input request %s: %+v %v", k, r, err)
			}
		}
		if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}); err != nil {
			t.Fatal(err)
		}
		done := h.waitTerminal(task.TaskID)
		if done.Status != "completed" || done.Result.Text() != "Deleted a.txt." {
			t.Errorf("got %s %q, want completed 'Deleted a.txt.'", done.Status, done.Result.Text())
		}
		// A replayed answer changes nothing.
		if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept"}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("decline submits nothing", func(t *testing.T) {
		before := h.fake.Requests()
		task := h.createTask("confirm_delete", map[string]any{"filename": "b.txt"})
		got := h.waitStatus(task.TaskID, "input_required")
		for k := range got.InputRequests {
			if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{k: taskclient.ElicitResult{Action: "decline"}}); err != nil {
				t.Fatal(err)
			}
		}
		done := h.waitTerminal(task.TaskID)
		if done.Status != "cancelled" || !strings.Contains(done.StatusMessage, "declined") {
			t.Errorf("got %s %q, want cancelled saying declined", done.Status, done.StatusMessage)
		}
		if n := h.fake.Requests() - before; n != 0 {
			t.Errorf("%d backend requests, want 0", n)
		}
	})
	t.Run("unknown keys are ignored", func(t *testing.T) {
		task := h.createTask("confirm_delete", map[string]any{"filename": "c.txt"})
		if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{"unknown-key": map[string]any{"ignored": true}}); err != nil {
			t.Fatal(err)
		}
		if got := h.waitStatus(task.TaskID, "input_required"); len(got.InputRequests) != 1 {
			t.Errorf("inputRequests %v after an unknown key", got.InputRequests)
		}
	})
	t.Run("without elicitation the call is -32021", func(t *testing.T) {
		c := &taskclient.Client{URL: h.srv.URL, Tasks: true}
		_, err := c.CallTool(ctx, "confirm_delete", map[string]any{"filename": "d.txt"}, nil)
		if code := rpcCode(t, err); code != -32021 {
			t.Errorf("code %d, want -32021", code)
		}
	})
}

func TestBackendQuestions(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	task := h.createTask("multi_input", nil)
	got := h.waitFor(task.TaskID, "two questions", func(tk *taskclient.Task) bool { return len(tk.InputRequests) == 2 })
	if got.Status != "input_required" {
		t.Fatalf("status %s", got.Status)
	}
	answer := taskclient.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "confirm": true}}
	if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{"name": answer}); err != nil {
		t.Fatal(err)
	}
	partial, err := h.tasks.GetTask(ctx, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if partial.Status != "input_required" || len(partial.InputRequests) != 1 || partial.InputRequests["confirm"].Method == "" {
		t.Fatalf("after a partial answer: %s %v, want input_required with only confirm", partial.Status, partial.InputRequests)
	}
	// Replaying the first answer is ignored.
	if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{"name": answer, "confirm": answer}); err != nil {
		t.Fatal(err)
	}
	done := h.waitTerminal(task.TaskID)
	if done.Status != "completed" {
		t.Fatalf("status %s, want completed", done.Status)
	}
	for key, n := range h.fake.Answers(jobIDOf(t, h, task.TaskID)) {
		if n != 1 {
			t.Errorf("answer %s delivered %d times, want once", key, n)
		}
	}
}

func TestMissingArgumentsAreAskedFor(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	res, err := h.tasks.CallTool(ctx, "test_tool_with_task", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Input == nil || len(res.Input.InputRequests) != 1 {
		t.Fatalf("got %+v, want an input_required result", res)
	}
	var key string
	for k := range res.Input.InputRequests {
		key = k
	}
	res, err = h.tasks.CallTool(ctx, "test_tool_with_task", nil, &taskclient.CallOptions{
		InputResponses: map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{"name": "Alice"}}},
		RequestState:   res.Input.RequestState,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Task == nil {
		t.Fatalf("second round: %+v, want a task", res)
	}
	if got := h.waitTerminal(res.Task.TaskID); !strings.Contains(got.Result.Text(), "Alice") {
		t.Errorf("result %q does not carry the gathered name", got.Result.Text())
	}
	for _, tc := range []struct{ action, says string }{
		{"decline", "the user declined to provide it; call again with it in the arguments"},
		{"cancel", "the user cancelled the request to provide it; call again with it in the arguments"},
	} {
		t.Run("the user may "+tc.action, func(t *testing.T) {
			first, err := h.tasks.CallTool(ctx, "test_tool_with_task", nil, nil)
			if err != nil || first.Input == nil {
				t.Fatalf("first round: %v %+v", err, first)
			}
			res, err := h.tasks.CallTool(ctx, "test_tool_with_task", nil, &taskclient.CallOptions{
				InputResponses: map[string]any{key: taskclient.ElicitResult{Action: tc.action}},
				RequestState:   first.Input.RequestState,
			})
			if err != nil || res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), tc.says) {
				t.Fatalf("got %v %+v; want an isError result saying %q", err, res, tc.says)
			}
		})
	}
	t.Run("a forged requestState is refused", func(t *testing.T) {
		_, err := h.tasks.CallTool(ctx, "test_tool_with_task", nil, &taskclient.CallOptions{RequestState: "eyJ2Ijp7Im5hbWUiOiJNYWxsb3J5In19.AAAA"})
		if code := rpcCode(t, err); code != -32602 {
			t.Errorf("code %d, want -32602", code)
		}
	})
}

func TestPollsAreCoalescedAndPaced(t *testing.T) {
	clk := &clock{now: time.Now()}
	h := newHarness(t, harnessOptions{now: clk.Now, tune: func(c *catalog.Catalog) {
		c.Tool("long_job").RefreshInterval = 5 * time.Second
	}})
	ctx := t.Context()
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "observed", func(tk *taskclient.Task) bool { return strings.HasPrefix(tk.StatusMessage, "running") })

	burst := func() int {
		before := h.fake.Requests()
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				if _, err := h.tasks.GetTask(ctx, task.TaskID); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return h.fake.Requests() - before
	}
	// Within the refresh interval every poll is served from the store.
	if n := burst(); n != 0 {
		t.Errorf("40 polls within the refresh interval made %d backend calls, want 0", n)
	}
	// Once the observation is stale, 40 concurrent polls share one call.
	clk.Advance(6 * time.Second)
	if n := burst(); n != 1 {
		t.Errorf("40 concurrent polls of a stale task made %d backend calls, want 1", n)
	}
}

func TestMissingJobEndsAfterGrace(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "observed", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, "running") })
	h.fake.Purge(jobIDOf(t, h, task.TaskID))
	got := h.waitTerminal(task.TaskID)
	if got.Status != "completed" || got.Result == nil || !got.Result.IsError || !strings.Contains(got.Result.Text(), "no longer reports") {
		t.Errorf("got %s %+v, want completed+isError saying the backend no longer reports the job", got.Status, got.Result)
	}
}

func TestSyncBudget(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	res, err := h.plain.CallTool(t.Context(), "long_job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), "still running") || !strings.Contains(res.Result.Text(), "job-") {
		t.Errorf("got %+v, want an isError result naming the still-running job", res.Result)
	}
}

func TestSyncCallForwardsCancelWhenClientGoesAway(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(150 * time.Millisecond)
		cancel()
	}()
	before := h.fake.Requests()
	_, err := h.plain.CallTool(ctx, "slow_compute", map[string]any{"seconds": 30}, nil)
	if err == nil {
		t.Fatal("the call finished although the client went away")
	}
	// The bridge notices the closed request and cancels downstream.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(fakeURL(t, h.fake) + "/jobs?correlation_id=")
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Jobs []struct{ ID, Status string } `json:"jobs"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		cancelled := false
		for _, j := range out.Jobs {
			if j.Status == "cancelled" {
				cancelled = h.fake.Cancels(j.ID) == 1
			}
		}
		if cancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job was cancelled downstream (backend requests since call: %d)", h.fake.Requests()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRestartLosesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("slow_compute", map[string]any{"seconds": 1, "label": "restart"})
	h.waitFor(task.TaskID, "submitted", func(tk *taskclient.Task) bool {
		return tk.Status == "working" && !strings.Contains(tk.StatusMessage, "submitting")
	})
	h.stop() // the server goes away mid-task

	again := newHarness(t, harnessOptions{storePath: h.storePath, fake: h.fake})
	got := again.waitTerminal(task.TaskID)
	if got.Status != "completed" || got.Result.Text() != "Computed restart in 1s." {
		t.Errorf("after restart: %s %q, want the job's true outcome", got.Status, got.Result.Text())
	}
	if n := again.fake.Submissions(correlationOf(t, again, task.TaskID)); n != 1 {
		t.Errorf("%d submissions, want 1", n)
	}
}

func correlationOf(t *testing.T, h *harness, taskID string) string {
	row, err := h.store.Get(t.Context(), mapping.KeyOf(taskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return row.CorrelationID
}

func TestAmbiguousSubmissionIsReconciled(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	// The backend creates the job but the answer is lost.
	h.fake.Inject(jobapi.Fault{Method: "POST", Path: "/jobs", Status: 503, AfterHandling: true})
	task := h.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "lost"})
	got := h.waitTerminal(task.TaskID)
	if got.Status != "completed" || !strings.Contains(got.Result.Text(), "Computed lost") {
		t.Errorf("got %s %q, want the found job's result", got.Status, got.StatusMessage)
	}
	if n := h.fake.Submissions(correlationOf(t, h, task.TaskID)); n != 1 {
		t.Errorf("%d submissions, want exactly 1", n)
	}
}

func TestAmbiguousSubmissionWithoutFinderFails(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.fake.Inject(jobapi.Fault{Method: "POST", Path: "/jobs", Status: 503, AfterHandling: true})
	task := h.createTask("no_finder", nil)
	got := h.waitTerminal(task.TaskID)
	corr := correlationOf(t, h, task.TaskID)
	if got.Status != "failed" || got.Error == nil || !strings.Contains(got.Error.Message, "outcome unknown") || !strings.Contains(got.Error.Message, corr) {
		t.Errorf("got %s %+v, want failed with 'outcome unknown' and the correlation ID", got.Status, got.Error)
	}
	if n := h.fake.Submissions(corr); n != 1 {
		t.Errorf("%d submissions, want 1 (never re-sent)", n)
	}
}

func TestCrashBeforeSubmissionIsReconciled(t *testing.T) {
	// A row left in the submitting phase by a process that died before (or
	// while) submitting: with a Finder that finds nothing, the task ends
	// failed, saying no job was created.
	h := newHarness(t, harnessOptions{submitTimeout: 200 * time.Millisecond})
	now := time.Now().UTC().Add(-time.Second)
	// The submission was sent longer ago than the backend's listing lag.
	sent := now.Add(-2 * time.Minute)
	id := "crashed-task-id-0123456789abcdef"
	row := &mapping.Task{
		Key: mapping.KeyOf(id), Principal: "anonymous", Tool: "slow_compute", Backend: "jobs",
		CorrelationID: "jb-never-sent", Phase: mapping.PhaseSubmitting, Status: mapping.StatusWorking,
		CreatedAt: sent, UpdatedAt: now, TTL: time.Hour, ExpiresAt: now.Add(time.Hour), PollInterval: time.Second,
		SubmittedAt: &sent,
	}
	if err := h.store.Create(t.Context(), row, mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitTerminal(id)
	if got.Status != "failed" || !strings.Contains(got.StatusMessage, "not created") {
		t.Errorf("got %s %q, want failed saying the job was not created", got.Status, got.StatusMessage)
	}
	if n := h.fake.Submissions("jb-never-sent"); n != 0 {
		t.Errorf("%d submissions, want 0: reconciliation never submits", n)
	}
}

// clock is a settable clock for the bridge (the fake backend keeps real time).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestExpiredTasksAreGoneAndPurged(t *testing.T) {
	clk := &clock{now: time.Now()}
	h := newHarness(t, harnessOptions{now: clk.Now, sweep: 20 * time.Millisecond})
	task := h.createTask("long_job", nil)
	if task.TTLMs == nil || *task.TTLMs != time.Hour.Milliseconds() {
		t.Fatalf("ttlMs = %v, want one hour", task.TTLMs)
	}
	created := clk.Now()
	clk.Advance(59 * time.Minute)
	if _, err := h.tasks.GetTask(t.Context(), task.TaskID); err != nil {
		t.Fatalf("a task within its TTL must resolve: %v", err)
	}
	clk.Advance(2 * time.Minute)
	_, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if code := rpcCode(t, err); code != -32602 {
		t.Fatalf("expired task: code %d, want -32602", code)
	}
	// The sweep deletes the row.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", created)
		if errors.Is(err, mapping.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired task still stored: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPollIntervalGrowsForLongTasks(t *testing.T) {
	clk := &clock{now: time.Now()}
	h := newHarness(t, harnessOptions{now: clk.Now})
	task := h.createTask("long_job", nil)
	base := *task.PollIntervalMs
	for _, tc := range []struct {
		advance time.Duration
		want    int64
	}{
		{5 * time.Minute, base},
		{6 * time.Minute, 2 * base}, // 11 minutes old
	} {
		clk.Advance(tc.advance)
		got, err := h.tasks.GetTask(t.Context(), task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if *got.PollIntervalMs != tc.want {
			t.Errorf("after %s more: pollIntervalMs %d, want %d", tc.advance, *got.PollIntervalMs, tc.want)
		}
	}
}

func TestCancelClaimLeftByADeadProcessIsTakenOver(t *testing.T) {
	h := newHarness(t, harnessOptions{sweep: 50 * time.Millisecond})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return strings.HasPrefix(tk.StatusMessage, "running") })
	// A process recorded the cancel and claimed forwarding it, then died
	// before the backend heard of it.
	row, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	row.CancelRequestedAt, row.CancelForwardedAt = &long, &long
	if err := h.store.Update(t.Context(), row); err != nil {
		t.Fatal(err)
	}
	got := h.waitTerminal(task.TaskID)
	if got.Status != "cancelled" {
		t.Fatalf("status %s, want cancelled", got.Status)
	}
	if n := h.fake.Cancels(jobIDOf(t, h, task.TaskID)); n != 1 {
		t.Errorf("backend received %d cancels, want 1", n)
	}
}

// A second key that differs only in case must not satisfy the Mcp-Name
// check on behalf of another task: the check reads params.taskId exactly as
// the handler does.
func TestMcpNameCannotBeSatisfiedByADecoyKey(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("long_job", nil)
	params := json.RawMessage(`{"taskId":"` + task.TaskID + `","taskid":"decoy"}`)
	_, resp, err := h.tasks.Raw(t.Context(), "tasks/cancel", params, http.Header{"Mcp-Name": {"decoy"}})
	if code := rpcCode(t, err); code != -32020 || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("code %d HTTP %d, want -32020 and 400", code, resp.StatusCode)
	}
	row, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if row.CancelRequestedAt != nil {
		t.Error("the decoy request cancelled the task")
	}
}
