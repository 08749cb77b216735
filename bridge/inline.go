package bridge

// Quick jobs answered inline. A tool with inline_within lets a call that
// would become a task (2026-07-28, the extension declared) wait that long
// for its job: a job that ends within it is answered with its ordinary tool
// result (or its JSON-RPC error), as a synchronous call would be, and the
// client is spared the create and the polls; one that does not end, or
// stops to ask for input, is answered with the task as without the option.
// The task row is created either way, before the job is submitted, so that
// the job is accounted for (jobbridge tasks list), a crash mid-wait is
// reconciled like any submission, and an idempotency key names it; it ends
// and expires as any task does.
//
// 2025-11-25 calls with params.task always get the task: that revision
// requires a CreateTaskResult for a task-augmented request, and its clients
// fail without one.

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/mapping"
)

// inlineResult waits up to the tool's inline_within for a new task to end
// and returns what the call answers then: the task's result or error, or
// (ok false) nothing, and the call answers with the task, which *row then
// holds as last read.
func (b *Bridge) inlineResult(ctx context.Context, t *tool, id string, row **mapping.Task) (res mcp.Result, err error, ok bool) {
	task := *row
	if t.Calls.InlineWithin <= 0 {
		return nil, nil, false
	}
	timer := time.NewTimer(t.Calls.InlineWithin)
	defer timer.Stop()
	for {
		if task.Status.Terminal() {
			b.log.Debug("task answered inline", "task", shortKey(task.Key), "tool", t.Name)
			d := b.detailed(id, task)
			if d.Error != nil {
				return nil, &jsonrpc.Error{Code: int64(d.Error.Code), Message: d.Error.Message}, true
			}
			return &patchedResult{raw: d.Result}, nil, true
		}
		if task.Status == mapping.StatusInputRequired {
			return nil, nil, false // the client must answer: give it the task now
		}
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-timer.C:
			return nil, nil, false
		case <-time.After(inlineStep(t)):
		}
		cur, err := b.store.Get(ctx, task.Key, task.Principal, b.opts.Now())
		if err != nil {
			return nil, nil, false // the task answers for itself
		}
		task = b.lc.Refresh(ctx, cur, b.opts.ObserveBudget)
		*row = task
	}
}

// inlineStep is the pause between two looks at a job that may end inline:
// the tool's refresh interval (a look within it reads the last
// observation), at most a quarter of inline_within.
func inlineStep(t *tool) time.Duration {
	return max(min(t.RefreshInterval, t.Calls.InlineWithin/4), 10*time.Millisecond)
}
