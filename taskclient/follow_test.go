package taskclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// pushFake is an MCP endpoint with one task, tsk-1, that walks a script of
// statuses. A listen stream pushes the current state first, then moves the
// task on and pushes each next state; tasks/get answers the current state
// and then moves it on. The task waits in input_required until tasks/update
// and before leaving a state of hold until that channel is closed.
type pushFake struct {
	statuses []string
	// endAfter ends each stream gracefully after that many pushes (0:
	// streams stay open).
	endAfter int
	// listen, if set, may answer the n-th subscriptions/listen (from 1)
	// itself and return true; get likewise for tasks/get.
	listen, get func(n int, w http.ResponseWriter, id json.RawMessage) bool
	hold        map[int]chan struct{}

	mu       sync.Mutex
	pos      int
	answered chan struct{}
	methods  []string
	listens  int
	gets     int
}

func (f *pushFake) start(t *testing.T) *Client {
	t.Helper()
	f.answered = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(srv.Close)
	return &Client{URL: srv.URL + "/mcp", Tasks: true, Elicitation: true}
}

func (f *pushFake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

// task is the state at pos.
func (f *pushFake) task(pos int) map[string]any {
	status := f.statuses[pos]
	task := map[string]any{
		"taskId": "tsk-1", "status": status, "statusMessage": fmt.Sprintf("step %d", pos),
		"createdAt": "2026-08-01T10:00:00Z", "lastUpdatedAt": "2026-08-01T10:00:00Z",
		"ttlMs": 60000, "pollIntervalMs": 10,
	}
	switch status {
	case StatusInputRequired:
		task["inputRequests"] = map[string]any{"ok": map[string]any{"method": "elicitation/create",
			"params": map[string]any{"message": "Proceed?", "requestedSchema": map[string]any{"type": "object",
				"properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}}}
	case StatusCompleted:
		task["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}
	}
	return task
}

// gate is what the task waits for before leaving pos (nil: nothing); ok
// is false at the end of the script.
func (f *pushFake) gate(pos int) (ch <-chan struct{}, ok bool) {
	if pos >= len(f.statuses)-1 {
		return nil, false
	}
	if f.statuses[pos] == StatusInputRequired {
		return f.answered, true
	}
	if h, found := f.hold[pos]; found {
		return h, true
	}
	return nil, true
}

func (f *pushFake) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, msg.Method)
	switch msg.Method {
	case "subscriptions/listen":
		f.listens++
		n := f.listens
		f.mu.Unlock()
		if f.listen != nil && f.listen(n, w, msg.ID) {
			return
		}
		f.stream(w, r, msg.ID)
	case "tasks/get":
		f.gets++
		n := f.gets
		f.mu.Unlock()
		if f.get != nil && f.get(n, w, msg.ID) {
			return
		}
		f.mu.Lock()
		task := f.task(f.pos)
		task["resultType"] = "complete"
		if ch, ok := f.gate(f.pos); ok && (ch == nil || closed(ch)) {
			f.pos++
		}
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": task})
	case "tasks/update":
		select {
		case <-f.answered:
		default:
			close(f.answered)
		}
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": ack})
	default:
		f.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": CodeMethodNotFound, "message": "method not found"}})
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stream serves a listen: the acknowledgement, the current state, then
// each next one.
func (f *pushFake) stream(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
	meta := map[string]any{"io.modelcontextprotocol/subscriptionId": id}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
		w.(http.Flusher).Flush()
	}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"_meta": meta, "notifications": map[string]any{"taskIds": []string{"tsk-1"}}}})
	for pushes := 1; ; pushes++ {
		f.mu.Lock()
		task := f.task(f.pos)
		f.mu.Unlock()
		task["_meta"] = meta
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": task})
		if pushes == f.endAfter {
			send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"resultType": "complete", "_meta": meta}})
			return
		}
		f.mu.Lock()
		ch, ok := f.gate(f.pos)
		f.mu.Unlock()
		if !ok {
			<-r.Context().Done() // open until the client goes
			return
		}
		if ch != nil {
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
		f.mu.Lock()
		f.pos++
		f.mu.Unlock()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// recorder is an OnUpdate that records "status: message" and answers
// input requests.
type recorder struct {
	c    *Client
	t    *testing.T
	seen []string
}

func (r *recorder) onUpdate(task *Task) error {
	r.seen = append(r.seen, task.Status+": "+task.StatusMessage)
	if task.Status == StatusInputRequired {
		return r.c.UpdateTask(r.t.Context(), task.TaskID, map[string]any{
			"ok": ElicitResult{Action: ActionAccept, Content: map[string]any{"ok": true}}})
	}
	return nil
}

func steps(statuses ...string) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = fmt.Sprintf("%s: step %d", s, i)
	}
	return out
}

