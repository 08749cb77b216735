// Package catalog loads and validates the YAML tool catalog: which backends
// exist, which tools the server offers, and how each tool's arguments become a
// backend job.
//
// Loading reports every problem at once, each as "file:line:col: path:
// message" (see [Error]); unknown keys are errors; a YAML syntax error is
// reported at the character that breaks the file; each tool's input schema
// is checked against the JSON Schema draft 2020-12 meta-schema rules, and its
// defaults against their own schemas, so that a mistake is a clear error when
// the catalog loads rather than a failure at call time.
//
// The catalog imports no adapter. The program hands the loader the backend
// types it knows ([BackendType]); each type decodes and validates its own
// blocks (a REST backend, for example, checks a literal or localhost
// base_url against the networks its adapter refuses), and the catalog
// reports what they find at the line and column of the field at fault, or
// of the character inside its value.
package catalog

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// Catalog is a loaded, validated catalog.
type Catalog struct {
	// File is the path the catalog was loaded from.
	File string
	// Revision identifies the catalog's content (a short hex SHA-256).
	Revision string
	Server   Server
	// Backends by name, and in file order.
	Backends     map[string]*Backend
	BackendOrder []string
	// Tools in file order.
	Tools []*Tool
	// Auth, when set, makes the HTTP endpoint authenticate every request
	// (OAuth 2.1 resource server and/or API keys) and bind each task to its
	// caller.
	Auth *auth.Config
	// Limits bound what one caller, and one request, may consume.
	Limits Limits
	// Warnings are what the job blocks' Warnings methods (see [Warner])
	// found: allowed, but probably mistakes. They are positioned like
	// errors, in file order, and do not keep the catalog from loading.
	Warnings Errors
}

// Limits is the catalog's `limits:` block. Every limit has a default.
type Limits struct {
	// MaxLiveTasks is how many unfinished tasks one principal may have.
	// Default 100.
	MaxLiveTasks int `yaml:"max_live_tasks"`
	// CreatesPerMinute is how many tasks one principal may create per
	// minute, across all the replicas sharing a store: the store counts
	// creations in fixed one-minute windows, atomically with each insert
	// (so up to twice as many may be created across a window's boundary).
	// Default 60.
	CreatesPerMinute int `yaml:"creates_per_minute"`
	// GetsPerSecond is how many tasks/* requests one principal may send per
	// second, per replica (a burst of twice as many is allowed); faster
	// callers get HTTP 429 with Retry-After. It is a bucket in each
	// process, since a count shared through the store would cost a write
	// per tasks/get: N replicas allow up to N times it. Default 100.
	GetsPerSecond int `yaml:"gets_per_second"`
	// MaxRequestBytes bounds an HTTP request body. Default 1 MiB.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// MaxArgumentBytes bounds a tool call's arguments. Default 64 KiB.
	MaxArgumentBytes int `yaml:"max_argument_bytes"`
	// MaxResultBytes bounds a stored result's text; a longer one is cut with
	// a note. Default 256 KiB.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// MaxInputWait is how long a task may wait for an answer in
	// input_required before it is cancelled. Default 24h.
	MaxInputWait time.Duration `yaml:"max_input_wait"`
	// StreamsPerPrincipal is how many subscriptions/listen streams of task
	// notifications one principal may hold open on one replica. Default 16.
	StreamsPerPrincipal int `yaml:"streams_per_principal"`
	// TasksPerStream is how many task IDs one stream may listen to.
	// Default 1000.
	TasksPerStream int `yaml:"tasks_per_stream"`
	// StreamKeepAlive is how often an idle HTTP stream gets an SSE comment,
	// so that proxies keep it open. Default 15s.
	StreamKeepAlive time.Duration `yaml:"stream_keep_alive"`
	// MaxStreamLife is how long a stream stays open before the server
	// closes it gracefully; the client listens again and misses nothing,
	// since each task's current state comes first. Default 1h.
	MaxStreamLife time.Duration `yaml:"max_stream_life"`
}

