package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// roots are the first names of placeholders; braces around anything else
// are literal text.
var roots = []string{"path.", "query.", "header.", "form.", "body.", "job.", "items"}

// vars are what a template can see while one request is answered.
type vars struct {
	path  map[string]string
	query url.Values
	head  http.Header
	form  url.Values
	body  []byte
	job   map[string]any // id, seq, phase, vars and phase fields; nil without a job
	items []any          // a list route's items
}

// lookup resolves a placeholder name.
func (v *vars) lookup(name string) (any, bool) {
	switch {
	case name == "items":
		if v.items == nil {
			return []any{}, true
		}
		return v.items, true
	case strings.HasPrefix(name, "path."):
		s, ok := v.path[strings.TrimPrefix(name, "path.")]
		return s, ok
	case strings.HasPrefix(name, "query."):
		k := strings.TrimPrefix(name, "query.")
		return v.query.Get(k), v.query.Has(k)
	case strings.HasPrefix(name, "header."):
		vals := v.head.Values(strings.TrimPrefix(name, "header."))
		if len(vals) == 0 {
			return nil, false
		}
		return vals[0], true
	case strings.HasPrefix(name, "form."):
		k := strings.TrimPrefix(name, "form.")
		return v.form.Get(k), v.form.Has(k)
	case strings.HasPrefix(name, "body."):
		r := gjson.GetBytes(v.body, strings.TrimPrefix(name, "body."))
		if !r.Exists() {
			return nil, false
		}
		return r.Value(), true
	case strings.HasPrefix(name, "job."):
		var cur any = v.job
		for _, k := range strings.Split(strings.TrimPrefix(name, "job."), ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		}
		return cur, true
	}
	return nil, false
}

// placeholder reports whether the text between braces is a placeholder.
func placeholder(name string) bool {
	for _, r := range roots {
		if strings.HasPrefix(name, r) || name == strings.TrimSuffix(r, ".") {
			return true
		}
	}
	return false
}

// text renders a string template as text.
func (v *vars) text(s string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[open+1 : open+end]
		b.WriteString(s[:open])
		if placeholder(name) {
			val, _ := v.lookup(name)
			b.WriteString(format(val))
		} else {
			b.WriteString(s[open : open+end+1])
		}
		s = s[open+end+1:]
	}
}

// format writes a value as text: strings as they are, other values as JSON,
// absent ones as nothing.
func format(val any) string {
	switch val := val.(type) {
	case nil:
		return ""
	case string:
		return val
	}
	b, err := json.Marshal(val)
	if err != nil {
		return fmt.Sprint(val)
	}
	return string(b)
}

// value renders a body template: maps and lists element by element, a
// string that is exactly one placeholder as the value it names (null when
// absent), other strings as text.
func (v *vars) value(t any) any {
	switch t := t.(type) {
	case string:
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") && strings.Count(t, "{") == 1 && placeholder(t[1:len(t)-1]) {
			val, _ := v.lookup(t[1 : len(t)-1])
			return val
		}
		return v.text(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = v.value(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = v.value(e)
		}
		return out
	}
	return t
}
