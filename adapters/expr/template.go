package expr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jobbridge/jobbridge/internal/spelling"

	"github.com/jobbridge/jobbridge/secrets"
)

// Template is parsed text with placeholders; see the package documentation.
type Template struct {
	segs []Segment
}

// Segment is one piece of a template. Exactly one of Lit, Name, Expr and
// Secret is set (none for an empty literal).
type Segment struct {
	Lit    string     // literal text
	Name   string     // a {dotted.name} placeholder
	Expr   *Program   // a {= expression}
	Secret *SecretRef // a ${NAME} or ${file:PATH} reference
	// Offset is the 1-based byte position of the segment in the source.
	Offset int
}

// SecretRef is a reference to a secret: an environment variable or a file,
// resolved through package secrets.
type SecretRef = secrets.Ref

// ParseTemplate parses s in scope. It reports the first mistake: an
// expression that does not compile, a placeholder for a variable the scope
// does not offer, an unterminated "{=" or a malformed secret reference.
func ParseTemplate(s string, scope Scope) (Template, error) {
	var t Template
	var lit strings.Builder
	litStart := 0
	flush := func() {
		if lit.Len() > 0 {
			t.segs = append(t.segs, Segment{Lit: lit.String(), Offset: litStart + 1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if lit.Len() == 0 {
			litStart = i
		}
		if strings.HasPrefix(s[i:], "${") && !strings.HasPrefix(s[i:], "${{") && scope.Secrets {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return Template{}, &Error{Offset: i + 1, Msg: "unterminated ${ reference"}
			}
			ref, err := parseSecret(s[i+2 : i+end])
			if err != nil {
				return Template{}, &Error{Offset: i + 1, Msg: err.Error()}
			}
			flush()
			t.segs = append(t.segs, Segment{Secret: &ref, Offset: i + 1})
			i += end + 1
			continue
		}
		if s[i] == '{' && (i == 0 || s[i-1] != '$' && s[i-1] != '{') {
			if strings.HasPrefix(s[i:], "{=") {
				end, err := exprEnd(s, i+2)
				if err != nil {
					return Template{}, err
				}
				src := s[i+2 : end]
				p, err := Compile(src, scope, AnyKind)
				if err != nil {
					var e *Error
					if errors.As(err, &e) && e.Offset > 0 {
						e.Offset += i + 2
					} else if e != nil {
						e.Offset = i + 1
					}
					return Template{}, err
				}
				flush()
				t.segs = append(t.segs, Segment{Expr: p, Offset: i + 1})
				i = end + 1
				continue
			}
			if end := strings.IndexByte(s[i:], '}'); end > 1 && isName(s[i+1:i+end]) {
				name := s[i+1 : i+end]
				if err := checkName(name, scope); err != nil {
					return Template{}, &Error{Offset: i + 1, Msg: err.Error()}
				}
				flush()
				t.segs = append(t.segs, Segment{Name: name, Offset: i + 1})
				i += end + 1
				continue
			}
		}
		lit.WriteByte(s[i])
		i++
	}
	flush()
	return t, nil
}

// MustParseTemplate is ParseTemplate for templates known to be valid.
func MustParseTemplate(s string, scope Scope) Template {
	t, err := ParseTemplate(s, scope)
	if err != nil {
		panic(err)
	}
	return t
}

// exprEnd returns the index of the "}" closing the expression that starts
// at from, skipping braces inside string literals and nested braces.
func exprEnd(s string, from int) (int, error) {
	depth := 0
	for i := from; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return 0, &Error{Offset: i + 1, Msg: "unterminated string in expression"}
			}
			i = j
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return i, nil
			}
			depth--
		}
	}
	return 0, &Error{Offset: from - 1, Msg: `unterminated {= expression (it needs a closing "}")`}
}

func parseSecret(body string) (SecretRef, error) {
	if path, ok := strings.CutPrefix(body, "file:"); ok {
		if path == "" || !strings.HasPrefix(path, "/") {
			return SecretRef{}, fmt.Errorf("${file:%s} needs an absolute file path", path)
		}
		return SecretRef{File: path}, nil
	}
	if !validEnvName(body) {
		return SecretRef{}, fmt.Errorf("${%s} is not a valid environment variable reference (write ${NAME} or ${file:/path})", body)
	}
	return SecretRef{Env: body}, nil
}

