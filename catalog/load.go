package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// Built-in defaults for the settings a tool (or the `defaults:` block) may
// leave out.
const (
	DefaultServerName   = "jobbridge"
	DefaultTask         = TaskOptional
	DefaultPollInterval = 2 * time.Second
	// DefaultSyncBudget stays under the 60s after which common clients
	// (the TypeScript SDK's default request time-out) give up on a call.
	DefaultSyncBudget   = 50 * time.Second
	DefaultTTL          = 24 * time.Hour
	DefaultMissingGrace = 2 * time.Minute

	// MaxTTL bounds a tool's ttl.
	MaxTTL = 30 * 24 * time.Hour
	// maxRefreshFactor bounds refresh_interval relative to poll_interval:
	// beyond it clients would poll many times without seeing news.
	maxRefreshFactor = 10
)

// FormatVersion is the catalog format version (the file's `version:`) this
// package reads.
const FormatVersion = 1

// Load reads the catalog file at path and parses it with [Parse], knowing
// the backend types given. A file that cannot be read is reported as a plain
// error; problems in its content as [Errors].
func Load(path string, types ...BackendType) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	return Parse(path, data, types...)
}

// Parse decodes and validates a catalog. file names the catalog in positions
// and in Catalog.File. When the catalog is not valid, the error is an
// [Errors] holding every problem found, in file order.
//
// The backends a catalog may declare are those of the types given: a `type:`
// that names none of them is an error that lists them. Types that are
// malformed (no name, a name given twice, a constructor that does not return
// a pointer to a struct) are reported as a plain error: the program is wrong,
// not the file. The warnings of a valid catalog are in [Catalog.Warnings].
//
// Top-level keys that start with "x-" are ignored, so that they can hold YAML
// anchors shared by several tools. Parse does not read the environment:
// ${NAME} references in header values are kept as written (see
// [Catalog.EnvRefs]).
func Parse(file string, data []byte, types ...BackendType) (*Catalog, error) {
	set, err := checkTypes(types)
	if err != nil {
		return nil, err
	}
	l := &loader{decoder: newDecoder(file, nodeBudget(len(data))), src: data, types: set}
	c := l.load(data)
	if len(l.errs) > 0 {
		l.errs.sort()
		return nil, l.errs
	}
	sum := sha256.Sum256(data)
	c.File = file
	c.Revision = hex.EncodeToString(sum[:])[:12]
	l.warnings.sort()
	c.Warnings = l.warnings
	return c, nil
}

// nodeBudget bounds the number of nodes decoded from a file of n bytes. A
// catalog written out in full has fewer nodes than bytes; only aliases can
// exceed the budget.
func nodeBudget(n int) int { return 10_000 + 20*n }

// document is the file's top level as written.
type document struct {
	// Version is the catalog format's version. Required; must be 1.
	Version *int `yaml:"version"`
	// Server describes the server itself: its name and version as
	// clients see them, its instructions and the default task store.
	Server Server `yaml:"server"`
	// Defaults set the tool keys of every tool that does not set them
	// itself.
	Defaults settings `yaml:"defaults"`
	// Backends are the job systems the tools run on, by name; each entry's
	// `type:` says which adapter reads the rest of it.
	Backends *yaml.Node `yaml:"backends"`
	// Tools are the MCP tools the server offers, in the order listed.
	Tools []toolEntry `yaml:"tools"`
	// Auth, when set, makes every HTTP request authenticate (OAuth 2.1
	// bearer tokens, API keys or both) and binds each task to its caller.
	// Without it the server listens on loopback addresses only.
	Auth *yaml.Node `yaml:"auth"`
	// Limits bound what one caller, and one request, may consume; every
	// limit has a default.
	Limits *yaml.Node `yaml:"limits"`
}

