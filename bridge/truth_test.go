package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// withMem serves every tool of the test catalog from mem.
func withMem(mem *memBackend) func(map[string]adapters.Adapter) map[string]adapters.Adapter {
	return func(map[string]adapters.Adapter) map[string]adapters.Adapter {
		return map[string]adapters.Adapter{"jobs": mem}
	}
}

func confirmKeyOf(t *testing.T, task *taskclient.Task) string {
	t.Helper()
	if len(task.InputRequests) != 1 {
		t.Fatalf("inputRequests %v, want one", task.InputRequests)
	}
	for k := range task.InputRequests {
		return k
	}
	return ""
}

// Only an explicit confirm: true submits a confirmed tool's job. Pressing
// Submit without ticking the box, false, or a wrong type leaves the task
// waiting and says why.
func TestConfirmationMustBeGivenExplicitly(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	task := h.createTask("confirm_delete", map[string]any{"filename": "prod.db"})
	got := h.waitStatus(task.TaskID, "input_required")
	key := confirmKeyOf(t, got)
	e, err := got.InputRequests[key].Elicitation()
	if err != nil {
		t.Fatal(err)
	}
	if e.RequestedSchema == nil || !e.RequestedSchema.IsRequired("confirm") {
		t.Errorf("requestedSchema %+v: want confirm required", e.RequestedSchema)
	}
	before := h.fake.Requests()
	for _, tt := range []struct {
		name    string
		content map[string]any
		want    string
	}{
		{"accept with no content", map[string]any{}, "not ticked"},
		{"accept with false", map[string]any{"confirm": false}, "confirm: false"},
		{"accept with a string", map[string]any{"confirm": "yes"}, "not a string"},
	} {
		if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: tt.content}}); err != nil {
			t.Fatal(err)
		}
		cur, err := h.tasks.GetTask(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status != "input_required" || len(cur.InputRequests) != 1 || !strings.Contains(cur.StatusMessage, tt.want) {
			t.Errorf("%s: got %s %q with %d requests, want input_required saying %q", tt.name, cur.Status, cur.StatusMessage, len(cur.InputRequests), tt.want)
		}
	}
	if n := h.fake.Requests() - before; n != 0 {
		t.Errorf("%d backend requests before a confirmation, want 0", n)
	}
	if err := h.tasks.UpdateTask(ctx, task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}); err != nil {
		t.Fatal(err)
	}
	if done := h.waitTerminal(task.TaskID); done.Status != "completed" || done.Result.Text() != "Deleted prod.db." {
		t.Errorf("after confirm: true: %s %q, want the job's result", done.Status, done.Result.Text())
	}
}

func TestConfirmationTexts(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, tt := range []struct{ action, want string }{
		{"decline", "the user declined the confirmation; no job was submitted"},
		{"cancel", "the user dismissed the confirmation; no job was submitted"},
	} {
		task := h.createTask("confirm_delete", map[string]any{"filename": "x"})
		key := confirmKeyOf(t, h.waitStatus(task.TaskID, "input_required"))
		if err := h.tasks.UpdateTask(t.Context(), task.TaskID, map[string]any{key: taskclient.ElicitResult{Action: tt.action}}); err != nil {
			t.Fatal(err)
		}
		if got := h.waitTerminal(task.TaskID); got.Status != "cancelled" || got.StatusMessage != tt.want {
			t.Errorf("%s: %s %q, want cancelled %q", tt.action, got.Status, got.StatusMessage, tt.want)
		}
	}
}

// The synchronous path (MRTR) asks again instead of submitting on an
// answer that does not confirm.
func TestSyncConfirmationMustBeGivenExplicitly(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) { c.Tool("confirm_delete").Task = catalog.TaskOptional }})
	c := &taskclient.Client{URL: h.srv.URL, Elicitation: true}
	ctx := t.Context()
	args := map[string]any{"filename": "sync.db"}
	first, err := c.CallTool(ctx, "confirm_delete", args, nil)
	if err != nil || first.Input == nil {
		t.Fatalf("first call: %+v %v, want input required", first, err)
	}
	var key string
	for k := range first.Input.InputRequests {
		key = k
	}
	before := h.fake.Requests()
	again, err := c.CallTool(ctx, "confirm_delete", args, &taskclient.CallOptions{InputResponses: map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{}}}})
	if err != nil || again.Input == nil {
		t.Fatalf("accept without confirm: %+v %v, want the question again", again, err)
	}
	if n := h.fake.Requests() - before; n != 0 {
		t.Errorf("%d backend requests, want 0", n)
	}
	done, err := c.CallTool(ctx, "confirm_delete", args, &taskclient.CallOptions{InputResponses: map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}})
	if err != nil || done.Result == nil || done.Result.Text() != "Deleted sync.db." {
		t.Fatalf("confirm: true: %+v %v, want the job's result", done, err)
	}
}