// checkName checks a placeholder name against the scope.
func checkName(name string, scope Scope) error {
	root, field, dotted := strings.Cut(name, ".")
	if _, known := varTypes[root]; !known {
		return unknownPlaceholder(name, scope)
	}
	if why, ok := scope.Missing[root]; ok && !scope.Has(root) {
		return fmt.Errorf("placeholder {%s} cannot be filled here: %s", name, why)
	}
	if !scope.Has(root) {
		return unknownPlaceholder(name, scope)
	}
	switch root {
	case Args:
		if !dotted || !validArgName(field) {
			return fmt.Errorf("placeholder {%s} has an invalid argument name", name)
		}
	case Job:
		if field != "id" && field != "location" {
			return fmt.Errorf("unknown placeholder {%s} (use {job.id} or {job.location})", name)
		}
	case Body, Headers, Answers:
		// any dotted path
	default:
		if dotted {
			return unknownPlaceholder(name, scope)
		}
	}
	return nil
}

// placeholderNames are the placeholders a scope offers, for messages.
func placeholderNames(scope Scope) []string {
	var names []string
	for _, v := range AllVars {
		if !scope.Has(v) {
			continue
		}
		switch v {
		case Args:
			names = append(names, "args.NAME")
		case Job:
			names = append(names, "job.id", "job.location")
		default:
			names = append(names, v)
		}
	}
	return names
}

