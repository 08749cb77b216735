package bridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
)

// served is a rendered result as a client receives it.
type served struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured map[string]any `json:"structuredContent"`
	IsError    bool           `json:"isError"`
}

func decodeServed(t *testing.T, raw json.RawMessage) served {
	t.Helper()
	var s served
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("decoding result %s: %v", raw, err)
	}
	if len(s.Content) != 1 || s.Content[0].Type != "text" {
		t.Fatalf("result content %s, want one text block", raw)
	}
	return s
}

// TestResultShape checks that the structured content of a job's result
// carries what a model needs (summary, outcome, reason, job, links, the
// facts adapters type, data) and that the text block carries the same
// readably, for the shapes each adapter gives.
func TestResultShape(t *testing.T) {
	ref := adapters.JobRef{ID: "job-7"}
	for _, tc := range []struct {
		name    string
		backend string
		obs     adapters.Observation
		want    map[string]any // structured content
		isError bool
		text    []string // the text contains each
	}{
		{
			name:    "succeeded with data and a link",
			backend: "jobs",
			obs: adapters.Observation{State: adapters.StateSucceeded, Message: "succeeded",
				Links:  []adapters.Link{{Title: "Job", URL: "http://jobs.test/jobs/job-7"}},
				Result: &adapters.Result{Text: "The sales report is ready.", Structured: map[string]any{"report": "sales", "rows": 1284}}},
			want: map[string]any{
				"summary": "The sales report is ready.", "outcome": "succeeded",
				"job":   map[string]any{"backend": "jobs", "id": "job-7", "url": "http://jobs.test/jobs/job-7"},
				"links": []any{map[string]any{"title": "Job", "url": "http://jobs.test/jobs/job-7"}},
				"data":  map[string]any{"report": "sales", "rows": float64(1284)},
			},
			text: []string{"The sales report is ready.", "Job: http://jobs.test/jobs/job-7", `Data: {"report":"sales","rows":1284}`},
		},
		{
			name:    "a job that failed says why",
			backend: "jobs",
			obs: adapters.Observation{State: adapters.StateToolError, Message: "export failed: disk quota exceeded",
				Result: &adapters.Result{Text: "The export stopped."}},
			want: map[string]any{
				"summary": "The export stopped.", "outcome": "failed", "reason": "export failed: disk quota exceeded",
				"job": map[string]any{"backend": "jobs", "id": "job-7"},
			},
			isError: true,
			text:    []string{"The export stopped.", "Reason: export failed: disk quota exceeded"},
		},
		{
			name:    "a GitHub run: summary line, details with the log tail, failed jobs lifted",
			backend: "gh",
			obs: adapters.Observation{State: adapters.StateToolError, Message: "completed: failure",
				Links: []adapters.Link{{Title: "Workflow run", URL: "https://github.test/o/r/actions/runs/9"}},
				Result: &adapters.Result{
					Text: "Workflow run 9 (CI #3, attempt 1) of o/r concluded failure.\nJobs:\n- build: success\n- test: failure\n\nLast 2 lines of the log of job test:\nFAIL x\nexit 1",
					Structured: map[string]any{"run_id": 9, "conclusion": "failure", "jobs": []any{
						map[string]any{"name": "build", "conclusion": "success", "html_url": "https://github.test/j/1"},
						map[string]any{"name": "test", "conclusion": "failure", "html_url": "https://github.test/j/2"},
					}}}},
			want: map[string]any{
				"summary": "Workflow run 9 (CI #3, attempt 1) of o/r concluded failure.", "outcome": "failed", "reason": "completed: failure",
				"details":     "Jobs:\n- build: success\n- test: failure\n\nLast 2 lines of the log of job test:\nFAIL x\nexit 1",
				"job":         map[string]any{"backend": "gh", "id": "job-7", "url": "https://github.test/o/r/actions/runs/9"},
				"links":       []any{map[string]any{"title": "Workflow run", "url": "https://github.test/o/r/actions/runs/9"}},
				"failed_jobs": []any{map[string]any{"name": "test", "conclusion": "failure", "url": "https://github.test/j/2"}},
				"data": map[string]any{"run_id": float64(9), "conclusion": "failure", "jobs": []any{
					map[string]any{"name": "build", "conclusion": "success", "html_url": "https://github.test/j/1"},
					map[string]any{"name": "test", "conclusion": "failure", "html_url": "https://github.test/j/2"},
				}},
			},
			isError: true,
			text:    []string{"concluded failure.", "FAIL x", "Reason: completed: failure", "Workflow run: https://github.test/o/r/actions/runs/9"},
		},
		{
			name:    "a Batch array job: exit code, log stream and array summary lifted",
			backend: "batch",
			obs: adapters.Observation{State: adapters.StateToolError, Message: "failed: Essential container exited (exit code 2)",
				Result: &adapters.Result{Text: "AWS Batch job nightly (job-7) FAILED. Exit code 2 after 1 attempt.",
					Structured: map[string]any{"exit_code": int32(2), "log_stream": "nightly/default/abc",
						"array": map[string]any{"size": 3, "status_summary": map[string]any{"FAILED": 1, "SUCCEEDED": 2}}}}},
			want: map[string]any{
				"summary": "AWS Batch job nightly (job-7) FAILED. Exit code 2 after 1 attempt.", "outcome": "failed",
				"reason":    "failed: Essential container exited (exit code 2)",
				"job":       map[string]any{"backend": "batch", "id": "job-7"},
				"exit_code": float64(2), "log_stream": "nightly/default/abc",
				"array": map[string]any{"size": float64(3), "status_summary": map[string]any{"FAILED": float64(1), "SUCCEEDED": float64(2)}},
				"data": map[string]any{"exit_code": float64(2), "log_stream": "nightly/default/abc",
					"array": map[string]any{"size": float64(3), "status_summary": map[string]any{"FAILED": float64(1), "SUCCEEDED": float64(2)}}},
			},
			isError: true,
			text:    []string{"Exit code 2", "Reason: failed: Essential container exited (exit code 2)", `"log_stream":"nightly/default/abc"`},
		},
		{
			name:    "a cancelled job without text",
			backend: "jobs",
			obs:     adapters.Observation{State: adapters.StateCancelled, Message: "stopped by the operator"},
			want: map[string]any{
				"summary": "Job job-7 was cancelled. stopped by the operator", "outcome": "cancelled", "reason": "stopped by the operator",
				"job": map[string]any{"backend": "jobs", "id": "job-7"},
			},
			isError: true,
			text:    []string{"Job job-7 was cancelled. stopped by the operator"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, problem := renderResult(resultInput{obs: tc.obs, ref: ref, backend: tc.backend, maxBytes: 1 << 16})
			if problem != "" {
				t.Errorf("problem %q without an output schema", problem)
			}
			got := decodeServed(t, raw)
			if diff := cmp.Diff(tc.want, got.Structured); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			if got.IsError != tc.isError {
				t.Errorf("isError %v, want %v", got.IsError, tc.isError)
			}
			for _, s := range tc.text {
				if !strings.Contains(got.Content[0].Text, s) {
					t.Errorf("text %q lacks %q", got.Content[0].Text, s)
				}
			}
		})
	}
}

