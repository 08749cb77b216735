package bridge

// How each tools/call was answered, for jobbridge_calls_total: operators see
// how their clients follow jobs (tasks, handles, results inline or
// synchronous) without reading logs.

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The answer label of jobbridge_calls_total.
const (
	answerTask     = "task"     // a task handle (either revision)
	answerInline   = "inline"   // a task-capable call answered with its result (inline_within)
	answerHandle   = "handle"   // a call without tasks answered with a handle (after_sync_budget)
	answerSync     = "sync"     // a call without tasks answered with its result
	answerQuestion = "question" // an interim result asking for input (multi round-trip)
	answerError    = "error"    // a JSON-RPC error
)

// countCalls counts the answers to tools/call of catalog tools. It wraps the
// whole chain, so it sees the answer the client gets.
func (b *Bridge) countCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil || b.toolNamed(r.Params.Name) == nil {
			return res, err // a companion tool, or an unknown name: no series for it
		}
		_, legacyTask := taskParamOf(r.Params.GetMeta())
		taskCapable := legacyTask || requestDeclaresTasks(r.Params.GetMeta())
		b.metrics.calls.WithLabelValues(r.Params.Name, callAnswer(res, err, taskCapable)).Inc()
		return res, err
	}
}

// callAnswer classifies the answer to one tools/call; taskCapable says
// whether the request asked for a task in its revision's terms.
func callAnswer(res mcp.Result, err error, taskCapable bool) string {
	if err != nil || res == nil {
		return answerError
	}
	if _, ok := res.(*createTaskResult); ok {
		return answerTask
	}
	raw, mErr := json.Marshal(res)
	if mErr != nil {
		return answerError
	}
	var a struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
		Structured struct {
			Outcome string          `json:"outcome"`
			Task    json.RawMessage `json:"task"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return answerError
	}
	switch {
	case a.ResultType == "task" || len(a.Task) > 0: // 2025-11-25 nests the task
		return answerTask
	case a.ResultType == "input_required":
		return answerQuestion
	case !taskCapable && len(a.Structured.Task) > 0 && (a.Structured.Outcome == "running" || a.Structured.Outcome == "input_required"):
		return answerHandle
	case taskCapable:
		return answerInline
	}
	return answerSync
}
