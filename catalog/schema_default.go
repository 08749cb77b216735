package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// problem is one way a default fails its schema: msg about the value at
// (the path from the default down, such as ["item 1", "property \"a\""]).
type problem struct {
	at  []string
	msg string
}

// String phrases the problem for a catalog author.
func (p problem) String() string {
	if len(p.at) == 0 {
		return "the default " + p.msg
	}
	where := slices.Clone(p.at)
	slices.Reverse(where)
	return strings.Join(where, " of ") + " of the default: " + p.msg
}

// within returns ps as problems of the part of a value named at.
func within(at string, ps []problem) []problem {
	for i := range ps {
		ps[i].at = append([]string{at}, ps[i].at...)
	}
	return ps
}

// validate checks the value inst (a schema's default) against schema, a
// schema the walk found well-formed, and returns what is wrong with it. It
// covers the keywords a default
// usually meets (type, enum, const, bounds, lengths, pattern, items,
// properties, required, local $ref and the in-place applicators); keywords it
// does not evaluate (format, contains, unevaluated*, dependent*) are
// annotations or too rare in defaults to matter.
func (c *schemaChecker) validate(inst, schema any, depth int) []problem {
	// References that apply the schema to itself (allOf: [{$ref: "#"}, ...])
	// would make the work grow exponentially: give up quietly instead.
	c.steps--
	if depth > maxRefDepth || c.steps < 0 {
		return nil
	}
	switch s := schema.(type) {
	case bool:
		if !s {
			return []problem{{msg: fmt.Sprintf("%s is not allowed: the schema is false", render(inst))}}
		}
		return nil
	case map[string]any:
		return c.validateObject(inst, s, depth)
	}
	return nil
}

func (c *schemaChecker) validateObject(inst any, s map[string]any, depth int) []problem {
	var out []problem
	add := func(format string, args ...any) { out = append(out, problem{msg: fmt.Sprintf(format, args...)}) }

	if ref, ok := s["$ref"].(string); ok && !c.hasID {
		if frag, local := strings.CutPrefix(ref, "#"); local {
			switch {
			case frag == "":
				out = append(out, c.validate(inst, c.root, depth+1)...)
			case strings.HasPrefix(frag, "/"):
				if target, ok := c.pointer(frag); ok {
					out = append(out, c.validate(inst, target, depth+1)...)
				}
			}
		}
	}
	if t, ok := s["type"]; ok {
		want := typeList(t)
		if !slices.ContainsFunc(want, func(w string) bool { return hasType(inst, w) }) {
			add("%s is %s, not %s", render(inst), describeValue(inst), orList(articled(want)))
			return out // the other keywords would only echo this
		}
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(v any) bool { return equalJSON(v, inst) }) {
		allowed := make([]string, len(e))
		for i, v := range e {
			allowed[i] = render(v)
		}
		add("%s is not one of the allowed values (enum): %s", render(inst), strings.Join(allowed, ", "))
	}
	if cv, ok := s["const"]; ok && !equalJSON(cv, inst) {
		add("%s is not the constant %s", render(inst), render(cv))
	}
	if f, ok := number(inst); ok {
		if lim, ok := number(s["minimum"]); ok && f < lim {
			add("%s is less than the minimum %s", render(inst), render(s["minimum"]))
		}
		if lim, ok := number(s["maximum"]); ok && f > lim {
			add("%s is greater than the maximum %s", render(inst), render(s["maximum"]))
		}
		if lim, ok := number(s["exclusiveMinimum"]); ok && f <= lim {
			add("%s is not greater than the exclusive minimum %s", render(inst), render(s["exclusiveMinimum"]))
		}
		if lim, ok := number(s["exclusiveMaximum"]); ok && f >= lim {
			add("%s is not less than the exclusive maximum %s", render(inst), render(s["exclusiveMaximum"]))
		}
		if m, ok := number(s["multipleOf"]); ok && m > 0 {
			if q := f / m; math.Abs(q-math.Round(q)) > 1e-9 {
				add("%s is not a multiple of %s", render(inst), render(s["multipleOf"]))
			}
		}
	}
	if str, ok := inst.(string); ok {
		n := utf8.RuneCountInString(str)
		if lim, ok := number(s["minLength"]); ok && float64(n) < lim {
			add("%s is shorter than minLength %s", render(inst), render(s["minLength"]))
		}
		if lim, ok := number(s["maxLength"]); ok && float64(n) > lim {
			add("%s is longer than maxLength %s", render(inst), render(s["maxLength"]))
		}
		if p, ok := s["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(str) {
				add("%s does not match the pattern %q", render(inst), p)
			}
		}
	}
	if list, ok := inst.([]any); ok {
		out = append(out, c.validateArray(list, s, depth)...)
	}
	if obj, ok := inst.(map[string]any); ok {
		out = append(out, c.validateMap(obj, s, depth)...)
	}
	if subs, ok := s["allOf"].([]any); ok {
		for _, sub := range subs {
			out = append(out, c.validate(inst, sub, depth+1)...)
		}
	}
	if subs, ok := s["anyOf"].([]any); ok && !slices.ContainsFunc(subs, func(sub any) bool { return len(c.validate(inst, sub, depth+1)) == 0 }) {
		add("%s matches none of the anyOf schemas", render(inst))
	}
	if subs, ok := s["oneOf"].([]any); ok {
		matches := 0
		for _, sub := range subs {
			if len(c.validate(inst, sub, depth+1)) == 0 {
				matches++
			}
		}
		switch {
		case matches == 0:
			add("%s matches none of the oneOf schemas", render(inst))
		case matches > 1:
			add("%s matches %d of the oneOf schemas, not exactly one", render(inst), matches)
		}
	}
	if sub, ok := s["not"]; ok && len(c.validate(inst, sub, depth+1)) == 0 {
		add("%s matches the schema under not", render(inst))
	}
	if cond, ok := s["if"]; ok {
		branch := "else"
		if len(c.validate(inst, cond, depth+1)) == 0 {
			branch = "then"
		}
		if sub, ok := s[branch]; ok {
			out = append(out, c.validate(inst, sub, depth+1)...)
		}
	}
	return out
}

