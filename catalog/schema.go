package catalog

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"
)

// inputSchema checks a tool's input schema (written as YAML at path) and
// returns it as JSON with the names of its properties. props is nil when the
// schema is missing or unusable, so that callers skip checks that depend on
// it.
func (l *loader) inputSchema(path string, n *yaml.Node) (raw json.RawMessage, props map[string]bool) {
	if n == nil {
		l.invalid(path, errors.New(`required: a JSON Schema with type "object" for the tool's arguments`))
		return nil, nil
	}
	val, ok := l.generic(n, path)
	if !ok {
		return nil, nil
	}
	m, isMap := val.(map[string]any)
	if !isMap {
		l.errorf(resolved(n), path, "expected a mapping (a JSON Schema), got %s", describe(resolved(n)))
		return nil, nil
	}
	switch typ, set := m["type"]; {
	case !set:
		l.invalid(path+".type", errors.New(`required: the input schema must have type "object"`))
		return nil, nil
	case typ != "object":
		l.invalid(path+".type", errors.New(`must be "object"`))
		return nil, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, nil
	}
	if _, err := s.Resolve(nil); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, nil
	}
	props = make(map[string]bool, len(s.Properties))
	for name := range s.Properties {
		props[name] = true
	}
	return raw, props
}
