package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/internal/spelling"
)

// inputSchema checks a tool's input schema (written as YAML at path) and
// returns it as JSON with the names of its properties. raw is nil when the
// schema has a problem; props is nil when the schema is missing or its
// properties are unusable, so that callers skip checks that depend on them.
//
// The schema is checked against the rules of the JSON Schema draft 2020-12
// meta-schema by walking the YAML, so that every problem is reported at once
// and at its own line and column; then each `default` is checked against the
// schema that holds it, and the schema is resolved as the bridge will use it.
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
	before := len(l.errs)
	c := newSchemaChecker(l, m)
	c.schema(path, m, schemaScope{})
	switch typ, set := m["type"]; {
	case !set:
		l.invalid(path+".type", errors.New(`required: the input schema must have type "object"`))
	case typ != "object" && !l.decodeFailed(path+".type"):
		l.invalid(path+".type", errors.New(`must be "object"`))
	}
	if p, ok := m["properties"].(map[string]any); ok && !l.decodeFailed(path+".properties") {
		props = make(map[string]bool, len(p))
		for name := range p {
			props[name] = true
		}
	}
	if len(l.errs) > before {
		return nil, props
	}
	raw, err := json.Marshal(m)
	if err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, props
	}
	// What the walk does not cover (references through $id, dynamic
	// references) the resolver the bridge uses checks.
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, props
	}
	if _, err := s.Resolve(nil); err != nil {
		l.invalid(path, fmt.Errorf("invalid schema: %w", err))
		return nil, props
	}
	return raw, props
}

// The JSON Schema 2020-12 dialect.
const (
	schemaDialect = "https://json-schema.org/draft/2020-12/schema"
	maxRefDepth   = 32
	// maxValidateSteps bounds the subschemas visited while checking one
	// input schema's defaults.
	maxValidateSteps = 100_000
)

// kind is what a keyword's value must be, after the draft 2020-12
// meta-schema.
type kind int

const (
	kindSchema       kind = iota + 1 // a schema: a mapping or true/false
	kindSchemaMap                    // a mapping of names to schemas
	kindSchemaList                   // a non-empty sequence of schemas
	kindString                       // a string
	kindNumber                       // a number
	kindPositive                     // a number greater than 0
	kindCount                        // a non-negative integer
	kindBool                         // true or false
	kindNames                        // a sequence of distinct strings
	kindNamesMap                     // a mapping of names to kindNames
	kindType                         // a type name or a sequence of distinct ones
	kindAny                          // any value
	kindList                         // a sequence of any values
	kindVocabulary                   // a mapping of URIs to booleans
	kindPattern                      // a regular expression
	kindPatternMap                   // a mapping of regular expressions to schemas
	kindDependencies                 // a mapping of names to a schema or kindNames
	kindRef                          // $ref: a reference
	kindDynamicRef                   // $dynamicRef: a reference
	kindAnchor                       // $anchor, $dynamicAnchor: a plain name
	kindDialect                      // $schema
	kindID                           // $id: a URI reference without a fragment
)