// A declaration of the extension made under protocol 2025-11-25 (or in
// initialize) does not make a tools/call return a CreateTaskResult.
func TestTaskOnlyForModernRequests(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	t.Run("HTTP, legacy _meta", func(t *testing.T) {
		params := map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "old"},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2025-11-25",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{bridge.TasksExtension: map[string]any{}}},
			}}
		raw, _, err := h.plain.Raw(t.Context(), "tools/call", params, http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `"resultType":"task"`) || !strings.Contains(string(raw), "Computed old in 0s.") {
			t.Errorf("got %s, want the synchronous result", raw)
		}
	})
	t.Run("stdio, declared at initialize", func(t *testing.T) {
		c := dialRaw(t, h)
		c.call(1, "initialize", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"legacy","version":"1"},
			"capabilities":{"elicitation":{},"extensions":{"`+bridge.TasksExtension+`":{}}}}`)
		c.notify("notifications/initialized", `{}`)
		got := c.call(2, "tools/call", `{"name":"slow_compute","arguments":{"seconds":0,"label":"stdio"}}`)
		if got.Error != nil || strings.Contains(string(got.Result), `"resultType":"task"`) || !strings.Contains(string(got.Result), "Computed stdio in 0s.") {
			t.Errorf("got %s %v, want the synchronous result", got.Result, got.Error)
		}
	})
}

// rawConn speaks JSON-RPC to the bridge over an in-memory transport, as a
// stdio client does, message by message.
type rawConn struct {
	t    *testing.T
	conn mcp.Connection
}

func dialRaw(t *testing.T, h *harness) *rawConn {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := h.bridge.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

func (c *rawConn) send(id int64, method, params string) {
	c.t.Helper()
	rid, _ := jsonrpc.MakeID(float64(id))
	if err := c.conn.Write(c.t.Context(), &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) notify(method, params string) {
	c.t.Helper()
	if err := c.conn.Write(c.t.Context(), &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}); err != nil {
		c.t.Fatal(err)
	}
}

// response reads messages until the next response.
func (c *rawConn) response() *jsonrpc.Response {
	c.t.Helper()
	for {
		msg, err := c.conn.Read(c.t.Context())
		if err != nil {
			c.t.Fatal(err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			return r
		}
	}
}

func (c *rawConn) call(id int64, method, params string) *jsonrpc.Response {
	c.t.Helper()
	c.send(id, method, params)
	return c.response()
}

// A synchronous call whose budget runs out cancels its job: nobody could
// follow it.
func TestSyncBudgetCancelsTheJob(t *testing.T) {
	mem := newMemBackend(nil)
	h := newHarness(t, harnessOptions{adapters: withMem(mem), tune: func(c *catalog.Catalog) { c.Tool("long_job").SyncBudget = 100 * time.Millisecond }})
	res, err := h.plain.CallTool(t.Context(), "long_job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result == nil || !res.Result.IsError || !strings.Contains(res.Result.Text(), "was cancelled") {
		t.Fatalf("got %+v, want an isError result saying the job was cancelled", res.Result)
	}
	waitUntil(t, "the job is cancelled downstream", func() bool { st, ok := mem.stateOf("mem-1"); return ok && st == adapters.StateCancelled })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the client cancels a synchronous call (notifications/cancelled), the
// job is cancelled, and the request is answered with a real error code,
// never 0.
func TestSyncCallCancelledByTheClient(t *testing.T) {
	mem := newMemBackend(nil)
	h := newHarness(t, harnessOptions{adapters: withMem(mem)})
	c := dialRaw(t, h)
	c.call(1, "initialize", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"legacy","version":"1"},"capabilities":{}}`)
	c.notify("notifications/initialized", `{}`)
	c.send(2, "tools/call", `{"name":"long_job","arguments":{}}`)
	waitUntil(t, "the job starts", func() bool { return mem.job("mem-1") != nil })
	c.notify("notifications/cancelled", `{"requestId":2,"reason":"user pressed stop"}`)
	if r := c.response(); r.Error == nil {
		t.Errorf("cancelled request answered with a result %s", r.Result)
	} else if rpcErr := (*jsonrpc.Error)(nil); !errors.As(r.Error, &rpcErr) || rpcErr.Code == 0 {
		t.Errorf("cancelled request answered with %v, want a JSON-RPC error with a real code", r.Error)
	}
	waitUntil(t, "the job is cancelled downstream", func() bool { st, ok := mem.stateOf("mem-1"); return ok && st == adapters.StateCancelled })
}