// settings are the tool keys that `defaults:` may also set.
type settings struct {
	// Task says whether a call becomes a task: required (only clients
	// that declare the tasks extension may call the tool), optional (a
	// task when the client declares the extension, otherwise the call
	// waits for the job within sync_budget) or never (the call always
	// waits). Default optional.
	Task *string `yaml:"task"`
	// PollInterval is the pollIntervalMs advertised to clients (> 0),
	// doubled after a task has run 10 minutes and quadrupled after an hour
	// (at most one minute). Default 2s.
	PollInterval *time.Duration `yaml:"poll_interval"`
	// RefreshInterval is the least time between two backend observations
	// of one job; a poll within it is served from the last observation.
	// Default: poll_interval.
	RefreshInterval *time.Duration `yaml:"refresh_interval"`
	// SyncBudget bounds how long a call that is not a task waits for its
	// job. Default 50s, under the 60s after which common clients give up.
	SyncBudget *time.Duration `yaml:"sync_budget"`
	// TTL is how long a task stays retrievable after its creation; at most
	// 30 days. Default 24h.
	TTL *time.Duration `yaml:"ttl"`
	// MissingGrace is how long a job may be missing from the backend (or
	// its status unreadable) before the task ends. Default 2m.
	MissingGrace *time.Duration `yaml:"missing_grace"`
	// AfterSyncBudget says what a call that is not a task gets when its
	// job outlives sync_budget: cancel (the job is cancelled, said in
	// words) or return_handle (a handle to follow with the companion
	// tools). Default cancel. See [Tool.AfterSyncBudget] (results.go).
	AfterSyncBudget *string `yaml:"after_sync_budget"`
}

// toolEntry is one entry of `tools:` as written.
type toolEntry struct {
	// Name is the tool's name as clients call it. Required, unique,
	// [A-Za-z0-9_.-]{1,128}.
	Name string `yaml:"name"`
	// Title is an optional display name.
	Title string `yaml:"title"`
	// Description says what the tool does, for the model. Required.
	Description string `yaml:"description"`
	// Backend names the entry of `backends:` that runs the tool's jobs.
	// Required.
	Backend  string   `yaml:"backend"`
	Settings settings `yaml:",inline"`
	// Calls are the keys of calls.go: idempotency_key, idempotency_window
	// and inline_within.
	Calls callSettings `yaml:",inline"`
	// InputSchema is the JSON Schema of the tool's arguments; its type
	// must be object. Required. Arguments are checked against it before
	// any job starts, after the defaults it declares are filled in.
	InputSchema *yaml.Node `yaml:"input_schema"`
	// Confirm, when set, asks the caller before the job is submitted; the
	// task starts in input_required.
	Confirm *Confirm `yaml:"confirm"`
	// Annotations are the MCP tool hints shown to clients.
	Annotations *Annotations `yaml:"annotations"`
	// Allow, with auth, says who may list and call the tool. Default:
	// every authenticated caller.
	Allow *Policy `yaml:"allow"`
	// Job is the backend type's job block: how a call becomes a job. It is
	// decoded once the backend's type is known.
	Job *yaml.Node `yaml:"job"`
	// OutputSchema: see [Tool.OutputSchema] (results.go).
	OutputSchema *yaml.Node `yaml:"output_schema"`
}

// decodeBlock decodes the mapping n into a new T (all its keys but skip),
// applies the defaults and reports what Validate finds, at path.
func decodeBlock[T any, PT interface {
	*T
	Block
}](l *loader, n *yaml.Node, path string, skip string) *T {
	v := new(T)
	l.decodeInto(PT(v), n, path, skip)
	return v
}

// decodeInto decodes the mapping n into v, a pointer to a struct (all its
// keys but skip), applies the defaults and reports what Validate finds, at
// path.
func (l *loader) decodeInto(v Block, n *yaml.Node, path string, skip string) {
	l.decode(withoutKey(n, skip), path, reflect.ValueOf(v).Elem())
	v.SetDefaults()
	l.fieldErrors(path, v.Validate())
}