// keywords are the keywords of the draft 2020-12 vocabularies (core,
// applicator, unevaluated, validation, meta-data, format-annotation,
// content) and the two older ones its meta-schema still admits.
var keywords = map[string]kind{
	// Core.
	"$id": kindID, "$schema": kindDialect, "$ref": kindRef, "$anchor": kindAnchor,
	"$dynamicRef": kindDynamicRef, "$dynamicAnchor": kindAnchor,
	"$vocabulary": kindVocabulary, "$comment": kindString, "$defs": kindSchemaMap,
	// Applicator.
	"prefixItems": kindSchemaList, "items": kindSchema, "contains": kindSchema,
	"additionalProperties": kindSchema, "properties": kindSchemaMap,
	"patternProperties": kindPatternMap, "dependentSchemas": kindSchemaMap,
	"propertyNames": kindSchema, "if": kindSchema, "then": kindSchema, "else": kindSchema,
	"allOf": kindSchemaList, "anyOf": kindSchemaList, "oneOf": kindSchemaList, "not": kindSchema,
	// Unevaluated.
	"unevaluatedItems": kindSchema, "unevaluatedProperties": kindSchema,
	// Validation.
	"type": kindType, "const": kindAny, "enum": kindList,
	"multipleOf": kindPositive, "maximum": kindNumber, "exclusiveMaximum": kindNumber,
	"minimum": kindNumber, "exclusiveMinimum": kindNumber,
	"maxLength": kindCount, "minLength": kindCount, "pattern": kindPattern,
	"maxItems": kindCount, "minItems": kindCount, "uniqueItems": kindBool,
	"maxContains": kindCount, "minContains": kindCount,
	"maxProperties": kindCount, "minProperties": kindCount,
	"required": kindNames, "dependentRequired": kindNamesMap,
	// Meta-data.
	"title": kindString, "description": kindString, "default": kindAny,
	"deprecated": kindBool, "readOnly": kindBool, "writeOnly": kindBool, "examples": kindList,
	// Format annotation: any format name; unknown ones are annotations.
	"format": kindString,
	// Content.
	"contentEncoding": kindString, "contentMediaType": kindString, "contentSchema": kindSchema,
	// Admitted by the 2020-12 meta-schema for older schemas.
	"definitions": kindSchemaMap, "dependencies": kindDependencies,
}

// replaced are words that are not draft 2020-12 keywords, with what to
// write instead.
var replaced = map[string]string{
	"$recursiveRef":    "is a draft 2019-09 keyword; use $dynamicRef",
	"$recursiveAnchor": "is a draft 2019-09 keyword; use $dynamicAnchor",
	"additionalItems":  "is not a draft 2020-12 keyword; use items (with prefixItems for the leading items)",
	"id":               "is not a draft 2020-12 keyword; use $id",
	"nullable":         `is an OpenAPI keyword, not JSON Schema; allow null with a type list such as [string, "null"]`,
	"optional":         "is not a JSON Schema keyword: a property is optional unless the object's required list names it",
}

// typeNames are the JSON Schema type names.
var typeNames = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

var anchorRE = regexp.MustCompile(`^[A-Za-z_][-A-Za-z0-9._]*$`)

// schemaChecker walks one input schema, reporting through the loader.
type schemaChecker struct {
	l    *loader
	root map[string]any
	// hasID is set when a subschema has an $id: references may then point
	// into other resources, which only the resolver follows.
	hasID   bool
	anchors map[string]bool
	// steps bounds the work of checking defaults against their schemas.
	steps int
}

func newSchemaChecker(l *loader, root map[string]any) *schemaChecker {
	c := &schemaChecker{l: l, root: root, anchors: map[string]bool{}, steps: maxValidateSteps}
	c.survey(root, 0)
	return c
}

// survey notes the $id and $anchor keywords anywhere in v.
func (c *schemaChecker) survey(v any, depth int) {
	if depth > 64 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$id"]; ok {
			c.hasID = true
		}
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := v[k].(string); ok {
				c.anchors[a] = true
			}
		}
		for _, e := range v {
			c.survey(e, depth+1)
		}
	case []any:
		for _, e := range v {
			c.survey(e, depth+1)
		}
	}
}

// reportAt reports a problem at the value at path.
func (c *schemaChecker) reportAt(path string, format string, args ...any) {
	c.l.errorAt(c.l.at(path), path, fmt.Errorf(format, args...))
}

// schemaScope is what a subschema's `required` may name besides its own
// properties: those of the schema it applies in place of (allOf, anyOf,
// oneOf, not, if, then, else, dependentSchemas), unless that schema admits
// properties it does not name.
type schemaScope struct {
	props map[string]bool
	open  bool
}

