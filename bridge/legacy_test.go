package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// legacyClient speaks protocol 2025-11-25 over Streamable HTTP as the v1
// TypeScript SDK does: initialize, then one JSON-RPC message per POST with
// Mcp-Session-Id and Mcp-Protocol-Version, never Mcp-Name; answers in JSON or
// SSE; server-to-client requests on a POST's SSE stream answered by a new
// POST.
type legacyClient struct {
	t       testing.TB
	url     string
	session string
	auth    string
	id      int
	// elicit answers an elicitation/create request (its params).
	elicit func(params json.RawMessage) any
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// newLegacyClient initializes a session declaring caps (a JSON object).
func newLegacyClient(t testing.TB, url, caps string) (*legacyClient, json.RawMessage) {
	t.Helper()
	c := &legacyClient{t: t, url: url}
	res, rerr := c.call("initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"v1-like","version":"1.32.2"}}`))
	if rerr != nil {
		t.Fatalf("initialize: %+v", rerr)
	}
	c.notify("notifications/initialized")
	return c, res
}

func (c *legacyClient) post(msg any) *http.Response {
	c.t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	return resp
}

func (c *legacyClient) notify(method string) {
	c.t.Helper()
	resp := c.post(map[string]any{"jsonrpc": "2.0", "method": method})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("%s: HTTP %d, want 202", method, resp.StatusCode)
	}
}

// call sends a request and returns its result or error, answering the
// server's requests on the way.
func (c *legacyClient) call(method string, params any) (json.RawMessage, *rpcError) {
	c.t.Helper()
	c.id++
	id := c.id
	resp := c.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	defer resp.Body.Close()
	want := fmt.Sprint(id)
	handle := func(m rpcMessage) (json.RawMessage, *rpcError, bool) {
		switch {
		case m.Method != "" && len(m.ID) > 0: // a request from the server
			var answer any = map[string]any{"action": "decline"}
			if m.Method == "elicitation/create" && c.elicit != nil {
				answer = c.elicit(m.Params)
			}
			r := c.post(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": answer})
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		case m.Method == "" && string(m.ID) == want:
			return m.Result, m.Error, true
		}
		return nil, nil, false
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m rpcMessage
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) != nil {
				continue
			}
			if res, err, done := handle(m); done {
				return res, err
			}
		}
		c.t.Fatalf("%s: the stream ended without an answer", method)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(ct, "application/json") {
		c.t.Fatalf("%s: HTTP %d %s answer %q, want JSON-RPC", method, resp.StatusCode, ct, body)
	}
	var m rpcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, body)
	}
	res, rerr, _ := handle(m)
	return res, rerr
}

// mustCall is call failing the test on a JSON-RPC error.
func (c *legacyClient) mustCall(method string, params any, out any) {
	c.t.Helper()
	res, rerr := c.call(method, params)
	if rerr != nil {
		c.t.Fatalf("%s: %+v", method, rerr)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			c.t.Fatalf("%s: %v: %s", method, err, res)
		}
	}
}

// legacyTask is a 2025-11-25 Task.
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval"`
}

