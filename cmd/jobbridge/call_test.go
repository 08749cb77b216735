package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

// fakeMCP is a tiny 2026-07-28 MCP endpoint for `jobbridge call`: tools/call
// answers come from toolsCall, tasks/get walks a scripted list of task
// states (an input_required state holds until tasks/update arrives), and
// tasks/cancel turns the task cancelled unless ignoreCancel is set.
type fakeMCP struct {
	toolsCall    func(params map[string]json.RawMessage) any
	states       []map[string]any
	ignoreCancel bool
	// afterGet, if set, runs after the n-th tasks/get (1-based) was answered.
	afterGet func(n int)

	mu        sync.Mutex
	pos       int
	answered  bool
	cancelled bool
	gets      int
	methods   []string
	calls     []map[string]json.RawMessage // params of each tools/call
	updates   []json.RawMessage            // inputResponses of each tasks/update
	headers   []http.Header
}

func (f *fakeMCP) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func (f *fakeMCP) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	result, getN := f.handle(msg.Method, msg.Params, r.Header)
	out := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	if rpcErr, ok := result.(rpcError); ok {
		out["error"] = rpcErr
	} else {
		out["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
	if getN > 0 && f.afterGet != nil {
		f.afterGet(getN)
	}
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (f *fakeMCP) handle(method string, params map[string]json.RawMessage, h http.Header) (any, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.methods = append(f.methods, method)
	f.headers = append(f.headers, h.Clone())
	switch method {
	case "tools/call":
		f.calls = append(f.calls, params)
		return f.toolsCall(params), 0
	case "tasks/update":
		f.updates = append(f.updates, params["inputResponses"])
		f.answered = true
		return map[string]any{"resultType": "complete"}, 0
	case "tasks/cancel":
		if !f.ignoreCancel {
			f.cancelled = true
		}
		return map[string]any{"resultType": "complete"}, 0
	case "tasks/get":
		f.gets++
		if f.cancelled {
			return taskState("cancelled", "cancelled by request", nil), f.gets
		}
		if f.states[f.pos]["status"] == "input_required" && f.answered && f.pos < len(f.states)-1 {
			f.pos++
		}
		st := f.states[f.pos]
		if st["status"] != "input_required" && f.pos < len(f.states)-1 {
			f.pos++
			f.answered = false
		}
		return st, f.gets
	}
	return rpcError{Code: -32601, Message: "method not found"}, 0
}

func (f *fakeMCP) recorded() (methods []string, calls []map[string]json.RawMessage, updates []json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.methods...), append([]map[string]json.RawMessage(nil), f.calls...), append([]json.RawMessage(nil), f.updates...)
}

// taskState builds a tasks/get answer polled at 10ms.
func taskState(status, message string, extra map[string]any) map[string]any {
	st := map[string]any{
		"resultType": "complete", "taskId": "tsk-42", "status": status,
		"createdAt": "2026-08-01T10:00:00Z", "lastUpdatedAt": "2026-08-01T10:00:00Z",
		"ttlMs": 3600000, "pollIntervalMs": 10,
	}
	if message != "" {
		st["statusMessage"] = message
	}
	for k, v := range extra {
		st[k] = v
	}
	return st
}

func createTask() map[string]any {
	st := taskState("working", "submitted", nil)
	st["resultType"] = "task"
	return st
}

func textResult(text string, isError bool) map[string]any {
	return map[string]any{"resultType": "complete", "isError": isError,
		"content": []any{map[string]any{"type": "text", "text": text}}}
}

func elicitation(message string, schema string) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode": "form", "message": message, "requestedSchema": json.RawMessage(schema)}}
}

var elapsedRE = regexp.MustCompile(`\((\d+[hms])+\)`)

// normalize replaces elapsed times in status lines with "(T)".
func normalize(s string) string { return elapsedRE.ReplaceAllString(s, "(T)") }