// inPlace are the keywords whose subschemas apply to the same instance as
// the schema holding them.
var inPlace = []string{"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "$ref", "$dynamicRef"}

// schema checks v, the schema at path.
func (c *schemaChecker) schema(path string, v any, scope schemaScope) {
	switch v := v.(type) {
	case bool:
		return
	case map[string]any:
		c.object(path, v, scope)
	case string:
		if slices.Contains(typeNames, v) {
			c.reportAt(path, "must be a schema, got the string %q: write {type: %s}", v, v)
			return
		}
		c.reportAt(path, "must be a schema (a mapping, or true or false), got a string")
	default:
		c.reportAt(path, "must be a schema (a mapping, or true or false), got %s", describeValue(v))
	}
}

func (c *schemaChecker) object(path string, m map[string]any, scope schemaScope) {
	before := len(c.l.errs)
	own := c.ownScope(m, scope)
	for _, k := range sortedKeys(m) {
		c.keyword(path, k, m[k], m, own)
	}
	c.bounds(path, m)
	c.required(path, m, own)
	if d, ok := m["default"]; ok && len(c.l.errs) == before {
		for _, p := range c.validate(d, m, 0) {
			c.reportAt(join(path, "default"), "%s", p)
		}
	}
}

// ownScope returns the property names a `required` in m, or in a subschema
// that applies in place of m, may name.
func (c *schemaChecker) ownScope(m map[string]any, scope schemaScope) schemaScope {
	s := schemaScope{props: map[string]bool{}, open: scope.open}
	for name := range scope.props {
		s.props[name] = true
	}
	addFrom := func(m map[string]any) {
		if p, ok := m["properties"].(map[string]any); ok {
			for name := range p {
				s.props[name] = true
			}
		}
		if _, ok := m["patternProperties"]; ok {
			s.open = true
		}
		if ap, ok := m["additionalProperties"]; ok && ap != false {
			s.open = true
		}
		for _, k := range []string{"$ref", "$dynamicRef"} {
			if _, ok := m[k]; ok {
				s.open = true
			}
		}
	}
	addFrom(m)
	// Properties declared by in-place subschemas count too, as in
	// {allOf: [{properties: {a: ...}}], required: [a]}.
	for _, k := range inPlace {
		switch sub := m[k].(type) {
		case map[string]any:
			addFrom(sub)
			if k == "dependentSchemas" {
				for _, e := range sub {
					if em, ok := e.(map[string]any); ok {
						addFrom(em)
					}
				}
			}
		case []any:
			for _, e := range sub {
				if em, ok := e.(map[string]any); ok {
					addFrom(em)
				}
			}
		}
	}
	return s
}

// keyword checks the value v of keyword k in the schema m at path.
func (c *schemaChecker) keyword(path, k string, v any, m map[string]any, scope schemaScope) {
	child := join(path, k)
	kd, known := keywords[k]
	if !known {
		switch {
		case strings.HasPrefix(k, "x-"):
			// The author's own annotation.
		case replaced[k] != "":
			c.l.errorAt(c.l.keyAt(child), child, fmt.Errorf("%q %s", k, replaced[k]))
		default:
			msg := fmt.Sprintf("unknown keyword %q", k)
			if s := suggestKeyword(k); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += `: not a JSON Schema (draft 2020-12) keyword; start your own annotations with "x-"`
			}
			c.l.errorAt(c.l.keyAt(child), child, errors.New(msg))
		}
		return
	}
	switch kd {
	case kindSchema:
		sc := schemaScope{}
		if slices.Contains(inPlace, k) {
			sc = scope
		}
		c.schema(child, v, sc)
	case kindSchemaMap:
		sub, ok := v.(map[string]any)
		if !ok {
			c.reportAt(child, "must be a mapping of %s to their schemas, got %s", mapOf(k), describeValue(v))
			return
		}
		sc := schemaScope{}
		if k == "dependentSchemas" {
			sc = scope
		}
		for _, name := range sortedKeys(sub) {
			c.schema(join(child, name), sub[name], sc)
		}
	case kindSchemaList:
		list, ok := v.([]any)
		switch {
		case !ok:
			c.reportAt(child, "must be a non-empty sequence of schemas, got %s", describeValue(v))
			return
		case len(list) == 0:
			c.reportAt(child, "must be a non-empty sequence of schemas, got an empty one")
			return
		}
		sc := schemaScope{}
		if slices.Contains(inPlace, k) {
			sc = scope
		}
		for i, e := range list {
			c.schema(fmt.Sprintf("%s[%d]", child, i), e, sc)
		}
	case kindString:
		if _, ok := v.(string); !ok {
			c.reportAt(child, "must be a string, got %s", describeValue(v))
		}
	case kindNumber:
		if _, ok := number(v); !ok {
			c.reportAt(child, "must be a number, got %s", describeValue(v))
		}
	case kindPositive:
		switch f, ok := number(v); {
		case !ok:
			c.reportAt(child, "must be a number greater than 0, got %s", describeValue(v))
		case f <= 0:
			c.reportAt(child, "must be greater than 0")
		}
	case kindCount:
		c.count(child, v)
	case kindBool:
		if _, ok := v.(bool); !ok {
			c.reportAt(child, "must be true or false, got %s", describeValue(v))
		}
	case kindNames:
		c.names(child, k, v)
	case kindNamesMap:
		sub, ok := v.(map[string]any)
		if !ok {
			c.reportAt(child, "must be a mapping of property names to lists of property names, got %s", describeValue(v))
			return
		}
		for _, name := range sortedKeys(sub) {
			c.names(join(child, name), k, sub[name])
		}
	case kindType:
		c.types(child, v)
	case kindAny:
	case kindList:
		if _, ok := v.([]any); !ok {
			c.reportAt(child, "must be a sequence (for example [a, b]), got %s", describeValue(v))
		}
	case kindVocabulary:
		sub, ok := v.(map[string]any)
		if !ok {
			c.reportAt(child, "must be a mapping of vocabulary URIs to true or false, got %s", describeValue(v))
			return
		}
		for _, uri := range sortedKeys(sub) {
			if _, ok := sub[uri].(bool); !ok {
				c.reportAt(join(child, uri), "must be true or false, got %s", describeValue(sub[uri]))
			}
		}
	case kindPattern:
		s, ok := v.(string)
		if !ok {
			c.reportAt(child, "must be a regular expression (a string), got %s", describeValue(v))
			return
		}
		if err := checkRegexp(s); err != nil {
			c.reportAt(child, "%v", err)
		}
	case kindPatternMap:
		sub, ok := v.(map[string]any)
		if !ok {
			c.reportAt(child, "must be a mapping of regular expressions to schemas, got %s", describeValue(v))
			return
		}
		for _, re := range sortedKeys(sub) {
			p := join(child, re)
			if err := checkRegexp(re); err != nil {
				c.l.errorAt(c.l.keyAt(p), p, err)
			}
			c.schema(p, sub[re], schemaScope{})
		}
	case kindDependencies:
		sub, ok := v.(map[string]any)
		if !ok {
			c.reportAt(child, "must be a mapping of property names to schemas or lists of property names, got %s", describeValue(v))
			return
		}
		for _, name := range sortedKeys(sub) {
			if _, isList := sub[name].([]any); isList {
				c.names(join(child, name), k, sub[name])
				continue
			}
			c.schema(join(child, name), sub[name], scope)
		}
	case kindRef:
		c.ref(child, v)
	case kindDynamicRef:
		if _, ok := v.(string); !ok {
			c.reportAt(child, "must be a reference (a string), got %s", describeValue(v))
		}
	case kindAnchor:
		s, ok := v.(string)
		switch {
		case !ok:
			c.reportAt(child, "must be a name (a string), got %s", describeValue(v))
		case !anchorRE.MatchString(s):
			c.reportAt(child, "%q is not a valid anchor name (a letter or _, then letters, digits, -, _ and .)", s)
		}
	case kindDialect:
		s, ok := v.(string)
		switch {
		case !ok:
			c.reportAt(child, "must be a URI (a string), got %s", describeValue(v))
		case strings.TrimSuffix(s, "#") != schemaDialect:
			c.reportAt(child, "unsupported dialect %q: tool schemas are JSON Schema draft 2020-12 (%s); leave $schema out or set it to that", s, schemaDialect)
		}
	case kindID:
		s, ok := v.(string)
		if !ok {
			c.reportAt(child, "must be a URI (a string), got %s", describeValue(v))
			return
		}
		if u, err := url.Parse(s); err != nil || u.Fragment != "" {
			c.reportAt(child, "%q is not a URI reference without a fragment", s)
		}
	}
}