// TestResultTextWithoutExtras checks that a result with nothing but its
// summary is that summary alone, as it always was.
func TestResultTextWithoutExtras(t *testing.T) {
	raw, _ := renderResult(resultInput{obs: adapters.Observation{State: adapters.StateSucceeded, Result: &adapters.Result{Text: "Deleted a.txt."}},
		ref: adapters.JobRef{ID: "j"}, backend: "jobs", maxBytes: 1 << 16})
	if got := decodeServed(t, raw); got.Content[0].Text != "Deleted a.txt." || got.Structured["summary"] != "Deleted a.txt." {
		t.Errorf("text %q, summary %v; want both %q", got.Content[0].Text, got.Structured["summary"], "Deleted a.txt.")
	}
}

// TestResultOutputSchema checks the served outputSchema (the envelope with
// data typed by the catalog's schema) and that results are checked against
// it: data that matches is served and conforms to the outputSchema; data
// that does not is a catalog problem, told in the result, and the result
// still conforms.
func TestResultOutputSchema(t *testing.T) {
	data := json.RawMessage(`{"type":"object","properties":{"rows":{"$ref":"#/$defs/count"}},"required":["rows"],"$defs":{"count":{"type":"integer","minimum":0}}}`)
	outSchema, err := outputSchemaOf(data)
	if err != nil {
		t.Fatalf("outputSchemaOf: %v", err)
	}
	envelope, err := resolveSchema(outSchema)
	if err != nil {
		t.Fatalf("resolving the served outputSchema: %v", err)
	}
	dataSchema, err := resolveSchema(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		data    map[string]any
		problem string // in the result when non-empty
	}{
		{"matches", map[string]any{"rows": 1284}, ""},
		{"a wrong type", map[string]any{"rows": "many"}, "rows"},
		{"no data at all", nil, "rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := adapters.Observation{State: adapters.StateSucceeded, Result: &adapters.Result{Text: "Counted.", Structured: tc.data}}
			raw, problem := renderResult(resultInput{obs: o, ref: adapters.JobRef{ID: "j"}, backend: "jobs", dataSchema: dataSchema, maxBytes: 1 << 16})
			got := decodeServed(t, raw)
			if err := envelope.Validate(got.Structured); err != nil {
				t.Errorf("structuredContent %v does not conform to the served outputSchema: %v", got.Structured, err)
			}
			if tc.problem == "" {
				if problem != "" || got.Structured["data"] == nil {
					t.Errorf("problem %q, data %v; want the data served", problem, got.Structured["data"])
				}
				return
			}
			if !strings.Contains(problem, tc.problem) {
				t.Errorf("problem %q does not name %q", problem, tc.problem)
			}
			said, _ := got.Structured["data_problem"].(string)
			if !strings.Contains(said, "catalog problem") || got.Structured["data"] != nil {
				t.Errorf("structuredContent %v: want data_problem saying it is a catalog problem, and no data", got.Structured)
			}
			if !strings.Contains(got.Content[0].Text, "Catalog problem: the job's data does not match the tool's output_schema") {
				t.Errorf("text %q does not tell the catalog problem", got.Content[0].Text)
			}
		})
	}
	if got, _ := outputSchemaOf(nil); got != nil {
		t.Errorf("outputSchemaOf(nil) = %s, want none: a tool without output_schema declares no outputSchema", got)
	}
}

