package awsbatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Placeholder names.
const (
	argsPrefix      = "args."
	phCorrelationID = "correlation_id"
)

// A template is a string with {placeholders}: {args.NAME} (a tool argument)
// and {correlation_id}. Braces that do not enclose a name are literal text.
type template []segment

// segment is literal text or, when ph is set, a placeholder.
type segment struct {
	lit string
	ph  string
}

// parseTemplate splits s into literal text and placeholders. A placeholder is
// "{name}" where name consists of letters, digits and "_.-".
func parseTemplate(s string) template {
	var t template
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '{' {
			if end := strings.IndexByte(s[i:], '}'); end > 1 && isName(s[i+1:i+end]) {
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

func isName(s string) bool {
	for _, r := range s {
		if !isNameRune(r) {
			return false
		}
	}
	return s != ""
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}

// placeholders lists the template's placeholder names in order.
func (t template) placeholders() []string {
	var names []string
	for _, seg := range t {
		if seg.ph != "" {
			names = append(names, seg.ph)
		}
	}
	return names
}

// hasPlaceholders reports whether the template uses any placeholder.
func (t template) hasPlaceholders() bool { return len(t.placeholders()) > 0 }

// check reports the first placeholder that is not {args.NAME} or
// {correlation_id}.
func (t template) check() error {
	for _, name := range t.placeholders() {
		if name == phCorrelationID {
			continue
		}
		arg, ok := strings.CutPrefix(name, argsPrefix)
		if !ok {
			return fmt.Errorf("unknown placeholder {%s} (use {args.NAME} or {correlation_id})", name)
		}
		if arg == "" || strings.Contains(arg, ".") {
			return fmt.Errorf("placeholder {%s} has an invalid argument name", name)
		}
	}
	return nil
}

// values are what placeholders stand for when a job is submitted.
type values struct {
	args          map[string]any
	correlationID string
}

// render fills the placeholders. An argument that is absent renders as empty
// text; strings render as themselves, numbers in their shortest form, and
// objects and arrays as JSON.
func (t template) render(v values) string {
	var b strings.Builder
	for _, seg := range t {
		switch {
		case seg.ph == "":
			b.WriteString(seg.lit)
		case seg.ph == phCorrelationID:
			b.WriteString(v.correlationID)
		default:
			b.WriteString(argText(v.args[strings.TrimPrefix(seg.ph, argsPrefix)]))
		}
	}
	return b.String()
}

func argText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// argNames adds the NAME of each {args.NAME} in t to seen.
func (t template) argNames(seen map[string]bool) {
	for _, name := range t.placeholders() {
		if arg, ok := strings.CutPrefix(name, argsPrefix); ok {
			seen[arg] = true
		}
	}
}