func TestFollowTakesEveryStateFromTheStream(t *testing.T) {
	statuses := []string{"working", "working", "input_required", "working", "completed"}
	f := &pushFake{statuses: statuses}
	c := f.start(t)
	rec := &recorder{c: c, t: t}
	final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{OnUpdate: rec.onUpdate})
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != StatusCompleted || final.Result.Text() != "done" {
		t.Errorf("final task %s %q, want completed with its result", final.Status, final.Result.Text())
	}
	if diff := cmp.Diff(steps(statuses...), rec.seen); diff != "" {
		t.Errorf("states seen (-want +got):\n%s", diff)
	}
	if gets, listens, updates := f.count("tasks/get"), f.count("subscriptions/listen"), f.count("tasks/update"); gets != 0 || listens != 1 || updates != 1 {
		t.Errorf("%d tasks/get, %d listens, %d tasks/update; want 0, 1 and 1", gets, listens, updates)
	}
}

func TestFollowListensAgainAfterTheServerEndsTheStream(t *testing.T) {
	statuses := []string{"working", "working", "working", "completed"}
	// Each stream pushes the state already seen, then one new state.
	f := &pushFake{statuses: statuses, endAfter: 2}
	c := f.start(t)
	rec := &recorder{c: c, t: t}
	last := mustDecodeTask(t, f.task(0))
	final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{Last: last, OnUpdate: rec.onUpdate})
	if err != nil || final.Status != StatusCompleted {
		t.Fatalf("Follow: %v, %+v", err, final)
	}
	// Each state once, though every stream began with one seen before.
	if diff := cmp.Diff(steps(statuses...)[1:], rec.seen); diff != "" {
		t.Errorf("states seen (-want +got):\n%s", diff)
	}
	if gets, listens := f.count("tasks/get"), f.count("subscriptions/listen"); gets != 0 || listens != 3 {
		t.Errorf("%d tasks/get and %d listens; want none and 3", gets, listens)
	}
}