func runCallTest(t *testing.T, ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runCall(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// taskIDLine is the line call prints once the fake's task exists.
func taskIDLine(url string) string {
	return "task ID: tsk-42; follow it with jobbridge task watch tsk-42 --url " + url + "\n"
}

func jsonEqual(t *testing.T, want string, got json.RawMessage) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %s: %v", want, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("bad JSON %s: %v", got, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", diff)
	}
}

func TestCallSyncResult(t *testing.T) {
	tests := []struct {
		name       string
		result     map[string]any
		wantStdout string
		wantErr    string
	}{
		{
			name: "text and structured content",
			result: map[string]any{"resultType": "complete",
				"content":           []any{map[string]any{"type": "text", "text": "Hello, Ada!"}},
				"structuredContent": map[string]any{"greeting": "Hello, Ada!"}},
			wantStdout: "Hello, Ada!\n{\n  \"greeting\": \"Hello, Ada!\"\n}\n",
		},
		{
			name:       "tool error",
			result:     textResult("no such user", true),
			wantStdout: "no such user\n",
			wantErr:    "tool reported an error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeMCP{toolsCall: func(map[string]json.RawMessage) any { return tt.result }}
			url := f.start(t)
			stdout, _, err := runCallTest(t, t.Context(), "", "--url", url, "--header", "Authorization: Bearer s3cret", "greet", `{"name":"Ada"}`)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("runCall: %v", err)
			}
			if tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
			_, calls, _ := f.recorded()
			if len(calls) != 1 {
				t.Fatalf("got %d tools/call, want 1", len(calls))
			}
			jsonEqual(t, `"greet"`, calls[0]["name"])
			jsonEqual(t, `{"name":"Ada"}`, calls[0]["arguments"])
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(calls[0]["_meta"], &meta); err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`, meta["io.modelcontextprotocol/clientCapabilities"])
			if got := f.headers[0].Get("Authorization"); got != "Bearer s3cret" {
				t.Errorf("Authorization header = %q, want the --header value", got)
			}
		})
	}
}

func TestCallTaskPolledToEnd(t *testing.T) {
	completed := taskState("completed", "", map[string]any{"result": map[string]any{
		"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "deployed v1.2.3"}}}})
	tests := []struct {
		name       string
		final      map[string]any
		wantStdout string
		wantErr    string
		wantLast   string
	}{
		{
			name:       "completed",
			final:      completed,
			wantStdout: "deployed v1.2.3\n",
			wantLast:   "[completed] (T)\n",
		},
		{
			name:       "completed with tool error",
			final:      taskState("completed", "job exited 3", map[string]any{"result": textResult("step build failed", true)}),
			wantStdout: "step build failed\n",
			wantErr:    "tool reported an error",
			wantLast:   "[completed] job exited 3 (T)\n",
		},
		{
			name: "failed",
			final: taskState("failed", "backend unreachable", map[string]any{
				"error": map[string]any{"code": -32603, "message": "backend unreachable"}}),
			wantErr:  "task failed: backend unreachable (code -32603)",
			wantLast: "[failed] backend unreachable (T)\n",
		},
		{
			name:     "cancelled",
			final:    taskState("cancelled", "", nil),
			wantErr:  "task cancelled",
			wantLast: "[cancelled] (T)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeMCP{
				toolsCall: func(map[string]json.RawMessage) any { return createTask() },
				states: []map[string]any{
					taskState("working", "queued", nil),
					taskState("working", "queued", nil),
					taskState("working", "running step 1/2\x1b[2J", nil),
					tt.final,
				},
			}
			url := f.start(t)
			stdout, stderr, err := runCallTest(t, t.Context(), "", "--url", url, "deploy")
			if tt.wantErr == "" && err != nil {
				t.Fatalf("runCall: %v", err)
			}
			if tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
			wantStderr := taskIDLine(url) + "[working] submitted (T)\n[working] queued (T)\n[working] running step 1/2[2J (T)\n" + tt.wantLast
			if diff := cmp.Diff(wantStderr, normalize(stderr)); diff != "" {
				t.Errorf("status lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallNoWait(t *testing.T) {
	f := &fakeMCP{toolsCall: func(map[string]json.RawMessage) any { return createTask() }}
	url := f.start(t)
	// Flags may follow the positional arguments.
	stdout, _, err := runCallTest(t, t.Context(), "", "--url", url, "deploy", `{"env":"prod"}`, "--no-wait")
	if err != nil {
		t.Fatalf("runCall: %v", err)
	}
	want, _ := json.MarshalIndent(createTask(), "", "  ")
	jsonEqual(t, string(want), json.RawMessage(stdout))
	if !strings.Contains(stdout, "\n  \"taskId\": \"tsk-42\",\n") {
		t.Errorf("stdout is not indented JSON:\n%s", stdout)
	}
	methods, _, _ := f.recorded()
	if diff := cmp.Diff([]string{"tools/call"}, methods); diff != "" {
		t.Errorf("methods mismatch (-want +got):\n%s", diff)
	}
}

const approvalSchema = `{"type":"object","properties":{
	"confirm":{"type":"boolean","title":"Confirm"},
	"reason":{"type":"string","description":"Why now?"},
	"replicas":{"type":"integer","default":2},
	"region":{"type":"string","enum":["eu","us"]}
},"required":["confirm","region"]}`

func TestCallAnswersTaskInput(t *testing.T) {
	tests := []struct {
		name       string
		stdin      string
		wantUpdate string
	}{
		{
			name:       "accept with retries, skip, default and choice number",
			stdin:      "maybe\ny\n\n\n\n7\n2\n",
			wantUpdate: `{"approve":{"action":"accept","content":{"confirm":true,"replicas":2,"region":"us"}}}`,
		},
		{
			// Pressing Enter at a required yes/no question answers nothing:
			// it is asked again, never taken as a confirmation.
			name:       "empty answers to a required boolean are asked again",
			stdin:      "\n\ny\n\n\n1\n",
			wantUpdate: `{"approve":{"action":"accept","content":{"confirm":true,"replicas":2,"region":"eu"}}}`,
		},
		{
			name:       "explicit values",
			stdin:      "no\nhotfix\n5\neu\n",
			wantUpdate: `{"approve":{"action":"accept","content":{"confirm":false,"reason":"hotfix","replicas":5,"region":"eu"}}}`,
		},
		{
			name:       "decline",
			stdin:      "!decline\n",
			wantUpdate: `{"approve":{"action":"decline"}}`,
		},
		{
			name:       "end of input dismisses",
			stdin:      "y\n",
			wantUpdate: `{"approve":{"action":"cancel"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeMCP{
				toolsCall: func(map[string]json.RawMessage) any { return createTask() },
				states: []map[string]any{
					taskState("working", "", nil),
					taskState("input_required", "waiting for approval", map[string]any{"inputRequests": map[string]any{
						"approve": elicitation("Deploy to production?", approvalSchema)}}),
					taskState("working", "deploying", nil),
					taskState("completed", "", map[string]any{"result": textResult("done", false)}),
				},
			}
			url := f.start(t)
			stdout, stderr, err := runCallTest(t, t.Context(), tt.stdin, "--url", url, "deploy")
			if err != nil {
				t.Fatalf("runCall: %v\nstderr:\n%s", err, stderr)
			}
			if stdout != "done\n" {
				t.Errorf("stdout = %q, want %q", stdout, "done\n")
			}
			_, _, updates := f.recorded()
			if len(updates) != 1 {
				t.Fatalf("got %d tasks/update, want 1 (stderr:\n%s)", len(updates), stderr)
			}
			jsonEqual(t, tt.wantUpdate, updates[0])
			if !strings.Contains(stderr, "Deploy to production?") {
				t.Errorf("stderr does not show the request message:\n%s", stderr)
			}
		})
	}
}

