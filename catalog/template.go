package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jobbridge/jobbridge/internal/spelling"
)

// confirmPlaceholders checks the placeholders of the confirmation message
// at path: the prompt is shown before the job exists, so only {args.NAME}
// can be filled, and NAME must be a property of the input schema (props; nil
// when the schema is unusable).
func (l *loader) confirmPlaceholders(path, msg string, props map[string]bool) {
	for _, ph := range placeholders(msg) {
		name, isArg := strings.CutPrefix(ph.name, "args.")
		switch {
		case !isArg:
			hint := ""
			if first, rest, ok := strings.Cut(ph.name, "."); ok && rest != "" && spelling.Distance(strings.ToLower(first), "args") <= 2 {
				hint = fmt.Sprintf(" (did you mean {args.%s}?)", rest)
			} else if props[ph.name] {
				hint = fmt.Sprintf(" (did you mean {args.%s}?)", ph.name)
			}
			l.invalid(path, fmt.Errorf("placeholder {%s} cannot be filled in a confirmation, which is shown before the job exists: only {args.NAME} can%s", ph.name, hint))
		case name == "" || strings.Contains(name, "."):
			l.invalid(path, fmt.Errorf("placeholder {%s} has an invalid argument name", ph.name))
		case props != nil && !props[name]:
			l.invalid(path, noProperty(name, props))
		}
	}
}

// noProperty is the error for a placeholder {args.NAME} whose NAME is not
// one of the input schema's properties props.
func noProperty(name string, props map[string]bool) error {
	names := sortedKeys(props)
	switch best := closest(name, names); {
	case best != "":
		return fmt.Errorf("placeholder {args.%s} names no property of the input schema (did you mean {args.%s}?)", name, best)
	case len(names) == 0:
		return fmt.Errorf("placeholder {args.%s} names no property of the input schema, which declares none", name)
	}
	return fmt.Errorf("placeholder {args.%s} names no property of the input schema (properties: %s)", name, strings.Join(names, ", "))
}

// placeholder is one "{name}" in a template, at s[start:end].
type placeholder struct {
	name       string
	start, end int
}

func placeholders(s string) []placeholder {
	var out []placeholder
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			break
		}
		if name := s[i+1 : i+end]; isPlaceholderName(name) {
			out = append(out, placeholder{name: name, start: i, end: i + end + 1})
			i += end
		}
	}
	return out
}

func isPlaceholderName(s string) bool {
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

// ConfirmMessage renders the tool's confirmation prompt with args: each
// {args.NAME} becomes the argument's value, a string as is and any other
// value as compact JSON; a missing argument renders as nothing. It returns ""
// when the tool has no confirmation.
func (t *Tool) ConfirmMessage(args map[string]any) string {
	if t.Confirm == nil {
		return ""
	}
	msg := t.Confirm.Message
	var b strings.Builder
	last := 0
	for _, ph := range placeholders(msg) {
		name, ok := strings.CutPrefix(ph.name, "args.")
		if !ok || name == "" {
			continue
		}
		b.WriteString(msg[last:ph.start])
		if v, present := args[name]; present {
			b.WriteString(renderArg(v))
		}
		last = ph.end
	}
	b.WriteString(msg[last:])
	return b.String()
}

func renderArg(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// EnvRefs returns the sorted names of the environment variables that backend
// secrets (REST header values, GitHub tokens: what each backend type's
// EnvValues returns) reference as ${NAME}, so that a validator can warn
// about unset ones. The catalog itself never reads the environment.
func (c *Catalog) EnvRefs() []string {
	var names []string
	for _, b := range c.Backends {
		names = append(names, b.EnvRefs...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// FileRefs returns the sorted paths of the files that backend secrets
// reference as ${file:PATH} (in what each backend type's EnvValues
// returns), so that a validator can warn about missing ones. The catalog
// itself never reads them.
func (c *Catalog) FileRefs() []string {
	var paths []string
	for _, b := range c.Backends {
		paths = append(paths, b.FileRefs...)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// fileRefsOf returns the sorted, distinct paths of the ${file:PATH}
// references in values.
func fileRefsOf(values []string) []string {
	var paths []string
	for _, v := range values {
		for s := v; ; {
			i := strings.Index(s, "${file:")
			if i < 0 {
				break
			}
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				break
			}
			if p := s[i+len("${file:") : i+end]; p != "" {
				paths = append(paths, p)
			}
			s = s[i+end+1:]
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// envRefsOf returns the sorted, distinct names of the well-formed ${NAME}
// references in values.
func envRefsOf(values []string) []string {
	seen := map[string]bool{}
	for _, v := range values {
		for _, name := range envRefs(v) {
			seen[name] = true
		}
	}
	if len(seen) == 0 {
		return nil
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// envRefs returns the NAMEs of the well-formed ${NAME} references in s.
func envRefs(s string) []string {
	var names []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return names
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return names
		}
		if name := s[i+2 : i+end]; isEnvName(name) {
			names = append(names, name)
		}
		s = s[i+end+1:]
	}
}

func isEnvName(s string) bool {
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
