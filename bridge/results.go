package bridge

// Tool results: how a terminal observation becomes the tool result stored
// with the task and served by tasks/get, tasks/result, synchronous calls and
// the companion tools (handle.go).
//
// Every result, of a job or of the bridge itself, has the same shape, so
// that a client that reads only structuredContent (Claude Code hands the
// model nothing else) and one that reads only the text both get what a
// model needs:
//
//   - structuredContent is the result: a resultEnvelope, whose `data` is the
//     job's own structured output (typed by the tool's output_schema when
//     the catalog declares one; the served outputSchema is then the envelope
//     with `data` typed by it, see outputSchemaOf);
//   - one text block carries the same information readably: the summary and
//     the adapter's details, the reason of a failure, the links and the data
//     as JSON.
//
// A stored result stays within the catalog's max_result_bytes: the text is
// cut with a note, and the structured content gives up its data, then its
// details, before it would exceed the limit.

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
)

// Outcomes of a result (resultEnvelope.Outcome).
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"
	outcomeCancelled = "cancelled"
	// outcomeRunning and outcomeInputRequired are the outcomes of a handle
	// (handle.go): the job goes on as a task.
	outcomeRunning       = "running"
	outcomeInputRequired = "input_required"
)

// resultEnvelope is the structuredContent of every tool result the bridge
// returns. Only summary and outcome are always present.
type resultEnvelope struct {
	// Summary is the result in one line: the adapter's first line, or the
	// bridge's own words.
	Summary string `json:"summary"`
	// Outcome is succeeded, failed or cancelled; a handle says running or
	// input_required.
	Outcome string `json:"outcome"`
	// Reason says why a job failed or was cancelled, or why the bridge
	// could not run it.
	Reason string `json:"reason,omitempty"`
	// Job identifies the backend job, with the URL of its page when the
	// adapter gives one.
	Job *jobInfo `json:"job,omitempty"`
	// Task identifies the task behind a handle or a companion tool's answer.
	Task *taskInfo `json:"task,omitempty"`
	// Links are every link the adapter gives (the job's page, its logs).
	Links []linkInfo `json:"links,omitempty"`
	// ExitCode, FailedJobs, LogStream and Array are facts the adapters type
	// in their structured output (exit_code and log_stream from AWS Batch,
	// the jobs of a GitHub Actions run that did not succeed, the status
	// summary of a Batch array job), lifted so that a model finds them in
	// the same place for every backend. They stay in Data too.
	ExitCode   *int64         `json:"exit_code,omitempty"`
	FailedJobs []failedJob    `json:"failed_jobs,omitempty"`
	LogStream  string         `json:"log_stream,omitempty"`
	Array      map[string]any `json:"array,omitempty"`
	// Details is the rest of the adapter's text after its first line (the
	// jobs of a GitHub run and the tails of their logs, say).
	Details string `json:"details,omitempty"`
	// InputRequests are the open questions of a task waiting for input, by
	// the key task_answer takes.
	InputRequests map[string]inputInfo `json:"input_requests,omitempty"`
	// Next says what to call next about a task (handles and companions).
	Next []nextCall `json:"next,omitempty"`
	// Data is the job's own structured output.
	Data map[string]any `json:"data,omitempty"`
	// DataProblem says why Data is absent: it did not match the tool's
	// output_schema (a catalog problem; the data is then in UncheckedData),
	// or it exceeded the server's size limit.
	DataProblem   string         `json:"data_problem,omitempty"`
	UncheckedData map[string]any `json:"unchecked_data,omitempty"`
}

type jobInfo struct {
	Backend string `json:"backend"`
	ID      string `json:"id"`
	URL     string `json:"url,omitempty"`
}

type linkInfo struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

type failedJob struct {
	Name       string `json:"name"`
	Conclusion string `json:"conclusion"`
	URL        string `json:"url,omitempty"`
}

type taskInfo struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	StatusMessage  string `json:"status_message,omitempty"`
	PollIntervalMs int64  `json:"poll_interval_ms,omitempty"`
}

type inputInfo struct {
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema"`
}

type nextCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	Purpose   string         `json:"purpose"`
}

// envelopeSchema is the outputSchema of a tool whose catalog declares an
// output_schema: the envelope, with the catalog's schema as `data` (%s).
const envelopeSchema = `{
  "type": "object",
  "required": ["summary", "outcome"],
  "properties": {
    "summary": {"type": "string", "description": "The result in one line."},
    "outcome": {"type": "string", "enum": ["succeeded", "failed", "cancelled", "running", "input_required"]},
    "reason": {"type": "string", "description": "Why the job failed or was cancelled."},
    "job": {"type": "object", "properties": {"backend": {"type": "string"}, "id": {"type": "string"}, "url": {"type": "string"}}},
    "task": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}, "status_message": {"type": "string"}, "poll_interval_ms": {"type": "integer"}}},
    "links": {"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}, "url": {"type": "string"}}}},
    "exit_code": {"type": "integer"},
    "failed_jobs": {"type": "array", "items": {"type": "object"}},
    "log_stream": {"type": "string"},
    "array": {"type": "object"},
    "details": {"type": "string"},
    "input_requests": {"type": "object"},
    "next": {"type": "array", "items": {"type": "object"}},
    "data": %s,
    "data_problem": {"type": "string"},
    "unchecked_data": {"type": "object"}
  }
}`