// withoutKey returns a copy of the mapping n without the pair whose key is
// skip (the backend's `type`, read before the rest of the block).
func withoutKey(n *yaml.Node, skip string) *yaml.Node {
	r := resolved(n)
	if skip == "" || r == nil || r.Kind != yaml.MappingNode {
		return n
	}
	c := *r
	c.Content = nil
	for i := 0; i+1 < len(r.Content); i += 2 {
		if k := resolved(r.Content[i]); k.Kind == yaml.ScalarNode && k.Value == skip {
			continue
		}
		c.Content = append(c.Content, r.Content[i], r.Content[i+1])
	}
	return &c
}

var (
	backendNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	toolNameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// loader turns a parsed document into a Catalog, reporting problems through
// its decoder.
type loader struct {
	*decoder
	// src is the file's text, to place problems inside scalar values.
	src   []byte
	types typeSet
	// warnings are the job blocks' warnings, positioned like errors.
	warnings Errors
}

func (l *loader) load(data []byte) *Catalog {
	root := l.parse(data)
	if root == nil {
		return nil
	}
	l.pos[""] = l.position(root)
	root = withoutExtensions(root)

	var doc document
	l.decode(root, "", reflect.ValueOf(&doc).Elem())
	if root.Kind != yaml.MappingNode {
		if isNull(root) {
			l.errorf(root, "", "the catalog is empty")
		}
		return nil
	}

	c := &Catalog{Server: doc.Server}
	if c.Server.Name == "" {
		c.Server.Name = DefaultServerName
	}
	switch {
	case doc.Version == nil:
		l.invalid("version", fmt.Errorf("required (this jobbridge reads version %d)", FormatVersion))
	case *doc.Version != FormatVersion:
		l.invalid("version", fmt.Errorf("unsupported version %d (this jobbridge reads version %d)", *doc.Version, FormatVersion))
	}

	c.Backends, c.BackendOrder = l.backends(doc.Backends)
	if doc.Auth != nil {
		c.Auth = decodeBlock[auth.Config](l, doc.Auth, "auth", "")
	}
	if doc.Limits != nil {
		c.Limits = *decodeBlock[Limits](l, doc.Limits, "limits", "")
	} else {
		c.Limits.SetDefaults()
	}

	defaults := l.settings("defaults", doc.Defaults, builtinSettings())
	if len(doc.Tools) == 0 {
		l.invalid("tools", errors.New("required: a catalog offers at least one tool"))
	}
	names := map[string]int{}
	for i := range doc.Tools {
		c.Tools = append(c.Tools, l.tool(fmt.Sprintf("tools[%d]", i), &doc.Tools[i], c.Backends, defaults, names))
	}
	l.companionNames(c)
	return c
}

// withoutExtensions drops the top-level keys that start with "x-": they are
// free for the operator's own use, typically to hold anchors that several
// tools share.
func withoutExtensions(root *yaml.Node) *yaml.Node {
	if root.Kind != yaml.MappingNode {
		return root
	}
	kept := *root
	kept.Content = nil
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Kind == yaml.ScalarNode && strings.HasPrefix(k.Value, "x-") {
			continue
		}
		kept.Content = append(kept.Content, root.Content[i], root.Content[i+1])
	}
	return &kept
}

// parse reads the single YAML document in data.
func (l *loader) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			l.errorAt(Position{File: l.file, Line: 1, Column: 1}, "", errors.New("the catalog is empty"))
		} else {
			l.syntaxError(data, err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.syntaxError(data, err)
		return nil
	default:
		l.errorAt(l.position(&extra), "", errors.New("the file holds more than one YAML document"))
		return nil
	}
	// The document node wraps the top-level value.
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		return root.Content[0]
	}
	return &root
}

