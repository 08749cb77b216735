package catalog

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAfterSyncBudgetAndOutputSchema checks what a valid catalog makes of
// after_sync_budget (per tool, and as a default that a sync-only tool does
// not take) and output_schema.
func TestAfterSyncBudgetAndOutputSchema(t *testing.T) {
	const src = `version: 1
defaults:
  after_sync_budget: return_handle
backends:
  jobs: {type: rest, base_url: "https://jobs.example.com"}
x-job: &job
  start: {path: /jobs}
  job_id: {field: id}
  status: {path: "/jobs/{job.id}", field: status, states: {done: succeeded}}
tools:
  - name: inherits
    description: Takes the default.
    backend: jobs
    input_schema: {type: object}
    output_schema: {type: object, properties: {rows: {type: integer}}, required: [rows]}
    job: *job
  - name: opts_out
    description: Cancels at the budget.
    backend: jobs
    after_sync_budget: cancel
    input_schema: {type: object}
    job: *job
  - name: sync_only
    description: Never a task, so never a handle.
    backend: jobs
    task: never
    input_schema: {type: object}
    job: *job
`
	c, err := Parse("f.yaml", []byte(src), adapterTypes...)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range []struct {
		tool    string
		handle  bool
		mode    AfterSyncBudget
		outputs string
	}{
		{"inherits", true, AfterBudgetHandle, `{"properties":{"rows":{"type":"integer"}},"required":["rows"],"type":"object"}`},
		{"opts_out", false, AfterBudgetCancel, ""},
		{"sync_only", false, "", ""},
	} {
		tl := c.Tool(tc.tool)
		if tl.ReturnsHandle() != tc.handle || tl.AfterSyncBudget != tc.mode {
			t.Errorf("%s: ReturnsHandle %v, AfterSyncBudget %q; want %v, %q", tc.tool, tl.ReturnsHandle(), tl.AfterSyncBudget, tc.handle, tc.mode)
		}
		var got, want any
		if tc.outputs != "" {
			json.Unmarshal([]byte(tc.outputs), &want)
		}
		if len(tl.OutputSchema) > 0 {
			json.Unmarshal(tl.OutputSchema, &got)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: output schema (-want +got):\n%s", tc.tool, diff)
		}
	}
	if !c.UsesHandles() {
		t.Error("UsesHandles() = false with a tool returning handles")
	}
}