// mapOf names the keys of a schema map keyword, for messages.
func mapOf(k string) string {
	switch k {
	case "properties", "dependentSchemas":
		return "property names"
	}
	return "names"
}

func (c *schemaChecker) count(path string, v any) {
	f, ok := number(v)
	switch {
	case !ok:
		c.reportAt(path, "must be a whole number of at least 0, got %s", describeValue(v))
	case f != math.Trunc(f):
		c.reportAt(path, "must be a whole number, got %v", f)
	case f < 0:
		c.reportAt(path, "must not be negative")
	}
}

// names checks a `required` or `dependentRequired` list.
func (c *schemaChecker) names(path, k string, v any) {
	list, ok := v.([]any)
	if !ok {
		switch v := v.(type) {
		case string:
			c.reportAt(path, "must be a list of property names, got a string: write [%s]", v)
		case bool:
			if k == "required" {
				c.reportAt(path, "must be a list of property names, got a boolean: to require this property, list its name in the required list of the object that holds it")
				return
			}
			c.reportAt(path, "must be a list of property names, got a boolean")
		default:
			c.reportAt(path, "must be a list of property names, got %s", describeValue(v))
		}
		return
	}
	seen := map[string]bool{}
	for i, e := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := e.(string)
		switch {
		case !ok:
			c.reportAt(p, "must be a property name (a string), got %s", describeValue(e))
		case seen[s]:
			c.reportAt(p, "%q is listed twice", s)
		}
		seen[s] = true
	}
}