// backends decodes the `backends:` mapping.
func (l *loader) backends(n *yaml.Node) (map[string]*Backend, []string) {
	backends := map[string]*Backend{}
	var order []string
	if n == nil {
		return backends, order
	}
	n, leave, ok := l.enter(n, "backends")
	if !ok {
		return backends, order
	}
	defer leave()
	if !l.expect(n, yaml.MappingNode, "backends", "a mapping") {
		return backends, order
	}
	for _, p := range l.pairs(n, "backends") {
		path := "backends." + p.name
		l.record(path, p.key, p.val)
		if !backendNameRE.MatchString(p.name) {
			l.errorf(p.key, path, "invalid backend name %q (use lowercase letters, digits, _ and -, starting with a letter)", p.name)
		}
		b := &Backend{Name: p.name, Pos: l.position(p.key)}
		backends[p.name] = b
		order = append(order, p.name)

		val := resolved(p.val)
		if val.Kind != yaml.MappingNode {
			l.expect(val, yaml.MappingNode, path, "a mapping")
			continue
		}
		typ := lookup(val, "type")
		if typ == nil {
			l.errorAt(l.position(p.key), path+".type", fmt.Errorf("required (%s)", l.types.known()))
			continue
		}
		r := resolved(typ)
		if r.Kind != yaml.ScalarNode || isNull(r) {
			l.errorf(typ, path+".type", "expected a string, got %s", describe(r))
			continue
		}
		b.Type = r.Value
		bt, ok := l.types.byName[b.Type]
		if !ok {
			l.errorAt(l.position(typ), path+".type", fmt.Errorf("unknown backend type %q (%s)", b.Type, l.types.known()))
			continue
		}
		cfg := bt.NewConfig()
		l.decodeInto(cfg, p.val, path, "type")
		if c, ok := cfg.(AddressChecker); ok {
			l.fieldErrors(path, c.CheckAddress())
		}
		b.Config = cfg
		if bt.EnvValues != nil {
			values := bt.EnvValues(cfg)
			b.EnvRefs = envRefsOf(values)
			b.FileRefs = fileRefsOf(values)
		}
	}
	return backends, order
}

// effective are a tool's settings after defaults, with where each was set
// (a path, or "" for a built-in default).
type effective struct {
	task                                              TaskMode
	poll, refresh, syncBudget, ttl, missingGrace      time.Duration
	pollAt, refreshAt, syncBudgetAt, ttlAt, missingAt string
	afterBudget                                       AfterSyncBudget
	afterBudgetAt                                     string
}

func builtinSettings() effective {
	return effective{
		task:         DefaultTask,
		poll:         DefaultPollInterval,
		syncBudget:   DefaultSyncBudget,
		ttl:          DefaultTTL,
		missingGrace: DefaultMissingGrace,
	}
}

// settings applies the settings block s at path over base, checking the
// values s sets and how they combine with the rest.
func (l *loader) settings(path string, s settings, base effective) effective {
	e := base
	if s.Task != nil {
		switch m := TaskMode(*s.Task); m {
		case TaskRequired, TaskOptional, TaskNever:
			e.task = m
		default:
			l.invalid(path+".task", fmt.Errorf("unknown task mode %q (known: required, optional, never)", *s.Task))
		}
	}
	set := func(d *time.Duration, key string, val *time.Duration, at *string) {
		if val == nil {
			return
		}
		p := path + "." + key
		switch {
		case l.decodeFailed(p):
			return
		case *val <= 0:
			l.invalid(p, errors.New("must be positive"))
			return
		case key == "ttl" && *val > MaxTTL:
			l.invalid(p, errors.New("must be at most 720h (30 days)"))
			return
		}
		*d, *at = *val, p
	}
	set(&e.poll, "poll_interval", s.PollInterval, &e.pollAt)
	set(&e.refresh, "refresh_interval", s.RefreshInterval, &e.refreshAt)
	set(&e.syncBudget, "sync_budget", s.SyncBudget, &e.syncBudgetAt)
	set(&e.ttl, "ttl", s.TTL, &e.ttlAt)
	set(&e.missingGrace, "missing_grace", s.MissingGrace, &e.missingAt)
	l.afterSyncBudget(path, s.AfterSyncBudget, &e)
	if e.refreshAt == "" {
		// Not set anywhere: refresh as often as clients are told to poll.
		e.refresh = e.poll
	}

	// Report a bad combination once, where this block takes part in it.
	mine := func(at string) bool { return strings.HasPrefix(at, path+".") }
	pick := func(first, second string) string {
		if mine(first) {
			return first
		}
		return second
	}
	if e.refresh > maxRefreshFactor*e.poll && (mine(e.refreshAt) || mine(e.pollAt)) {
		at := pick(e.refreshAt, e.pollAt)
		l.invalid(at, fmt.Errorf("refresh_interval %s is more than %d times poll_interval %s: clients would poll many times without news", e.refresh, maxRefreshFactor, e.poll))
	}
	if e.poll > e.ttl && (mine(e.pollAt) || mine(e.ttlAt)) {
		at := pick(e.pollAt, e.ttlAt)
		l.invalid(at, fmt.Errorf("poll_interval %s is longer than ttl %s: the task would expire before the first poll", e.poll, e.ttl))
	}
	return e
}

