package expr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// ShellQuote makes s one word for a POSIX shell: it is wrapped in single
// quotes, inside which the shell expands nothing, and each single quote in s
// ends the quoting, is written escaped (\') and starts it again. So "$(id)"
// stays the text "$(id)".
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// JSONQuote makes s a JSON string literal, quotes included, for JSON written
// inside a string value.
func JSONQuote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// Text formats a value for interpolation into text: nil as "", strings as
// they are, numbers in their shortest form, booleans as true/false, lists
// and maps as JSON.
func Text(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int:
		return strconv.Itoa(v), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case json.Number:
		return v.String(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("formatting a value of type %T: %w", v, err)
	}
	return string(b), nil
}

// quoteFunctions declares shell_quote, json_quote and text.
func quoteFunctions() cel.EnvOption {
	unary := func(name string, f func(string) string) cel.EnvOption {
		return cel.Function(name,
			cel.Overload(name+"_dyn", []*cel.Type{cel.DynType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					n, err := native(v)
					if err != nil {
						return types.NewErr("%s: %v", name, err)
					}
					s, err := Text(n)
					if err != nil {
						return types.NewErr("%s: %v", name, err)
					}
					return types.String(f(s))
				})))
	}
	return cel.Lib(quoteLib{opts: []cel.EnvOption{
		unary("shell_quote", ShellQuote),
		unary("json_quote", JSONQuote),
		unary("text", func(s string) string { return s }),
	}})
}

type quoteLib struct{ opts []cel.EnvOption }

func (l quoteLib) CompileOptions() []cel.EnvOption     { return l.opts }
func (l quoteLib) ProgramOptions() []cel.ProgramOption { return nil }
