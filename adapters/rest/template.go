package rest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// Placeholder names.
const (
	argsPrefix      = "args."
	phJobID         = "job.id"
	phJobLocation   = "job.location"
	phCorrelationID = "correlation_id"
	phAnswers       = "answers"
	phBaseURL       = "base_url"
)

// The scopes of the places templates and expressions are written in.
var (
	// notYet explains the names a call made before the job exists cannot use.
	notYet = map[string]string{
		expr.Job:     "the job does not exist yet",
		expr.Answers: "{answers} is only known in the respond body",
		expr.BaseURL: "{base_url} is only known in links",
		expr.Body:    "body is only known when an answer is read",
		expr.Status:  "status is only known when an answer is read",
		expr.Headers: "headers are only known when an answer is read",
	}
	// startScope: the start and find calls.
	startScope = expr.Scope{Vars: []string{expr.Args, expr.CorrelationID}, Missing: notYet}
	// jobScope: calls about a job that exists (status, cancel, respond, queue).
	jobScope = expr.Scope{Vars: []string{expr.Args, expr.CorrelationID, expr.Job}, Missing: notYet}
)

// readScope is the scope of a rule reading an answer to a call made in s.
func readScope(s expr.Scope) expr.Scope {
	return s.With(expr.Body, expr.Status, expr.Headers)
}

// headerScope is s for header values, which may reference secrets.
func headerScope(s expr.Scope) expr.Scope {
	h := s.With()
	h.Secrets = true
	return h
}

// fieldErr turns a template or expression error into a field error,
// keeping the position of the mistake inside the value.
func fieldErr(path string, err error) error {
	var e *expr.Error
	if errors.As(err, &e) {
		return fielderr.New(path, e.Offset, err)
	}
	return adapters.Fieldf(path, "%v", err)
}

// values are what placeholders stand for in one request.
type values struct {
	args          map[string]any
	jobID         string
	location      string
	correlationID string
	answers       map[string]adapters.Answer
	baseURL       string
	queuedAt      *time.Time // set while the reference names a queue item
}

// vars returns the values as expression variables.
func (v *values) vars() expr.Vars {
	out := expr.CallVars(v.args, v.correlationID)
	out[expr.BaseURL] = v.baseURL
	if v.jobID != "" {
		job := map[string]any{"id": v.jobID}
		if v.location != "" {
			job["location"] = v.location
		}
		out[expr.Job] = job
	}
	if v.answers != nil {
		m := make(map[string]any, len(v.answers))
		for k, a := range v.answers {
			entry := map[string]any{"action": a.Action}
			if a.Content != nil {
				entry["content"] = expr.Numbers(a.Content)
			}
			m[k] = entry
		}
		out[expr.Answers] = m
	}
	return out
}

// answerOf is what a rule reads an answer from: the body (decoded JSON, or
// the text when the answer is not JSON), the HTTP status, the headers with
// lower-case names, and the request's values.
func answerOf(v *values, status int, h map[string][]string, body []byte) expr.Answer {
	vars := v.vars()
	if decoded, err := expr.DecodeJSON(body); err == nil {
		vars[expr.Body] = decoded
	} else {
		vars[expr.Body] = string(body)
	}
	vars[expr.Status] = int64(status)
	headers := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	vars[expr.Headers] = headers
	return expr.Answer{Raw: body, Vars: vars}
}

// escaping

func raw(_, value string) (string, error) { return value, nil }

// pathSegment escapes value as exactly one path segment. Empty values and
// dot segments are refused: they would change which resource is addressed.
func pathSegment(name, value string) (string, error) {
	switch value {
	case "":
		return "", fmt.Errorf("placeholder %s is empty in a path", name)
	case ".", "..":
		return "", fmt.Errorf("placeholder %s is a dot segment in a path", name)
	}
	return url.PathEscape(value), nil
}

// linkPart escapes job values and arguments as path segments and keeps
// {base_url} and {job.location}, which are URLs already, as they are.
func linkPart(name, value string) (string, error) {
	if name == "{"+phBaseURL+"}" || name == "{"+phJobLocation+"}" {
		return value, nil
	}
	return url.PathEscape(value), nil
}

// A body is compiled into a tree of these: maps, lists, templates for
// strings, and literal scalars.
type bodyNode any

// compileBody parses the string leaves of a body as templates.
func compileBody(path string, v any, s expr.Scope) (bodyNode, []error) {
	switch v := v.(type) {
	case string:
		t, err := expr.ParseTemplate(v, s)
		if err != nil {
			return nil, []error{fieldErr(path, err)}
		}
		if lit, ok := t.Literal(); ok {
			return lit, nil
		}
		return t, nil
	case map[string]any:
		out := make(map[string]bodyNode, len(v))
		var errs []error
		for _, k := range sortedKeys(v) {
			n, e := compileBody(path+"."+k, v[k], s)
			errs = append(errs, e...)
			out[k] = n
		}
		return out, errs
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				return nil, []error{adapters.Fieldf(path, "key %v is not a string", k)}
			}
			m[ks] = e
		}
		return compileBody(path, m, s)
	case []any:
		out := make([]bodyNode, len(v))
		var errs []error
		for i, e := range v {
			n, es := compileBody(path+"."+strconv.Itoa(i), e, s)
			errs = append(errs, es...)
			out[i] = n
		}
		return out, errs
	case nil, bool, int, int64, uint64, float64:
		return v, nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	}
	return nil, []error{adapters.Fieldf(path, "unsupported value of type %T", v)}
}

// renderBody builds a request body from its compiled tree. A string that is
// exactly one placeholder or expression is replaced by the value with its
// JSON type; a map entry whose value is absent is left out.
func renderBody(ctx context.Context, node bodyNode, vars expr.Vars) (out any, present bool, err error) {
	switch n := node.(type) {
	case expr.Template:
		return n.Value(ctx, vars)
	case map[string]bodyNode:
		m := make(map[string]any, len(n))
		for k, e := range n {
			r, ok, err := renderBody(ctx, e, vars)
			if err != nil {
				return nil, false, err
			}
			if ok {
				m[k] = r
			}
		}
		return m, true, nil
	case []bodyNode:
		l := make([]any, len(n))
		for i, e := range n {
			r, _, err := renderBody(ctx, e, vars)
			if err != nil {
				return nil, false, err
			}
			l[i] = r
		}
		return l, true, nil
	}
	return node, true, nil
}

// bodyTemplates lists the templates of a compiled body.
func bodyTemplates(node bodyNode) []expr.Template {
	switch n := node.(type) {
	case expr.Template:
		return []expr.Template{n}
	case map[string]bodyNode:
		var out []expr.Template
		for _, k := range sortedKeys(n) {
			out = append(out, bodyTemplates(n[k])...)
		}
		return out
	case []bodyNode:
		var out []expr.Template
		for _, e := range n {
			out = append(out, bodyTemplates(e)...)
		}
		return out
	}
	return nil
}