func TestCallPromptsShowFields(t *testing.T) {
	f := &fakeMCP{
		toolsCall: func(map[string]json.RawMessage) any { return createTask() },
		states: []map[string]any{
			taskState("input_required", "", map[string]any{"inputRequests": map[string]any{
				"approve": elicitation("Deploy to production?", approvalSchema)}}),
			taskState("completed", "", map[string]any{"result": textResult("done", false)}),
		},
	}
	url := f.start(t)
	_, stderr, err := runCallTest(t, t.Context(), "y\n\n\neu\n", "--url", url, "deploy")
	if err != nil {
		t.Fatalf("runCall: %v", err)
	}
	want := taskIDLine(url) + "[working] submitted (T)\n[input_required] (T)\n\nDeploy to production?\n" +
		"  Confirm (y/n): \n" +
		"  Why now?\n  reason (text, optional): \n" +
		"  replicas (integer, optional) [2]: \n" +
		"  region (one of: 1) eu, 2) us): \n" +
		"answers sent; waiting for the task to continue\n[completed] (T)\n"
	if diff := cmp.Diff(want, normalize(stderr)); diff != "" {
		t.Errorf("stderr mismatch (-want +got):\n%s", diff)
	}
}

func TestCallMissingArgumentRounds(t *testing.T) {
	nameRequest := map[string]any{"resultType": "input_required", "requestState": "state-1",
		"inputRequests": map[string]any{"name": elicitation("Who should be greeted?",
			`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}}

	t.Run("answered", func(t *testing.T) {
		f := &fakeMCP{toolsCall: func(p map[string]json.RawMessage) any {
			if _, ok := p["inputResponses"]; !ok {
				return nameRequest
			}
			return textResult("Hello, Ada!", false)
		}}
		url := f.start(t)
		stdout, _, err := runCallTest(t, t.Context(), "Ada\n", "--url", url, "greet")
		if err != nil {
			t.Fatalf("runCall: %v", err)
		}
		if stdout != "Hello, Ada!\n" {
			t.Errorf("stdout = %q", stdout)
		}
		_, calls, _ := f.recorded()
		if len(calls) != 2 {
			t.Fatalf("got %d tools/call, want 2", len(calls))
		}
		jsonEqual(t, `{"name":{"action":"accept","content":{"name":"Ada"}}}`, calls[1]["inputResponses"])
		jsonEqual(t, `"state-1"`, calls[1]["requestState"])
		jsonEqual(t, `{}`, calls[1]["arguments"])
	})

	t.Run("gives up after the round limit", func(t *testing.T) {
		f := &fakeMCP{toolsCall: func(map[string]json.RawMessage) any { return nameRequest }}
		url := f.start(t)
		_, _, err := runCallTest(t, t.Context(), "", "--url", url, "greet")
		if err == nil || !strings.Contains(err.Error(), "still asks for input after 10 rounds") {
			t.Fatalf("error = %v, want the round limit", err)
		}
		_, calls, _ := f.recorded()
		if len(calls) != maxInputRounds+1 {
			t.Errorf("got %d tools/call, want %d", len(calls), maxInputRounds+1)
		}
		jsonEqual(t, `{"name":{"action":"cancel"}}`, calls[1]["inputResponses"])
	})
}

func TestCallInterruptCancelsTask(t *testing.T) {
	tests := []struct {
		name         string
		ignoreCancel bool
		wantErr      string
	}{
		{name: "backend cancels", wantErr: "task cancelled"},
		{name: "backend never finishes", ignoreCancel: true, wantErr: "task still not finished 200ms after the cancel request; giving up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, interrupt := context.WithCancel(t.Context())
			defer interrupt()
			f := &fakeMCP{
				toolsCall:    func(map[string]json.RawMessage) any { return createTask() },
				states:       []map[string]any{taskState("working", "running", nil)},
				ignoreCancel: tt.ignoreCancel,
				afterGet: func(n int) {
					if n == 2 {
						interrupt()
					}
				},
			}
			url := f.start(t)
			_, stderr, err := runCallTest(t, ctx, "", "--url", url, "--timeout", "200ms", "slow_compute")
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
			if !strings.Contains(stderr, "cancel requested; waiting for the backend…\n") {
				t.Errorf("stderr lacks the cancel notice:\n%s", stderr)
			}
			methods, _, _ := f.recorded()
			cancels := 0
			for _, m := range methods {
				if m == "tasks/cancel" {
					cancels++
				}
			}
			if cancels != 1 {
				t.Errorf("sent %d tasks/cancel, want 1 (methods %v)", cancels, methods)
			}
			if methods[len(methods)-1] != "tasks/get" {
				t.Errorf("last request %q, want polling after the cancel", methods[len(methods)-1])
			}
		})
	}
}

func TestCallUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		wantMsg string // the first line on stderr
	}{
		{name: "no tool", args: nil, wantErr: exitError(2), wantMsg: "jobbridge call: missing the TOOL to call"},
		{name: "too many arguments", args: []string{"a", "{}", "extra"}, wantErr: exitError(2), wantMsg: `jobbridge call: unexpected argument "extra" after TOOL and JSON_ARGS`},
		{name: "unknown flag", args: []string{"--bogus", "a"}, wantErr: exitError(2), wantMsg: "jobbridge call: flag provided but not defined: -bogus"},
		{name: "bad header", args: []string{"--header", "nocolon", "a"}, wantErr: exitError(2)},
		{name: "arguments not an object", args: []string{"a", "[1,2]"}, wantErr: exitError(2), wantMsg: "jobbridge call: JSON_ARGS must be a JSON object, not a JSON array: [1,2]"},
		{name: "arguments not JSON", args: []string{"a", `{"a": 1,}`}, wantErr: exitError(2), wantMsg: "jobbridge call: JSON_ARGS is not valid JSON: invalid character '}' looking for beginning of object key string (at byte 9 of {\"a\": 1,})"},
		{name: "arguments null", args: []string{"a", "null"}, wantErr: exitError(2), wantMsg: "jobbridge call: JSON_ARGS must be a JSON object, not null"},
		{name: "help", args: []string{"-h"}, wantErr: errHelped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := runCallTest(t, t.Context(), "", tt.args...)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if first, _, _ := strings.Cut(stderr, "\n"); tt.wantMsg != "" && first != tt.wantMsg {
				t.Errorf("stderr begins %q, want %q", first, tt.wantMsg)
			}
		})
	}
}

func TestCallReportsRPCError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid arguments: missing properties: [\"label\"]"}}`)
	}))
	defer srv.Close()
	_, _, err := runCallTest(t, t.Context(), "", "--url", srv.URL, "slow_compute")
	want := `calling tool slow_compute: tools/call: json-rpc error -32602: invalid arguments: missing properties: ["label"]`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestStatusLineOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	s := &statusLine{w: &buf, tty: true, start: time.Now()}
	s.show(mustTask(t, taskState("working", "step\n1", nil)))
	s.show(mustTask(t, taskState("working", "step\n1", nil)))
	s.finish()
	want := "\r\x1b[K[working] step 1 (T)\r\x1b[K[working] step 1 (T)\n"
	if diff := cmp.Diff(want, normalize(buf.String())); diff != "" {
		t.Errorf("terminal output mismatch (-want +got):\n%s", diff)
	}
}