// The backend's reasons reach the caller, not only the log.
func TestStartProblemsReachTheCaller(t *testing.T) {
	for _, tt := range []struct {
		name       string
		err        error
		status     string
		wantInText string
	}{
		{"refused", errors.New(`HTTP 422: {"message":"queue prod-gpu does not exist"}`), "completed", "queue prod-gpu does not exist"},
		{"unaddressable", fmt.Errorf("%w: the start answer (HTTP 201) has no field \"id\": {\"job\":{}}", adapters.ErrJobUnaddressable), "failed", "has no field \"id\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemBackend(nil)
			mem.startHook = func(int) (error, bool) { return tt.err, true }
			h := newHarness(t, harnessOptions{adapters: withMem(mem)})
			task := h.createTask("long_job", nil)
			got := h.waitTerminal(task.TaskID)
			text := got.StatusMessage
			if got.Result != nil {
				text += got.Result.Text()
			}
			if got.Error != nil {
				text += got.Error.Message
			}
			if got.Status != tt.status || !strings.Contains(text, tt.wantInText) {
				t.Errorf("got %s %q, want %s carrying %q", got.Status, text, tt.status, tt.wantInText)
			}
			if tt.status == "failed" && (got.Error == nil || !strings.Contains(got.Error.Message, "correlation ID jb-")) {
				t.Errorf("error %+v does not name the correlation ID", got.Error)
			}
		})
	}
}

// An unreadable status answer is told to the caller at once, and ends the
// task failed after the tool's missing grace.
func TestUnreadableStatusIsToldThenFails(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), tune: func(c *catalog.Catalog) {
		c.Tool("long_job").MissingGrace = time.Minute
	}})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	mem.setObsErr("mem-1", fmt.Errorf("%w: the status answer has no field \"state\"", adapters.ErrUnreadableStatus))
	clk.Advance(time.Second)
	got := h.waitFor(task.TaskID, "told", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, `no field "state"`) })
	if got.Status != "working" {
		t.Errorf("status %s, want working within the grace", got.Status)
	}
	clk.Advance(2 * time.Minute)
	got = h.waitTerminal(task.TaskID)
	if got.Status != "failed" || got.Error == nil || !strings.Contains(got.Error.Message, `no field "state"`) || !strings.Contains(got.Error.Message, "mem-1") {
		t.Errorf("got %s %+v, want failed naming the problem and the job", got.Status, got.Error)
	}
}

// A cancel the backend refuses leaves the task cancellable, says so, and is
// tried again by the sweep.
func TestRefusedCancelIsToldAndRetried(t *testing.T) {
	mem := newMemBackend(nil)
	var refuse atomic.Bool
	refuse.Store(true)
	mem.cancelHook = func(*memJob) (error, bool) {
		if refuse.Load() {
			return fmt.Errorf("%w: HTTP 409: job is in a protected phase", adapters.ErrCancelRefused), true
		}
		return nil, false
	}
	h := newHarness(t, harnessOptions{adapters: withMem(mem), sweep: 50 * time.Millisecond})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	got, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "refused") || !strings.Contains(got.StatusMessage, "protected phase") {
		t.Errorf("got %s %q, want working saying the cancel was refused and why", got.Status, got.StatusMessage)
	}
	waitUntil(t, "the sweep tries again", func() bool { _, _, c := mem.counts(); return c >= 2 })
	refuse.Store(false)
	if got := h.waitTerminal(task.TaskID); got.Status != "cancelled" || got.StatusMessage != "job mem-1 was cancelled" {
		t.Errorf("got %s %q, want cancelled", got.Status, got.StatusMessage)
	}
}

