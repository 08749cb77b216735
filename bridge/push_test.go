package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// nextTask reads the stream's next notification, failing the test after a
// few seconds.
func nextTask(t *testing.T, s *taskclient.Stream) *taskclient.Task {
	t.Helper()
	type got struct {
		task *taskclient.Task
		err  error
	}
	ch := make(chan got, 1)
	go func() {
		task, err := s.Next()
		ch <- got{task, err}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("stream: %v", g.err)
		}
		return g.task
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
	return nil
}

func TestListenPushesEachStateOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("slow_compute", map[string]any{"seconds": 0.5, "label": "pushed"})

	s, err := h.tasks.Listen(t.Context(), []string{task.TaskID, "no-such-task"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.TaskIDs) != 1 || s.TaskIDs[0] != task.TaskID {
		t.Fatalf("acknowledged %q; want only the caller's task", s.TaskIDs)
	}

	// The first message is the task's current state; then each change, in
	// order, until the final one, with nothing repeated.
	first := nextTask(t, s)
	if first.TaskID != task.TaskID || first.Status != "working" {
		t.Fatalf("first notification %s %s; want the task working", first.TaskID, first.Status)
	}
	var seen []string
	last := first
	for !last.Terminal() {
		next := nextTask(t, s)
		if next.Status == last.Status && next.StatusMessage == last.StatusMessage {
			t.Errorf("pushed the same state twice: %s %q", next.Status, next.StatusMessage)
		}
		seen = append(seen, next.Status)
		last = next
	}
	if last.Status != "completed" || last.Result == nil || !strings.Contains(last.Result.Text(), "Computed pushed") {
		t.Fatalf("last notification %+v; want completed with the job's result", last)
	}
	// What was pushed is what tasks/get answers.
	got, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != last.Status || got.StatusMessage != last.StatusMessage || got.Result.Text() != last.Result.Text() {
		t.Errorf("tasks/get %s %q, pushed %s %q", got.Status, got.StatusMessage, last.Status, last.StatusMessage)
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
		// A notification is not a result.
		ResultType *string `json:"resultType"`
	}
	json.Unmarshal(last.Raw, &meta)
	if string(meta.Meta["io.modelcontextprotocol/subscriptionId"]) != string(s.SubscriptionID) || meta.ResultType != nil {
		t.Errorf("notification _meta %s, resultType %v; want the subscription id %s and no resultType", meta.Meta, meta.ResultType, s.SubscriptionID)
	}
}

func TestListenSendsATerminalTaskAtOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	task := h.createTask("slow_compute", map[string]any{"seconds": 0, "label": "done"})
	h.waitTerminal(task.TaskID)
	s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := nextTask(t, s); got.Status != "completed" {
		t.Fatalf("first notification %s; want completed", got.Status)
	}
}

func TestListenRefusals(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		c.Limits.TasksPerStream = 2
		c.Limits.StreamsPerPrincipal = 1
	}})
	task := h.createTask("slow_compute", map[string]any{"seconds": 30})

	t.Run("without the extension", func(t *testing.T) {
		_, err := h.plain.Listen(t.Context(), []string{task.TaskID})
		var rpc *taskclient.RPCError
		if !errors.As(err, &rpc) || rpc.Code != taskclient.CodeMissingRequiredClientCapability || rpc.HTTPStatus != http.StatusBadRequest {
			t.Fatalf("got %v; want -32021 with HTTP 400", err)
		}
		if !strings.Contains(string(rpc.Data), "io.modelcontextprotocol/tasks") {
			t.Errorf("data %s does not name the extension", rpc.Data)
		}
	})
	t.Run("too many task IDs", func(t *testing.T) {
		_, err := h.tasks.Listen(t.Context(), []string{"a", "b", "c"})
		var rpc *taskclient.RPCError
		if !errors.As(err, &rpc) || rpc.Code != taskclient.CodeInvalidParams || !strings.Contains(rpc.Message, "at most 2") {
			t.Fatalf("got %v; want -32602 saying at most 2", err)
		}
	})
	t.Run("too many streams", func(t *testing.T) {
		s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = h.tasks.Listen(t.Context(), []string{task.TaskID})
		var rpc *taskclient.RPCError
		if !errors.As(err, &rpc) || rpc.HTTPStatus != http.StatusTooManyRequests || !strings.Contains(rpc.Message, "too many open streams") {
			t.Fatalf("got %v; want HTTP 429 too many open streams", err)
		}
	})
	t.Run("a closed stream frees its slot", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
			if err == nil {
				s.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("still refused after the other stream closed: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestListenIsForTheOwnerOnly(t *testing.T) {
	h := newAuthHarness(t, nil)
	alice, bob := h.client("alice", nil), h.client("bob", nil)
	res, err := alice.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 30}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("creating alice's task: %v %+v", err, res)
	}
	s, err := bob.Listen(t.Context(), []string{res.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.TaskIDs) != 0 {
		t.Fatalf("bob's stream acknowledged %q; want none of alice's tasks", s.TaskIDs)
	}
	// Nothing agreed: the server ends the stream at once.
	if _, err := s.Next(); !errors.Is(err, taskclient.ErrStreamEnded) {
		t.Fatalf("bob's stream: %v; want it ended", err)
	}
}

func TestListenEndsGracefully(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		c.Limits.MaxStreamLife = 300 * time.Millisecond
		c.Limits.StreamKeepAlive = 50 * time.Millisecond
	}})
	task := h.createTask("slow_compute", map[string]any{"seconds": 600})
	// A task whose state stays the same while the stream lasts.
	h.waitFor(task.TaskID, "running", func(t *taskclient.Task) bool { return strings.HasPrefix(t.StatusMessage, "running") })
	// Read the raw stream: keep-alive comments while idle, then the
	// listen's result with the subscription id.
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},"notifications":{"taskIds":["`+task.TaskID+`"]}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	body, _ := io.ReadAll(resp.Body)
	var messages []string
	keepAlives := 0
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "data: "):
			messages = append(messages, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, ":"):
			keepAlives++
		}
	}
	if len(messages) != 3 {
		t.Fatalf("got %d messages, want the acknowledgement, the task and the result:\n%s", len(messages), body)
	}
	for i, want := range []string{`"method":"notifications/subscriptions/acknowledged"`, `"method":"notifications/tasks"`, `"resultType":"complete"`} {
		if !strings.Contains(messages[i], want) || !strings.Contains(messages[i], `"io.modelcontextprotocol/subscriptionId":"listen-1"`) {
			t.Errorf("message %d = %s; want %s with the subscription id", i, messages[i], want)
		}
	}
	if !strings.Contains(messages[2], `"id":"listen-1"`) {
		t.Errorf("the stream's end %s does not answer the listen request", messages[2])
	}
	if keepAlives == 0 {
		t.Errorf("no keep-alive comment in an idle stream:\n%s", body)
	}
}