func mustTask(t *testing.T, state map[string]any) *taskclient.Task {
	t.Helper()
	data, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	var task taskclient.Task
	if err := json.Unmarshal(data, &task); err != nil {
		t.Fatal(err)
	}
	return &task
}

func TestStatusLineFitsTheTerminal(t *testing.T) {
	long := "step 7 of 12: uploading artifacts to the release bucket, then invalidating the CDN caches"
	tests := []struct {
		name string
		cols int
		msg  string
		note string
		want string
	}{
		{name: "fits", cols: 80, msg: "running", want: "[working] running (T)"},
		{name: "cut to 40 columns", cols: 40, msg: long, want: "[working] step 7 of 12: uploading… (T)"},
		{name: "note kept before the elapsed time", cols: 60, msg: "running", note: "server unreachable, retrying (3)",
			want: "[working] running — server unreachable, retrying (3) (T)"},
		{name: "narrow", cols: 12, msg: long, want: "[working] …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &statusLine{w: &buf, tty: true, start: time.Now(), size: func() (int, int) { return tt.cols, 24 }}
			s.setNote(tt.note)
			s.show(mustTask(t, taskState("working", tt.msg, nil)))
			got := strings.TrimPrefix(buf.String(), "\r\x1b[K")
			if diff := cmp.Diff(tt.want, normalize(got)); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
			if n := len([]rune(got)); n >= tt.cols {
				t.Errorf("%d runes on %d columns: %q", n, tt.cols, got)
			}
		})
	}
}

