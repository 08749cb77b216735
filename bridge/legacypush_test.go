package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/mapping/postgres"
)

// Part 5: notifications/tasks/status for 2025-11-25 sessions.

// getStream opens a session's standalone GET stream and returns its
// messages.
func getStream(t *testing.T, url, session string) <-chan rpcMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	out := make(chan rpcMessage, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m rpcMessage
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil {
				out <- m
			}
		}
	}()
	return out
}

// awaitStatus reads notifications until one says the task has status, and
// returns its params; it fails on any notification/progress carrier left on
// the wire.
func awaitStatus(t *testing.T, msgs <-chan rpcMessage, id, status string) map[string]any {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the stream ended before task %s became %s", id, status)
			}
			if m.Method == "notifications/progress" {
				t.Fatalf("a carrier reached the client: %s", m.Params)
			}
			if m.Method != "notifications/tasks/status" {
				continue
			}
			var p map[string]any
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			if p["taskId"] == id && p["status"] == status {
				return p
			}
		case <-deadline:
			t.Fatalf("no notifications/tasks/status %s for task %s", status, id)
		}
	}
}

func checkStatusShape(t *testing.T, p map[string]any) {
	t.Helper()
	for _, k := range []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttl"} {
		if _, ok := p[k]; !ok {
			t.Errorf("notifications/tasks/status lacks %q: %v", k, p)
		}
	}
	for _, k := range []string{"ttlMs", "pollIntervalMs", "result", "_meta"} {
		if _, ok := p[k]; ok {
			t.Errorf("notifications/tasks/status carries %q, which 2025-11-25 does not have: %v", k, p)
		}
	}
}

func TestLegacyPushOverHTTP(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c, _ := newLegacyClient(t, h.srv.URL, `{}`)
	msgs := getStream(t, h.srv.URL, c.session)
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "push"})
	// The client never polls: the change arrives on its GET stream.
	p := awaitStatus(t, msgs, task.TaskID, "completed")
	checkStatusShape(t, p)
}

func TestLegacyPushOverStdio(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := newStdioLines(t, h.bridge)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"v1-like","version":"1"}}}`)
	c.awaitID("1")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.2},"task":{}}}`)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(c.awaitID("2").Result, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("tools/call with params.task: %v", err)
	}
	checkStatusShape(t, awaitStatus(t, c.msgs, created.Task.TaskID, "completed"))
}

// TestLegacyPushAcrossReplicas: a change another replica makes reaches the
// session's stream on this one.
func TestLegacyPushAcrossReplicas(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	s := newIdemSetup(t, nil)
	var rs []*replica
	for range 2 {
		store, err := postgres.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, s.start(t, store))
	}
	a, _ := newLegacyClient(t, rs[0].srv.URL, `{}`)
	msgs := getStream(t, rs[0].srv.URL, a.session)
	task := a.createTask("long_job", map[string]any{})
	b, _ := newLegacyClient(t, rs[1].srv.URL, `{}`)
	b.mustCall("tasks/cancel", map[string]any{"taskId": task.TaskID}, nil)
	checkStatusShape(t, awaitStatus(t, msgs, task.TaskID, "cancelled"))
}

// stdioLines is a raw newline-delimited JSON-RPC client of ServeIO.
type stdioLines struct {
	t    *testing.T
	in   io.WriteCloser
	msgs chan rpcMessage
	mu   sync.Mutex
	byID map[string]chan rpcMessage
}

func newStdioLines(t *testing.T, b *bridge.Bridge) *stdioLines {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.ServeIO(ctx, inR, outW); outW.Close() }()
	c := &stdioLines{t: t, in: inW, msgs: make(chan rpcMessage, 64), byID: map[string]chan rpcMessage{}}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m rpcMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if m.Method == "" && len(m.ID) > 0 {
				c.reply(string(m.ID)) <- m
				continue
			}
			c.msgs <- m
		}
		close(c.msgs)
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
	})
	return c
}

