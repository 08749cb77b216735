package taskclient

import (
	"context"
	"encoding/json"
	"fmt"
)

// Result types a server may send.
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
	ResultTask          = "task"
)

// Implementation names a client or server ({name, version}).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
}

// DiscoverResult is the server/discover result.
type DiscoverResult struct {
	ResultType        string   `json:"resultType"`
	SupportedVersions []string `json:"supportedVersions"`
	// Capabilities maps each server capability ("tools", "extensions", ...)
	// to its settings object.
	Capabilities map[string]json.RawMessage `json:"capabilities"`
	Instructions string                     `json:"instructions,omitempty"`
	TTLMs        *int64                     `json:"ttlMs"`
	CacheScope   string                     `json:"cacheScope"`
	// ServerInfo is decoded from _meta["io.modelcontextprotocol/serverInfo"].
	ServerInfo *Implementation `json:"-"`
	// Raw is the result exactly as received.
	Raw json.RawMessage `json:"-"`
}

// Extension returns the settings the server advertised for the named
// extension, and whether it advertised it at all.
func (d *DiscoverResult) Extension(name string) (json.RawMessage, bool) {
	var exts map[string]json.RawMessage
	if err := json.Unmarshal(d.Capabilities["extensions"], &exts); err != nil {
		return nil, false
	}
	v, ok := exts[name]
	return v, ok
}

// Discover calls server/discover.
func (c *Client) Discover(ctx context.Context) (*DiscoverResult, error) {
	raw, _, err := c.Raw(ctx, "server/discover", nil, nil)
	if err != nil {
		return nil, err
	}
	var res DiscoverResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding server/discover result: %w", err)
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &meta) == nil {
		if info, ok := meta.Meta[metaServerInfo]; ok {
			var impl Implementation
			if json.Unmarshal(info, &impl) == nil {
				res.ServerInfo = &impl
			}
		}
	}
	res.Raw = raw
	return &res, nil
}

// Tool is one entry of tools/list.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Execution is the tool's execution settings, which only 2025-11-25
	// servers send (2026-07-28 tools have none); nil when absent.
	Execution *ToolExecution `json:"execution,omitempty"`
}

// ToolExecution is a 2025-11-25 tool's execution settings.
type ToolExecution struct {
	// TaskSupport is "required", "optional" or "forbidden".
	TaskSupport string `json:"taskSupport,omitempty"`
}

// ListTools calls tools/list, following nextCursor until the last page.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var (
		tools  []Tool
		cursor string
	)
	for page := 0; ; page++ {
		if page >= 1000 {
			return nil, fmt.Errorf("listing tools: more than %d pages", page)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, _, err := c.Raw(ctx, "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var res struct {
			Tools      []Tool `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("decoding tools/list result: %w", err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			return tools, nil
		}
		cursor = res.NextCursor
	}
}

// CallOptions carries the optional parts of a tools/call request.
type CallOptions struct {
	// InputResponses answers the inputRequests of a previous input_required
	// result, keyed like them (values such as [ElicitResult]).
	InputResponses map[string]any
	// RequestState echoes the requestState of that result.
	RequestState string
	// Meta adds entries to the request's _meta; a nil value removes a
	// standard entry.
	Meta map[string]any
}

// CallResult is the outcome of tools/call: exactly one field is set.
type CallResult struct {
	// Task is set when the server created a task (resultType "task").
	Task *Task
	// Input is set when the server needs input first (resultType
	// "input_required"); retry with CallOptions built from it.
	Input *InputRequired
	// Result is set for an ordinary tool result (resultType "complete").
	Result *ToolResult
}

// InputRequired is a multi round-trip interim result.
type InputRequired struct {
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                  `json:"requestState,omitempty"`
	// Raw is the result exactly as received.
	Raw json.RawMessage `json:"-"`
}

// CallTool calls the named tool with args (nil means {}).
func (c *Client) CallTool(ctx context.Context, name string, args any, opts *CallOptions) (*CallResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	params := map[string]any{"name": name, "arguments": args}
	if opts != nil {
		if opts.InputResponses != nil {
			params["inputResponses"] = opts.InputResponses
		}
		if opts.RequestState != "" {
			params["requestState"] = opts.RequestState
		}
		if opts.Meta != nil {
			params["_meta"] = opts.Meta
		}
	}
	raw, _, err := c.Raw(ctx, "tools/call", params, nil)
	if err != nil {
		return nil, err
	}
	var head struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decoding tools/call result: %w", err)
	}
	switch head.ResultType {
	case ResultTask:
		t, err := decodeTask(raw)
		if err != nil {
			return nil, fmt.Errorf("decoding tools/call result: %w", err)
		}
		return &CallResult{Task: t}, nil
	case ResultInputRequired:
		var in InputRequired
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding tools/call result: %w", err)
		}
		in.Raw = raw
		return &CallResult{Input: &in}, nil
	case ResultComplete, "": // an absent resultType comes from a legacy server
		r, err := decodeToolResult(raw)
		if err != nil {
			return nil, fmt.Errorf("decoding tools/call result: %w", err)
		}
		return &CallResult{Result: r}, nil
	default:
		return nil, fmt.Errorf("decoding tools/call result: unrecognized resultType %q", head.ResultType)
	}
}

// GetTask calls tasks/get and returns the detailed task.
func (c *Client) GetTask(ctx context.Context, taskID string) (*Task, error) {
	raw, _, err := c.Raw(ctx, "tasks/get", map[string]any{"taskId": taskID}, nil)
	if err != nil {
		return nil, err
	}
	t, err := decodeTask(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding tasks/get result: %w", err)
	}
	return t, nil
}

// UpdateTask calls tasks/update with the given input responses, keyed like
// the task's inputRequests (values such as [ElicitResult]).
func (c *Client) UpdateTask(ctx context.Context, taskID string, responses map[string]any) error {
	if responses == nil {
		responses = map[string]any{}
	}
	_, _, err := c.Raw(ctx, "tasks/update", map[string]any{"taskId": taskID, "inputResponses": responses}, nil)
	return err
}

// CancelTask calls tasks/cancel. The server only acknowledges the intent; the
// task reaches a terminal state later (not necessarily "cancelled").
func (c *Client) CancelTask(ctx context.Context, taskID string) error {
	_, _, err := c.Raw(ctx, "tasks/cancel", map[string]any{"taskId": taskID}, nil)
	return err
}