// outputSchemaOf is the outputSchema served for a tool: nil when the
// catalog declares no output_schema, else the envelope with `data` typed by
// it. The data schema's $defs move to the envelope's root, so that its
// "#/$defs/..." references still resolve.
func outputSchemaOf(data json.RawMessage) (json.RawMessage, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	defs, hasDefs := d["$defs"]
	delete(d, "$defs")
	delete(d, "$schema")
	delete(d, "$id")
	inner, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	raw := []byte(fmt.Sprintf(envelopeSchema, inner))
	if hasDefs {
		var env map[string]any
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
		env["$defs"] = defs
		if raw, err = json.Marshal(env); err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return raw, nil
}

// resolveSchema resolves a JSON Schema given as JSON.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// Result helpers.

// outcome is the stored terminal outcome.
type outcome struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// toolError is an isError result in the bridge's own words: the text, and
// the same as the envelope's summary and reason.
func toolError(format string, args ...any) *mcp.CallToolResult {
	msg := fmt.Sprintf(format, args...)
	env := envelopeOfText(msg, true)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: msg}},
		StructuredContent: env,
		IsError:           true,
	}
}

// envelopeOfText is the envelope of a result the bridge words itself.
func envelopeOfText(text string, isError bool) *resultEnvelope {
	summary, details := splitSummary(text)
	env := &resultEnvelope{Summary: summary, Details: details, Outcome: outcomeSucceeded}
	if isError {
		env.Outcome, env.Reason = outcomeFailed, summary
	}
	return env
}

// toolResultText is an inlined CallToolResult with one text block, and the
// same as its structured content.
func toolResultText(text string, isError bool) json.RawMessage {
	return marshalToolResult(text, envelopeOfText(text, isError), isError)
}

func marshalToolResult(text string, env *resultEnvelope, isError bool) json.RawMessage {
	r := map[string]any{
		"resultType":        "complete",
		"content":           []map[string]any{{"type": "text", "text": text}},
		"structuredContent": env,
		"isError":           isError,
	}
	b, _ := json.Marshal(r)
	return b
}

// resultInput is what a job's result is made of.
type resultInput struct {
	obs     adapters.Observation
	ref     adapters.JobRef
	backend string
	// dataSchema is the tool's output_schema, resolved; nil when it has
	// none.
	dataSchema *jsonschema.Resolved
	maxBytes   int
}

// toolResultOf renders the result of a terminal observation for the tool t
// and logs, once, a result whose data does not match the tool's
// output_schema (a catalog problem, also told in the result).
func (b *Bridge) toolResultOf(t *tool, o adapters.Observation, ref adapters.JobRef) json.RawMessage {
	in := resultInput{obs: o, ref: ref, backend: t.Backend, maxBytes: b.limits.MaxResultBytes}
	if len(t.OutputSchema) > 0 {
		s, err := resolveSchema(t.OutputSchema)
		if err != nil {
			// The catalog checked it; a schema that stopped resolving is a
			// bug, not a reason to lose the result.
			b.log.Error("output schema does not resolve", "tool", t.Name, "error", err)
		}
		in.dataSchema = s
	}
	raw, problem := renderResult(in)
	if problem != "" {
		b.log.Warn("job result does not match the tool's output_schema (a catalog problem)", "tool", t.Name, "backend", t.Backend, "job", ref.ID, "problem", problem)
	}
	return raw
}