func TestStatusLineTicksAbovePrompt(t *testing.T) {
	var buf syncBuffer
	s := &statusLine{w: &buf, tty: true, start: time.Now(), size: func() (int, int) { return 80, 24 }}
	task := mustTask(t, taskState("input_required", "waiting for approval", nil))
	s.show(task)
	s.park(task)
	fmt.Fprint(s, "\nDeploy?\n  Confirm (y/n): ") // two rows below the line, then the prompt
	time.Sleep(1200 * time.Millisecond)
	s.unpark()
	out := buf.String()
	// The redraw saves the cursor, goes up to the status line (3 rows: the
	// empty line, the question, the prompt), rewrites it and comes back.
	want := "\x1b7\x1b[3A\r\x1b[K[input_required] waiting for approval (1s)\x1b8"
	if !strings.Contains(out, want) {
		t.Errorf("no redraw %q in %q", want, out)
	}
	before := len(buf.String())
	time.Sleep(1100 * time.Millisecond)
	if len(buf.String()) != before {
		t.Error("the line still ticks after unpark")
	}
}

func TestStatusLineCountsWrappedRows(t *testing.T) {
	s := &statusLine{w: io.Discard, tty: true, size: func() (int, int) { return 10, 24 }}
	s.parked = &taskclient.Task{}
	s.up = 1
	fmt.Fprint(s, strings.Repeat("x", 25)) // three rows of 10 columns
	s.echoed("abcdef")                     // wraps once more, then the newline
	if s.up != 1+2+1+1 {
		t.Errorf("rows up = %d, want 5", s.up)
	}
}

