package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
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

// A template is a parsed string: literal text, {placeholders} and, in header
// values, ${ENV} references.
type template []segment

// segment is one piece of a template; exactly one of its fields is set, or
// none for an empty literal.
type segment struct {
	lit string
	ph  string // placeholder name, e.g. "args.count"
	env string // environment variable name (header values only)
}

// parseTemplate splits s into literal text and placeholders. A placeholder is
// "{name}" where name consists of letters, digits and "_.-"; other braces are
// literal text. With env set, "${NAME}" is an environment reference;
// otherwise it is literal text (so "${HOME}" in a body stays as written).
func parseTemplate(s string, env bool) template {
	var t template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "${") {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				lit.WriteString(s[i:])
				break
			}
			name := s[i+2 : i+end]
			if env && validEnvName(name) {
				flush()
				t = append(t, segment{env: name})
			} else {
				lit.WriteString(s[i : i+end+1])
			}
			i += end + 1
			continue
		}
		if s[i] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end > 1 && isName(s[i+1:i+end]) {
				flush()
				t = append(t, segment{ph: s[i+1 : i+end]})
				i += end + 1
				continue
			}
		}
		lit.WriteByte(s[i])
		i++
	}
	flush()
	return t
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

// sole returns the placeholder name when the template is exactly one
// placeholder.
func (t template) sole() (string, bool) {
	if len(t) == 1 && t[0].ph != "" {
		return t[0].ph, true
	}
	return "", false
}

// resolveEnv replaces the template's ${NAME} references with their values.
// Its errors name the variable, never a value.
func (t template) resolveEnv(getenv func(string) (string, bool)) (template, error) {
	out := make(template, 0, len(t))
	for _, seg := range t {
		if seg.env == "" {
			out = append(out, seg)
			continue
		}
		v, ok := getenv(seg.env)
		if !ok {
			return nil, fmt.Errorf("environment variable %s is not set", seg.env)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("environment variable %s contains a line break or NUL", seg.env)
		}
		out = append(out, segment{lit: v})
	}
	return out, nil
}

// literal returns the template's text with placeholders written back as
// "{name}". It is used for backend headers, which take no placeholders.
func (t template) literal() string {
	var b strings.Builder
	for _, seg := range t {
		if seg.ph != "" {
			b.WriteString("{" + seg.ph + "}")
		}
		b.WriteString(seg.lit)
	}
	return b.String()
}

// checkEnvRefs reports a malformed ${...} reference in a header value without
// quoting the value.
func checkEnvRefs(s string) error {
	for i := 0; ; {
		j := strings.Index(s[i:], "${")
		if j < 0 {
			return nil
		}
		i += j
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return errors.New("unterminated ${ reference")
		}
		if name := s[i+2 : i+end]; !validEnvName(name) {
			return fmt.Errorf("${%s} is not a valid environment variable reference", name)
		}
		i += end + 1
	}
}

// callPlaceholders lists every placeholder a call template uses.
func callPlaceholders(c *Call) []string {
	names := parseTemplate(c.Path, false).placeholders()
	for _, v := range c.Query {
		names = append(names, parseTemplate(v, false).placeholders()...)
	}
	for _, v := range c.Headers {
		names = append(names, parseTemplate(v, true).placeholders()...)
	}
	return appendBodyPlaceholders(names, c.Body)
}

func appendBodyPlaceholders(names []string, v any) []string {
	switch v := v.(type) {
	case string:
		names = append(names, parseTemplate(v, false).placeholders()...)
	case map[string]any:
		for _, e := range v {
			names = appendBodyPlaceholders(names, e)
		}
	case map[any]any:
		for _, e := range v {
			names = appendBodyPlaceholders(names, e)
		}
	case []any:
		for _, e := range v {
			names = appendBodyPlaceholders(names, e)
		}
	}
	return names
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isNameRune(r) {
			return false
		}
	}
	return true
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// values are what placeholders stand for in one request.
type values struct {
	args          map[string]any
	jobID         string
	location      string
	correlationID string
	answers       map[string]adapters.Answer
	baseURL       string
}

