package expr

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// Value is a configuration field that reads a value out of an answer: a
// JSON path (gjson syntax) or, when the field starts with "=", an
// expression.
type Value struct {
	path string
	prg  *Program
}

// ParseValue parses a field. An expression is compiled in scope and must
// give want (or a value whose type is only known at run time). An Error's
// Offset counts from the start of s, "=" included.
func ParseValue(s string, scope Scope, want Kind) (Value, error) {
	src, isExpr := strings.CutPrefix(strings.TrimLeft(s, " \t"), "=")
	if !isExpr {
		return Value{path: s}, nil
	}
	p, err := Compile(src, scope, want)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Offset > 0 {
			e.Offset += len(s) - len(src)
		}
		return Value{}, err
	}
	return Value{prg: p}, nil
}

// IsZero reports whether the field was left empty.
func (v Value) IsZero() bool { return v.path == "" && v.prg == nil }

// Program returns the expression, or nil for a JSON path.
func (v Value) Program() *Program { return v.prg }

// String returns the field as written (an expression with its "=").
func (v Value) String() string {
	if v.prg != nil {
		return "=" + v.prg.String()
	}
	return v.path
}

// Answer is what a value is read from: an answer's raw body, and the
// variables of the reading (body decoded, status, headers, and the job's).
type Answer struct {
	Raw  []byte
	Vars Vars
}

// Read returns the value. ok is false when it is absent: the path matches
// nothing or JSON null, or the expression gives null or reads a field the
// answer does not have.
func (v Value) Read(ctx context.Context, a Answer) (val any, ok bool, err error) {
	switch {
	case v.prg != nil:
		out, err := v.prg.Eval(ctx, a.Vars)
		if err != nil {
			if MissingField(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		return out, out != nil, nil
	case v.path == "":
		return nil, false, nil
	}
	r := gjson.GetBytes(a.Raw, v.path)
	if !r.Exists() || r.Type == gjson.Null {
		return nil, false, nil
	}
	switch r.Type {
	case gjson.String:
		return r.Str, true, nil
	case gjson.True, gjson.False:
		return r.Bool(), true, nil
	case gjson.Number:
		return Numbers(json.Number(r.Raw)), true, nil
	}
	out, err := DecodeJSON([]byte(r.Raw))
	if err != nil {
		// gjson results such as "#" counts are not raw JSON documents.
		return r.Value(), true, nil
	}
	return out, true, nil
}

// MissingField reports whether an evaluation error is a read of an absent
// map key or list index: the value is absent rather than the answer wrong.
func MissingField(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such key") || strings.Contains(msg, "no such attribute") ||
		strings.Contains(msg, "index out of range")
}

// IsNull reports whether the value is a JSON path that the answer has,
// holding null (Read reports it absent).
func (v Value) IsNull(a Answer) bool {
	if v.prg != nil || v.path == "" {
		return false
	}
	r := gjson.GetBytes(a.Raw, v.path)
	return r.Exists() && r.Type == gjson.Null
}

// ReadJSON is Read returning the value as JSON. For a JSON path it is the
// answer's own text, so that the order of object members is kept.
func (v Value) ReadJSON(ctx context.Context, a Answer) (json.RawMessage, bool, error) {
	if v.prg == nil && v.path != "" {
		r := gjson.GetBytes(a.Raw, v.path)
		if !r.Exists() || r.Type == gjson.Null {
			return nil, false, nil
		}
		if r.Type == gjson.JSON {
			return json.RawMessage(r.Raw), true, nil
		}
	}
	val, ok, err := v.Read(ctx, a)
	if err != nil || !ok {
		return nil, ok, err
	}
	b, err := json.Marshal(val)
	return b, err == nil, err
}