func TestChoicesAreNumberedWhenNumbersPick(t *testing.T) {
	tests := []struct {
		choices  []string
		hint     string
		answer   string
		want     string
		wantFail bool
	}{
		{choices: []string{"eu", "us"}, hint: "one of: 1) eu, 2) us", answer: "2", want: "us"},
		{choices: []string{"eu", "us"}, hint: "one of: 1) eu, 2) us", answer: "eu", want: "eu"},
		{choices: []string{"10", "20"}, hint: "one of: 10, 20", answer: "1", wantFail: true},
		{choices: []string{"10", "20"}, hint: "one of: 10, 20", answer: "20", want: "20"},
	}
	for _, tt := range tests {
		opts := make([]any, len(tt.choices))
		for i, c := range tt.choices {
			opts[i] = c
		}
		data, _ := json.Marshal(map[string]any{"type": "string", "enum": opts})
		var p taskclient.Property
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		if got := fieldHint(p); got != tt.hint {
			t.Errorf("%v: hint %q, want %q", tt.choices, got, tt.hint)
		}
		got, err := pickChoice(tt.choices, tt.answer)
		if tt.wantFail != (err != nil) || (!tt.wantFail && got != tt.want) {
			t.Errorf("%v: answer %q picked %q, %v", tt.choices, tt.answer, got, err)
		}
	}
}

func TestCallRefusedConnectionAsksIfTheServerRuns(t *testing.T) {
	_, _, err := runCallTest(t, t.Context(), "", "--url", "http://127.0.0.1:1/mcp", "deploy")
	if err == nil || !strings.Contains(err.Error(), "is the server running at http://127.0.0.1:1/mcp?") {
		t.Errorf("call: %v", err)
	}
}

// statusLines are the status lines of stderr, elapsed times normalized.
func statusLines(stderr string) []string {
	var out []string
	for _, line := range strings.Split(normalize(stderr), "\n") {
		if strings.HasPrefix(line, "[") {
			out = append(out, line)
		}
	}
	return out
}