func (c *stdioLines) reply(id string) chan rpcMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.byID[id]
	if ch == nil {
		ch = make(chan rpcMessage, 1)
		c.byID[id] = ch
	}
	return ch
}

func (c *stdioLines) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *stdioLines) awaitID(id string) rpcMessage {
	c.t.Helper()
	select {
	case m := <-c.reply(id):
		if m.Error != nil {
			c.t.Fatalf("request %s: %+v", id, m.Error)
		}
		return m
	case <-time.After(15 * time.Second):
		c.t.Fatalf("no answer to request %s", id)
	}
	return rpcMessage{}
}

// Part 6: questions reach a session that never calls tasks/result.

// inspectorLike is a go-sdk client session of revision 2025-11-25 that
// calls tools as tasks (params.task), polls only tasks/get and answers
// elicitation/create, as MCP Inspector does with "Run as task".
type inspectorLike struct {
	t  *testing.T
	cs *mcp.ClientSession
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId,omitempty"`
}

type legacyTaskResult struct {
	mcp.ResultBase
	legacyTask
}

type tasksListResult struct {
	mcp.ResultBase
	Tasks []legacyTask `json:"tasks"`
}

type toolResultRaw struct {
	mcp.ResultBase
	Content []map[string]any `json:"content"`
	IsError bool             `json:"isError"`
}

// taskCallParams is a tools/call's params with params.task, which the
// SDK's CallToolParams does not have.
type taskCallParams struct {
	*mcp.CallToolParams
	Task map[string]any `json:"task"`
}

func newInspectorLike(t *testing.T, transport mcp.Transport, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *inspectorLike {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "inspector-like", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.ClientRequest[mcp.Params]); ok && method == "tools/call" {
				if p, ok := r.Params.(*mcp.CallToolParams); ok {
					req = &mcp.ClientRequest[*taskCallParams]{Session: r.Session, Params: &taskCallParams{CallToolParams: p, Task: map[string]any{}}}
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, m := range []string{"tasks/get"} {
		if err := mcp.AddSendingCustomMethod[*taskIDParams, *legacyTaskResult](c, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *tasksListResult](c, "tasks/list"); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *toolResultRaw](c, "tasks/result"); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return &inspectorLike{t: t, cs: cs}
}

// runAsTask calls the tool with params.task and returns the task's ID
// (the SDK reads the CreateTaskResult as a tool result and drops it, so
// the ID is read from tasks/list, newest first).
func (c *inspectorLike) runAsTask(tool string, args map[string]any) string {
	c.t.Helper()
	if _, err := c.cs.CallTool(c.t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
		c.t.Fatalf("tools/call with params.task: %v", err)
	}
	list, err := mcp.CallCustomMethod[*taskIDParams, *tasksListResult](c.t.Context(), c.cs, "tasks/list", &taskIDParams{})
	if err != nil || len(list.Tasks) == 0 {
		c.t.Fatalf("tasks/list: %+v, %v", list, err)
	}
	return list.Tasks[0].TaskID
}

func (c *inspectorLike) get(id string) legacyTask {
	c.t.Helper()
	res, err := mcp.CallCustomMethod[*taskIDParams, *legacyTaskResult](c.t.Context(), c.cs, "tasks/get", &taskIDParams{TaskID: id})
	if err != nil {
		c.t.Fatalf("tasks/get: %v", err)
	}
	return res.legacyTask
}

// pollUntilEnded polls tasks/get only, as Inspector does.
func (c *inspectorLike) pollUntilEnded(id string) legacyTask {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		task := c.get(id)
		switch task.Status {
		case "completed", "failed", "cancelled":
			return task
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s never ended: %+v", id, task)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answerer answers the multi_input questions and counts what it was asked.
type answerer struct {
	mu    sync.Mutex
	asked []string // the questions, in order
	tasks []string // the related-task IDs
}

func (a *answerer) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req.Params.Message)
	rel, _ := req.Params.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	id, _ := rel["taskId"].(string)
	a.tasks = append(a.tasks, id)
	if strings.Contains(req.Params.Message, "name") {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

func (a *answerer) seen() ([]string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...), append([]string(nil), a.tasks...)
}

func testQuestionsWithoutTasksResult(t *testing.T, transport func(h *harness) mcp.Transport) {
	h := newHarness(t, harnessOptions{})
	a := &answerer{}
	c := newInspectorLike(t, transport(h), a.elicit)
	id := c.runAsTask("multi_input", map[string]any{})
	if task := c.pollUntilEnded(id); task.Status != "completed" {
		t.Fatalf("task ended %s (%s), want completed", task.Status, task.StatusMessage)
	}
	asked, related := a.seen()
	if len(asked) != 2 {
		t.Fatalf("the client was asked %q, want the job's two questions once each", asked)
	}
	for _, r := range related {
		if r != id {
			t.Errorf("a question's related task is %q, want %q", r, id)
		}
	}
	// A tasks/result now gets the result and asks nothing again.
	res, err := mcp.CallCustomMethod[*taskIDParams, *toolResultRaw](t.Context(), c.cs, "tasks/result", &taskIDParams{TaskID: id})
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	if text, _ := res.Content[0]["text"].(string); !strings.Contains(text, "All questions answered") {
		t.Errorf("tasks/result: %+v, want the job's result", res)
	}
	if again, _ := a.seen(); len(again) != 2 {
		t.Errorf("after tasks/result the client was asked %q, want no question again", again)
	}
}

func TestQuestionsWithoutTasksResultOverHTTP(t *testing.T) {
	testQuestionsWithoutTasksResult(t, func(h *harness) mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: h.srv.URL}
	})
}

func TestQuestionsWithoutTasksResultOverStdio(t *testing.T) {
	testQuestionsWithoutTasksResult(t, func(h *harness) mcp.Transport {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.bridge.ServeIO(ctx, inR, outW); outW.Close() }()
		t.Cleanup(func() { inW.Close(); cancel(); <-done })
		return &mcp.IOTransport{Reader: outR, Writer: inW}
	})
}

