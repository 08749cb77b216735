package taskclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// request is what the fake server saw of one POST.
type request struct {
	Header http.Header
	ID     json.RawMessage
	Method string
	Params map[string]json.RawMessage
}

// reply is what the fake server sends back. Exactly one of Result, Error or
// Body is used; Body is sent verbatim.
type reply struct {
	Status int
	SSE    bool
	// Before are SSE events sent ahead of the response (SSE only).
	Before []string
	Result any
	Error  *RPCError
	Body   string
}

// fakeServer is a minimal MCP endpoint that records every request and
// answers each with the reply chosen by its handler.
type fakeServer struct {
	URL string

	mu       sync.Mutex
	requests []request
}

func newFakeServer(t *testing.T, handle func(r request) reply) *fakeServer {
	t.Helper()
	fs := &fakeServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		body, err := io.ReadAll(hr.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r := request{Header: hr.Header.Clone(), ID: msg.ID, Method: msg.Method, Params: msg.Params}
		fs.mu.Lock()
		fs.requests = append(fs.requests, r)
		fs.mu.Unlock()

		rep := handle(r)
		if rep.Status == 0 {
			rep.Status = http.StatusOK
		}
		payload := rep.Body
		if payload == "" {
			out := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
			if rep.Error != nil {
				out["error"] = rep.Error
			} else {
				out["result"] = rep.Result
			}
			data, err := json.Marshal(out)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			payload = string(data)
		}
		if rep.SSE {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(rep.Status)
			for _, ev := range rep.Before {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
			fmt.Fprintf(w, "event: message\nid: 1\ndata: %s\n\n", payload)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, payload)
	}))
	t.Cleanup(srv.Close)
	fs.URL = srv.URL + "/mcp"
	return fs
}

func (fs *fakeServer) last(t *testing.T) request {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.requests) == 0 {
		t.Fatal("server saw no request")
	}
	return fs.requests[len(fs.requests)-1]
}

func (fs *fakeServer) all() []request {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]request(nil), fs.requests...)
}

func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(data)
}

func decodeJSON(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func workingTask(id string) map[string]any {
	return map[string]any{
		"resultType": "task", "taskId": id, "status": "working",
		"createdAt": "2026-08-01T10:00:00Z", "lastUpdatedAt": "2026-08-01T10:00:00Z",
		"ttlMs": 60000, "pollIntervalMs": 10,
	}
}

var ack = map[string]any{"resultType": "complete"}

func TestRequestHeadersAndMeta(t *testing.T) {
	fs := newFakeServer(t, func(r request) reply {
		switch r.Method {
		case "tools/call":
			return reply{Result: workingTask("tsk-1")}
		case "tasks/get":
			return reply{Result: json.RawMessage(`{"resultType":"complete","taskId":"tsk-1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":null}`)}
		case "tools/list":
			return reply{Result: map[string]any{"resultType": "complete", "tools": []any{}}}
		case "server/discover":
			return reply{Result: map[string]any{"resultType": "complete", "supportedVersions": []string{ProtocolVersion}, "capabilities": map[string]any{}}}
		}
		return reply{Result: ack}
	})
	c := &Client{
		URL: fs.URL, Tasks: true, Elicitation: true,
		Header:     http.Header{"Authorization": {"Bearer t0ken"}},
		ClientName: "tester", ClientVersion: "1.2.3",
	}

	tests := []struct {
		method   string
		call     func() error
		wantName string // "" means no Mcp-Name header
	}{
		{"server/discover", func() error { _, err := c.Discover(t.Context()); return err }, ""},
		{"tools/list", func() error { _, err := c.ListTools(t.Context()); return err }, ""},
		{"tools/call", func() error { _, err := c.CallTool(t.Context(), "deploy", nil, nil); return err }, "deploy"},
		{"tasks/get", func() error { _, err := c.GetTask(t.Context(), "tsk-1"); return err }, "tsk-1"},
		{"tasks/update", func() error { return c.UpdateTask(t.Context(), "tsk-1", nil) }, "tsk-1"},
		{"tasks/cancel", func() error { return c.CancelTask(t.Context(), "tsk-1") }, "tsk-1"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			got := fs.last(t)
			wantHeaders := map[string]string{
				"Content-Type":         "application/json",
				"Accept":               "application/json, text/event-stream",
				"Mcp-Protocol-Version": "2026-07-28",
				"Mcp-Method":           tt.method,
				"Mcp-Name":             tt.wantName,
				"Authorization":        "Bearer t0ken",
			}
			gotHeaders := map[string]string{}
			for k := range wantHeaders {
				gotHeaders[k] = got.Header.Get(k)
			}
			if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
			if _, ok := got.Header["Mcp-Name"]; ok != (tt.wantName != "") {
				t.Errorf("Mcp-Name header present = %v, want %v", ok, tt.wantName != "")
			}
			wantMeta := map[string]any{
				"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "tester", "version": "1.2.3"},
				"io.modelcontextprotocol/clientCapabilities": map[string]any{
					"extensions":  map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}},
					"elicitation": map[string]any{},
				},
			}
			if diff := cmp.Diff(wantMeta, decodeJSON(t, got.Params["_meta"])); diff != "" {
				t.Errorf("_meta mismatch (-want +got):\n%s", diff)
			}
			if got.Method != tt.method {
				t.Errorf("method = %q, want %q", got.Method, tt.method)
			}
		})
	}
}

