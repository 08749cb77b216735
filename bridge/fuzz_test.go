package bridge_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

// The methods FuzzTasksParams sends, chosen by the input's op byte.
var fuzzMethods = [...]string{"tasks/get", "tasks/update", "tasks/cancel"}

// Placeholders in fuzz params, replaced by the IDs of the two real tasks the
// fuzz target keeps: one waiting for its confirmation (input_required) and
// one whose job runs for an hour (working).
const (
	confirmPlaceholder = "$CONFIRM"
	jobPlaceholder     = "$JOB"
)

// fuzzAllowedCodes are the JSON-RPC errors garbage params may legitimately
// get: invalid params (including an unknown task and a missing or invalid
// _meta), a missing tasks capability, a header that does not match the body
// (Mcp-Name, MCP-Protocol-Version), an invalid request and a parse error.
// -32603 is not among them: an internal error on garbage input is a bug.
var fuzzAllowedCodes = map[int]bool{
	taskclient.CodeInvalidParams:                   true,
	taskclient.CodeMissingRequiredClientCapability: true,
	taskclient.CodeHeaderMismatch:                  true,
	taskclient.CodeInvalidRequest:                  true,
	taskclient.CodeParseError:                      true,
}

// fuzzMaxParams bounds the params of one input, well under the request size
// limit, so that each input stays fast.
const fuzzMaxParams = 256 << 10

