package catalog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/internal/spelling"
)

// decoder walks yaml.v3 nodes against Go values, guided by their `yaml`
// struct tags, and collects every problem with its position instead of
// stopping at the first. It exists because yaml.v3's own Node.Decode cannot
// reject unknown keys.
//
// Supported targets: structs (with `yaml:",inline"` fields), pointers, maps
// with string keys, slices, strings, bools, integers, floats, time.Duration
// (Go syntax with a unit), *yaml.Node (kept as is, for blocks decoded later)
// and any (generic YAML as map[string]any, []any and scalars).
type decoder struct {
	file string
	errs Errors
	// pos holds the position of every node decoded so far by its path, so
	// that problems found after decoding can point at a line and column.
	pos map[string]Position
	// keyPos holds the position of the key of every mapping entry decoded
	// so far by the entry's path, for problems with a key itself.
	keyPos map[string]Position
	// nodes holds the value node (as written: an alias is not followed) of
	// every path recorded, to place problems inside a scalar value.
	nodes map[string]*yaml.Node
	// failed holds the paths at which decoding reported a problem.
	failed map[string]bool
	// expanding holds the alias targets being decoded, to stop cycles.
	expanding map[*yaml.Node]bool
	// budget is how many more nodes may be visited; aliases can make a small
	// file expand into a huge tree.
	budget int
	// outer is the outermost alias being expanded, and outerPath its path:
	// where an exhausted budget is reported.
	outer     *yaml.Node
	outerPath string
}