func TestDeclaredCapabilities(t *testing.T) {
	tests := []struct {
		name              string
		tasks, elicitaton bool
		want              string
	}{
		{"none", false, false, `{}`},
		{"tasks", true, false, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"elicitation", false, true, `{"elicitation":{}}`},
		{"both", true, true, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFakeServer(t, func(request) reply { return reply{Result: ack} })
			c := &Client{URL: fs.URL, Tasks: tt.tasks, Elicitation: tt.elicitaton}
			if err := c.CancelTask(t.Context(), "x"); err != nil {
				t.Fatal(err)
			}
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(fs.last(t).Params["_meta"], &meta); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decodeJSON(t, json.RawMessage(tt.want)), decodeJSON(t, meta["io.modelcontextprotocol/clientCapabilities"])); diff != "" {
				t.Errorf("clientCapabilities mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallToolResultKinds(t *testing.T) {
	inputRequired := map[string]any{
		"resultType":   "input_required",
		"requestState": "opaque-state",
		"inputRequests": map[string]any{
			"who": map[string]any{"method": "elicitation/create", "params": map[string]any{
				"message": "Who are you?",
				"requestedSchema": map[string]any{"type": "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}},
					"required":   []string{"name"}},
			}},
		},
	}
	complete := map[string]any{
		"resultType": "complete",
		"content":    []any{map[string]any{"type": "text", "text": "Hello, Ada!"}},
		"isError":    true,
	}
	tests := []struct {
		name    string
		sse     bool
		result  any
		want    *CallResult
		wantErr string
	}{
		{
			name:   "task over JSON",
			result: workingTask("tsk-9"),
			want: &CallResult{Task: &Task{ResultType: "task", TaskID: "tsk-9", Status: "working",
				CreatedAt: "2026-08-01T10:00:00Z", LastUpdatedAt: "2026-08-01T10:00:00Z",
				TTLMs: ptr(int64(60000)), PollIntervalMs: ptr(int64(10))}},
		},
		{
			name:   "task over SSE",
			sse:    true,
			result: workingTask("tsk-9"),
			want: &CallResult{Task: &Task{ResultType: "task", TaskID: "tsk-9", Status: "working",
				CreatedAt: "2026-08-01T10:00:00Z", LastUpdatedAt: "2026-08-01T10:00:00Z",
				TTLMs: ptr(int64(60000)), PollIntervalMs: ptr(int64(10))}},
		},
		{
			name:   "input required",
			result: inputRequired,
			want: &CallResult{Input: &InputRequired{RequestState: "opaque-state",
				InputRequests: map[string]InputRequest{"who": {Method: "elicitation/create",
					Params: json.RawMessage(`{"message":"Who are you?","requestedSchema":{"properties":{"name":{"type":"string"}},"required":["name"],"type":"object"}}`)}}}},
		},
		{
			name:   "complete with isError over SSE",
			sse:    true,
			result: complete,
			want: &CallResult{Result: &ToolResult{ResultType: "complete", IsError: true,
				Content: []Content{{Type: "text", Text: "Hello, Ada!"}}}},
		},
		{
			name:    "unknown resultType is invalid",
			result:  map[string]any{"resultType": "mystery"},
			wantErr: `unrecognized resultType "mystery"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFakeServer(t, func(r request) reply {
				return reply{SSE: tt.sse, Result: tt.result, Before: []string{
					`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
					`{"jsonrpc":"2.0","id":999,"result":{"resultType":"complete"}}`,
				}}
			})
			c := &Client{URL: fs.URL, Tasks: true}
			got, err := c.CallTool(t.Context(), "greet", map[string]any{"name": "Ada"}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			opts := []cmp.Option{
				cmpopts.IgnoreFields(Task{}, "Raw"),
				cmpopts.IgnoreFields(InputRequired{}, "Raw"),
				cmpopts.IgnoreFields(ToolResult{}, "Raw"),
				cmpopts.IgnoreFields(Content{}, "Raw"),
				cmp.Transformer("json", func(m json.RawMessage) any {
					var v any
					_ = json.Unmarshal(m, &v)
					return v
				}),
			}
			if diff := cmp.Diff(tt.want, got, opts...); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"name": "Ada"}, decodeJSON(t, fs.last(t).Params["arguments"])); diff != "" {
				t.Errorf("arguments mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallToolRetryCarriesInputResponses(t *testing.T) {
	fs := newFakeServer(t, func(request) reply { return reply{Result: ack} })
	c := &Client{URL: fs.URL, Elicitation: true}
	_, err := c.CallTool(t.Context(), "greet", nil, &CallOptions{
		InputResponses: map[string]any{"who": ElicitResult{Action: ActionAccept, Content: map[string]any{"name": "Ada"}}},
		RequestState:   "opaque-state",
		Meta:           map[string]any{"progressToken": "p1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for k, v := range fs.last(t).Params {
		if k != "_meta" {
			got[k] = decodeJSON(t, v)
		}
	}
	want := map[string]any{
		"name":           "greet",
		"arguments":      map[string]any{},
		"inputResponses": map[string]any{"who": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}},
		"requestState":   "opaque-state",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("params mismatch (-want +got):\n%s", diff)
	}
	meta := decodeJSON(t, fs.last(t).Params["_meta"]).(map[string]any)
	if meta["progressToken"] != "p1" || meta["io.modelcontextprotocol/protocolVersion"] != ProtocolVersion {
		t.Errorf("_meta = %v, want progressToken and the standard entries", meta)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name    string
		reply   reply
		want    *RPCError // nil: a non-RPC error is expected
		wantErr string
		// wantHTTP is the status of the *HTTPError expected (0: none).
		wantHTTP int
	}{
		{
			name:  "missing capability on 400",
			reply: reply{Status: 400, Error: &RPCError{Code: -32021, Message: "Missing required client capability", Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`)}},
			want:  &RPCError{Code: -32021, Message: "Missing required client capability", Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`), HTTPStatus: 400},
		},
		{
			name:  "method not found on 404",
			reply: reply{Status: 404, Error: &RPCError{Code: -32601, Message: "method not found"}},
			want:  &RPCError{Code: -32601, Message: "method not found", HTTPStatus: 404},
		},
		{
			name:  "unknown task on 200",
			reply: reply{Error: &RPCError{Code: -32602, Message: "Failed to retrieve task: Task not found"}},
			want:  &RPCError{Code: -32602, Message: "Failed to retrieve task: Task not found", HTTPStatus: 200},
		},
		{
			name:  "error over SSE",
			reply: reply{SSE: true, Error: &RPCError{Code: -32603, Message: "internal"}},
			want:  &RPCError{Code: -32603, Message: "internal", HTTPStatus: 200},
		},
		{
			name:  "parse error with null id",
			reply: reply{Status: 400, Body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
			want:  &RPCError{Code: -32700, Message: "parse error", HTTPStatus: 400},
		},
		{
			name:     "non-JSON gateway error",
			reply:    reply{Status: 502, Body: "bad gateway"},
			wantErr:  "unexpected HTTP status 502: bad gateway",
			wantHTTP: 502,
		},
		{
			name:    "response for another id",
			reply:   reply{Body: `{"jsonrpc":"2.0","id":12345,"result":{"resultType":"complete"}}`},
			wantErr: "does not match request id",
		},
		{
			name:    "stream without a response",
			reply:   reply{SSE: true, Body: `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`},
			wantErr: "event stream ended without a response",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFakeServer(t, func(request) reply { return tt.reply })
			c := &Client{URL: fs.URL, Tasks: true}
			_, err := c.GetTask(t.Context(), "tsk-1")
			if err == nil {
				t.Fatal("GetTask succeeded, want an error")
			}
			var rpcErr *RPCError
			if tt.want == nil {
				if errors.As(err, &rpcErr) {
					t.Fatalf("error = %v, want a non-RPC error", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				var httpErr *HTTPError
				if tt.wantHTTP != 0 && (!errors.As(err, &httpErr) || httpErr.StatusCode != tt.wantHTTP) {
					t.Errorf("error = %v (%T), want an *HTTPError with status %d", err, err, tt.wantHTTP)
				}
				return
			}
			if !errors.As(err, &rpcErr) {
				t.Fatalf("error = %v (%T), want *RPCError", err, err)
			}
			if diff := cmp.Diff(tt.want, rpcErr); diff != "" {
				t.Errorf("RPCError mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetTaskVariants(t *testing.T) {
	tests := []struct {
		fixture string
		check   func(t *testing.T, got *Task)
	}{
		{"task_completed.json", func(t *testing.T, got *Task) {
			if got.Status != StatusCompleted || !got.Terminal() || got.TTLMs != nil {
				t.Errorf("status %q terminal %v ttl %v, want completed, terminal, null TTL", got.Status, got.Terminal(), got.TTLMs)
			}
			if got.Result == nil || got.Result.Text() != "deployed" || got.Result.IsError {
				t.Fatalf("result = %+v, want text %q and no error", got.Result, "deployed")
			}
			if diff := cmp.Diff(map[string]any{"version": "1.2.3"}, decodeJSON(t, got.Result.StructuredContent)); diff != "" {
				t.Errorf("structuredContent mismatch (-want +got):\n%s", diff)
			}
			if got.Result.Content[1].URI != "file:///log.txt" {
				t.Errorf("resource_link uri = %q", got.Result.Content[1].URI)
			}
			if got.PollInterval() != DefaultPollInterval {
				t.Errorf("PollInterval() = %v, want the default %v", got.PollInterval(), DefaultPollInterval)
			}
		}},
		{"task_failed.json", func(t *testing.T, got *Task) {
			want := &RPCError{Code: -32603, Message: "backend unreachable", Data: json.RawMessage(`{"attempts":3}`)}
			if diff := cmp.Diff(want, got.Error); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		}},
		{"task_input_required.json", func(t *testing.T, got *Task) {
			if got.Terminal() {
				t.Error("input_required task reported terminal")
			}
			if got.PollInterval() != MinPollInterval {
				t.Errorf("PollInterval() = %v, want %v", got.PollInterval(), MinPollInterval)
			}
			el, err := got.InputRequests["approve"].Elicitation()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range el.RequestedSchema.Properties {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff([]string{"reason", "confirm", "replicas", "region", "zones"}, names); diff != "" {
				t.Errorf("property order mismatch (-want +got):\n%s", diff)
			}
			if el.Mode != "form" || el.Message != "Deploy to production?" {
				t.Errorf("mode %q message %q", el.Mode, el.Message)
			}
			if !el.RequestedSchema.IsRequired("region") || el.RequestedSchema.IsRequired("reason") {
				t.Error("required set decoded wrongly")
			}
			if diff := cmp.Diff([]string{"eu", "us"}, el.RequestedSchema.Properties[3].Choices()); diff != "" {
				t.Errorf("enum choices mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"a", "b"}, el.RequestedSchema.Properties[4].Choices()); diff != "" {
				t.Errorf("multi-select choices mismatch (-want +got):\n%s", diff)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			raw := fixture(t, tt.fixture)
			fs := newFakeServer(t, func(request) reply { return reply{Result: raw} })
			c := &Client{URL: fs.URL, Tasks: true}
			got, err := c.GetTask(t.Context(), "tsk-1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decodeJSON(t, raw), decodeJSON(t, got.Raw)); diff != "" {
				t.Errorf("Raw mismatch (-want +got):\n%s", diff)
			}
			tt.check(t, got)
		})
	}
}

func TestListToolsFollowsCursor(t *testing.T) {
	fs := newFakeServer(t, func(r request) reply {
		var cursor string
		_ = json.Unmarshal(r.Params["cursor"], &cursor)
		switch cursor {
		case "":
			return reply{Result: map[string]any{"resultType": "complete", "nextCursor": "p2",
				"tools": []any{map[string]any{"name": "a", "inputSchema": map[string]any{"type": "object"}}}}}
		case "p2":
			return reply{Result: map[string]any{"resultType": "complete",
				"tools": []any{map[string]any{"name": "b", "description": "second"}}}}
		}
		return reply{Error: &RPCError{Code: -32602, Message: "bad cursor"}}
	})
	c := &Client{URL: fs.URL}
	got, err := c.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Description: "second"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
}

func TestDiscover(t *testing.T) {
	fs := newFakeServer(t, func(request) reply {
		return reply{SSE: true, Result: json.RawMessage(`{"resultType":"complete","supportedVersions":["2026-07-28"],
			"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},
			"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"jobbridge","version":"1.0.0"}},
			"ttlMs":3600000,"cacheScope":"public"}`)}
	})
	c := &Client{URL: fs.URL}
	got, err := c.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := got.Extension(TasksExtension)
	if !ok || string(settings) != "{}" {
		t.Errorf("tasks extension = %s, %v; want {}, true", settings, ok)
	}
	if _, ok := got.Extension("io.example/other"); ok {
		t.Error("unadvertised extension reported present")
	}
	if diff := cmp.Diff(&Implementation{Name: "jobbridge", Version: "1.0.0"}, got.ServerInfo); diff != "" {
		t.Errorf("serverInfo mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2026-07-28"}, got.SupportedVersions); diff != "" {
		t.Errorf("supportedVersions mismatch (-want +got):\n%s", diff)
	}
	if got.CacheScope != "public" || got.TTLMs == nil || *got.TTLMs != 3600000 {
		t.Errorf("cacheScope %q ttlMs %v", got.CacheScope, got.TTLMs)
	}
}

func TestRawOverrides(t *testing.T) {
	fs := newFakeServer(t, func(request) reply { return reply{Result: ack} })
	c := &Client{URL: fs.URL, Tasks: true}
	params := map[string]any{
		"taskId": "tsk-1",
		"_meta": map[string]any{
			"io.modelcontextprotocol/clientCapabilities": nil,          // removed
			"io.modelcontextprotocol/protocolVersion":    "1900-01-01", // replaced
		},
	}
	raw, resp, err := c.Raw(t.Context(), "tasks/get", params, http.Header{
		"Mcp-Name":             {"someone-else"},
		"Mcp-Protocol-Version": {""},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"resultType":"complete"}` || resp.StatusCode != 200 {
		t.Errorf("Raw = %s, status %d", raw, resp.StatusCode)
	}
	got := fs.last(t)
	if got.Header.Get("Mcp-Name") != "someone-else" {
		t.Errorf("Mcp-Name = %q, want the override", got.Header.Get("Mcp-Name"))
	}
	if _, ok := got.Header["Mcp-Protocol-Version"]; ok {
		t.Error("MCP-Protocol-Version sent, want it removed")
	}
	want := map[string]any{
		"io.modelcontextprotocol/protocolVersion": "1900-01-01",
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "taskclient", "version": "0"},
	}
	if diff := cmp.Diff(want, decodeJSON(t, got.Params["_meta"])); diff != "" {
		t.Errorf("_meta mismatch (-want +got):\n%s", diff)
	}
}

func TestMcpNameEncoding(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"deploy-prod", "deploy-prod"},
		{"déployer", "=?base64?ZMOpcGxveWVy?="},
		{" padded", "=?base64?IHBhZGRlZA==?="},
		{"=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFakeServer(t, func(request) reply {
				return reply{Result: map[string]any{"resultType": "complete", "content": []any{}}}
			})
			c := &Client{URL: fs.URL}
			if _, err := c.CallTool(t.Context(), tt.name, nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := fs.last(t).Header.Get("Mcp-Name"); got != tt.want {
				t.Errorf("Mcp-Name = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestElicitSchemaRoundTrip(t *testing.T) {
	in := `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"boolean","default":true}},"required":["z"]}`
	var s ElicitSchema
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip = %s, want %s", out, in)
	}
}

func ptr[T any](v T) *T { return &v }
