package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// defaultErrorCode is the JSON-RPC code of a failed job without one
// (internal error).
const defaultErrorCode = -32603

// maxMessage bounds the status message the adapter passes on.
const maxMessage = 1000

// emptySchema is the requested schema of a question that has none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// observe reads a status answer. A status value that states: does not map
// is reported in the observation's Err, wrapping [adapters.ErrUnmappedState]
// (naming the value and the mapped ones), and logged once per tool and
// value. An answer whose status field is missing, unreadable or neither a
// string nor a number is reported in the observation's Err, wrapping
// [adapters.ErrUnreadableStatus], with the HTTP status and an excerpt.
func (a *Adapter) observe(ctx context.Context, t *tool, ref adapters.JobRef, v *values, resp *http.Response, body []byte, ans expr.Answer) adapters.Observation {
	r := &t.read
	unreadable := func(format string, args ...any) adapters.Observation {
		// A callback (see ReadEvents) is read without a request or status.
		return adapters.Observation{Err: a.answered(adapters.ProblemUnreadable, adapters.ErrUnreadableStatus, resp,
			fmt.Sprintf("%s (answer: %s)", fmt.Sprintf(format, args...), a.excerpt(body)))}
	}
	// read returns a reading's value; a reading that fails is logged and
	// taken as absent (only the status field decides readability).
	read := func(name string, val expr.Value) (any, bool) {
		if val.IsZero() {
			return nil, false
		}
		out, ok, err := val.Read(ctx, ans)
		if err != nil {
			a.log.Warn("reading the status answer failed", "tool", t.name, "job", ref.ID, "field", name, "error", a.redactor.Redact(err.Error()))
			a.traceText(t.status, "rule", fmt.Sprintf("%s %s failed: %s", name, val, a.redactor.Redact(err.Error())))
			return nil, false
		}
		if ok {
			a.traceText(t.status, "rule", fmt.Sprintf("%s %s → %s", name, val, a.redactor.Clean(show(out), 200)))
		}
		return out, ok
	}
	text := func(name string, val expr.Value) string {
		out, ok := read(name, val)
		if !ok {
			return ""
		}
		s, _ := expr.Text(out)
		return s
	}

	if r.field.Program() == nil && !validJSON(body) {
		return unreadable("the status answer is not JSON")
	}
	status, present, err := r.field.Read(ctx, ans)
	switch {
	case err != nil:
		return unreadable("reading the status (%s) failed: %v", r.field, a.redactor.Redact(err.Error()))
	case !present && r.field.Program() != nil:
		return unreadable("the status expression %s gives no value", r.field)
	case !present && r.field.IsNull(ans):
		return unreadable("the status field %q is null, not a string or number", r.field)
	case !present:
		return unreadable("the status answer has no field %q", r.field)
	}
	rawStatus, kind := scalarText(status)
	if kind != "" {
		return unreadable("the status field %q is %s, not a string or number", r.field, kind)
	}
	msg := text("status.message", r.message)

	st, known := t.states[rawStatus]
	if !known {
		a.logUnmapped(t, rawStatus)
		a.traceText(t.status, "rule", fmt.Sprintf("status.field %s → %q, which status.states does not map", r.field, a.redactor.Clean(rawStatus, 100)))
		return adapters.Observation{Err: unmappedState(t, rawStatus, a.redactor.Clean)}
	}
	var o adapters.Observation
	o.State = st
	o.Message = firstNonEmpty(msg, rawStatus)
	a.traceText(t.status, "rule", fmt.Sprintf("status.field %s → %q → %s", r.field, a.redactor.Clean(rawStatus, 100), st))
	o.Message = a.redactor.Clean(o.Message, maxMessage)

	if r.hasProgress {
		if done, ok := number(read("status.progress.done", r.progressDone)); ok {
			o.Progress = &adapters.Progress{Done: done}
			if total, ok := number(read("status.progress.total", r.progressTotal)); ok {
				o.Progress.Total = total
			}
		}
	}

	if o.State.Terminal() && !r.finishedAt.IsZero() {
		if at, err := time.Parse(time.RFC3339Nano, text("status.finished_at", r.finishedAt)); err == nil {
			o.FinishedAt = at
		}
	}
	switch o.State {
	case adapters.StateSucceeded:
		o.Result = a.result(r, read)
		if o.Result == nil {
			o.Result = &adapters.Result{Text: fmt.Sprintf("Job %s succeeded.", ref.ID)}
		}
	case adapters.StateToolError:
		o.Result = a.result(r, read)
		if o.Result == nil {
			o.Result = &adapters.Result{}
		}
		if o.Result.Text == "" {
			o.Result.Text = firstNonEmpty(a.redactor.Redact(msg), fmt.Sprintf("Job %s failed.", ref.ID))
		}
	case adapters.StateCancelled:
		o.Result = a.result(r, read)
	case adapters.StateFailed:
		o.Error = &adapters.JobError{Code: defaultErrorCode}
		if r.hasError {
			if c, ok := number(read("status.error.code", r.errorCode)); ok {
				o.Error.Code = int(c)
			}
			o.Error.Message = a.redactor.Clean(text("status.error.message", r.errorMessage), maxMessage)
		}
		if o.Error.Message == "" {
			o.Error.Message = firstNonEmpty(o.Message, fmt.Sprintf("job %s failed", ref.ID))
		}
	case adapters.StateInputRequired:
		list, ok, err := r.inputRequests.ReadJSON(ctx, ans)
		if err != nil {
			a.log.Warn("reading the questions failed", "tool", t.name, "job", ref.ID, "error", a.redactor.Redact(err.Error()))
		}
		if ok {
			o.InputRequests = a.inputRequests(t, ref, list)
		}
	}

	vars := ans.Vars
	for _, l := range t.links {
		u, _, err := l.t.Render(ctx, vars, linkPart, nil)
		if err != nil {
			a.log.Warn("skipping link", "tool", t.name, "job", ref.ID, "link", l.title, "error", err)
			continue
		}
		o.Links = append(o.Links, adapters.Link{Title: l.title, URL: u})
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), a.now()); ok && d > 0 {
		o.RetryAfter = d
	}
	return o
}