// SetDefaults fills the limits left at zero.
func (l *Limits) SetDefaults() {
	setInt(&l.MaxLiveTasks, 100)
	setInt(&l.CreatesPerMinute, 60)
	setInt(&l.GetsPerSecond, 100)
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = 1 << 20
	}
	setInt(&l.MaxArgumentBytes, 64<<10)
	setInt(&l.MaxResultBytes, 256<<10)
	if l.MaxInputWait == 0 {
		l.MaxInputWait = 24 * time.Hour
	}
	setInt(&l.StreamsPerPrincipal, 16)
	setInt(&l.TasksPerStream, 1000)
	if l.StreamKeepAlive == 0 {
		l.StreamKeepAlive = 15 * time.Second
	}
	if l.MaxStreamLife == 0 {
		l.MaxStreamLife = time.Hour
	}
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

// Validate reports limits that are negative or too small to work with.
func (l *Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		path string
		v    int64
		min  int64
	}{
		{"max_live_tasks", int64(l.MaxLiveTasks), 1},
		{"creates_per_minute", int64(l.CreatesPerMinute), 1},
		{"gets_per_second", int64(l.GetsPerSecond), 1},
		{"max_request_bytes", l.MaxRequestBytes, 1 << 10},
		{"max_argument_bytes", int64(l.MaxArgumentBytes), 16},
		{"max_result_bytes", int64(l.MaxResultBytes), 1 << 10},
		{"streams_per_principal", int64(l.StreamsPerPrincipal), 1},
		{"tasks_per_stream", int64(l.TasksPerStream), 1},
	} {
		if f.v < f.min {
			errs = append(errs, fielderr.Errorf(f.path, "must be at least %d", f.min))
		}
	}
	if l.MaxInputWait < time.Minute {
		errs = append(errs, fielderr.Errorf("max_input_wait", "must be at least 1m"))
	}
	if l.StreamKeepAlive < time.Second {
		errs = append(errs, fielderr.Errorf("stream_keep_alive", "must be at least 1s"))
	}
	if l.MaxStreamLife < time.Minute {
		errs = append(errs, fielderr.Errorf("max_stream_life", "must be at least 1m"))
	}
	return errors.Join(errs...)
}

// Tool returns the tool with the given name, or nil.
func (c *Catalog) Tool(name string) *Tool {
	for _, t := range c.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Server is the catalog's `server:` block.
type Server struct {
	// Name is reported as serverInfo's name. Default "jobbridge".
	Name string `yaml:"name"`
	// Version is reported as serverInfo's version. Default: the binary's
	// version.
	Version string `yaml:"version"`
	// Instructions are returned by server/discover.
	Instructions string `yaml:"instructions"`
	// Store is the task store URL (sqlite:PATH or postgres://...), used when
	// neither --store nor JOBBRIDGE_STORE is given. It may reference
	// environment variables as ${NAME}.
	Store string `yaml:"store"`
}

// Backend is one entry of the `backends:` map.
type Backend struct {
	Name string
	// Type names the backend's [BackendType]: "rest", "aws_batch", ...
	Type string
	// Config is the decoded backend config: the pointer the type's
	// NewConfig returned (a *rest.BackendConfig for "rest", say), with its
	// defaults applied.
	Config any
	// EnvRefs are the sorted names of the environment variables that the
	// config's secrets reference as ${NAME} (see BackendType.EnvValues).
	EnvRefs []string
	// FileRefs are the sorted paths of the files that the config's secrets
	// reference as ${file:PATH} (in the same values as EnvRefs).
	FileRefs []string
	Pos      Position
}

// TaskMode says whether a tool's calls become tasks.
type TaskMode string

const (
	// TaskRequired: only clients that declare the tasks extension may call
	// the tool; others get -32021.
	TaskRequired TaskMode = "required"
	// TaskOptional: a task when the client declares the extension, otherwise
	// the call waits for the job within SyncBudget. The default.
	TaskOptional TaskMode = "optional"
	// TaskNever: the call always waits for the job (synchronous).
	TaskNever TaskMode = "never"
)

// Tool is one entry of the `tools:` list.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Backend names the backend that runs the tool's jobs.
	Backend string
	Task    TaskMode
	// InputSchema is the tool's JSON Schema for its arguments (type object),
	// as JSON.
	InputSchema json.RawMessage
	// Confirm, when set, makes each task start in input_required with this
	// confirmation prompt; the job is submitted only after the user accepts.
	Confirm *Confirm
	// PollInterval is the pollIntervalMs advertised to clients. Default 2s.
	PollInterval time.Duration
	// RefreshInterval is the minimum time between two backend observations
	// of one job; polls within it are served from the last observation.
	// Default: PollInterval.
	RefreshInterval time.Duration
	// SyncBudget bounds how long a synchronous call waits for the job.
	// Default 50s, under the 60s request time-out of common clients.
	SyncBudget time.Duration
	// AfterSyncBudget is what a call without tasks gets when its job
	// outlives SyncBudget: the job cancelled (the default) or the task's
	// handle (see results.go).
	AfterSyncBudget AfterSyncBudget
	// OutputSchema, when set, is the JSON Schema of the job's data (see
	// results.go), as JSON.
	OutputSchema json.RawMessage
	// TTL is how long a task stays retrievable after creation. Default 24h.
	TTL time.Duration
	// MissingGrace is how long a job may be missing from the backend before
	// the task ends with an error. Default 2m.
	MissingGrace time.Duration
	// Annotations are the MCP tool hints.
	Annotations *Annotations
	// Calls are the idempotency and inline options (calls.go).
	Calls Calls
	// Allow restricts who may see and call the tool when the server
	// authenticates its callers. Nil: every authenticated caller.
	Allow *Policy
	// Job is the tool's decoded job block: the pointer its backend type's
	// NewJob returned (a *rest.JobConfig for a "rest" backend, say), with
	// its defaults applied. Nil when the backend is unknown.
	Job any
	Pos Position
}

