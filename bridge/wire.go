package bridge

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TasksExtension is the identifier of the MCP Tasks extension.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Wire shapes of the Tasks extension (SEP-2663). The SDK does not post-process
// custom results, so each carries its own resultType.

// taskFields are the fields of a Task, shared by CreateTaskResult and the
// DetailedTask of tasks/get.
type taskFields struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"` // always present; null means unlimited
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
}

// createTaskResult is the flat CreateTaskResult (resultType "task").
type createTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskFields
}

// detailedTaskResult is the answer to tasks/get: a DetailedTask with
// resultType "complete" and exactly the field its status calls for.
type detailedTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskFields
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *wireError                 `json:"error,omitempty"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

func newAck() *ackResult { return &ackResult{ResultType: "complete"} }

// wireError is a JSON-RPC error object inlined in a failed task.
type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
// Input responses stay raw: only keys that are outstanding are decoded.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// elicitation is the wire form of an elicitation/create input request.
type elicitation struct {
	Method string       `json:"method"`
	Params elicitParams `json:"params"`
}

type elicitParams struct {
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

func elicitationJSON(message string, schema json.RawMessage) json.RawMessage {
	b, err := json.Marshal(elicitation{
		Method: "elicitation/create",
		Params: elicitParams{Mode: "form", Message: message, RequestedSchema: schema},
	})
	if err != nil {
		// The inputs are a string and valid JSON; marshalling cannot fail.
		panic(fmt.Sprintf("bridge: encoding elicitation: %v", err))
	}
	return b
}

// elicitAnswer is an ElicitResult as a client sends it in inputResponses.
type elicitAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

func decodeAnswer(raw json.RawMessage) (elicitAnswer, bool) {
	var a elicitAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, false
	}
	switch a.Action {
	case "accept", "decline", "cancel":
		return a, true
	}
	return a, false
}

// Errors of the protocol.

func taskNotFound() error {
	// One message for unknown, expired and foreign tasks, so that a task's
	// existence does not leak to other principals.
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

func internalError(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}
}

// missingCapability returns the -32021 error naming the capabilities the
// request needed but did not declare.
func missingCapability(caps *mcp.ClientCapabilities, what string) error {
	raw, err := json.Marshal(caps)
	if err != nil {
		return internalError("encoding capability error: %v", err)
	}
	// The SDK writes its deprecated roots capability even when unset:
	// leave it out, so that the error names only what is required.
	var required map[string]json.RawMessage
	json.Unmarshal(raw, &required)
	delete(required, "roots")
	data, err := json.Marshal(map[string]any{"requiredCapabilities": required})
	if err != nil {
		return internalError("encoding capability error: %v", err)
	}
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: "Missing required client capability: " + what,
		Data:    data,
	}
}

func tasksCapability() *mcp.ClientCapabilities {
	c := &mcp.ClientCapabilities{}
	c.AddExtension(TasksExtension, nil)
	return c
}

func elicitationCapability() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
}

// modernProtocol is the first protocol revision with per-request _meta and
// the Tasks extension.
const modernProtocol = "2026-07-28"

// requestDeclaresTasks reports whether a request asked for tasks in its own
// terms: its _meta names protocol 2026-07-28 or later and declares the
// extension. Revisions are dates, so they compare as strings.
func requestDeclaresTasks(meta map[string]any) bool {
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= modernProtocol && declaresTasks(meta)
}

// declaresTasks reports whether a request's _meta declared the tasks
// extension. Custom-method handlers only see the raw _meta map.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// sanitize makes untrusted backend text safe to show as a status message:
// control characters other than newline and tab are dropped and the length is
// capped.
func sanitize(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("…")
			break
		}
		if r == '\n' || r == '\t' || r >= 0x20 && r != 0x7f && !(r >= 0x80 && r < 0xa0) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