// FuzzTasksParams sends arbitrary params to tasks/get, tasks/update and
// tasks/cancel. Whatever the params, the server answers (it neither panics
// nor hangs) with a JSON-RPC result of resultType "complete" or with one of
// fuzzAllowedCodes; a tasks/get result names the task the Mcp-Name header
// named; and the real tasks keep their status unless the input was a
// well-formed cancel, or an update carrying an answer, for that task.
//
//	go test -run '^$' -fuzz FuzzTasksParams -fuzztime 60s ./bridge/
func FuzzTasksParams(f *testing.F) {
	big := strings.Repeat("A", 64<<10)
	deep := strings.Repeat("[", 1500) + strings.Repeat("]", 1500)
	seeds := []struct {
		op     uint8
		params string
		name   string // Mcp-Name; empty: derived from params.taskId
	}{
		// Well-formed.
		{0, `{"taskId":"$CONFIRM"}`, ""},
		{0, `{"taskId":"$JOB"}`, ""},
		{1, `{"taskId":"$JOB","inputResponses":{}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":"decline"}}}`, ""},
		{2, `{"taskId":"$JOB"}`, ""},
		{2, `{"taskId":"$CONFIRM"}`, ""},
		// taskId of the wrong type, missing, empty or unknown.
		{0, `{"taskId":123}`, ""},
		{1, `{"taskId":true}`, ""},
		{2, `{"taskId":null}`, ""},
		{0, `{"taskId":["$JOB"]}`, ""},
		{2, `{"taskId":{"id":"$JOB"}}`, ""},
		{0, `{"taskId":1e999}`, ""},
		{0, `{}`, ""},
		{1, `{"taskId":""}`, ""},
		{2, `{"taskId":"no-such-task"}`, ""},
		{0, `{"taskId":"` + big + `"}`, ""},
		// Near misses of a real ID.
		{0, `{"taskId":" $JOB "}`, ""},
		{2, `{"taskId":"$JOB\u0000"}`, ""},
		{0, `{"taskId":"$JOBx"}`, ""},
		{0, `{"TaskId":"$JOB"}`, ""},
		{2, `{"taskid":"$JOB","taskId":"$CONFIRM"}`, ""},
		{2, `{"taskId":"$JOB","taskid":"decoy"}`, "decoy"},
		// Unicode and escapes.
		{0, `{"taskId":"täsk-😀-\u202e-\ud800"}`, ""},
		{1, `{"taskId":"=?base64?JEpPQg==?="}`, ""},
		{2, "{\"taskId\":\"\xff\xfe\"}", ""},
		// Garbage inputResponses on a real task.
		{1, `{"taskId":"$CONFIRM","inputResponses":null}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":[1,2,3]}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":"accept"}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":null}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":"accept"}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":5}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":"ACCEPT"}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":"accept","content":[]}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":"accept","content":"yes"}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":["accept"]}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":` + deep + `}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"other":{"action":"accept"},"":{"action":"decline"}}}`, ""},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"` + big + `":{"action":"accept"}}}`, ""},
		{1, `{"taskId":"$JOB","inputResponses":{"name":{"action":"accept","content":{"name":{"x":[null,{}]}}}}}`, ""},
		// _meta that drops or mangles the declared capabilities.
		{0, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, ""},
		{2, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/task":{}}}}}`, ""},
		{0, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/clientCapabilities":null}}`, ""},
		{2, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":[]}}}`, ""},
		{1, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/clientCapabilities":"tasks"}}`, ""},
		{0, `{"taskId":"$JOB","_meta":"x"}`, ""},
		{0, `{"taskId":"$JOB","_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}`, ""},
		// Params that are not an object, or not JSON at all.
		{0, `null`, ""},
		{1, `[]`, ""},
		{2, `[{"taskId":"$JOB"}]`, ""},
		{0, `"$JOB"`, ""},
		{1, `42`, ""},
		{2, `true`, ""},
		{0, ``, ""},
		{1, `{"taskId":`, ""},
		{2, `{"taskId":"$JOB"}}`, ""},
		{0, deep, ""},
		// Mcp-Name headers that do not name params.taskId.
		{0, `{"taskId":"$JOB"}`, "$CONFIRM"},
		{2, `{"taskId":"$JOB"}`, "decoy"},
		{1, `{"taskId":"$CONFIRM","inputResponses":{"jobbridge.confirm":{"action":"decline"}}}`, " $CONFIRM"},
		{2, `{"taskId":"$JOB","TaskId":"decoy"}`, "$JOB"},
		{0, `{"taskId":null}`, "$JOB"},
		{0, `null`, "$JOB"},
	}
	for _, s := range seeds {
		f.Add(s.op, s.params, s.name)
	}

	h := newHarness(f, harnessOptions{tune: func(c *catalog.Catalog) {
		// The fuzzer is one principal sending thousands of requests a
		// second and replacing the tasks it cancels.
		c.Limits.GetsPerSecond = 1 << 20
		c.Limits.CreatesPerMinute = 1 << 20
		c.Limits.MaxLiveTasks = 1 << 20
		// Serve the running job's state from the store.
		c.Tool("long_job").RefreshInterval = time.Hour
	}})
	fx := &fuzzTasks{h: h}
	fx.confirm = fx.newTask(f, "confirm_delete", map[string]any{"filename": "fuzz.txt"})
	fx.job = fx.newTask(f, "long_job", nil)

	f.Fuzz(func(t *testing.T, op uint8, params, name string) {
		if len(params)+len(name) > fuzzMaxParams {
			t.Skip("params larger than the fuzz target sends")
		}
		method := fuzzMethods[int(op)%len(fuzzMethods)]
		params = strings.ReplaceAll(params, confirmPlaceholder, fx.confirm.id)
		params = strings.ReplaceAll(params, jobPlaceholder, fx.job.id)
		name = strings.ReplaceAll(name, confirmPlaceholder, fx.confirm.id)
		name = strings.ReplaceAll(name, jobPlaceholder, fx.job.id)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()

		a := fx.send(ctx, t, method, params, name)
		if ctx.Err() != nil {
			t.Fatalf("%s %s: no answer within 10s", method, clip(params))
		}
		var rpc *taskclient.RPCError
		switch {
		case a.err != nil && errors.As(a.err, &rpc):
			if !fuzzAllowedCodes[rpc.Code] {
				t.Fatalf("%s %s: error %d %q, want one of %v", method, clip(params), rpc.Code, rpc.Message, fuzzAllowedCodes)
			}
		case a.err != nil && a.status == http.StatusBadRequest && strings.Contains(a.err.Error(), "malformed payload") && !sdkParses(params):
			// The SDK refuses a body it cannot parse (invalid JSON, or
			// nested deeper than it accepts) with HTTP 400 and a text
			// body, not a JSON-RPC parse error: such a body never
			// reaches the params decoding under test.
		case a.err != nil:
			t.Fatalf("%s %s: answer is not a JSON-RPC response: %s", method, clip(params), clip(a.err.Error()))
		default:
			var res struct {
				ResultType string `json:"resultType"`
				TaskID     string `json:"taskId"`
			}
			if err := json.Unmarshal(a.result, &res); err != nil || res.ResultType != "complete" {
				t.Fatalf("%s %s: result %s, want resultType complete", method, clip(params), clip(string(a.result)))
			}
			// The server acts on params.taskId (matched exactly, as the
			// SDK decodes params) only if Mcp-Name names the same task.
			obj, _ := jsonObject(params)
			if id := stringField(obj, "taskId"); id != a.name {
				t.Fatalf("%s %s: answered for params.taskId %q although the Mcp-Name header named %q", method, clip(params), id, a.name)
			}
			if method == "tasks/get" && res.TaskID != a.name {
				t.Fatalf("%s %s: result is task %q, but the Mcp-Name header named %q", method, clip(params), res.TaskID, a.name)
			}
		}

		for _, task := range []*fuzzTask{fx.confirm, fx.job} {
			if a.err == nil && mayChange(method, params, task.id) {
				// A well-formed cancel or answer may change the task, now
				// or once the job is observed: continue with a fresh one.
				*task = *fx.newTask(t, task.tool, task.args)
				continue
			}
			got, err := h.tasks.GetTask(ctx, task.id)
			if err != nil {
				t.Fatalf("after %s %s: tasks/get of the real %s task: %v", method, clip(params), task.tool, err)
			}
			if got.Status != task.status {
				t.Fatalf("after %s %s: real %s task is %s (%s), want it still %s", method, clip(params), task.tool, got.Status, got.StatusMessage, task.status)
			}
		}
	})
}

// fuzzTasks holds the real tasks FuzzTasksParams checks after each input.
type fuzzTasks struct {
	h            *harness
	confirm, job *fuzzTask
}

// fuzzTask is a real task and the status it must keep.
type fuzzTask struct {
	tool   string
	args   any
	id     string
	status string
}

// newTask calls tool as a task: a confirmation waits in input_required, a
// long job is working.
func (fx *fuzzTasks) newTask(t testing.TB, tool string, args any) *fuzzTask {
	t.Helper()
	res, err := fx.h.tasks.CallTool(t.Context(), tool, args, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("calling %s: %v %+v, want a task", tool, err, res)
	}
	return &fuzzTask{tool: tool, args: args, id: res.Task.TaskID, status: res.Task.Status}
}

// fuzzAnswer is the server's answer to one fuzz input.
type fuzzAnswer struct {
	result json.RawMessage
	err    error
	// name is the Mcp-Name header sent ("" for none).
	name string
	// status is the HTTP status of the response (0 for none).
	status int
}

// send sends params as they are, with the Mcp-Name header name if it is not
// empty. A JSON object goes through taskclient.Client.Raw, which adds the
// standard _meta (declaring tasks) and, unless name is given, the Mcp-Name
// header derived from params.taskId; anything else, which Raw cannot send,
// is written into the request body verbatim.
func (fx *fuzzTasks) send(ctx context.Context, t *testing.T, method, params, name string) fuzzAnswer {
	var header http.Header
	if name != "" {
		// Any bytes fit in a header in this encoding.
		header = http.Header{"Mcp-Name": {"=?base64?" + base64.StdEncoding.EncodeToString([]byte(name)) + "?="}}
	}
	if obj, ok := jsonObject(params); ok {
		if meta, ok := obj["_meta"]; !ok || string(meta) == "null" || isJSONObject(meta) {
			result, resp, err := fx.h.tasks.Raw(ctx, method, json.RawMessage(params), header)
			if name == "" {
				name = stringField(obj, "taskId")
			}
			a := fuzzAnswer{result: result, err: err, name: name}
			if resp != nil {
				a.status = resp.StatusCode
			}
			return a
		}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fx.h.srv.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", taskclient.ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fuzzAnswer{err: fmt.Errorf("sending: %w", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fuzzAnswer{err: fmt.Errorf("reading: %w", err)}
	}
	var msg struct {
		Result json.RawMessage      `json:"result"`
		Error  *taskclient.RPCError `json:"error"`
	}
	if err := json.Unmarshal(eventData(data), &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
		return fuzzAnswer{status: resp.StatusCode, err: fmt.Errorf("HTTP %d: not a JSON-RPC response: %q", resp.StatusCode, data)}
	}
	if msg.Error != nil {
		return fuzzAnswer{status: resp.StatusCode, err: msg.Error}
	}
	return fuzzAnswer{status: resp.StatusCode, result: msg.Result, name: name}
}

// eventData returns the data of the first event of an event stream, or b
// itself if it is not one.
func eventData(b []byte) []byte {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return d
		}
	}
	return b
}