// tool checks one entry of `tools:` and builds its Tool. names maps the
// tool names seen so far to their lines.
func (l *loader) tool(path string, te *toolEntry, backends map[string]*Backend, defaults effective, names map[string]int) *Tool {
	t := &Tool{
		Name:        te.Name,
		Title:       te.Title,
		Description: te.Description,
		Backend:     te.Backend,
		Confirm:     te.Confirm,
		Annotations: te.Annotations,
		Allow:       te.Allow,
		Pos:         l.at(path),
	}

	namePath := path + ".name"
	switch first, dup := names[te.Name]; {
	case te.Name == "":
		l.invalid(namePath, errors.New("required"))
	case !toolNameRE.MatchString(te.Name):
		l.invalid(namePath, fmt.Errorf("invalid tool name %q (use 1 to 128 letters, digits, _, - and .)", te.Name))
	case dup:
		l.invalid(namePath, fmt.Errorf("duplicate tool name %q (first at line %d)", te.Name, first))
	default:
		names[te.Name] = l.at(namePath).Line
	}
	if strings.TrimSpace(te.Description) == "" {
		p := path + ".description"
		l.invalid(p, errors.New("required: agents choose tools by their description"))
	}

	e := l.settings(path, te.Settings, defaults)
	t.Task, t.PollInterval, t.RefreshInterval = e.task, e.poll, e.refresh
	t.SyncBudget, t.TTL, t.MissingGrace = e.syncBudget, e.ttl, e.missingGrace
	t.AfterSyncBudget = l.toolAfterSyncBudget(path, te, e)
	t.OutputSchema = l.outputSchema(path+".output_schema", te.OutputSchema)
	t.Calls = l.calls(path, te.Calls, e.task, e.syncBudget)

	schema, props := l.inputSchema(path+".input_schema", te.InputSchema)
	t.InputSchema = schema

	if te.Confirm != nil {
		p := path + ".confirm.message"
		switch {
		case strings.TrimSpace(te.Confirm.Message) == "":
			l.invalid(p, errors.New("required"))
		default:
			l.confirmPlaceholders(p, te.Confirm.Message, props)
		}
	}

	backendPath := path + ".backend"
	b := backends[te.Backend]
	switch {
	case te.Backend == "":
		l.invalid(backendPath, errors.New("required"))
	case b == nil:
		l.invalid(backendPath, fmt.Errorf("unknown backend %q%s", te.Backend, known(backends)))
	default:
		// A backend of an unknown type was reported where it is declared.
		if bt, ok := l.types.byName[b.Type]; ok {
			t.Job = l.job(bt.NewJob(), path+".job", te.Job, props)
		}
	}
	return t
}

// known formats the backend names for an "unknown backend" message.
func known(backends map[string]*Backend) string {
	if len(backends) == 0 {
		return " (no backends are declared)"
	}
	names := make([]string, 0, len(backends))
	for name := range backends {
		names = append(names, name)
	}
	slices.Sort(names)
	return " (known: " + strings.Join(names, ", ") + ")"
}

