package githubactions

import (
	"errors"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// The scopes of the job block's templates: workflow inputs see the tool
// call's arguments and the correlation ID, the ref only the arguments.
var (
	inputScope = expr.Scope{Vars: []string{expr.Args, expr.CorrelationID}}
	refScope   = expr.Scope{
		Vars:    []string{expr.Args},
		Missing: map[string]string{expr.CorrelationID: "the ref names a branch or tag; only inputs may carry the correlation ID"},
	}
)

// parseField parses the template of the field at path in scope; its error
// is an [adapters.FieldError] pointing inside the value when the position
// of the mistake is known.
func parseField(path, v string, scope expr.Scope) (expr.Template, error) {
	t, err := expr.ParseTemplate(v, scope)
	if err != nil {
		var e *expr.Error
		if errors.As(err, &e) {
			return expr.Template{}, &adapters.FieldError{Path: path, Offset: e.Offset, Err: err}
		}
		return expr.Template{}, &adapters.FieldError{Path: path, Err: err}
	}
	return t, nil
}

// vars are the values the templates of one submission see.
func vars(req adapters.StartRequest) expr.Vars {
	return expr.CallVars(req.Arguments, req.CorrelationID)
}

// envRef returns NAME when s is exactly one ${NAME} reference.
func envRef(s string) (string, bool) {
	name, ok := strings.CutPrefix(strings.TrimSpace(s), "${")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, "}")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return "", false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return "", false
		}
	}
	return name, true
}