func (c *legacyClient) createTask(tool string, args any) legacyTask {
	c.t.Helper()
	var res struct {
		Task legacyTask `json:"task"`
	}
	c.mustCall("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}}, &res)
	if res.Task.TaskID == "" || res.Task.TTL == nil {
		c.t.Fatalf("CreateTaskResult %+v: want a nested task with taskId and ttl", res)
	}
	return res.Task
}

func (c *legacyClient) waitTerminal(id string) legacyTask {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var task legacyTask
		c.mustCall("tasks/get", map[string]any{"taskId": id}, &task)
		switch task.Status {
		case "completed", "failed", "cancelled":
			return task
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task never ended: %+v", task)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A 2025-11-25 client over HTTP sees the revision's tasks: the capability
// at initialize, taskSupport per tool, a nested CreateTaskResult, flat tasks
// from tasks/get (without Mcp-Name), the tool's result from tasks/result
// with the related-task _meta, and JSON-RPC errors for what does not apply.
func TestLegacyTasksOverHTTP(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, initRes := newLegacyClient(t, h.srv.URL, `{}`)
	if c.session == "" {
		t.Fatal("initialize of 2025-11-25 got no Mcp-Session-Id")
	}
	var ir struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
	}
	json.Unmarshal(initRes, &ir)
	tasksCap, _ := ir.Capabilities["tasks"].(map[string]any)
	if ir.ProtocolVersion != "2025-11-25" || tasksCap["requests"] == nil || tasksCap["list"] == nil || tasksCap["cancel"] == nil {
		t.Fatalf("initialize result %s: want capabilities.tasks with requests.tools.call, list and cancel", initRes)
	}

	var tools struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	c.mustCall("tools/list", map[string]any{}, &tools)
	support := map[string]string{}
	for _, tl := range tools.Tools {
		if tl.Execution == nil {
			t.Fatalf("tool %s has no execution.taskSupport", tl.Name)
		}
		support[tl.Name] = tl.Execution.TaskSupport
	}
	for tool, want := range map[string]string{"greet": "forbidden", "slow_compute": "optional", "test_tool_with_task": "required"} {
		if support[tool] != want {
			t.Errorf("taskSupport of %s = %q, want %q (all: %v)", tool, support[tool], want, support)
		}
	}
	// A forbidden tool refuses params.task, a required one its absence,
	// each saying what works instead.
	if _, rerr := c.call("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}, "task": map[string]any{}}); rerr == nil || rerr.Code != -32601 || !strings.Contains(rerr.Message, "without params.task") {
		t.Errorf("task call of a forbidden tool: %+v, want -32601 saying to call it without params.task", rerr)
	}
	if _, rerr := c.call("tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}}); rerr == nil || rerr.Code != -32601 || !strings.Contains(rerr.Message, "with params.task") {
		t.Errorf("plain call of a required tool: %+v, want -32601 saying to call it with params.task", rerr)
	}

	task := c.createTask("slow_compute", map[string]any{"seconds": 0, "label": "Ada"})
	if task.Status != "working" {
		t.Errorf("new task %+v, want working", task)
	}
	done := c.waitTerminal(task.TaskID)
	if done.Status != "completed" {
		t.Fatalf("task %+v, want completed", done)
	}
	res, rerr := c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if rerr != nil {
		t.Fatalf("tasks/result: %+v", rerr)
	}
	var tr struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	json.Unmarshal(res, &tr)
	if len(tr.Content) == 0 || !strings.Contains(tr.Content[0].Text, "Ada") || tr.IsError {
		t.Errorf("tasks/result %s: want the tool's result", res)
	}
	if tr.Meta["io.modelcontextprotocol/related-task"].TaskID != task.TaskID {
		t.Errorf("tasks/result %s: want the related-task _meta", res)
	}

	// Cancelling a finished task is refused, as the revision says.
	if _, rerr := c.call("tasks/cancel", map[string]any{"taskId": task.TaskID}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("tasks/cancel of a completed task: %+v, want -32602", rerr)
	}
	// tasks/update is not a 2025-11-25 method.
	if _, rerr := c.call("tasks/update", map[string]any{"taskId": task.TaskID}); rerr == nil || rerr.Code != -32601 {
		t.Errorf("tasks/update under 2025-11-25: %+v, want -32601", rerr)
	}
}

// A cancel under 2025-11-25 forwards the cancel downstream and answers the
// Task, cancelled.
func TestLegacyCancel(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := newLegacyClient(t, h.srv.URL, `{}`)
	task := c.createTask("slow_compute", map[string]any{"seconds": 30})
	var jobID string
	deadline := time.Now().Add(10 * time.Second)
	for jobID == "" {
		row, err := h.store.Get(t.Context(), mapping.KeyOf(task.TaskID), "anonymous", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var ref adapters.JobRef
		if json.Unmarshal(row.JobRef, &ref) == nil {
			jobID = ref.ID
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was never submitted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var cancelled legacyTask
	c.mustCall("tasks/cancel", map[string]any{"taskId": task.TaskID}, &cancelled)
	if cancelled.Status != "cancelled" || !strings.Contains(cancelled.StatusMessage, "cancel was sent") {
		t.Fatalf("tasks/cancel answered %+v, want the Task cancelled, saying the cancel was sent", cancelled)
	}
	if n := h.fake.Cancels(jobID); n != 1 {
		t.Errorf("the backend saw %d cancels of job %s, want 1", n, jobID)
	}
	var again legacyTask
	c.mustCall("tasks/get", map[string]any{"taskId": task.TaskID}, &again)
	if again.Status != "cancelled" {
		t.Errorf("tasks/get after the cancel: %+v, want cancelled for good", again)
	}
}

// The confirmation of a 2025-11-25 task is asked through tasks/result: the
// bridge relays it as elicitation/create on the tasks/result stream, with
// the related-task _meta, and the answer submits the job.
func TestLegacyConfirmationThroughTasksResult(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := newLegacyClient(t, h.srv.URL, `{"elicitation":{}}`)
	var asked json.RawMessage
	c.elicit = func(params json.RawMessage) any {
		asked = params
		return map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	task := c.createTask("confirm_delete", map[string]any{"filename": "prod.db"})
	if task.Status != "input_required" {
		t.Fatalf("confirm task %+v, want input_required", task)
	}
	res, rerr := c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if rerr != nil {
		t.Fatalf("tasks/result: %+v", rerr)
	}
	if !strings.Contains(string(asked), "prod.db") || !strings.Contains(string(asked), task.TaskID) {
		t.Errorf("elicitation params %s: want the confirmation message and the related task", asked)
	}
	if !strings.Contains(string(res), "content") {
		t.Errorf("tasks/result %s: want the tool's result after the confirmation", res)
	}

	// Without the elicitation capability the tool cannot be confirmed: a
	// clear error, before any task exists.
	plain, _ := newLegacyClient(t, h.srv.URL, `{}`)
	_, rerr = plain.call("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "x"}, "task": map[string]any{}})
	if rerr == nil || !strings.Contains(rerr.Message, "elicitation") {
		t.Errorf("confirm tool without elicitation: %+v, want an error naming elicitation", rerr)
	}
}

// tasks/list shows the caller's own tasks, by pages, and nothing of another
// principal's.
func TestLegacyTasksList(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := newLegacyClient(t, h.srv.URL, `{}`)
	mine := map[string]bool{}
	for i := range 3 {
		mine[c.createTask("slow_compute", map[string]any{"seconds": 0, "label": fmt.Sprint("n", i)}).TaskID] = true
	}
	var page struct {
		Tasks      []legacyTask `json:"tasks"`
		NextCursor string       `json:"nextCursor"`
	}
	c.mustCall("tasks/list", map[string]any{}, &page)
	seen := map[string]bool{}
	for _, tk := range page.Tasks {
		seen[tk.TaskID] = true
	}
	for id := range mine {
		if !seen[id] {
			t.Errorf("tasks/list %+v misses task %s", page, id)
		}
	}
	if _, rerr := c.call("tasks/list", map[string]any{"cursor": "not-a-cursor"}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("a bad cursor: %+v, want -32602", rerr)
	}
}

// Under 2026-07-28 the 2025-11-25 methods do not exist, and errors are
// JSON-RPC objects on every path.
func TestLegacyMethodsAreNotModern(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, method := range []string{"tasks/list", "tasks/result"} {
		_, _, err := h.tasks.Raw(t.Context(), method, map[string]any{"taskId": "x"}, http.Header{"Mcp-Name": {"x"}})
		if err == nil || !strings.Contains(err.Error(), "-32601") || !strings.Contains(err.Error(), "2025-11-25 method") {
			t.Errorf("%s under 2026-07-28: %v, want -32601 saying it is a 2025-11-25 method", method, err)
		}
	}
	// An unknown session is a JSON-RPC error, not text/plain.
	req, _ := http.NewRequest("POST", h.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "no-such-session")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m rpcMessage
	if resp.StatusCode < 400 || json.Unmarshal(body, &m) != nil || m.Error == nil {
		t.Errorf("unknown session: HTTP %d %q %s, want a JSON-RPC error", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// A restarted server with another state key cannot open the sealed IDs of
// the tasks before it; a live task read by its ID is listed again.
func TestLegacyTasksListAfterRestart(t *testing.T) {
	opts := harnessOptions{}
	h := newHarness(t, opts)
	c, _ := newLegacyClient(t, h.srv.URL, `{}`)
	task := c.createTask("slow_compute", map[string]any{"seconds": 60})
	h.stop()
	h.start(opts) // a new random state key
	c, _ = newLegacyClient(t, h.srv.URL, `{}`)
	listed := func() bool {
		var page struct {
			Tasks []legacyTask `json:"tasks"`
		}
		c.mustCall("tasks/list", map[string]any{}, &page)
		for _, tk := range page.Tasks {
			if tk.TaskID == task.TaskID {
				return true
			}
		}
		return false
	}
	if listed() {
		t.Fatal("a task sealed under another key was listed")
	}
	c.mustCall("tasks/get", map[string]any{"taskId": task.TaskID}, nil)
	if !listed() {
		t.Error("the task, read by its ID, is still not listed")
	}
}

// Under 2025-11-25 too, another principal's task answers exactly like an
// unknown one (tasks/get, tasks/result, tasks/cancel), tasks/list shows
// only the caller's tasks, and no probe changes anything.
func TestLegacyBOLA(t *testing.T) {
	h := newAuthHarness(t, nil)
	token := func(sub, tenant string) string {
		return "Bearer " + h.issuer.Token(map[string]any{"sub": sub, "aud": testResource, "tenant": tenant})
	}
	session := func(auth string) *legacyClient {
		c := &legacyClient{t: t, url: h.srv.URL, auth: auth}
		if _, rerr := c.call("initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"v1-like","version":"1"}}`)); rerr != nil {
			t.Fatalf("initialize: %+v", rerr)
		}
		c.notify("notifications/initialized")
		return c
	}
	alice := session(token("alice", "acme"))
	var ids []string
	for range 5 {
		ids = append(ids, alice.createTask("long_job", map[string]any{}).TaskID)
	}
	probes := 0
	for _, prober := range []*legacyClient{session(token("mallory", "acme")), session(token("alice", "other"))} {
		for _, id := range ids {
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				probes++
				_, foreign := prober.call(method, map[string]any{"taskId": id})
				_, unknown := prober.call(method, map[string]any{"taskId": "bm90LWEtdGFzay1vZi1hbnlvbmUtMTIzNDU2"})
				if fmt.Sprint(foreign) != fmt.Sprint(unknown) || foreign == nil || foreign.Code != -32602 {
					t.Errorf("%s of a foreign task answered %+v, of an unknown one %+v; want the same -32602", method, foreign, unknown)
				}
			}
		}
		var page struct {
			Tasks []legacyTask `json:"tasks"`
		}
		prober.mustCall("tasks/list", map[string]any{}, &page)
		if len(page.Tasks) != 0 {
			t.Errorf("another principal's tasks/list shows %d tasks, want none", len(page.Tasks))
		}
	}
	for _, id := range ids {
		var task legacyTask
		alice.mustCall("tasks/get", map[string]any{"taskId": id}, &task)
		if task.Status != "working" {
			t.Errorf("a probe changed alice's task: %+v", task)
		}
	}
	t.Logf("2025-11-25 BOLA: %d probes, 0 leaks", probes)
}

// The limits are the same under 2025-11-25: a caller at max_live_tasks gets
// the same tool error, and no task.
func TestLegacyLimits(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) { c.Limits.MaxLiveTasks = 1 }})
	c, _ := newLegacyClient(t, h.srv.URL, `{}`)
	c.createTask("long_job", map[string]any{})
	res, rerr := c.call("tools/call", map[string]any{"name": "long_job", "arguments": map[string]any{}, "task": map[string]any{}})
	if rerr != nil {
		t.Fatalf("second task: %+v", rerr)
	}
	if !strings.Contains(string(res), `"isError":true`) || !strings.Contains(string(res), "unfinished tasks, the limit") || strings.Contains(string(res), `"task"`) {
		t.Errorf("second task over the limit: %s, want the live-limit tool error and no task", res)
	}
}

// Each state change of a task is one log line at info: the task's hash
// (never its ID), tool, backend, job, correlation ID, from → to and the time
// in the state it left.
func TestTransitionsAreLogged(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, harnessOptions{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	task := h.createTask("slow_compute", map[string]any{"seconds": 0})
	h.waitTerminal(task.TaskID)
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="task state changed"`) && strings.Contains(l, "to=completed") {
			line = l
		}
	}
	for _, want := range []string{"task=", "tool=slow_compute", "backend=jobs", "job=", "correlation=jb-", "from=working", "in_state="} {
		if !strings.Contains(line, want) {
			t.Errorf("transition line %q lacks %s\n%s", line, want, logs.String())
		}
	}
	if strings.Contains(logs.String(), task.TaskID) {
		t.Error("the logs contain the task ID")
	}
}