// TestResultSizeCap checks that a result stays within max_result_bytes: the
// text is cut with a note, and the structured content gives up its data and
// cuts its details, saying so, but keeps the summary and the reason.
func TestResultSizeCap(t *testing.T) {
	const limit = 4096
	big := strings.Repeat("x", 3*limit)
	o := adapters.Observation{State: adapters.StateToolError, Message: "out of memory",
		Result: &adapters.Result{Text: "The job died.\n" + big, Structured: map[string]any{"blob": big}}}
	raw, _ := renderResult(resultInput{obs: o, ref: adapters.JobRef{ID: "j"}, backend: "jobs", maxBytes: limit})
	got := decodeServed(t, raw)
	if n := len(got.Content[0].Text); n > limit+100 || !strings.Contains(got.Content[0].Text, "[result cut at 4096 bytes") {
		t.Errorf("text of %d bytes, want it cut at %d with a note", n, limit)
	}
	sc, _ := json.Marshal(got.Structured)
	if len(sc) > limit {
		t.Errorf("structuredContent of %d bytes, over the limit %d", len(sc), limit)
	}
	if got.Structured["summary"] != "The job died." || got.Structured["reason"] != "out of memory" || got.Structured["data"] != nil {
		t.Errorf("structuredContent %s: want the summary and reason kept, the data left out", sc)
	}
	if p, _ := got.Structured["data_problem"].(string); !strings.Contains(p, "exceeded 4096 bytes") {
		t.Errorf("data_problem %q does not say the data was too big", p)
	}
}

// TestBridgeErrorsCarryTheirReason checks that an isError result in the
// bridge's own words (a budget, a refusal) carries its reason in the
// structured content too.
func TestBridgeErrorsCarryTheirReason(t *testing.T) {
	r := toolError("job %s was still running after %s, so it was cancelled", "j-1", "2s")
	env, ok := r.StructuredContent.(*resultEnvelope)
	if !ok || !r.IsError || env.Outcome != outcomeFailed || env.Reason != "job j-1 was still running after 2s, so it was cancelled" || env.Summary != env.Reason {
		t.Errorf("toolError: isError %v, structuredContent %+v; want outcome failed with the reason", r.IsError, r.StructuredContent)
	}
	got := decodeServed(t, toolResultText("The backend \"jobs\" did not start the job: quota", true))
	if got.Structured["reason"] != "The backend \"jobs\" did not start the job: quota" || got.Structured["outcome"] != "failed" {
		t.Errorf("toolResultText: structuredContent %v; want outcome failed with the reason", got.Structured)
	}
}

// TestResultDataThatIsNotJSON checks that data an adapter gives but JSON
// cannot carry loses only the data, said so, not the result.
func TestResultDataThatIsNotJSON(t *testing.T) {
	o := adapters.Observation{State: adapters.StateSucceeded, Result: &adapters.Result{Text: "Done.", Structured: map[string]any{"f": func() {}}}}
	raw, _ := renderResult(resultInput{obs: o, ref: adapters.JobRef{ID: "j"}, backend: "jobs", maxBytes: 1 << 16})
	got := decodeServed(t, raw)
	if p, _ := got.Structured["data_problem"].(string); got.Structured["summary"] != "Done." || got.Structured["data"] != nil || !strings.Contains(p, "could not be encoded") {
		t.Errorf("structuredContent %v: want the summary kept and the data left out, saying why", got.Structured)
	}
}