// The first terminal state the job reached is the task's outcome: a job
// that failed before the cancel took effect is completed with its failure.
func TestFailureBeforeCancelIsKept(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cancelErr  error
		finished   time.Duration // relative to the cancel
		wantStatus string
	}{
		{"backend says already finished", fmt.Errorf("%w: HTTP 409", adapters.ErrAlreadyFinished), 0, "completed"},
		{"failed before the cancel was sent", nil, -time.Minute, "completed"},
		{"failed after the cancel was sent", nil, time.Second, "cancelled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemBackend(nil)
			mem.cancelHook = func(j *memJob) (error, bool) {
				if tt.finished > 0 {
					// The cancel makes the job fail a moment later.
					mem.finish(j.id, adapters.StateToolError, "FAILED", time.Now().Add(tt.finished))
				}
				return tt.cancelErr, true
			}
			h := newHarness(t, harnessOptions{adapters: withMem(mem)})
			task := h.createTask("long_job", nil)
			h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
			if tt.finished <= 0 {
				mem.finish("mem-1", adapters.StateToolError, "FAILED", time.Now().Add(tt.finished))
			}
			if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
				t.Fatal(err)
			}
			got := h.waitTerminal(task.TaskID)
			if got.Status != tt.wantStatus {
				t.Fatalf("status %s (%q), want %s", got.Status, got.StatusMessage, tt.wantStatus)
			}
			if got.Status == "completed" && (!got.Result.IsError || !strings.Contains(got.Result.Text(), "disk full")) {
				t.Errorf("result %+v, want the job's failure", got.Result)
			}
		})
	}
}

// tasks/get never waits on a hanging backend past its budget: it answers
// from the last observation, and the observation finishes for the next poll.
func TestTasksGetDoesNotWaitForAHangingBackend(t *testing.T) {
	mem := newMemBackend(nil)
	release := make(chan struct{})
	h := newHarness(t, harnessOptions{adapters: withMem(mem)})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	mem.set(func(m *memBackend) {
		m.pollHook = func(ctx context.Context, n int) (error, bool) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, false
		}
	})
	mem.finish("mem-1", adapters.StateSucceeded, "DONE", time.Now())
	time.Sleep(150 * time.Millisecond) // past the tool's refresh interval
	got, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	// The poll is still blocked: this answer came from the last observation.
	if got.Status != "working" || got.StatusMessage != "RUNNING" {
		t.Errorf("while the backend hangs: %s %q, want the last observation", got.Status, got.StatusMessage)
	}
	close(release)
	if done := h.waitTerminal(task.TaskID); done.Status != "completed" {
		t.Errorf("after the backend answers: %s, want completed", done.Status)
	}
}

// A throttling backend pauses every call to it for the time it asked, and a
// failing one is asked less than in calm weather (circuit breaker), while
// tasks/get keeps answering and says why the state is not fresh.
func TestThrottlingAndStormsPauseTheBackend(t *testing.T) {
	clk := &clock{now: time.Now()}
	mem := newMemBackend(clk.Now)
	h := newHarness(t, harnessOptions{now: clk.Now, adapters: withMem(mem), sweep: time.Hour, tune: func(c *catalog.Catalog) {
		c.Tool("long_job").RefreshInterval = time.Second
		c.Limits.SetDefaults()
		c.Limits.GetsPerSecond = 1 << 20
	}})
	var ids []string
	for range 5 {
		task := h.createTask("long_job", nil)
		ids = append(ids, task.TaskID)
		h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	}
	// pollAll polls every task once per simulated second for n seconds and
	// returns the backend calls made.
	pollAll := func(n int) int {
		_, before, _ := mem.counts()
		for range n {
			clk.Advance(time.Second)
			for _, id := range ids {
				got, err := h.tasks.GetTask(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != "working" {
					t.Fatalf("status %s, want working", got.Status)
				}
			}
		}
		_, after, _ := mem.counts()
		return after - before
	}
	calm := pollAll(10)
	if calm != 50 {
		t.Fatalf("calm weather: %d calls for 5 tasks over 10 refresh intervals, want 50", calm)
	}

	mem.set(func(m *memBackend) {
		m.pollHook = func(context.Context, int) (error, bool) {
			return &adapters.ThrottledError{RetryAfter: 30 * time.Second, Err: errors.New("HTTP 429")}, true
		}
	})
	if n := pollAll(29); n != 1 {
		t.Errorf("throttled with Retry-After 30s: %d calls in 29s, want 1 (the one that was throttled)", n)
	}
	got, err := h.tasks.GetTask(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.StatusMessage, "throttling") || !strings.HasPrefix(got.StatusMessage, "RUNNING (") {
		t.Errorf("status message %q, want the last observation and why it is not fresh", got.StatusMessage)
	}

	mem.set(func(m *memBackend) {
		m.pollHook = func(context.Context, int) (error, bool) { return errors.New("connection refused"), true }
	})
	storm := pollAll(60)
	if storm >= calm*6/2 {
		t.Errorf("storm: %d calls in 60s, want well under calm weather's %d", storm, calm*6)
	}
	t.Logf("backend calls for 5 tasks polled every second: calm %d in 10s; throttled (Retry-After 30s) 1 in 29s; failing %d in 60s (calm: %d)", calm, storm, calm*6)
}

// A throttled submission created no job; it is sent again after the pause
// the backend asked for, and fails, saying so, only when the submit timeout
// is spent.
func TestThrottledSubmissionIsRetried(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		mem := newMemBackend(nil)
		mem.startHook = func(n int) (error, bool) {
			if n <= 2 {
				return &adapters.ThrottledError{RetryAfter: 50 * time.Millisecond, Err: errors.New("HTTP 429")}, true
			}
			return nil, false
		}
		h := newHarness(t, harnessOptions{adapters: withMem(mem)})
		task := h.createTask("long_job", nil)
		h.waitFor(task.TaskID, "submitted", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
		if starts, _, _ := mem.counts(); starts != 3 {
			t.Errorf("%d submissions, want 3", starts)
		}
	})
	t.Run("budget spent", func(t *testing.T) {
		mem := newMemBackend(nil)
		mem.startHook = func(int) (error, bool) {
			return &adapters.ThrottledError{RetryAfter: time.Hour, Err: errors.New("HTTP 429")}, true
		}
		h := newHarness(t, harnessOptions{adapters: withMem(mem), submitTimeout: time.Second})
		task := h.createTask("long_job", nil)
		got := h.waitTerminal(task.TaskID)
		if got.Status != "completed" || !got.Result.IsError || !strings.Contains(got.Result.Text(), "throttling") || !strings.Contains(got.Result.Text(), "no job was created") {
			t.Errorf("got %s %+v, want isError saying the backend throttled and no job was created", got.Status, got.Result)
		}
	})
}