// TestRelayedQuestionNotAskedAgainByTasksResult: a tasks/result that
// arrives while the relayed question is out waits for its answer instead
// of asking it a second time.
func TestRelayedQuestionNotAskedAgainByTasksResult(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var asked atomic.Int32
	out := make(chan string, 1) // the related task of the question
	release := make(chan struct{})
	elicit := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		rel, _ := req.Params.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
		id, _ := rel["taskId"].(string)
		out <- id
		// Holding the answer holds the client's connection too (the SDK
		// handles one incoming request at a time); the server is not held.
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}
	c := newInspectorLike(t, &mcp.StreamableClientTransport{Endpoint: h.srv.URL}, elicit)
	go c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "confirm_delete", Arguments: map[string]any{"filename": "a.txt"}})
	var id string
	select {
	case id = <-out: // the confirmation was relayed on the GET stream
	case <-time.After(15 * time.Second):
		t.Fatal("the confirmation never reached the client")
	}
	type result struct {
		res *toolResultRaw
		err error
	}
	got := make(chan result, 1)
	go func() {
		res, err := mcp.CallCustomMethod[*taskIDParams, *toolResultRaw](t.Context(), c.cs, "tasks/result", &taskIDParams{TaskID: id})
		got <- result{res, err}
	}()
	for deadline := time.Now().Add(15 * time.Second); h.bridge.ResultsWaiting(id) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("tasks/result never reached the server")
		}
	}
	close(release)
	var r result
	select {
	case r = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("tasks/result never answered")
	}
	if r.err != nil {
		t.Fatalf("tasks/result: %v", r.err)
	}
	if len(r.res.Content) == 0 || r.res.Content[0]["text"] != "Deleted a.txt." {
		t.Errorf("tasks/result: %+v, want Deleted a.txt.", r.res)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the confirmation was asked %d times, want once", n)
	}
}
