package awsbatch

import (
	"context"
	"errors"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// scope is what the templates of a job block may use: the tool call's
// arguments and the correlation ID.
var scope = expr.Scope{Vars: []string{expr.Args, expr.CorrelationID}}

// parseField parses the template of the field at path; its error is an
// [adapters.FieldError] pointing inside the value when the position of the
// mistake is known.
func parseField(path, v string) (expr.Template, error) {
	t, err := expr.ParseTemplate(v, scope)
	if err != nil {
		return expr.Template{}, fieldError(path, err)
	}
	return t, nil
}

func fieldError(path string, err error) error {
	var e *expr.Error
	if errors.As(err, &e) {
		return &adapters.FieldError{Path: path, Offset: e.Offset, Err: err}
	}
	return &adapters.FieldError{Path: path, Err: err}
}

// templates are the parsed templates of a job block, by source text, so
// that a submission renders without parsing.
type templates map[string]expr.Template

// compileTemplates parses every template of a valid job block.
func compileTemplates(c *JobConfig) (templates, error) {
	ts := templates{}
	for _, s := range c.templates() {
		if _, ok := ts[s]; ok {
			continue
		}
		t, err := expr.ParseTemplate(s, scope)
		if err != nil {
			return nil, err
		}
		ts[s] = t
	}
	return ts, nil
}

// render fills the template src for one submission. An absent argument (or
// an expression giving null) renders as empty text.
func (ts templates) render(ctx context.Context, src string, v expr.Vars) (string, error) {
	t, ok := ts[src]
	if !ok {
		var err error
		if t, err = expr.ParseTemplate(src, scope); err != nil {
			return "", err
		}
	}
	s, _, err := t.Render(ctx, v, expr.Raw, nil)
	return s, err
}

// vars are the values the templates of one submission see.
func vars(req adapters.StartRequest) expr.Vars {
	return expr.CallVars(req.Arguments, req.CorrelationID)
}

// Console link placeholders.
const (
	phRegion = "region"
	phJobID  = "job_id"
)

// consoleLink is a parsed console_url: literal text and the placeholders
// {region} and {job_id}, which are not template variables of the job block
// (the link is made for a job that exists, outside any tool call).
type consoleLink []consoleSeg

// consoleSeg is literal text or, when ph is set, a placeholder.
type consoleSeg struct {
	lit, ph string
}

// parseConsoleLink splits s into text and {name} placeholders (name in
// letters, digits and "_.-"); other braces are text.
func parseConsoleLink(s string) consoleLink {
	var l consoleLink
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '{' {
			if end := strings.IndexByte(s[i:], '}'); end > 1 && isName(s[i+1:i+end]) {
				if lit.Len() > 0 {
					l = append(l, consoleSeg{lit: lit.String()})
					lit.Reset()
				}
				l = append(l, consoleSeg{ph: s[i+1 : i+end]})
				i += end + 1
				continue
			}
		}
		lit.WriteByte(s[i])
		i++
	}
	if lit.Len() > 0 {
		l = append(l, consoleSeg{lit: lit.String()})
	}
	return l
}

func isName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}