func (c *schemaChecker) validateArray(list []any, s map[string]any, depth int) []problem {
	var out []problem
	add := func(format string, args ...any) { out = append(out, problem{msg: fmt.Sprintf(format, args...)}) }
	if lim, ok := number(s["minItems"]); ok && float64(len(list)) < lim {
		add("%s has fewer than minItems %s items", render(list), render(s["minItems"]))
	}
	if lim, ok := number(s["maxItems"]); ok && float64(len(list)) > lim {
		add("%s has more than maxItems %s items", render(list), render(s["maxItems"]))
	}
	if s["uniqueItems"] == true {
	dup:
		for i := range list {
			for j := range i {
				if equalJSON(list[i], list[j]) {
					add("%s has the item %s twice, but uniqueItems is true", render(list), render(list[i]))
					break dup
				}
			}
		}
	}
	prefix, _ := s["prefixItems"].([]any)
	for i, item := range list {
		var sub any
		switch {
		case i < len(prefix):
			sub = prefix[i]
		default:
			var ok bool
			if sub, ok = s["items"]; !ok {
				continue
			}
		}
		out = append(out, within(fmt.Sprintf("item %d", i), c.validate(item, sub, depth+1))...)
	}
	return out
}

func (c *schemaChecker) validateMap(obj map[string]any, s map[string]any, depth int) []problem {
	var out []problem
	add := func(format string, args ...any) { out = append(out, problem{msg: fmt.Sprintf(format, args...)}) }
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				if _, present := obj[name]; !present {
					add("%s lacks the required property %q", render(obj), name)
				}
			}
		}
	}
	if lim, ok := number(s["minProperties"]); ok && float64(len(obj)) < lim {
		add("%s has fewer than minProperties %s properties", render(obj), render(s["minProperties"]))
	}
	if lim, ok := number(s["maxProperties"]); ok && float64(len(obj)) > lim {
		add("%s has more than maxProperties %s properties", render(obj), render(s["maxProperties"]))
	}
	props, _ := s["properties"].(map[string]any)
	patterns, _ := s["patternProperties"].(map[string]any)
	for _, name := range sortedKeys(obj) {
		matched := false
		if sub, ok := props[name]; ok {
			matched = true
			out = append(out, within(fmt.Sprintf("property %q", name), c.validate(obj[name], sub, depth+1))...)
		}
		for _, pat := range sortedKeys(patterns) {
			re, err := regexp.Compile(pat)
			if err != nil || !re.MatchString(name) {
				continue
			}
			matched = true
			out = append(out, within(fmt.Sprintf("property %q", name), c.validate(obj[name], patterns[pat], depth+1))...)
		}
		if ap, ok := s["additionalProperties"]; ok && !matched {
			if ap == false {
				add("%s has the property %q, which additionalProperties: false does not allow", render(obj), name)
				continue
			}
			out = append(out, within(fmt.Sprintf("property %q", name), c.validate(obj[name], ap, depth+1))...)
		}
	}
	return out
}

// typeList returns the type names of a `type` keyword.
func typeList(t any) []string {
	switch t := t.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// hasType reports whether v is of the JSON Schema type name; an integer is
// also a number, and a number with no fractional part is an integer.
func hasType(v any, name string) bool {
	switch name {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := number(v)
		return ok
	case "integer":
		f, ok := number(v)
		return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

// articled puts "a" or "an" before each type name ("null" stays bare).
func articled(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		switch {
		case n == "null":
			out[i] = "null"
		case strings.ContainsAny(n[:1], "aeiou"):
			out[i] = "an " + n
		default:
			out[i] = "a " + n
		}
	}
	return out
}

func orList(items []string) string {
	switch len(items) {
	case 0:
		return "of any allowed type"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// equalJSON reports whether two decoded values are the same JSON value
// (1 and 1.0 are equal).
func equalJSON(a, b any) bool {
	return reflect.DeepEqual(normalJSON(a), normalJSON(b))
}

func normalJSON(v any) any {
	if f, ok := number(v); ok {
		return f
	}
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalJSON(e)
		}
		return out
	}
	return v
}

// render formats a value as compact JSON for messages, shortened when long.
func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return describeValue(v)
	}
	s := string(b)
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