// jsonObject decodes s if it is a JSON object.
func jsonObject(s string) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

func isJSONObject(raw json.RawMessage) bool {
	_, ok := jsonObject(string(raw))
	return ok
}

// stringField returns obj[key] if it is a string.
func stringField(obj map[string]json.RawMessage, key string) string {
	var s string
	if raw, ok := obj[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// mayChange reports whether a successful method with params may change the
// task id: a cancel of it, or an update of it carrying at least one answer
// (an object whose action is accept, decline or cancel). It is lenient —
// keys match in any case, and any of several taskId keys may name the task —
// so that it never calls a legitimate change a bug.
func mayChange(method, params, id string) bool {
	obj, _ := jsonObject(params)
	var targeted bool
	var answers []json.RawMessage
	for k, v := range obj {
		switch {
		case strings.EqualFold(k, "taskId"):
			var s string
			targeted = targeted || json.Unmarshal(v, &s) == nil && s == id
		case strings.EqualFold(k, "inputResponses"):
			var m map[string]json.RawMessage
			_ = json.Unmarshal(v, &m)
			for _, a := range m {
				answers = append(answers, a)
			}
		}
	}
	if !targeted {
		return false
	}
	switch method {
	case "tasks/cancel":
		return true
	case "tasks/update":
		for _, raw := range answers {
			var a struct {
				Action string `json:"action"`
			}
			if json.Unmarshal(raw, &a) == nil && (a.Action == "accept" || a.Action == "decline" || a.Action == "cancel") {
				return true
			}
		}
	}
	return false
}

// sdkMaxDepth is the deepest nesting of objects and arrays the SDK parses in
// a request body.
const sdkMaxDepth = 1000

// sdkParses reports whether the SDK can parse a request body carrying
// params: valid JSON nested no deeper than sdkMaxDepth, counting the body's
// own object.
func sdkParses(params string) bool {
	if !json.Valid([]byte(params)) {
		return false
	}
	depth, deepest := 1, 1
	inString, escaped := false, false
	for i := 0; i < len(params); i++ {
		c := params[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest <= sdkMaxDepth
}

// clip quotes s for a failure message, cut to a readable length.
func clip(s string) string {
	const n = 300
	if len(s) > n {
		return fmt.Sprintf("%q… (%d bytes)", s[:n], len(s))
	}
	return fmt.Sprintf("%q", s)
}