func TestListenOverStdio(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.bridge.ServeIO(ctx, inR, outW) }()
	defer func() {
		inW.Close()
		<-done
	}()
	lines := bufio.NewScanner(outR)
	read := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %s", lines.Bytes())
		}
		return m
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	// The stdio caller's own task.
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{` + meta + `,"name":"slow_compute","arguments":{"seconds":0.3}}}`)
	created := read()
	res, _ := created["result"].(map[string]any)
	if res["resultType"] != "task" {
		t.Fatalf("tools/call answered %v; want a task", created)
	}
	task := struct{ TaskID string }{res["taskId"].(string)}
	send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + meta + `,"notifications":{"taskIds":["` + task.TaskID + `"]}}}`)
	ack := read()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v; want the acknowledgement", ack)
	}
	var statuses []string
	for {
		m := read()
		if m["method"] != "notifications/tasks" {
			t.Fatalf("message %v; want notifications/tasks", m)
		}
		p := m["params"].(map[string]any)
		if p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != 7.0 {
			t.Errorf("params._meta %v; want subscriptionId 7", p["_meta"])
		}
		statuses = append(statuses, p["status"].(string))
		if p["status"] == "completed" {
			break
		}
	}
	if statuses[0] != "working" {
		t.Errorf("statuses %v; want the current state (working) first", statuses)
	}
	// Other requests are served on the same session meanwhile, and the
	// client's notifications/cancelled ends the stream.
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	send(`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{` + meta + `,"taskId":"` + task.TaskID + `"}}`)
	if m := read(); m["id"] != 8.0 || m["result"] == nil {
		t.Fatalf("answer %v; want tasks/get's result", m)
	}
}

func TestListenEndsWhenTheServerStops(t *testing.T) {
	t.Run("stdio: notifications/cancelled for the listen", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.bridge.ServeIO(ctx, inR, outW); outW.Close() }()
		defer inW.Close()
		lines := bufio.NewScanner(outR)
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"slow_compute","arguments":{"seconds":600}}}`+"\n")
		var id string
		for id == "" && lines.Scan() {
			var m struct {
				Result struct{ TaskID string } `json:"result"`
			}
			json.Unmarshal(lines.Bytes(), &m)
			id = m.Result.TaskID
		}
		io.WriteString(inW, `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{`+meta+`,"notifications":{"taskIds":["`+id+`"]}}}`+"\n")
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"notifications/tasks"`) {
				break
			}
		}
		cancel()
		var end string
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"notifications/cancelled"`) {
				end = lines.Text()
			}
		}
		if !strings.Contains(end, `"requestId":"L"`) {
			t.Fatalf("no notifications/cancelled for the listen before stdout closed (last: %q)", end)
		}
		if err := <-done; err != nil {
			t.Fatalf("ServeIO: %v", err)
		}
	})
	t.Run("HTTP: EndStreams answers the listen", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		task := h.createTask("slow_compute", map[string]any{"seconds": 600})
		s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		nextTask(t, s)
		h.bridge.EndStreams()
		for err == nil {
			_, err = s.Next() // changes sent before the end come first
		}
		if !errors.Is(err, taskclient.ErrStreamEnded) {
			t.Fatalf("after EndStreams: %v; want the listen's result", err)
		}
		// Other requests are still served.
		if _, err := h.tasks.GetTask(t.Context(), task.TaskID); err != nil {
			t.Fatal(err)
		}
	})
}

// failingGets is a store whose Get fails while fail is set.
type failingGets struct {
	mapping.Store
	fail atomic.Bool
}

func (s *failingGets) Get(ctx context.Context, key mapping.Key, principal string, now time.Time) (*mapping.Task, error) {
	if s.fail.Load() {
		return nil, errors.New("database is unreachable")
	}
	return s.Store.Get(ctx, key, principal, now)
}

func TestListenSaysWhenTheStoreCannotBeRead(t *testing.T) {
	var store *failingGets
	h := newHarness(t, harnessOptions{wrapStore: func(s mapping.Store) mapping.Store {
		store = &failingGets{Store: s}
		return store
	}})
	task := h.createTask("slow_compute", map[string]any{"seconds": 600})
	store.fail.Store(true)
	_, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
	var rpc *taskclient.RPCError
	if !errors.As(err, &rpc) || rpc.Code != taskclient.CodeInternalError || !strings.Contains(rpc.Message, "task store could not be read") {
		t.Fatalf("listen while the store fails: %v; want an error saying so (not an acknowledgement without the task)", err)
	}
	store.fail.Store(false)
	s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.TaskIDs) != 1 {
		t.Fatalf("acknowledged %q once the store is back", s.TaskIDs)
	}
}
