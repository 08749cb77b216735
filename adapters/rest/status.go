package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/jobbridge/jobbridge/adapters"
)

// defaultErrorCode is the JSON-RPC code of a failed job without one
// (internal error).
const defaultErrorCode = -32603

// maxMessage bounds the status message the adapter passes on.
const maxMessage = 1000

// emptySchema is the requested schema of a question that has none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// observe reads a status answer. An unknown status value keeps the job
// working, with the raw value in the message, and is logged. An answer that
// is not JSON, or whose status field is missing or neither a string nor a
// number, is reported in the observation's Err, wrapping
// [adapters.ErrUnreadableStatus], with the HTTP status and an excerpt.
func (a *Adapter) observe(t *tool, ref adapters.JobRef, v *values, resp *http.Response, body []byte) adapters.Observation {
	cfg := &t.statusCfg
	unreadable := func(format string, args ...any) adapters.Observation {
		return adapters.Observation{Err: fmt.Errorf("polling job %s: %w", ref.ID,
			reasonf(adapters.ErrUnreadableStatus, "%s (HTTP %d; answer: %s)",
				fmt.Sprintf(format, args...), resp.StatusCode, a.excerpt(body)))}
	}
	if !gjson.ValidBytes(body) {
		return unreadable("the status answer is not JSON")
	}
	get := func(p string) gjson.Result {
		if p == "" {
			return gjson.Result{}
		}
		return gjson.GetBytes(body, p)
	}
	status := get(cfg.Field)
	if !status.Exists() {
		return unreadable("the status answer has no field %q", cfg.Field)
	}
	if kind := jsonKind(status); kind != "" {
		return unreadable("the status field %q is %s, not a string or number", cfg.Field, kind)
	}
	rawStatus := status.String()
	msg := get(cfg.Message).String()

	var o adapters.Observation
	st, known := t.states[rawStatus]
	if known {
		o.State = st
		o.Message = firstNonEmpty(msg, rawStatus)
	} else {
		a.log.Warn("unknown job status; keeping the task working",
			"tool", t.name, "job", ref.ID, "status", a.redactor.clean(rawStatus, 100))
		o.State = adapters.StateWorking
		o.Message = fmt.Sprintf("status %q", rawStatus)
		if msg != "" {
			o.Message += ": " + msg
		}
	}
	o.Message = a.redactor.clean(o.Message, maxMessage)

	if p := cfg.Progress; p != nil {
		if done := get(p.Done); done.Type == gjson.Number {
			o.Progress = &adapters.Progress{Done: done.Float()}
			if total := get(p.Total); total.Type == gjson.Number {
				o.Progress.Total = total.Float()
			}
		}
	}

	if o.State.Terminal() && cfg.FinishedAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, get(cfg.FinishedAt).String()); err == nil {
			o.FinishedAt = at
		}
	}
	switch o.State {
	case adapters.StateSucceeded:
		o.Result = a.result(cfg, get)
		if o.Result == nil {
			o.Result = &adapters.Result{Text: fmt.Sprintf("Job %s succeeded.", ref.ID)}
		}
	case adapters.StateToolError:
		o.Result = a.result(cfg, get)
		if o.Result == nil {
			o.Result = &adapters.Result{}
		}
		if o.Result.Text == "" {
			o.Result.Text = firstNonEmpty(a.redactor.redact(msg), fmt.Sprintf("Job %s failed.", ref.ID))
		}
	case adapters.StateCancelled:
		o.Result = a.result(cfg, get)
	case adapters.StateFailed:
		o.Error = &adapters.JobError{Code: defaultErrorCode}
		if e := cfg.Error; e != nil {
			if c := get(e.Code); c.Type == gjson.Number {
				o.Error.Code = int(c.Int())
			}
			o.Error.Message = a.redactor.clean(get(e.Message).String(), maxMessage)
		}
		if o.Error.Message == "" {
			o.Error.Message = firstNonEmpty(o.Message, fmt.Sprintf("job %s failed", ref.ID))
		}
	case adapters.StateInputRequired:
		o.InputRequests = a.inputRequests(t, ref, get(cfg.InputRequests))
	}

	for _, l := range t.links {
		u, _, err := l.t.render(v, linkPart)
		if err != nil {
			a.log.Warn("skipping link", "tool", t.name, "job", ref.ID, "link", l.title, "error", err)
			continue
		}
		o.Links = append(o.Links, adapters.Link{Title: l.title, URL: u})
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && d > 0 {
		o.RetryAfter = d
	}
	return o
}

// result reads the job's output, or returns nil when the answer has none.
func (a *Adapter) result(cfg *StatusConfig, get func(string) gjson.Result) *adapters.Result {
	if cfg.Result == nil {
		return nil
	}
	var r adapters.Result
	if t := get(cfg.Result.Text); t.Exists() && t.Type != gjson.Null {
		r.Text = a.redactor.redact(t.String())
	}
	if s := get(cfg.Result.Structured); s.Exists() && s.Type != gjson.Null {
		if s.IsObject() {
			_ = json.Unmarshal([]byte(s.Raw), &r.Structured) // s.Raw is valid JSON
		} else {
			r.Structured = map[string]any{"value": s.Value()}
		}
		if r.Text == "" {
			r.Text = a.redactor.redact(s.Raw)
		}
	}
	if r.Text == "" && r.Structured == nil {
		return nil
	}
	return &r
}

// inputRequests reads the outstanding questions: an array of
// {"key", "message", "schema"}.
func (a *Adapter) inputRequests(t *tool, ref adapters.JobRef, list gjson.Result) map[string]adapters.InputRequest {
	if !list.IsArray() {
		return nil
	}
	reqs := map[string]adapters.InputRequest{}
	for _, q := range list.Array() {
		key := q.Get("key").String()
		if key == "" {
			a.log.Warn("skipping a question without a key", "tool", t.name, "job", ref.ID)
			continue
		}
		schema := emptySchema
		if s := q.Get("schema"); s.IsObject() {
			schema = json.RawMessage(s.Raw)
		}
		reqs[key] = adapters.InputRequest{
			Message: a.redactor.clean(q.Get("message").String(), maxMessage),
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