// TestCallFollowsTheStream: against a server that pushes task status,
// call and task watch follow the task to its end without one tasks/get
// (task watch reads the task once, to begin with).
func TestCallFollowsTheStream(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		name     string
		args     func() []string
		wantGets int
	}{
		{name: "call", args: func() []string {
			return []string{"call", "--url", s.url, "slow_compute", `{"seconds": 1, "label": "pushed"}`}
		}},
		{name: "task watch", wantGets: 1, args: func() []string {
			id := s.startTask(t, "slow_compute", map[string]any{"seconds": 1, "label": "pushed"})
			return []string{"task", "watch", "--url", s.url, id}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args()
			gets, listens := s.front.count("tasks/get"), s.front.count("subscriptions/listen")
			stdout, stderr, err := runCommand(t, t.Context(), "", args...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tt.name, err, stderr)
			}
			if stdout != "Computed pushed in 1s.\n" {
				t.Errorf("stdout = %q", stdout)
			}
			lines := statusLines(stderr)
			if len(lines) < 3 || lines[len(lines)-1] != "[completed] finished (T)" {
				t.Errorf("status lines %q; want the progress, then [completed]", lines)
			}
			if n := s.front.count("tasks/get") - gets; n != tt.wantGets {
				t.Errorf("%d tasks/get while the stream works; want %d", n, tt.wantGets)
			}
			if n := s.front.count("subscriptions/listen") - listens; n != 1 {
				t.Errorf("%d listens; want 1", n)
			}
		})
	}
}