// lookup returns the value of placeholder name. ok is false when the value is
// absent (an optional argument the caller left out).
func (v *values) lookup(name string) (val any, ok bool, err error) {
	switch {
	case strings.HasPrefix(name, argsPrefix):
		val, ok = v.args[strings.TrimPrefix(name, argsPrefix)]
		return val, ok, nil
	case name == phJobID:
		return v.jobID, true, nil
	case name == phJobLocation:
		if v.location == "" {
			return nil, false, errors.New("the job has no location")
		}
		return v.location, true, nil
	case name == phCorrelationID:
		return v.correlationID, true, nil
	case name == phBaseURL:
		return v.baseURL, true, nil
	case name == phAnswers:
		m := make(map[string]any, len(v.answers))
		for k, a := range v.answers {
			entry := map[string]any{"action": a.Action}
			if a.Content != nil {
				entry["content"] = a.Content
			}
			m[k] = entry
		}
		return m, true, nil
	}
	return nil, false, fmt.Errorf("unknown placeholder {%s}", name)
}

// text formats a placeholder value for interpolation into a string: strings
// as they are, anything else as JSON.
func text(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("formatting a value of type %T: %w", v, err)
	}
	return string(b), nil
}

// escaper turns a placeholder's text into what the rendered string holds.
type escaper func(name, value string) (string, error)

func raw(_, value string) (string, error) { return value, nil }

// pathSegment escapes value as exactly one path segment. Empty values and
// dot segments are refused: they would change which resource is addressed.
func pathSegment(name, value string) (string, error) {
	switch value {
	case "":
		return "", fmt.Errorf("placeholder {%s} is empty in a path", name)
	case ".", "..":
		return "", fmt.Errorf("placeholder {%s} is a dot segment in a path", name)
	}
	return url.PathEscape(value), nil
}

// linkPart escapes job values and arguments as path segments and keeps
// {base_url} and {job.location}, which are URLs already, as they are.
func linkPart(name, value string) (string, error) {
	if name == phBaseURL || name == phJobLocation {
		return value, nil
	}
	return url.PathEscape(value), nil
}

// render interpolates the template. missing reports a template that is
// exactly one placeholder whose value is absent; an absent argument inside a
// longer template renders as the empty string.
func (t template) render(v *values, esc escaper) (s string, missing bool, err error) {
	if name, ok := t.sole(); ok {
		val, ok, err := v.lookup(name)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", true, nil
		}
		str, err := text(val)
		if err != nil {
			return "", false, err
		}
		s, err = esc(name, str)
		return s, false, err
	}
	var b strings.Builder
	for _, seg := range t {
		if seg.ph == "" {
			b.WriteString(seg.lit)
			continue
		}
		val, _, err := v.lookup(seg.ph)
		if err != nil {
			return "", false, err
		}
		str, err := text(val)
		if err != nil {
			return "", false, err
		}
		str, err = esc(seg.ph, str)
		if err != nil {
			return "", false, err
		}
		b.WriteString(str)
	}
	return b.String(), false, nil
}

// renderBody builds a request body from its structured template. A string
// that is exactly one placeholder is replaced by the value with its JSON type;
// a map entry whose value is an absent argument is left out.
func renderBody(node any, v *values) (out any, present bool, err error) {
	switch n := node.(type) {
	case string:
		t := parseTemplate(n, false)
		if name, ok := t.sole(); ok {
			val, ok, err := v.lookup(name)
			return val, ok, err
		}
		s, _, err := t.render(v, raw)
		return s, true, err
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, e := range n {
			r, ok, err := renderBody(e, v)
			if err != nil {
				return nil, false, err
			}
			if ok {
				m[k] = r
			}
		}
		return m, true, nil
	case map[any]any:
		m := make(map[string]any, len(n))
		for k, e := range n {
			r, ok, err := renderBody(e, v)
			if err != nil {
				return nil, false, err
			}
			if ok {
				m[fmt.Sprint(k)] = r
			}
		}
		return m, true, nil
	case []any:
		l := make([]any, len(n))
		for i, e := range n {
			r, _, err := renderBody(e, v)
			if err != nil {
				return nil, false, err
			}
			l[i] = r
		}
		return l, true, nil
	}
	return node, true, nil
}