func mustDecodeTask(t *testing.T, v map[string]any) *Task {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	task, err := decodeTask(data)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestFollowPollsWhenTheServerDoesNotStream(t *testing.T) {
	rpcError := func(status, code int) func(int, http.ResponseWriter, json.RawMessage) bool {
		return func(_ int, w http.ResponseWriter, id json.RawMessage) bool {
			writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": "no"}})
			return true
		}
	}
	sse := func(events ...string) func(int, http.ResponseWriter, json.RawMessage) bool {
		return func(_ int, w http.ResponseWriter, id json.RawMessage) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range events {
				fmt.Fprintf(w, "data: %s\n\n", strings.ReplaceAll(e, "{id}", string(id)))
			}
			return true
		}
	}
	const ackNone = `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":[]}}}`
	const ackTask = `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["tsk-1"]}}}`
	tests := []struct {
		name   string
		listen func(int, http.ResponseWriter, json.RawMessage) bool
	}{
		{name: "method not found, HTTP 404", listen: rpcError(http.StatusNotFound, CodeMethodNotFound)},
		{name: "missing capability, HTTP 400", listen: rpcError(http.StatusBadRequest, CodeMissingRequiredClientCapability)},
		{name: "HTTP 405 without JSON-RPC", listen: func(_ int, w http.ResponseWriter, _ json.RawMessage) bool {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return true
		}},
		{name: "JSON instead of a stream", listen: func(_ int, w http.ResponseWriter, id json.RawMessage) bool {
			writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "result": ack})
			return true
		}},
		{name: "a stream without the task", listen: sse(ackNone, `{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete"}}`)},
		{name: "a stream ended by an error", listen: sse(ackTask, `{"jsonrpc":"2.0","id":{id},"error":{"code":-32603,"message":"internal"}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			statuses := []string{"working", "input_required", "working", "completed"}
			f := &pushFake{statuses: statuses, listen: tt.listen}
			c := f.start(t)
			rec := &recorder{c: c, t: t}
			final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{OnUpdate: rec.onUpdate})
			if err != nil || final.Status != StatusCompleted || final.Result.Text() != "done" {
				t.Fatalf("Follow: %v, %+v", err, final)
			}
			if diff := cmp.Diff(steps(statuses...), rec.seen); diff != "" {
				t.Errorf("states seen (-want +got):\n%s", diff)
			}
			if listens := f.count("subscriptions/listen"); listens != 1 {
				t.Errorf("%d listens; want 1, then polls for the rest of the task", listens)
			}
		})
	}
}

func TestFollowPollOptionNeverListens(t *testing.T) {
	statuses := []string{"working", "working", "completed"}
	f := &pushFake{statuses: statuses}
	c := f.start(t)
	rec := &recorder{c: c, t: t}
	final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{Poll: true, OnUpdate: rec.onUpdate})
	if err != nil || final.Status != StatusCompleted {
		t.Fatalf("Follow: %v, %+v", err, final)
	}
	if diff := cmp.Diff(steps(statuses...), rec.seen); diff != "" {
		t.Errorf("states seen (-want +got):\n%s", diff)
	}
	if listens, gets := f.count("subscriptions/listen"), f.count("tasks/get"); listens != 0 || gets != 3 {
		t.Errorf("%d listens and %d tasks/get; want none and 3", listens, gets)
	}
}

// A stream that breaks, a server that is away for a listen and a poll,
// then back: Follow retries by polling and listens again once a poll
// answers.
func TestFollowRetriesThenListensAgain(t *testing.T) {
	statuses := []string{"working", "working", "working", "completed"}
	away := func(w http.ResponseWriter) {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
	}
	f := &pushFake{statuses: statuses}
	f.listen = func(n int, w http.ResponseWriter, id json.RawMessage) bool {
		switch n {
		case 1: // the acknowledgement and the current state, then the connection ends
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"taskIds\":[\"tsk-1\"]}}}\n\n")
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": f.task(0)})
			fmt.Fprintf(w, "data: %s\n\n", data)
			return true
		case 2:
			away(w)
			return true
		}
		return false
	}
	f.get = func(n int, w http.ResponseWriter, _ json.RawMessage) bool {
		if n == 1 {
			away(w)
			return true
		}
		return false
	}
	c := f.start(t)
	rec := &recorder{c: c, t: t}
	var tries []int
	final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{
		OnUpdate: rec.onUpdate,
		Retry: func(err error, n int) (time.Duration, error) {
			if !Unreachable(err) {
				return 0, err
			}
			tries = append(tries, n)
			return 10 * time.Millisecond, nil
		},
	})
	if err != nil || final.Status != StatusCompleted {
		t.Fatalf("Follow: %v, %+v", err, final)
	}
	if diff := cmp.Diff([]int{1, 2}, tries); diff != "" {
		t.Errorf("retries (-want +got):\n%s", diff)
	}
	// The state the poll brings after the failures is shown again: the
	// server is back.
	want := append(steps(statuses...)[:1], steps(statuses...)...)
	if diff := cmp.Diff(want, rec.seen); diff != "" {
		t.Errorf("states seen (-want +got):\n%s", diff)
	}
	if listens, gets := f.count("subscriptions/listen"), f.count("tasks/get"); listens != 3 || gets != 2 {
		t.Errorf("%d listens and %d tasks/get; want 3 and 2", listens, gets)
	}
}

func TestFollowGivesUpWithoutRetry(t *testing.T) {
	f := &pushFake{statuses: []string{"working", "completed"}}
	f.listen = func(_ int, w http.ResponseWriter, _ json.RawMessage) bool {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return true
	}
	c := f.start(t)
	_, err := Follow(t.Context(), c, "tsk-1", FollowOptions{})
	var httpErr *HTTPError
	if !errors.As(err, &httpErr) || httpErr.StatusCode != http.StatusBadGateway {
		t.Fatalf("error = %v, want the 502", err)
	}
}

func TestFollowTicksWhileTheStreamIsQuiet(t *testing.T) {
	release := make(chan struct{})
	f := &pushFake{statuses: []string{"working", "completed"}, hold: map[int]chan struct{}{0: release}}
	c := f.start(t)
	ticks := 0
	final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{Tick: func() {
		if ticks++; ticks == 1 {
			close(release)
		}
	}})
	if err != nil || final.Status != StatusCompleted {
		t.Fatalf("Follow: %v, %+v", err, final)
	}
	if ticks == 0 {
		t.Error("Tick never called while waiting on the stream")
	}
}

func TestFollowEnds(t *testing.T) {
	t.Run("with the context", func(t *testing.T) {
		f := &pushFake{statuses: []string{"working", "completed"}, hold: map[int]chan struct{}{0: make(chan struct{})}}
		c := f.start(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		final, err := Follow(ctx, c, "tsk-1", FollowOptions{OnUpdate: func(*Task) error {
			cancel()
			return nil
		}})
		if !errors.Is(err, context.Canceled) || final == nil || final.Status != StatusWorking {
			t.Fatalf("Follow: %v, %+v; want context.Canceled with the working task", err, final)
		}
	})
	t.Run("with OnUpdate's error", func(t *testing.T) {
		f := &pushFake{statuses: []string{"working", "completed"}}
		c := f.start(t)
		boom := errors.New("boom")
		_, err := Follow(t.Context(), c, "tsk-1", FollowOptions{OnUpdate: func(*Task) error { return boom }})
		if err != boom {
			t.Fatalf("error = %v, want OnUpdate's", err)
		}
	})
	t.Run("at once for a terminal task", func(t *testing.T) {
		f := &pushFake{statuses: []string{"completed"}}
		c := f.start(t)
		done := mustDecodeTask(t, f.task(0))
		final, err := Follow(t.Context(), c, "tsk-1", FollowOptions{Last: done})
		if err != nil || final != done || len(f.methods) != 0 {
			t.Fatalf("Follow: %v, %+v after %v; want the task given, no request", err, final, f.methods)
		}
	})
}

func TestUnreachable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"502", &HTTPError{StatusCode: http.StatusBadGateway}, true},
		{"503", &HTTPError{StatusCode: http.StatusServiceUnavailable}, true},
		{"504", &HTTPError{StatusCode: http.StatusGatewayTimeout}, true},
		{"500", &HTTPError{StatusCode: http.StatusInternalServerError}, false},
		{"401", &HTTPError{StatusCode: http.StatusUnauthorized}, false},
		{"JSON-RPC error", &RPCError{Code: CodeInvalidParams, HTTPStatus: http.StatusBadRequest}, false},
		{"JSON-RPC error from a gateway", fmt.Errorf("tasks/get: %w", &RPCError{Code: CodeInternalError, HTTPStatus: http.StatusServiceUnavailable}), true},
		{"refused connection", &url.Error{Op: "Post", URL: "http://127.0.0.1:1/mcp", Err: syscall.ECONNREFUSED}, true},
		{"cut stream", fmt.Errorf("reading the stream: %w", io.ErrUnexpectedEOF), true},
		{"other", errors.New("decoding response: not a JSON-RPC response"), false},
	}
	for _, tt := range tests {
		if got := Unreachable(tt.err); got != tt.want {
			t.Errorf("%s: Unreachable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