// TestCallPollsWhenListenIsRefused: a server (or proxy) that refuses
// subscriptions/listen is polled, and the call ends as it would on the
// stream.
func TestCallPollsWhenListenIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		refuse func(w http.ResponseWriter)
	}{
		{name: "method not found", refuse: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`)
		}},
		{name: "HTTP 404 from a proxy", refuse: func(w http.ResponseWriter) {
			http.Error(w, "404 page not found", http.StatusNotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t)
			s.front.refuse = func(w http.ResponseWriter, r *http.Request) bool {
				if r.Header.Get("Mcp-Method") != "subscriptions/listen" {
					return false
				}
				tt.refuse(w)
				return true
			}
			stdout, stderr, err := runCommand(t, t.Context(), "", "call", "--url", s.url, "slow_compute", `{"seconds": 0.5, "label": "polled"}`)
			if err != nil {
				t.Fatalf("call: %v\n%s", err, stderr)
			}
			if stdout != "Computed polled in 0.5s.\n" {
				t.Errorf("stdout = %q", stdout)
			}
			if lines := statusLines(stderr); len(lines) == 0 || lines[len(lines)-1] != "[completed] finished (T)" {
				t.Errorf("status lines %q; want [completed] last", lines)
			}
			if n := s.front.count("subscriptions/listen"); n != 1 {
				t.Errorf("%d listens; want 1, then polls", n)
			}
			if n := s.front.count("tasks/get"); n == 0 {
				t.Error("no tasks/get: the task was not polled")
			}
		})
	}
}

func TestCallPollFlagNeverListens(t *testing.T) {
	s := newTestServer(t)
	stdout, stderr, err := runCommand(t, t.Context(), "", "call", "--poll", "--url", s.url, "slow_compute", `{"seconds": 0.3, "label": "p"}`)
	if err != nil || stdout != "Computed p in 0.3s.\n" {
		t.Fatalf("call --poll: %v, stdout %q\n%s", err, stdout, stderr)
	}
	if n, gets := s.front.count("subscriptions/listen"), s.front.count("tasks/get"); n != 0 || gets == 0 {
		t.Errorf("%d listens and %d tasks/get; want none and some", n, gets)
	}
}

// TestCallListensAgainWhenTheStreamEnds: the server ends each stream
// gracefully after 300ms; call listens again each time, shows each state
// once and still polls nothing.
func TestCallListensAgainWhenTheStreamEnds(t *testing.T) {
	s := newTunedTestServer(t, func(c *catalog.Catalog) {
		c.Limits.MaxStreamLife = 300 * time.Millisecond
		c.Limits.StreamKeepAlive = 50 * time.Millisecond
	})
	stdout, stderr, err := runCommand(t, t.Context(), "", "call", "--url", s.url, "slow_compute", `{"seconds": 2, "label": "relisten"}`)
	if err != nil {
		t.Fatalf("call: %v\n%s", err, stderr)
	}
	if stdout != "Computed relisten in 2s.\n" {
		t.Errorf("stdout = %q", stdout)
	}
	t.Logf("stderr:\n%s", stderr)
	if n := s.front.count("subscriptions/listen"); n < 3 {
		t.Errorf("%d listens in 2s of streams that last 300ms; want several", n)
	}
	if n := s.front.count("tasks/get"); n != 0 {
		t.Errorf("%d tasks/get; want none", n)
	}
	seen := map[string]bool{}
	for _, line := range statusLines(stderr) {
		text := strings.TrimSuffix(line, " (T)")
		if seen[text] {
			t.Errorf("status %q shown twice:\n%s", text, stderr)
		}
		seen[text] = true
	}
	if !seen["[completed] finished"] {
		t.Errorf("no final status:\n%s", stderr)
	}
}

// TestCallAnswersInputOnTheStream: a task in input_required, as pushed,
// gets its prompt; the answer goes by tasks/update and what follows comes
// on the stream.
func TestCallAnswersInputOnTheStream(t *testing.T) {
	tests := []struct {
		name, tool, args, stdin string
		wantPrompts             []string
		wantStdout              string
	}{
		{name: "the bridge's confirmation", tool: "confirm_delete", args: `{"filename": "a.txt"}`, stdin: "y\n",
			wantPrompts: []string{"Delete a.txt?"}, wantStdout: "Deleted a.txt.\n"},
		{name: "the backend's questions", tool: "multi_input", args: `{}`, stdin: "y\nAda\n",
			wantPrompts: []string{"Shall the job go on?", "What is your name?"}, wantStdout: "All questions answered.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t)
			stdout, stderr, err := runCommand(t, t.Context(), tt.stdin, "call", "--url", s.url, tt.tool, tt.args)
			if err != nil {
				t.Fatalf("call: %v\n%s", err, stderr)
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout, tt.wantStdout)
			}
			for _, p := range append(tt.wantPrompts, "answers sent; waiting for the task to continue", "[input_required]", "[completed]") {
				if !strings.Contains(stderr, p) {
					t.Errorf("stderr lacks %q:\n%s", p, stderr)
				}
			}
			if n := s.front.count("tasks/update"); n != 1 {
				t.Errorf("%d tasks/update; want 1", n)
			}
			if n := s.front.count("tasks/get"); n != 0 {
				t.Errorf("%d tasks/get; want none: the next state comes on the stream", n)
			}
		})
	}
}

func TestFollowCommandsDocumentPoll(t *testing.T) {
	for _, cmd := range []string{"call", "task"} {
		stdout, _, err := runCommand(t, t.Context(), "", cmd, "--help")
		if err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		for _, want := range []string{"[--poll]", "-poll", "push stream", "proxies in front of them"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, want, stdout)
			}
		}
	}
}

// TestCallDeclinesAtTheConfirmationPrompt: n at the bridge's confirmation
// prompt declines (the prompt says so): the task ends cancelled, no job is
// started, and the call does not wait for another answer.
func TestCallDeclinesAtTheConfirmationPrompt(t *testing.T) {
	s := newTestServer(t)
	stdout, stderr, err := runCommand(t, t.Context(), "n\n", "call", "--url", s.url, "confirm_delete", `{"filename": "a.txt"}`)
	if err == nil {
		t.Fatalf("call: no error for a declined confirmation; stdout %q\n%s", stdout, stderr)
	}
	for _, want := range []string{"Delete a.txt?", "n declines it", "[cancelled]", "declined the confirmation; no job was submitted"} {
		if !strings.Contains(stderr+err.Error(), want) {
			t.Errorf("output lacks %q:\nerror %v\n%s", want, err, stderr)
		}
	}
}