// job decodes a tool's job block n at path into job, checks it and
// collects its warnings. props are the input schema's properties, or nil
// when the schema is unusable. It returns job, or nil when n is absent.
func (l *loader) job(job JobBlock, path string, n *yaml.Node, props map[string]bool) JobBlock {
	if n == nil {
		l.invalid(path, errors.New("required: the calls that start and observe the job"))
		return nil
	}
	l.decodeInto(job, n, path, "")
	if props != nil {
		for _, name := range job.ArgNames() {
			if props[name] {
				continue
			}
			// A placeholder, else an expression reading the argument.
			var at string
			var pos Position
			for _, text := range []string{"{args." + name + "}", "args." + name, `args["` + name + `"]`, "args['" + name + "']"} {
				if at, pos = l.findText(n, path, text); at != path {
					break
				}
			}
			l.errorAt(pos, at, noProperty(name, props))
		}
	}
	if w, ok := job.(Warner); ok {
		for _, e := range l.placeAll(path, w.Warnings()) {
			if !l.decodeFailed(e.Path) {
				l.warnings = append(l.warnings, e)
			}
		}
	}
	return job
}

// invalid reports a problem found after decoding, at the position of the
// value at path. It says nothing when decoding already reported a problem at
// path or at a value enclosing it: the new one would only be its echo.
func (l *loader) invalid(path string, err error) {
	if l.decodeFailed(path) {
		return
	}
	l.errs = append(l.errs, &Error{Pos: l.at(path), Path: path, Err: err})
}

// decodeFailed reports whether decoding reported a problem at path or at a
// value enclosing it.
func (l *loader) decodeFailed(path string) bool {
	for {
		if l.failed[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return l.failed[""]
		}
		path = path[:i]
	}
}

// fieldErrors reports the problems a config's Validate found in the block at
// path, each at the position of the field it names.
func (l *loader) fieldErrors(block string, err error) {
	for _, e := range l.placeAll(block, err) {
		if !l.decodeFailed(e.Path) {
			l.errs = append(l.errs, e)
		}
	}
}

// placeAll positions the problems err holds (joined) in the block at path:
// a [fielderr.Error] at the field it names, and with an Offset at that byte
// of the field's value; any other error at the block.
func (l *loader) placeAll(block string, err error) Errors {
	var out Errors
	for _, e := range leaves(err) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			out = append(out, &Error{Pos: l.at(block), Path: block, Err: e})
			continue
		}
		path := block
		if fe.Path != "" {
			path = block + "." + fe.Path
		}
		if _, ok := l.pos[path]; !ok {
			if alt := indexBrackets(path); alt != path {
				if _, ok := l.pos[alt]; ok {
					path = alt
				}
			}
		}
		pos := l.at(path)
		if n := l.nodes[path]; n != nil && fe.Offset > 0 {
			if p, ok := l.inValue(n, fe.Offset); ok {
				pos = p
			}
		}
		out = append(out, &Error{Pos: pos, Path: path, Err: fe.Err})
	}
	return out
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

var dottedIndexRE = regexp.MustCompile(`\.(\d+)(\.|$)`)

// indexBrackets rewrites sequence indexes in a dotted path ("body.items.0")
// into the bracket form the decoder records ("body.items[0]").
func indexBrackets(path string) string {
	for {
		next := dottedIndexRE.ReplaceAllString(path, "[$1]$2")
		if next == path {
			return path
		}
		path = next
	}
}

// findText finds the first scalar under n (a node decoded at path) whose text
// contains s, and returns its path and position; n's own otherwise.
func (l *loader) findText(n *yaml.Node, path, s string) (string, Position) {
	var walk func(n *yaml.Node, path string) (string, *yaml.Node)
	walk = func(n *yaml.Node, path string) (string, *yaml.Node) {
		switch n.Kind {
		case yaml.ScalarNode:
			if strings.Contains(n.Value, s) {
				return path, n
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if p, found := walk(n.Content[i+1], join(path, n.Content[i].Value)); found != nil {
					return p, found
				}
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				if p, found := walk(item, fmt.Sprintf("%s[%d]", path, i)); found != nil {
					return p, found
				}
			}
		}
		return "", nil
	}
	if p, found := walk(n, path); found != nil {
		return p, l.position(found)
	}
	return path, l.at(path)
}