func newDecoder(file string, budget int) *decoder {
	return &decoder{
		file:      file,
		pos:       map[string]Position{},
		keyPos:    map[string]Position{},
		nodes:     map[string]*yaml.Node{},
		failed:    map[string]bool{},
		expanding: map[*yaml.Node]bool{},
		budget:    budget,
	}
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	nodeType        = reflect.TypeFor[*yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

func (d *decoder) position(n *yaml.Node) Position {
	return Position{File: d.file, Line: n.Line, Column: n.Column}
}

func (d *decoder) errorAt(pos Position, path string, err error) {
	d.errs = append(d.errs, &Error{Pos: pos, Path: path, Err: err})
	d.failed[path] = true
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errorAt(d.position(n), path, fmt.Errorf(format, args...))
}

// record notes where the value at path is: at its key when it is a mapping or
// a sequence (where a reader sees the block start), at the value otherwise.
func (d *decoder) record(path string, key, val *yaml.Node) {
	n := val
	if key != nil {
		d.keyPos[path] = d.position(key)
		if r := resolved(val); r != nil && (r.Kind == yaml.MappingNode || r.Kind == yaml.SequenceNode) {
			n = key
		}
	}
	d.pos[path] = d.position(n)
	d.nodes[path] = val
}

// at returns the position of the value at path, or of its nearest recorded
// ancestor when the value is absent (a missing key is reported at the
// mapping that lacks it).
func (d *decoder) at(path string) Position {
	for {
		if p, ok := d.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return d.pos[""]
		}
		path = path[:i]
	}
}

// keyAt returns the position of the key of the mapping entry at path, or
// the position of its value when it has no key (a sequence item).
func (d *decoder) keyAt(path string) Position {
	if p, ok := d.keyPos[path]; ok {
		return p
	}
	return d.at(path)
}

// resolved follows aliases (yaml.v3 never aliases an alias).
func resolved(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

// visit spends the node budget on n (one unit, plus one per 16 bytes of a
// scalar's text) and reports whether decoding may go on.
func (d *decoder) visit(n *yaml.Node) bool {
	if d.budget <= 0 {
		return false
	}
	cost := 1
	if r := resolved(n); r != nil && r.Kind == yaml.ScalarNode {
		cost += len(r.Value) / 16
	}
	d.budget -= cost
	if d.budget <= 0 {
		at, path := n, ""
		if d.outer != nil {
			at, path = d.outer, d.outerPath
		}
		d.errorf(at, path, "the document is too large once its aliases are expanded")
		// What was not decoded would only show up as echoes.
		d.failed[""] = true
		return false
	}
	return true
}

// enter resolves n when it is an alias, guarding against an alias that
// refers to a node containing it. The returned leave function must be called
// when the caller is done with the node.
func (d *decoder) enter(n *yaml.Node, path string) (_ *yaml.Node, leave func(), ok bool) {
	if n.Kind != yaml.AliasNode {
		return n, func() {}, true
	}
	target := n.Alias
	if target == nil || d.expanding[target] {
		d.errorf(n, path, "alias *%s refers to a node that contains it", n.Value)
		return nil, nil, false
	}
	if len(d.expanding) == 0 {
		d.outer, d.outerPath = n, path
	}
	d.expanding[target] = true
	return target, func() {
		delete(d.expanding, target)
		if len(d.expanding) == 0 {
			d.outer, d.outerPath = nil, ""
		}
	}, true
}

// knownTags are the YAML tags the catalog accepts.
var knownTags = map[string]bool{
	"!!null": true, "!!bool": true, "!!int": true, "!!float": true, "!!str": true,
	"!!timestamp": true, "!!binary": true, "!!map": true, "!!seq": true,
}

func (d *decoder) checkTag(n *yaml.Node, path string) bool {
	if tag := n.ShortTag(); !knownTags[tag] {
		d.errorf(n, path, "unsupported tag %s", tag)
		return false
	}
	return true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of a node for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "a boolean"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	}
	return "a string"
}

func (d *decoder) expect(n *yaml.Node, kind yaml.Kind, path, want string) bool {
	if n.Kind != kind {
		d.errorf(n, path, "expected %s, got %s", want, describe(n))
		return false
	}
	return true
}

// decode decodes n into v, which must be settable. A null leaves v as it is.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	if !d.visit(n) {
		return
	}
	n, leave, ok := d.enter(n, path)
	if !ok {
		return
	}
	defer leave()
	if !d.checkTag(n, path) || isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case t == nodeType:
		v.Set(reflect.ValueOf(n))
		return
	case t == durationType:
		d.duration(n, path, v)
		return
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType):
		// A config type that reads its own YAML (an int or a list of
		// them, say); its error is placed at the value.
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.errorf(n, path, "%v", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, path, v.Elem())
	case reflect.Interface:
		if t.NumMethod() != 0 {
			d.errorf(n, path, "cannot decode into a value of type %s", t)
			return
		}
		if val, ok := d.generic(n, path); ok && val != nil {
			v.Set(reflect.ValueOf(val))
		}
	case reflect.Struct:
		d.structure(n, path, v)
	case reflect.Map:
		d.mapping(n, path, v)
	case reflect.Slice:
		d.sequence(n, path, v)
	case reflect.String:
		if d.expect(n, yaml.ScalarNode, path, "a string") {
			v.SetString(n.Value)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.errorf(n, path, "expected a boolean (true or false), got %s", describe(n))
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.errorf(n, path, "invalid boolean %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.errorf(n, path, "expected an integer, got %s", describe(n))
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			d.errorf(n, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.errorf(n, path, "expected a non-negative integer, got %s", describe(n))
			return
		}
		var u uint64
		if err := n.Decode(&u); err != nil || v.OverflowUint(u) {
			d.errorf(n, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
			d.errorf(n, path, "expected a number, got %s", describe(n))
			return
		}
		var f float64
		if err := n.Decode(&f); err != nil || v.OverflowFloat(f) {
			d.errorf(n, path, "number %s is out of range", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		d.errorf(n, path, "cannot decode into a value of type %s", t)
	}
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected a duration such as 2s, got %s", describe(n))
		return
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		d.errorf(n, path, "duration needs a unit, e.g. 2s")
		return
	case "!!str":
	default:
		d.errorf(n, path, "expected a duration such as 2s, got %s", describe(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, "invalid duration %q (use Go syntax such as 500ms, 2s, 1h30m)", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// field is a struct field reachable by a YAML key, possibly through inline
// structs.
type field struct {
	name  string
	index []int
}

// fieldsOf lists the YAML keys of struct type t in declaration order.
func fieldsOf(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			if sf.Type.Kind() == reflect.Struct {
				for _, f := range fieldsOf(sf.Type) {
					fields = append(fields, field{name: f.name, index: append([]int{i}, f.index...)})
				}
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		fields = append(fields, field{name: name, index: []int{i}})
	}
	return fields
}

func (d *decoder) structure(n *yaml.Node, path string, v reflect.Value) {
	if !d.expect(n, yaml.MappingNode, path, "a mapping") {
		return
	}
	fields := fieldsOf(v.Type())
	for _, p := range d.pairs(n, path) {
		name := p.name
		child := join(path, name)
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == name })
		if i < 0 {
			msg := fmt.Sprintf("unknown key %q", name)
			if s := suggest(name, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errorAt(d.position(p.key), child, errors.New(msg))
			continue
		}
		d.record(child, p.key, p.val)
		d.decode(p.val, child, v.FieldByIndex(fields[i].index))
	}
}

func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) {
	if !d.expect(n, yaml.MappingNode, path, "a mapping") {
		return
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		d.errorf(n, path, "cannot decode into a map of type %s", t)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	for _, p := range d.pairs(n, path) {
		child := join(path, p.name)
		d.record(child, p.key, p.val)
		elem := reflect.New(t.Elem()).Elem()
		d.decode(p.val, child, elem)
		v.SetMapIndex(reflect.ValueOf(p.name).Convert(t.Key()), elem)
	}
}

func (d *decoder) sequence(n *yaml.Node, path string, v reflect.Value) {
	if !d.expect(n, yaml.SequenceNode, path, "a sequence") {
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		child := fmt.Sprintf("%s[%d]", path, i)
		d.record(child, nil, item)
		d.decode(item, child, s.Index(i))
	}
	v.Set(s)
}

// generic decodes n as plain data: map[string]any, []any, string, bool, int,
// float64 or nil. It reports false when n holds a problem.
func (d *decoder) generic(n *yaml.Node, path string) (any, bool) {
	if !d.visit(n) {
		return nil, false
	}
	n, leave, ok := d.enter(n, path)
	if !ok {
		return nil, false
	}
	defer leave()
	if !d.checkTag(n, path) {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		ok := true
		for _, p := range d.pairs(n, path) {
			child := join(path, p.name)
			d.record(child, p.key, p.val)
			val, valOK := d.generic(p.val, child)
			ok = ok && valOK
			m[p.name] = val
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, item := range n.Content {
			child := fmt.Sprintf("%s[%d]", path, i)
			d.record(child, nil, item)
			val, itemOK := d.generic(item, child)
			ok = ok && itemOK
			s[i] = val
		}
		return s, ok
	case yaml.ScalarNode:
	default:
		d.errorf(n, path, "unexpected %s", describe(n))
		return nil, false
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool", "!!int", "!!float":
		var val any
		if err := n.Decode(&val); err != nil {
			d.errorf(n, path, "invalid %s %q", strings.TrimPrefix(describe(n), "a "), n.Value)
			return nil, false
		}
		if f, isFloat := val.(float64); isFloat && (math.IsInf(f, 0) || math.IsNaN(f)) {
			d.errorf(n, path, "%s cannot be represented in JSON", n.Value)
			return nil, false
		}
		return val, true
	case "!!binary":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(n.Value), ""))
		if err != nil {
			d.errorf(n, path, "invalid base64 in !!binary value")
			return nil, false
		}
		return string(b), true
	}
	return n.Value, true
}

// pair is one entry of a mapping: name is the key's text (after following an
// alias), key the key node as written, for positions.
type pair struct {
	name     string
	key, val *yaml.Node
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge"
}

// pairs returns the entries of mapping n in file order, with merge keys
// ("<<: *base") expanded in place: an explicit key overrides a merged one
// wherever the merge key sits, and an earlier merged mapping overrides a later
// one. A duplicate key is reported and dropped; so is a key that is not a
// scalar.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	entries := len(n.Content) / 2
	keep := make([]bool, entries)
	explicit := map[string]*yaml.Node{}
	for i := range entries {
		key := n.Content[2*i]
		if isMergeKey(key) {
			continue
		}
		rk := resolved(key)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			d.errorf(key, path, "mapping keys must be strings, got %s", describeKey(rk))
			continue
		}
		if first, dup := explicit[rk.Value]; dup {
			d.errorf(key, join(path, rk.Value), "duplicate key %q (first at line %d)", rk.Value, first.Line)
			continue
		}
		explicit[rk.Value] = key
		keep[i] = true
	}
	out := make([]pair, 0, len(explicit))
	merged := map[string]bool{}
	for i := range entries {
		key, val := n.Content[2*i], n.Content[2*i+1]
		if keep[i] {
			out = append(out, pair{name: resolved(key).Value, key: key, val: val})
			continue
		}
		if !isMergeKey(key) {
			continue
		}
		for _, p := range d.merge(val, path) {
			if explicit[p.name] != nil || merged[p.name] {
				continue
			}
			merged[p.name] = true
			out = append(out, p)
		}
	}
	return out
}

// merge returns the entries a merge key's value contributes: a mapping, or a
// sequence of mappings.
func (d *decoder) merge(val *yaml.Node, path string) []pair {
	if !d.visit(val) {
		return nil
	}
	n, leave, ok := d.enter(val, path)
	if !ok {
		return nil
	}
	defer leave()
	switch n.Kind {
	case yaml.MappingNode:
		return d.pairs(n, path)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range n.Content {
			if r := resolved(item); r == nil || r.Kind != yaml.MappingNode {
				d.errorf(item, path, "a merge key (<<) takes a mapping or a sequence of mappings")
				continue
			}
			out = append(out, d.merge(item, path)...)
		}
		return out
	}
	d.errorf(n, path, "a merge key (<<) takes a mapping or a sequence of mappings")
	return nil
}

func describeKey(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	return describe(n)
}

// lookup returns the value of key in mapping n (following aliases and merge
// keys), without reporting anything. It is used to read a discriminator such
// as a backend's type before the mapping is decoded.
func lookup(n *yaml.Node, key string) *yaml.Node {
	budget := 1000 // mappings to look into
	return lookupIn(n, key, &budget)
}

func lookupIn(n *yaml.Node, key string, budget *int) *yaml.Node {
	n = resolved(n)
	if n == nil || n.Kind != yaml.MappingNode || *budget <= 0 {
		return nil
	}
	*budget--
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merges = append(merges, v)
			continue
		}
		if rk := resolved(k); rk != nil && rk.Kind == yaml.ScalarNode && rk.Value == key {
			return v
		}
	}
	for _, m := range merges {
		m = resolved(m)
		if m == nil {
			continue
		}
		items := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			items = m.Content
		}
		for _, item := range items {
			if v := lookupIn(item, key, budget); v != nil {
				return v
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest returns the known key closest to name, if it is within two edits.
func suggest(name string, fields []field) string {
	best, bestDist := "", 3
	for _, f := range fields {
		if dist := spelling.Distance(strings.ToLower(name), f.name); dist < bestDist {
			best, bestDist = f.name, dist
		}
	}
	return best
}
