package rest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// scriptKeys are body keys whose values a backend runs as commands.
var scriptKeys = []string{"command", "cmd", "script", "shell", "entrypoint", "run", "commands"}

// Warnings reports, as field errors, what is allowed but probably wrong:
//
//   - an argument interpolated unquoted into a body string that a backend's
//     shell runs (a string starting with "#!", or the value of a key named
//     command, cmd, script, shell, entrypoint, run or commands, or an
//     element of such a list). The caller's text would run as code there
//     ("$(id)" runs id); {= shell_quote(args.NAME)} keeps it one word of
//     data.
//   - a status.states table that maps no value to succeeded: no job of the
//     tool could ever end successfully, which is most likely a forgotten
//     or misspelt success value.
func (c *JobConfig) Warnings() error {
	var errs []error
	if len(c.Status.States) > 0 && !slices.Contains(slices.Collect(maps.Values(c.Status.States)), adapters.StateSucceeded.String()) {
		errs = append(errs, adapters.Fieldf("status.states",
			"no status value maps to succeeded, so no job of this tool can end successfully; map the backend's success value (for example DONE: succeeded)"))
	}
	for _, nc := range []struct {
		name string
		call *Call
	}{{"start", &c.Start}, {"respond", c.Respond}, {"cancel", c.Cancel}} {
		if nc.call == nil || nc.call.Body == nil {
			continue
		}
		errs = append(errs, scriptWarnings(nc.name+".body", "", nc.call.Body, false)...)
	}
	return errors.Join(errs...)
}

func scriptWarnings(path, key string, v any, inScript bool) []error {
	switch v := v.(type) {
	case string:
		script := inScript || strings.HasPrefix(strings.TrimSpace(v), "#!") || slices.Contains(scriptKeys, strings.ToLower(key))
		if !script {
			return nil
		}
		t, err := expr.ParseTemplate(v, startScope.With(expr.Job, expr.Answers))
		if err != nil {
			return nil // Validate reports it
		}
		var errs []error
		for _, seg := range t.Segments() {
			switch {
			case strings.HasPrefix(seg.Name, argsPrefix):
				name := strings.TrimPrefix(seg.Name, argsPrefix)
				errs = append(errs, unquoted(path, seg.Offset, name))
			case seg.Expr != nil && seg.Expr.Uses(expr.Args) && !quotedExpr(seg.Expr.String()):
				names, _ := seg.Expr.ArgNames()
				errs = append(errs, unquoted(path, seg.Offset, strings.Join(names, ", ")))
			}
		}
		return errs
	case map[string]any:
		var errs []error
		for _, k := range sortedKeys(v) {
			errs = append(errs, scriptWarnings(path+"."+k, k, v[k], inScript)...)
		}
		return errs
	case map[any]any:
		var errs []error
		for k, e := range v {
			ks := fmt.Sprint(k)
			errs = append(errs, scriptWarnings(path+"."+ks, ks, e, inScript)...)
		}
		return errs
	case []any:
		var errs []error
		list := inScript || slices.Contains(scriptKeys, strings.ToLower(key))
		for i, e := range v {
			errs = append(errs, scriptWarnings(path+"."+strconv.Itoa(i), "", e, list)...)
		}
		return errs
	}
	return nil
}

// quotedExpr reports whether an expression's whole value is quoted.
func quotedExpr(src string) bool {
	s := strings.TrimSpace(src)
	return strings.HasPrefix(s, "shell_quote(") && strings.HasSuffix(s, ")")
}

func unquoted(path string, offset int, name string) error {
	what := "argument " + name
	if name == "" {
		what = "an argument"
	}
	return &adapters.FieldError{Path: path, Offset: offset, Err: fmt.Errorf(
		"%s is interpolated unquoted into a script: the backend's shell would run what the caller writes (\"$(id)\" runs id); write {= shell_quote(args.%s)}",
		what, firstWord(name))}
}

func firstWord(s string) string {
	if s == "" {
		return "NAME"
	}
	w, _, _ := strings.Cut(s, ",")
	return w
}
