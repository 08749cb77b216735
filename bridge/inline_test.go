package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
)

// inlineWithin gives the named tools an inline_within of d.
func inlineWithin(d time.Duration, tools ...string) func(*catalog.Catalog) {
	return func(cat *catalog.Catalog) {
		for _, name := range tools {
			cat.Tool(name).Calls.InlineWithin = d
		}
	}
}

func TestInlineWithin(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: inlineWithin(2*time.Second, "slow_compute", "failing_job", "protocol_error_job", "confirm_delete")})
	ctx := t.Context()

	t.Run("a quick job answers with its result", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 0.1, "label": "quick"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Task != nil || res.Result == nil {
			t.Fatalf("got %+v, want the ordinary result inline", res)
		}
		if res.Result.ResultType != "complete" || !strings.Contains(res.Result.Text(), "Computed quick") {
			t.Errorf("inline result %+v, want resultType complete and the job's text", res.Result)
		}
	})
	t.Run("a job that fails answers with its error result", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "failing_job", map[string]any{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result == nil || !res.Result.IsError {
			t.Fatalf("got %+v, want an inline result with isError", res)
		}
	})
	t.Run("a protocol error answers as a JSON-RPC error", func(t *testing.T) {
		_, err := h.tasks.CallTool(ctx, "protocol_error_job", map[string]any{}, nil)
		if err == nil || !strings.Contains(err.Error(), "broke the protocol") {
			t.Fatalf("got %v, want the job's JSON-RPC error", err)
		}
	})
	t.Run("a slow job answers with its task", func(t *testing.T) {
		h2 := newHarness(t, harnessOptions{tune: inlineWithin(300*time.Millisecond, "slow_compute")})
		res, err := h2.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 5}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Task == nil || res.Task.Status != "working" {
			t.Fatalf("got %+v, want the working task", res)
		}
		if strings.Contains(res.Task.StatusMessage, "submitting") {
			t.Errorf("the task says %q after the wait; want what is known now", res.Task.StatusMessage)
		}
	})
	t.Run("a job that needs input answers with its task at once", func(t *testing.T) {
		res, err := h.tasks.CallTool(ctx, "confirm_delete", map[string]any{"filename": "a.txt"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Task == nil || res.Task.Status != "input_required" {
			t.Fatalf("got %+v, want the task waiting for confirmation", res)
		}
	})
	t.Run("2025-11-25 always gets the task", func(t *testing.T) {
		c, _ := newLegacyClient(t, h.srv.URL, `{}`)
		task := c.createTask("slow_compute", map[string]any{"seconds": 0.1})
		if task.TaskID == "" {
			t.Fatal("no task")
		}
	})
}