// Alone on its store, a restarted process takes over at once the cancel
// claim its previous process left, and reconciles at once a submission no
// process of its own is running, without waiting for the submit timeout.
func TestRestartResumesAtOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return strings.HasPrefix(tk.StatusMessage, "running") })
	row, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The process recorded a cancel, claimed forwarding it a moment ago and
	// died before the backend heard of it.
	recent := time.Now().Add(-time.Second)
	row.CancelRequestedAt, row.CancelForwardedAt = &recent, &recent
	if err := h.store.Update(t.Context(), row); err != nil {
		t.Fatal(err)
	}
	h.stop()

	again := newHarness(t, harnessOptions{storePath: h.storePath, fake: h.fake, submitTimeout: time.Hour, sweep: 50 * time.Millisecond})
	if got := again.waitTerminal(task.TaskID); got.Status != "cancelled" {
		t.Errorf("status %s, want cancelled", got.Status)
	}

	// A submission cut off by the crash: the job exists on the backend, the
	// row still says submitting.
	body := strings.NewReader(`{"correlation_id":"jb-cut-off","duration_seconds":0,"output":"Computed cut in 0s."}`)
	resp, err := http.Post(fakeURL(t, h.fake)+"/jobs", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	now := time.Now().UTC()
	id := "cut-off-task-id-0123456789abcdef"
	cut := &mapping.Task{
		Key: mapping.KeyOf(id), Principal: "anonymous", Tool: "slow_compute", Backend: "jobs",
		CorrelationID: "jb-cut-off", Phase: mapping.PhaseSubmitting, Status: mapping.StatusWorking,
		CreatedAt: now, UpdatedAt: now, TTL: time.Hour, ExpiresAt: now.Add(time.Hour), PollInterval: time.Second,
	}
	if err := again.store.Create(t.Context(), cut, mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if got := again.waitTerminal(id); got.Status != "completed" || got.Result.Text() != "Computed cut in 0s." {
		t.Errorf("cut-off submission: %s %q, want it reconciled to the job's outcome", got.Status, got.StatusMessage)
	}
}

// A cancel recorded while the submission is still under way is forwarded as
// soon as the job reference is recorded, also when the submission's outcome
// had to be reconciled.
func TestCancelDuringSubmissionIsForwardedOnceTheJobExists(t *testing.T) {
	for _, tt := range []struct {
		name    string
		unknown bool
	}{
		{"submission succeeds", false},
		{"submission outcome unknown, job found", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemBackend(nil)
			release := make(chan struct{})
			h := newHarness(t, harnessOptions{adapters: func(map[string]adapters.Adapter) map[string]adapters.Adapter {
				return map[string]adapters.Adapter{"jobs": &findingBackend{mem}}
			}, submitTimeout: time.Hour, sweep: time.Hour})
			mem.startHook = func(int) (error, bool) {
				<-release
				if tt.unknown {
					// The backend created the job, then the answer was lost.
					mem.create()
					return fmt.Errorf("%w: connection reset", adapters.ErrOutcomeUnknown), true
				}
				return nil, false
			}
			task := h.createTask("long_job", nil)
			if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
				t.Fatal(err)
			}
			close(release)
			if got := h.waitTerminal(task.TaskID); got.Status != "cancelled" {
				t.Errorf("status %s (%q), want cancelled", got.Status, got.StatusMessage)
			}
			if _, _, cancels := mem.counts(); cancels != 1 {
				t.Errorf("%d cancels forwarded, want 1", cancels)
			}
		})
	}
}