// show formats a reading for a trace.
func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	s, _ := expr.Text(v)
	return s
}

// number returns a reading that is a number, or a string holding one.
func number(v any, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}

// result reads the job's output, or returns nil when the answer has none.
func (a *Adapter) result(r *statusReads, read func(string, expr.Value) (any, bool)) *adapters.Result {
	if !r.hasResult {
		return nil
	}
	var res adapters.Result
	if t, ok := read("status.result.text", r.resultText); ok {
		s, _ := expr.Text(t)
		res.Text = a.redactor.Redact(s)
	}
	if s, ok := read("status.result.structured", r.resultStructured); ok {
		if m, isMap := s.(map[string]any); isMap {
			res.Structured = m
		} else {
			res.Structured = map[string]any{"value": s}
		}
		if res.Text == "" {
			b, _ := json.Marshal(s)
			res.Text = a.redactor.Redact(string(b))
		}
	}
	if res.Text == "" && res.Structured == nil {
		return nil
	}
	return &res
}

// inputRequests reads the outstanding questions: a JSON array of
// {"key", "message", "schema"}. A schema is passed on as the backend wrote
// it (its properties in their order).
func (a *Adapter) inputRequests(t *tool, ref adapters.JobRef, list json.RawMessage) map[string]adapters.InputRequest {
	var qs []struct {
		Key     any             `json:"key"`
		Message any             `json:"message"`
		Schema  json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(list, &qs) != nil {
		return nil
	}
	reqs := map[string]adapters.InputRequest{}
	for _, q := range qs {
		key, _ := scalarText(expr.Numbers(q.Key))
		if key == "" {
			a.log.Warn("skipping a question without a key", "tool", t.name, "job", ref.ID)
			continue
		}
		schema := emptySchema
		if s := bytes.TrimSpace(q.Schema); len(s) > 0 && s[0] == '{' {
			schema = json.RawMessage(s)
		}
		msg, _ := expr.Text(q.Message)
		reqs[key] = adapters.InputRequest{
			Message: a.redactor.Clean(msg, maxMessage),
			Schema:  schema,
		}
	}
	return reqs
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// maxLoggedUnmapped bounds the unmapped status values logged, so that a
// backend reporting ever new values does not grow the memory of them.
const maxLoggedUnmapped = 1000

// logUnmapped logs a status value states: does not map, once per tool and
// value: it is the catalog's mistake, told to the caller on every poll.
func (a *Adapter) logUnmapped(t *tool, value string) {
	key := t.name + "\x00" + value
	if a.unmappedLogged.Load() >= maxLoggedUnmapped {
		return
	}
	if _, seen := a.unmapped.LoadOrStore(key, true); seen {
		return
	}
	a.unmappedLogged.Add(1)
	a.log.Warn("catalog problem: the backend reports a status value that status.states does not map",
		"tool", t.name, "status", a.redactor.Clean(value, 100), "mapped", strings.Join(t.mappedValues(), ", "))
}
