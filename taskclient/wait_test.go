package taskclient

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// scriptedTasks serves tasks/get from a list of statuses, advancing one step
// per poll and staying on the last; tasks/update moves input_required on.
type scriptedTasks struct {
	mu       sync.Mutex
	statuses []string
	answered bool
}

func (s *scriptedTasks) handle(r request) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == "tasks/update" {
		s.answered = true
		return reply{Result: ack}
	}
	if s.statuses[0] == StatusInputRequired && s.answered && len(s.statuses) > 1 {
		s.statuses = s.statuses[1:]
	}
	status := s.statuses[0]
	if len(s.statuses) > 1 && status != StatusInputRequired {
		s.statuses = s.statuses[1:]
	}
	task := map[string]any{
		"resultType": "complete", "taskId": "tsk-1", "status": status,
		"createdAt": "2026-08-01T10:00:00Z", "lastUpdatedAt": "2026-08-01T10:00:00Z",
		"ttlMs": 60000, "pollIntervalMs": 10,
	}
	switch status {
	case StatusInputRequired:
		task["inputRequests"] = map[string]any{"ok": map[string]any{"method": "elicitation/create",
			"params": map[string]any{"message": "Proceed?", "requestedSchema": map[string]any{"type": "object",
				"properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}}}
	case StatusCompleted:
		task["result"] = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}}
	}
	return reply{Result: task}
}

func TestWaitPollsUntilTerminal(t *testing.T) {
	script := &scriptedTasks{statuses: []string{"working", "working", "input_required", "working", "completed"}}
	fs := newFakeServer(t, script.handle)
	c := &Client{URL: fs.URL, Tasks: true, Elicitation: true}

	var seen []string
	got, err := Wait(t.Context(), c, "tsk-1", func(task *Task) {
		seen = append(seen, task.Status)
		if task.Status == StatusInputRequired {
			if err := c.UpdateTask(t.Context(), task.TaskID, map[string]any{
				"ok": ElicitResult{Action: ActionAccept, Content: map[string]any{"ok": true}},
			}); err != nil {
				t.Errorf("UpdateTask: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusCompleted || got.Result.Text() != "done" {
		t.Errorf("final task %q with text %q, want completed with %q", got.Status, got.Result.Text(), "done")
	}
	if diff := cmp.Diff([]string{"working", "working", "input_required", "working", "completed"}, seen); diff != "" {
		t.Errorf("observed statuses mismatch (-want +got):\n%s", diff)
	}
	var updates []json.RawMessage
	for _, r := range fs.all() {
		if r.Method == "tasks/update" {
			updates = append(updates, r.Params["inputResponses"])
		}
	}
	if len(updates) != 1 || string(updates[0]) != `{"ok":{"action":"accept","content":{"ok":true}}}` {
		t.Errorf("tasks/update inputResponses = %s, want one accept", updates)
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	script := &scriptedTasks{statuses: []string{"working"}}
	fs := newFakeServer(t, script.handle)
	c := &Client{URL: fs.URL, Tasks: true}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	polls := 0
	got, err := Wait(ctx, c, "tsk-1", func(*Task) {
		polls++
		if polls == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if got == nil || got.Status != StatusWorking {
		t.Errorf("last task = %+v, want the working task", got)
	}
}

func TestWaitReturnsServerError(t *testing.T) {
	fs := newFakeServer(t, func(request) reply {
		return reply{Error: &RPCError{Code: CodeInvalidParams, Message: "Task not found"}}
	})
	c := &Client{URL: fs.URL, Tasks: true}
	_, err := Wait(t.Context(), c, "tsk-gone", nil)
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeInvalidParams {
		t.Fatalf("error = %v, want -32602", err)
	}
}