// unknownPlaceholder is the error for a placeholder the scope does not
// offer, with the likely intended one when the name is close to it.
func unknownPlaceholder(name string, scope Scope) error {
	known := placeholderNames(scope)
	if first, rest, ok := strings.Cut(name, "."); ok && rest != "" && validArgName(rest) && scope.Has(Args) {
		switch first = strings.ToLower(first); {
		case first == Args:
		case spelling.Distance(first, Args) <= 2, first == "argument", first == "arguments", first == "input", first == "inputs", first == "params":
			return fmt.Errorf("unknown placeholder {%s} (did you mean {args.%s}?)", name, rest)
		}
	}
	best, bestDist := "", 3
	for _, k := range known {
		if strings.HasSuffix(k, "NAME") {
			continue
		}
		if d := spelling.Distance(strings.ToLower(name), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Errorf("unknown placeholder {%s} (did you mean {%s}?)", name, best)
	}
	if len(known) == 0 {
		return fmt.Errorf("unknown placeholder {%s} (no placeholders are available here)", name)
	}
	return fmt.Errorf("unknown placeholder {%s} (known here: {%s})", name, strings.Join(known, "}, {"))
}

// Segments returns the template's pieces in order.
func (t Template) Segments() []Segment { return t.segs }

// Tail returns the template without its first i segments.
func (t Template) Tail(i int) Template {
	if i >= len(t.segs) {
		return Template{}
	}
	return Template{segs: t.segs[i:]}
}

// IsZero reports whether the template is empty.
func (t Template) IsZero() bool { return len(t.segs) == 0 }

// Names lists the {dotted.name} placeholders in order.
func (t Template) Names() []string {
	var names []string
	for _, s := range t.segs {
		if s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return names
}

// Uses reports whether the template uses variable root, in a placeholder
// or an expression.
func (t Template) Uses(root string) bool {
	for _, s := range t.segs {
		if s.Name == root || strings.HasPrefix(s.Name, root+".") || s.Expr != nil && s.Expr.Uses(root) {
			return true
		}
	}
	return false
}

// ArgNames returns the argument names the template reads; all is true
// when an expression may read any argument.
func (t Template) ArgNames() (names []string, all bool) {
	for _, s := range t.segs {
		if n, ok := strings.CutPrefix(s.Name, Args+"."); ok {
			names = append(names, n)
		}
		if s.Expr != nil {
			n, a := s.Expr.ArgNames()
			names = append(names, n...)
			all = all || a
		}
	}
	slices.Sort(names)
	return slices.Compact(names), all
}

// Secrets lists the secret references of the template.
func (t Template) Secrets() []SecretRef {
	var refs []SecretRef
	for _, s := range t.segs {
		if s.Secret != nil {
			refs = append(refs, *s.Secret)
		}
	}
	return refs
}

// Literal returns the template's text when it has no placeholder,
// expression or secret.
func (t Template) Literal() (string, bool) {
	var b strings.Builder
	for _, s := range t.segs {
		if s.Name != "" || s.Expr != nil || s.Secret != nil {
			return "", false
		}
		b.WriteString(s.Lit)
	}
	return b.String(), true
}

// Sole reports whether the template is exactly one placeholder or
// expression (so that its value keeps its JSON type in a body).
func (t Template) Sole() bool {
	return len(t.segs) == 1 && (t.segs[0].Name != "" || t.segs[0].Expr != nil)
}

// Escaper turns the text of a placeholder or expression (named by what for
// errors) into what the rendered string holds.
type Escaper func(what, value string) (string, error)

// Raw is the Escaper that keeps text as it is.
func Raw(_, value string) (string, error) { return value, nil }

// SecretFunc returns a secret's current value.
type SecretFunc func(SecretRef) (string, error)

// Render interpolates the template. missing is true when the template is
// exactly one placeholder or expression whose value is absent (an optional
// argument the caller left out, an expression giving null); inside a longer
// template an absent value renders as "". secrets may be nil for a template
// without secret references.
func (t Template) Render(ctx context.Context, v Vars, esc Escaper, secrets SecretFunc) (s string, missing bool, err error) {
	if t.Sole() {
		val, ok, err := t.segs[0].value(ctx, v)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", true, nil
		}
		str, err := Text(val)
		if err != nil {
			return "", false, err
		}
		s, err = esc(t.segs[0].what(), str)
		return s, false, err
	}
	var b strings.Builder
	for _, seg := range t.segs {
		switch {
		case seg.Secret != nil:
			if secrets == nil {
				return "", false, fmt.Errorf("%s cannot be resolved here", seg.Secret)
			}
			val, err := secrets(*seg.Secret)
			if err != nil {
				return "", false, err
			}
			b.WriteString(val)
			continue
		case seg.Name == "" && seg.Expr == nil:
			b.WriteString(seg.Lit)
			continue
		}
		val, _, err := seg.value(ctx, v)
		if err != nil {
			return "", false, err
		}
		str, err := Text(val)
		if err != nil {
			return "", false, err
		}
		if str, err = esc(seg.what(), str); err != nil {
			return "", false, err
		}
		b.WriteString(str)
	}
	return b.String(), false, nil
}

// Value returns what the template stands for in a JSON body: the value of
// a sole placeholder or expression with its type (present is false when it
// is absent), and otherwise the rendered text.
func (t Template) Value(ctx context.Context, v Vars) (val any, present bool, err error) {
	if t.Sole() {
		return t.segs[0].value(ctx, v)
	}
	s, _, err := t.Render(ctx, v, Raw, nil)
	return s, true, err
}

// what names the segment in errors.
func (s Segment) what() string {
	if s.Expr != nil {
		return "{= " + strings.TrimSpace(s.Expr.String()) + "}"
	}
	return "{" + s.Name + "}"
}

// value returns the segment's value; ok is false when it is absent.
func (s Segment) value(ctx context.Context, v Vars) (any, bool, error) {
	if s.Expr != nil {
		out, err := s.Expr.Eval(ctx, v)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", s.what(), err)
		}
		return out, out != nil, nil
	}
	return Lookup(v, s.Name)
}

// Lookup returns the value of a dotted name in v; ok is false when it is
// absent (or JSON null).
func Lookup(v Vars, name string) (any, bool, error) {
	root, rest, dotted := strings.Cut(name, ".")
	cur, ok := v[root]
	if !ok {
		return nil, false, nil
	}
	for dotted {
		var field string
		field, rest, dotted = strings.Cut(rest, ".")
		m, isMap := cur.(map[string]any)
		if !isMap {
			return nil, false, nil
		}
		if cur, ok = m[field]; !ok {
			return nil, false, nil
		}
	}
	if cur == nil {
		return nil, false, nil
	}
	return cur, true, nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func validArgName(s string) bool { return isName(s) && !strings.Contains(s, ".") }

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