// findingBackend adds a lookup by correlation ID to memBackend: it finds the
// last job started.
type findingBackend struct{ *memBackend }

func (f *findingBackend) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seq == 0 {
		return adapters.JobRef{}, false, nil
	}
	return adapters.JobRef{ID: fmt.Sprintf("mem-%d", f.seq)}, true, nil
}

// A submission whose outcome is unknown is looked up again, with backoff,
// while the backend's listing lags; the lookup carries the submission time
// and the arguments, and the job is adopted once it is listed.
func TestLookupWaitsForALaggingListing(t *testing.T) {
	mem := newMemBackend(nil)
	lag := &laggingFinder{memBackend: mem, misses: 3}
	h := newHarness(t, harnessOptions{adapters: func(map[string]adapters.Adapter) map[string]adapters.Adapter {
		return map[string]adapters.Adapter{"jobs": lag}
	}, sweep: time.Hour, lookupBackoff: 20 * time.Millisecond})
	mem.startHook = func(int) (error, bool) {
		mem.create()
		return fmt.Errorf("%w: connection reset", adapters.ErrOutcomeUnknown), true
	}
	task := h.createTask("slow_compute", map[string]any{"seconds": 5, "label": "lagged"})
	h.waitFor(task.TaskID, "told", func(tk *taskclient.Task) bool { return strings.Contains(tk.StatusMessage, "not listed") })
	got := h.waitFor(task.TaskID, "adopted", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if got.Status != "working" {
		t.Errorf("status %s, want working", got.Status)
	}
	finds, req := lag.seen()
	if finds != 4 {
		t.Errorf("%d lookups, want 4 (3 not listed yet, then found)", finds)
	}
	if req.SubmittedAt.IsZero() || time.Since(req.SubmittedAt) > time.Minute || req.Arguments["label"] != "lagged" {
		t.Errorf("lookup request %+v, want the submission time and the arguments", req)
	}
}

// laggingFinder finds the last job started only after misses lookups,
// answering ErrNotListedYet before, as a lagging listing does.
type laggingFinder struct {
	*memBackend
	misses int
	finds  int
	last   adapters.StartRequest
}

func (f *laggingFinder) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finds++
	f.last = req
	if f.finds <= f.misses {
		return adapters.JobRef{}, false, fmt.Errorf("not in the listing: %w", adapters.ErrNotListedYet)
	}
	return adapters.JobRef{ID: fmt.Sprintf("mem-%d", f.seq)}, true, nil
}

func (f *laggingFinder) seen() (int, adapters.StartRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.finds, f.last
}

// A later observation of the job keeps saying that the cancel was refused,
// and why, with the job's own status after it: the caller is not left to
// think the cancel was forgotten.
func TestRefusedCancelSurvivesObservations(t *testing.T) {
	mem := newMemBackend(nil)
	mem.cancelHook = func(*memJob) (error, bool) {
		return fmt.Errorf("%w: HTTP 409: job is in a protected phase", adapters.ErrCancelRefused), true
	}
	h := newHarness(t, harnessOptions{adapters: withMem(mem), tune: func(c *catalog.Catalog) {
		c.Tool("long_job").RefreshInterval = 10 * time.Millisecond
	}})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	_, polls0, _ := mem.counts()
	got := h.waitFor(task.TaskID, "an observation after the refusal", func(*taskclient.Task) bool {
		_, polls, _ := mem.counts()
		return polls > polls0
	})
	if !strings.Contains(got.StatusMessage, "refused") || !strings.Contains(got.StatusMessage, "protected phase") || !strings.Contains(got.StatusMessage, "RUNNING") {
		t.Errorf("after an observation: %q, want the refusal and why, and the job's status", got.StatusMessage)
	}
}