func (c *schemaChecker) types(path string, v any) {
	check := func(p string, e any) {
		s, ok := e.(string)
		if !ok {
			c.reportAt(p, "must be a type name (%s), got %s", strings.Join(typeNames, ", "), describeValue(e))
			return
		}
		if slices.Contains(typeNames, s) {
			return
		}
		msg := fmt.Sprintf("unknown type %q", s)
		if best := closest(s, typeNames); best != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", best)
		} else {
			msg += " (known: " + strings.Join(typeNames, ", ") + ")"
		}
		c.reportAt(p, "%s", msg)
	}
	list, ok := v.([]any)
	if !ok {
		check(path, v)
		return
	}
	if len(list) == 0 {
		c.reportAt(path, "must name at least one type")
		return
	}
	seen := map[string]bool{}
	for i, e := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		check(p, e)
		if s, ok := e.(string); ok {
			if seen[s] {
				c.reportAt(p, "type %q is listed twice", s)
			}
			seen[s] = true
		}
	}
}

// bounds reports lower bounds above their upper bounds: no value could
// satisfy the schema.
func (c *schemaChecker) bounds(path string, m map[string]any) {
	for _, b := range [][2]string{
		{"minimum", "maximum"}, {"exclusiveMinimum", "exclusiveMaximum"},
		{"minLength", "maxLength"}, {"minItems", "maxItems"},
		{"minProperties", "maxProperties"}, {"minContains", "maxContains"},
	} {
		lo, okLo := number(m[b[0]])
		hi, okHi := number(m[b[1]])
		if okLo && okHi && lo > hi {
			c.reportAt(join(path, b[0]), "%s %v is greater than %s %v: no value can satisfy both", b[0], lo, b[1], hi)
		}
	}
}