// renderResult turns a terminal observation into the inlined tool result.
// problem is set when the job's data does not match the tool's
// output_schema.
func renderResult(in resultInput) (raw json.RawMessage, problem string) {
	o, ref := in.obs, in.ref
	text := ""
	var data map[string]any
	if o.Result != nil {
		text = strings.TrimSpace(o.Result.Text)
		data = o.Result.Structured
	}
	if text == "" {
		switch o.State {
		case adapters.StateSucceeded:
			text = fmt.Sprintf("Job %s succeeded.", ref.ID)
		case adapters.StateToolError:
			text = fmt.Sprintf("Job %s failed.", ref.ID)
		default:
			text = fmt.Sprintf("Job %s was cancelled.", ref.ID)
		}
		if m := sanitize(o.Message, 1024); m != "" {
			text += " " + m
		}
	}
	env := &resultEnvelope{Outcome: outcomeSucceeded, Job: &jobInfo{Backend: in.backend, ID: ref.ID}}
	env.Summary, env.Details = splitSummary(text)
	switch o.State {
	case adapters.StateSucceeded:
	case adapters.StateToolError:
		env.Outcome = outcomeFailed
	default:
		env.Outcome = outcomeCancelled
	}
	if env.Outcome != outcomeSucceeded {
		env.Reason = sanitize(o.Message, 1024)
		if env.Reason == "" {
			env.Reason = env.Summary
		}
	}
	for _, l := range o.Links {
		env.Links = append(env.Links, linkInfo{Title: l.Title, URL: l.URL})
	}
	if len(env.Links) > 0 {
		env.Job.URL = env.Links[0].URL
	}
	if data != nil {
		// A JSON round trip gives the data the types a client will see,
		// which the schema is checked against.
		var clean map[string]any
		b, err := json.Marshal(data)
		if err == nil {
			err = json.Unmarshal(b, &clean)
		}
		if err != nil {
			env.DataProblem = "the job's data could not be encoded as JSON: " + sanitize(err.Error(), 256)
			clean = nil
		}
		data = clean
		if data != nil {
			lift(env, data)
		}
	}
	if in.dataSchema != nil && env.Outcome == outcomeSucceeded {
		check := data
		if check == nil {
			check = map[string]any{}
		}
		if err := in.dataSchema.Validate(check); err != nil {
			problem = sanitize(err.Error(), 512)
			env.DataProblem = "catalog problem: the job's data does not match the tool's output_schema (" + problem + "); it is given unchecked in unchecked_data"
			env.UncheckedData, data = data, nil
		}
	}
	env.Data = data

	// The text mirrors the envelope: the adapter's text, the reason when
	// the text does not say it, the links and the data.
	var sb strings.Builder
	sb.WriteString(text)
	if env.Reason != "" && !strings.Contains(strings.ToLower(text), strings.ToLower(env.Reason)) {
		fmt.Fprintf(&sb, "\nReason: %s", env.Reason)
	}
	if len(o.Links) > 0 {
		sb.WriteString("\n")
		for _, l := range o.Links {
			fmt.Fprintf(&sb, "\n%s: %s", l.Title, l.URL)
		}
	}
	if env.DataProblem != "" {
		fmt.Fprintf(&sb, "\n\nCatalog problem: the job's data does not match the tool's output_schema (%s).", problem)
	}
	shown := env.Data
	if shown == nil {
		shown = env.UncheckedData
	}
	if shown != nil {
		if b, err := json.Marshal(shown); err == nil {
			fmt.Fprintf(&sb, "\n\nData: %s", b)
		}
	}
	full := sb.String()
	if len(full) > in.maxBytes {
		full = truncateUTF8(full, in.maxBytes) + fmt.Sprintf("\n[result cut at %d bytes, the server's limit]", in.maxBytes)
	}
	capEnvelope(env, in.maxBytes)
	return marshalToolResult(full, env, o.State != adapters.StateSucceeded), problem
}

// splitSummary cuts a text into its first line (the summary, at most 2 KiB)
// and the rest.
func splitSummary(text string) (summary, details string) {
	text = strings.TrimSpace(text)
	summary, details, _ = strings.Cut(text, "\n")
	summary, details = strings.TrimSpace(summary), strings.TrimSpace(details)
	if len(summary) > 2048 {
		summary = truncateUTF8(summary, 2048) + "…"
	}
	return summary, details
}

// lift copies the facts adapters type in their structured output to the
// envelope's own fields.
func lift(env *resultEnvelope, data map[string]any) {
	if v, ok := data["exit_code"].(float64); ok && v == float64(int64(v)) {
		code := int64(v)
		env.ExitCode = &code
	}
	if v, ok := data["log_stream"].(string); ok && v != "" {
		env.LogStream = v
	}
	if v, ok := data["array"].(map[string]any); ok {
		env.Array = v
	}
	if jobs, ok := data["jobs"].([]any); ok {
		for _, j := range jobs {
			m, _ := j.(map[string]any)
			name, _ := m["name"].(string)
			conclusion, _ := m["conclusion"].(string)
			url, _ := m["html_url"].(string)
			switch conclusion {
			case "failure", "timed_out", "cancelled", "startup_failure", "action_required":
				env.FailedJobs = append(env.FailedJobs, failedJob{Name: name, Conclusion: conclusion, URL: url})
			}
		}
	}
}

// capEnvelope keeps the envelope within maxBytes: it gives up the data,
// then cuts the details, saying so.
func capEnvelope(env *resultEnvelope, maxBytes int) {
	size := func() int {
		b, _ := json.Marshal(env)
		return len(b)
	}
	if size() <= maxBytes {
		return
	}
	if env.Data != nil || env.UncheckedData != nil {
		env.Data, env.UncheckedData = nil, nil
		env.DataProblem = fmt.Sprintf("the data exceeded %d bytes, the server's limit; it was left out", maxBytes)
	}
	for n := len(env.Details) / 2; size() > maxBytes && env.Details != ""; n /= 2 {
		env.Details = truncateUTF8(env.Details, n) + "\n[cut at the server's size limit]"
		if n == 0 {
			env.Details = ""
		}
	}
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func failure(o adapters.Observation) (int, string) {
	code, msg := -32603, sanitize(o.Message, 1024)
	if o.Error != nil {
		if o.Error.Code != 0 {
			code = o.Error.Code
		}
		if o.Error.Message != "" {
			msg = sanitize(o.Error.Message, 1024)
		}
	}
	if msg == "" {
		msg = "the job failed at the protocol level"
	}
	return code, msg
}
