package githubactions

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Placeholder names.
const (
	argsPrefix      = "args."
	phCorrelationID = "correlation_id"
)

// template is a parsed ref or input value: literal text and {placeholders}.
type template []segment

// segment is literal text or, when ph is set, a placeholder.
type segment struct {
	lit string
	ph  string
}

// parseTemplate splits s into text and placeholders. A placeholder is "{name}"
// where name consists of letters, digits and "_.-"; other braces are text
// (so a workflow expression such as ${{ ... }} passes through).
func parseTemplate(s string) template {
	var t template
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '{' {
			if end := strings.IndexByte(s[i:], '}'); end > 1 && isName(s[i+1:i+end]) && (i == 0 || s[i-1] != '$' && s[i-1] != '{') {
				if lit.Len() > 0 {
					t = append(t, segment{lit: lit.String()})
					lit.Reset()
				}
				t = append(t, segment{ph: s[i+1 : i+end]})
				i += end + 1
				continue
			}
		}
		lit.WriteByte(s[i])
		i++
	}
	if lit.Len() > 0 {
		t = append(t, segment{lit: lit.String()})
	}
	return t
}

// check reports unknown placeholders; {correlation_id} is allowed only with
// correlation set.
func (t template) check(correlation bool) error {
	var errs []error
	for _, seg := range t {
		switch {
		case seg.ph == "":
		case strings.HasPrefix(seg.ph, argsPrefix) && validArgName(strings.TrimPrefix(seg.ph, argsPrefix)):
		case seg.ph == phCorrelationID && correlation:
		case seg.ph == phCorrelationID:
			errs = append(errs, errors.New("{correlation_id} is not available here"))
		default:
			errs = append(errs, fmt.Errorf("unknown placeholder {%s} (use {args.NAME} or {correlation_id})", seg.ph))
		}
	}
	return errors.Join(errs...)
}

// render fills the template. missing is true when the template is exactly
// one placeholder of an argument the caller left out; inside a longer
// template an absent argument renders as "".
func (t template) render(args map[string]any, correlationID string) (s string, missing bool, err error) {
	lookup := func(ph string) (string, bool, error) {
		if ph == phCorrelationID {
			return correlationID, true, nil
		}
		v, ok := args[strings.TrimPrefix(ph, argsPrefix)]
		if !ok || v == nil {
			return "", false, nil
		}
		if s, isString := v.(string); isString {
			return s, true, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", false, fmt.Errorf("formatting argument %s: %w", strings.TrimPrefix(ph, argsPrefix), err)
		}
		return string(b), true, nil
	}
	if len(t) == 1 && t[0].ph != "" {
		v, ok, err := lookup(t[0].ph)
		return v, !ok && err == nil, err
	}
	var b strings.Builder
	for _, seg := range t {
		if seg.ph == "" {
			b.WriteString(seg.lit)
			continue
		}
		v, _, err := lookup(seg.ph)
		if err != nil {
			return "", false, err
		}
		b.WriteString(v)
	}
	return b.String(), false, nil
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

func isName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}

func validArgName(s string) bool {
	return isName(s) && !strings.Contains(s, ".")
}