// required reports the names in m's `required` list that name no property.
func (c *schemaChecker) required(path string, m map[string]any, scope schemaScope) {
	list, ok := m["required"].([]any)
	if !ok || scope.open {
		return
	}
	names := sortedKeys(scope.props)
	for i, e := range list {
		s, ok := e.(string)
		if !ok || scope.props[s] {
			continue
		}
		p := fmt.Sprintf("%s.required[%d]", path, i)
		switch best := closest(s, names); {
		case len(names) == 0:
			c.reportAt(p, "%q is required but the schema declares no properties", s)
		case best != "":
			c.reportAt(p, "%q is required but is not a property (did you mean %q?)", s, best)
		default:
			c.reportAt(p, "%q is required but is not a property (properties: %s)", s, strings.Join(names, ", "))
		}
	}
}

// ref checks a $ref: it must be a string, and a reference inside this
// schema must point at something.
func (c *schemaChecker) ref(path string, v any) {
	s, ok := v.(string)
	if !ok {
		c.reportAt(path, "must be a reference (a string such as \"#/$defs/NAME\"), got %s", describeValue(v))
		return
	}
	if c.hasID {
		return // the resolver follows references through $id
	}
	frag, local := strings.CutPrefix(s, "#")
	if !local {
		if strings.HasPrefix(s, "https://json-schema.org/") {
			return // a meta-schema, which the resolver knows
		}
		c.reportAt(path, "%q refers to another document, which jobbridge does not fetch: put the definition under $defs and refer to it as \"#/$defs/NAME\"", s)
		return
	}
	if frag == "" {
		return
	}
	if !strings.HasPrefix(frag, "/") {
		if !c.anchors[frag] {
			c.reportAt(path, "%q refers to an anchor %q that no $anchor in this schema defines", s, frag)
		}
		return
	}
	if _, ok := c.pointer(frag); !ok {
		msg := fmt.Sprintf("%q points at nothing in this schema", s)
		for _, defs := range []string{"$defs", "definitions"} {
			if name, ok := strings.CutPrefix(frag, "/"+defs+"/"); ok {
				if m, ok := c.root[defs].(map[string]any); ok {
					if best := closest(name, sortedKeys(m)); best != "" {
						msg += fmt.Sprintf(" (did you mean \"#/%s/%s\"?)", defs, best)
					}
				}
			}
		}
		c.reportAt(path, "%s", msg)
	}
}

// pointer resolves a JSON pointer (RFC 6901, as a URI fragment) in the
// root schema.
func (c *schemaChecker) pointer(p string) (any, bool) {
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	var cur any = c.root
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// checkRegexp checks a pattern the way the bridge will use it: Go's RE2
// syntax, close to ECMA-262 but without lookaround and backreferences.
func checkRegexp(s string) error {
	if _, err := regexp.Compile(s); err != nil {
		return fmt.Errorf("invalid regular expression %q: %s (patterns use RE2 syntax: no lookaround or backreferences)", s, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return nil
}

// suggestKeyword returns the keyword a misspelled one was probably meant to
// be.
func suggestKeyword(k string) string {
	names := make([]string, 0, len(keywords))
	for name := range keywords {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.EqualFold(name, k) || strings.EqualFold(name, "$"+k) {
			return name
		}
	}
	return closest(k, names)
}

// closest returns the candidate nearest to s, if it is close enough to be a
// likely misspelling: within two edits, and fewer than half of s's bytes.
func closest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, cand := range candidates {
		d := spelling.Distance(strings.ToLower(s), strings.ToLower(cand))
		if d < bestDist && d*2 < len(s) {
			best, bestDist = cand, d
		}
	}
	return best
}

// number returns v as a float64 when it is a number.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// describeValue names the kind of a decoded value for "got X" messages.
func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int, int64, uint64:
		return "an integer"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a sequence"
	case map[string]any:
		return "a mapping"
	}
	return "a value"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