// Confirm is a confirmation prompt.
type Confirm struct {
	// Message may use {args.NAME} placeholders.
	Message string `yaml:"message"`
}

// Annotations are MCP tool annotations (hints for clients, not enforced).
type Annotations struct {
	// ReadOnly hints that the tool changes nothing (readOnlyHint).
	ReadOnly *bool `yaml:"read_only"`
	// Destructive hints that the tool may destroy or overwrite something
	// (destructiveHint).
	Destructive *bool `yaml:"destructive"`
	// Idempotent hints that calling the tool again with the same
	// arguments has no further effect (idempotentHint).
	Idempotent *bool `yaml:"idempotent"`
	// OpenWorld hints that the tool reaches systems outside the server
	// (openWorldHint).
	OpenWorld *bool `yaml:"open_world"`
}

// Policy says who may list and call a tool. A caller is allowed when it is
// one of Principals or a member of one of Groups (either list empty: no
// restriction of that kind, both empty: everyone) and holds every scope in
// Scopes.
type Policy struct {
	// Principals are callers allowed by identity: an OAuth principal's
	// "issuer|subject" or an API key's "key:principal".
	Principals []string `yaml:"principals"`
	// Groups allow every caller in one of them (the token's groups claim,
	// an API key's groups).
	Groups []string `yaml:"groups"`
	// Scopes must all be held by the caller; a caller that lacks one gets
	// HTTP 403 insufficient_scope naming it.
	Scopes []string `yaml:"scopes"`
}

// Allows reports whether a caller with the given identity may use the tool.
func (p *Policy) Allows(principal string, groups, scopes []string) bool {
	if p == nil {
		return true
	}
	member := len(p.Principals) == 0 && len(p.Groups) == 0
	for _, x := range p.Principals {
		member = member || x == principal
	}
	for _, g := range p.Groups {
		for _, h := range groups {
			member = member || g == h
		}
	}
	if !member {
		return false
	}
	for _, need := range p.Scopes {
		held := false
		for _, s := range scopes {
			held = held || s == need
		}
		if !held {
			return false
		}
	}
	return true
}

// Position is a place in a catalog file.
type Position struct {
	File   string
	Line   int
	Column int
}
