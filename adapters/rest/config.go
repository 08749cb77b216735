package rest

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// BackendConfig is a `type: rest` backend in the catalog: where the job API
// lives and how to talk to it. Every tool on the backend shares it.
//
//	backends:
//	  jobs:
//	    type: rest
//	    base_url: https://jobs.example.com/api/v1
//	    headers:
//	      Authorization: Bearer ${JOBS_TOKEN}
//	    allow_networks: [10.20.0.0/16]   # only for an API on an internal network
type BackendConfig struct {
	// BaseURL is the scheme, host, port and path prefix of the job API. Every
	// request the adapter makes stays under it: tool arguments only fill
	// escaped path segments, query values and body values.
	BaseURL string `yaml:"base_url"`
	// Headers are sent on every request. Values may reference environment
	// variables as ${NAME}; they are expanded when the server starts and are
	// never logged or echoed in errors.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each HTTP request. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is how many times a safe request (status GET, find) is
	// retried on connection errors and 5xx answers other than 501, with
	// jittered exponential backoff that never waits past the caller's
	// deadline. A 429, or a 503 with Retry-After, is never retried: it is
	// reported as throttling and the bridge pauses the backend. Default 3.
	MaxRetries *int `yaml:"max_retries"`
	// IdempotencyHeader, when set, names a request header (for example
	// "Idempotency-Key") in which the start call carries the correlation ID.
	// The API then de-duplicates submissions, so a start that may have reached
	// the server is retried like a safe request. Without it a start is sent
	// once and an ambiguous outcome is reconciled, never re-sent.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// ListingLag is how long after a submission the API's lookup (a tool's
	// find call) may still not show the job. Within it, a lookup that finds
	// nothing proves nothing and is asked again later; only after it does
	// "not found" mean the job was not created. Default 60s; 0s for an API
	// that lists a job as soon as it accepts it.
	ListingLag *time.Duration `yaml:"listing_lag"`
	// AllowNetworks lists networks (CIDR, e.g. 10.20.0.0/16 or
	// 127.0.0.0/8) the adapter may connect to although they are in a range
	// it refuses by default: loopback, private (RFC 1918, IPv6 ULA),
	// link-local (incl. 169.254.169.254), CGNAT, unspecified, multicast,
	// documentation and other special-purpose blocks, in IPv4, IPv6 and
	// IPv4-mapped forms. The check applies to the address actually dialled,
	// after name resolution. Default: none (public addresses only).
	AllowNetworks []string `yaml:"allow_networks"`
	// OAuth2, when set, makes the adapter send an OAuth 2.0 access token
	// obtained with the client credentials grant; see [OAuth2Config].
	OAuth2 *OAuth2Config `yaml:"oauth2"`
	// PropagateTrace, when true, sends the W3C traceparent (and tracestate)
	// of the bridge's backend-call span on every request, so that an API
	// that traces can join the bridge's trace. Default false: the API learns
	// nothing of the bridge's traces.
	PropagateTrace bool `yaml:"propagate_trace"`
	// Events, when set, makes the bridge accept the job API's signed
	// callbacks about job state changes; see [EventsConfig]. Without it the
	// backend's jobs are only polled.
	Events *EventsConfig `yaml:"events"`
}

// JobConfig is a tool's `job:` block on a rest backend: the calls that start,
// observe, cancel and answer a job.
//
// Templates. Path, query, header and body values may contain placeholders in
// braces: {args.NAME} (a tool argument), {job.id} (the job ID),
// {job.location} (the Location the start call returned), {correlation_id},
// and {= EXPR}, a CEL expression over the same names (see package
// adapters/expr), e.g. {= shell_quote(args.branch)}. A placeholder in a path
// is path-escaped as one segment, in a query value query-escaped. In a body,
// a string leaf that is exactly one placeholder or expression is replaced by
// the value with its JSON type kept ({args.count} stays a number);
// placeholders inside a longer string are interpolated as text. In a respond
// body, {answers} is the map of answers by key, each {"action": ...,
// "content": {...}}.
//
// Readings. Every field that reads an answer (job_id.field, status.field,
// status.message, ..., find.field) is a JSON path in gjson syntax or, when
// it starts with "=", a CEL expression over body (the answer's JSON),
// status (its HTTP status), headers (lower-case names), args, job and
// correlation_id.
type JobConfig struct {
	// Start submits the job. Method defaults to POST.
	Start Call `yaml:"start"`
	// JobID says where the start response carries the job's ID.
	JobID JobIDConfig `yaml:"job_id"`
	// Status observes the job. Method defaults to GET.
	Status StatusConfig `yaml:"status"`
	// Cancel, when set, stops the job. Method defaults to POST. A 404, 409
	// or 410 answer is checked with one status call: a job that has finished
	// (or is gone) keeps its own outcome; one still running means the cancel
	// was refused, and it is tried again. Without it tasks/cancel is recorded
	// but nothing is sent downstream.
	Cancel *Call `yaml:"cancel"`
	// Respond, when set, delivers answers to the job's input requests.
	Respond *Call `yaml:"respond"`
	// Find, when set, looks a job up by its correlation ID after a
	// submission whose outcome is unknown. Within the backend's listing_lag
	// of the submission, finding nothing is not taken as proof.
	Find *FindConfig `yaml:"find"`
}

// Call is one HTTP request template.
type Call struct {
	// Method is the HTTP method; its default depends on the call (POST
	// to start, cancel and respond, GET to observe and find).
	Method string `yaml:"method"`
	// Path is appended to the backend's base_url: a template whose
	// placeholders are escaped as one path segment each. A path that
	// would climb out of base_url is refused before anything is sent.
	Path string `yaml:"path"`
	// Query are query parameters; values are templates, query-escaped.
	Query map[string]string `yaml:"query"`
	// Headers are sent with this call besides the backend's headers;
	// values are templates.
	Headers map[string]string `yaml:"headers"`
	// Body is built as structured data (a YAML mapping or list) and sent as
	// JSON; it is never a string template.
	Body any `yaml:"body"`
	// Outcomes say what answers mean, checked in order before the
	// defaults; the first rule that matches decides.
	Outcomes []Outcome `yaml:"outcomes"`
}

// Outcome is one answer classification rule of a call:
//
//	outcomes:
//	  - status: [500]
//	    when: 'body.errors.exists(e, e.error_number == 2017)'
//	    is: not_found
//	    message: '= body.errors[0].error'
type Outcome struct {
	// Status lists the HTTP statuses the rule applies to (one, or a list);
	// empty: any.
	Status Statuses `yaml:"status"`
	// When is a CEL condition over body, status and headers (and the
	// call's values); empty: always. A condition that reads a field the
	// answer does not have is false.
	When string `yaml:"when"`
	// Is is what the answer means. Each call accepts its own meanings:
	// start: success, refused (certainly no job), unknown, retry_later;
	// status: success, not_found, retry_later, error; cancel and
	// job_id.queue.cancel: success, already_finished, not_found, refused,
	// retry_later; respond: success, not_found, refused, retry_later; find:
	// success, not_found, retry_later; job_id.queue: success, not_found
	// (the queue item is gone and named no job), cancelled (the queued
	// request was cancelled, by the task's cancel or at the backend),
	// refused (the backend will not run it), retry_later. A queued request
	// that is cancelled, refused or gone never started: the task ends
	// cancelled when it asked to cancel, else completed with isError saying
	// so (a gone one after the tool's missing_grace).
	Is string `yaml:"is"`
	// Message, a JSON path or "=" expression, is the text shown for a
	// refusal or an error; default: the answer's own message field.
	Message string `yaml:"message"`
}

// Statuses are HTTP statuses, written as one number or a list of them.
type Statuses []int

// UnmarshalYAML reads `404` or `[404, 410]`.
func (s *Statuses) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var one int
		if err := n.Decode(&one); err != nil {
			return fmt.Errorf("expected an HTTP status or a list of them, got %q", n.Value)
		}
		*s = Statuses{one}
		return nil
	}
	var list []int
	if err := n.Decode(&list); err != nil {
		return errors.New("expected an HTTP status or a list of them")
	}
	*s = list
	return nil
}

// JobIDConfig locates the job ID in the start response.
type JobIDConfig struct {
	// Field is a JSON path (gjson syntax, e.g. "id" or "job.id") into the
	// response body, or an "=" expression.
	Field string `yaml:"field"`
	// FromLocation takes the job ID from the last path segment of the
	// Location header, and makes {job.location} available to later calls.
	FromLocation bool `yaml:"from_location"`
	// Queue, when set, says that the start answer names a queue item or an
	// operation, not the job: the adapter asks it until the job's own ID
	// appears.
	Queue *QueueConfig `yaml:"queue"`
}

// QueueConfig follows a queue item (Jenkins' /queue/item/N/, a long-running
// operation) until it names the job. Its call is a GET about the queue item:
// {job.id} and {job.location} are the queue item's. Its outcome rules may
// say cancelled (Jenkins' `cancelled: true`), refused or not_found: such a
// queued request never started, and the task ends cancelled when it asked
// to cancel, else completed with isError saying the job was never started,
// in the backend's words (never failed). A 404 or 410 answer is not_found.
type QueueConfig struct {
	Call `yaml:",inline"`
	// Field reads the job's ID from the queue answer; absent or null means
	// the job is still queued.
	Field string `yaml:"field"`
	// Message reads why the job is still queued (Jenkins' "why"), shown
	// after "queued at the backend".
	Message string `yaml:"message"`
	// Timeout is how long a job may stay queued; after it the queued
	// request is removed (with cancel) and the task ends as never started,
	// saying so. Default 1h.
	Timeout time.Duration `yaml:"timeout"`
	// Cancel, when set, removes the queue item (e.g. Jenkins' POST
	// /queue/cancelItem?id={job.id}); without it a cancel of a queued job
	// is refused and tried again once the job has started.
	Cancel *Call `yaml:"cancel"`
}

// StatusConfig is the status call and how to read its answer.
type StatusConfig struct {
	Call `yaml:",inline"`
	// Field reads the status value, e.g. "status", or
	// '= body.building ? "BUILDING" : body.result'. The value is looked up
	// in States.
	Field string `yaml:"field"`
	// States maps status values to adapter states: working, input_required,
	// succeeded, tool_error, cancelled, failed. A value not in the table is
	// reported as the observation's problem (adapters.ErrUnmappedState),
	// naming the value and the mapped ones, and logged once.
	States map[string]string `yaml:"states"`
	// Message reads a human-readable status message.
	Message string `yaml:"message"`
	// FinishedAt reads the time (RFC 3339) the job finished, read for
	// finished jobs. It lets the bridge tell a job that failed before a
	// cancel took effect from one the cancel stopped.
	FinishedAt string `yaml:"finished_at"`
	// Progress locates progress counters.
	Progress *ProgressConfig `yaml:"progress"`
	// Result locates the job's output once it has finished.
	Result *ResultConfig `yaml:"result"`
	// Error locates a protocol-level error for the failed state.
	Error *ErrorConfig `yaml:"error"`
	// InputRequests reads the job's outstanding questions: an array of
	// objects {"key", "message", "schema"} where schema is an elicitation
	// requestedSchema.
	InputRequests string `yaml:"input_requests"`
	// Links are titled URL templates added to the task's result; they may use
	// the same placeholders as paths, plus {base_url}.
	Links map[string]string `yaml:"links"`
}

// ProgressConfig locates progress counters in the status answer.
type ProgressConfig struct {
	// Done reads how much of the job is done (a number).
	Done string `yaml:"done"`
	// Total reads how much there is to do in all (a number).
	Total string `yaml:"total"`
}

// ResultConfig locates a finished job's output in the status answer.
type ResultConfig struct {
	// Text reads a text summary.
	Text string `yaml:"text"`
	// Structured reads an object returned as structured content.
	Structured string `yaml:"structured"`
}

// ErrorConfig locates a protocol-level error in the status answer.
type ErrorConfig struct {
	// Code reads the error's code.
	Code string `yaml:"code"`
	// Message reads the error's message.
	Message string `yaml:"message"`
}

// FindConfig is a lookup by correlation ID.
type FindConfig struct {
	Call `yaml:",inline"`
	// Field reads the found job's ID: a string or number, or a list of IDs
	// (an expression searching a list answer). Absent, null, empty or an
	// empty list means no job carries the correlation ID; a list of more
	// than one is an error (the bridge cannot tell which job is the task's).
	Field string `yaml:"field"`
}

// Defaults applied by SetDefaults.
const (
	defaultTimeout    = 10 * time.Second
	defaultMaxRetries = 3
	defaultListingLag = time.Minute
	maxMaxRetries     = 10
	defaultQueueWait  = time.Hour
)

// SetDefaults fills the fields the operator left out: a 10s timeout, 3
// retries and a listing lag of 60s, and the events block's defaults.
func (c *BackendConfig) SetDefaults() {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.MaxRetries == nil {
		n := defaultMaxRetries
		c.MaxRetries = &n
	}
	if c.ListingLag == nil {
		d := defaultListingLag
		c.ListingLag = &d
	}
	if c.Events != nil {
		c.Events.SetDefaults()
	}
}

// Validate reports every problem in the backend block, joined, each as an
// [adapters.FieldError] whose path is relative to the block. It may be called
// before or after SetDefaults. Header values may hold secrets and never
// appear in its errors.
func (c *BackendConfig) Validate() error {
	var errs []error
	if err := checkBaseURL(c.BaseURL); err != nil {
		errs = append(errs, adapters.Fieldf("base_url", "%v", err))
	}
	for _, name := range sortedKeys(c.Headers) {
		errs = append(errs, checkHeader("headers."+name, name, c.Headers[name])...)
		if _, err := expr.ParseTemplate(c.Headers[name], backendHeaderScope); err != nil {
			errs = append(errs, fieldErr("headers."+name, fmt.Errorf("%w; backend headers take only ${NAME} and ${file:PATH}: use a call's headers for placeholders", err)))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, adapters.Fieldf("timeout", "must not be negative"))
	}
	if c.MaxRetries != nil && (*c.MaxRetries < 0 || *c.MaxRetries > maxMaxRetries) {
		errs = append(errs, adapters.Fieldf("max_retries", "must be between 0 and %d", maxMaxRetries))
	}
	if c.ListingLag != nil && (*c.ListingLag < 0 || *c.ListingLag > time.Hour) {
		errs = append(errs, adapters.Fieldf("listing_lag", "must be between 0s and 1h"))
	}
	if c.IdempotencyHeader != "" && !validHeaderName(c.IdempotencyHeader) {
		errs = append(errs, adapters.Fieldf("idempotency_header", "%q is not a valid header name", c.IdempotencyHeader))
	}
	for i, n := range c.AllowNetworks {
		if err := checkNetwork(n); err != nil {
			errs = append(errs, adapters.Fieldf(fmt.Sprintf("allow_networks[%d]", i), "%v", err))
		}
	}
	if c.OAuth2 != nil {
		errs = append(errs, prefixFields("oauth2.", c.OAuth2.Validate()))
	}
	if c.Events != nil {
		errs = append(errs, c.Events.validate()...)
	}
	return errors.Join(errs...)
}

// SetDefaults fills the methods the operator left out (start, cancel and
// respond POST; status and find GET) and upper-cases the others.
func (c *JobConfig) SetDefaults() {
	setMethod(&c.Start, http.MethodPost)
	setMethod(&c.Status.Call, http.MethodGet)
	if c.Cancel != nil {
		setMethod(c.Cancel, http.MethodPost)
	}
	if c.Respond != nil {
		setMethod(c.Respond, http.MethodPost)
	}
	if c.Find != nil {
		setMethod(&c.Find.Call, http.MethodGet)
	}
	if q := c.JobID.Queue; q != nil {
		setMethod(&q.Call, http.MethodGet)
		if q.Cancel != nil {
			setMethod(q.Cancel, http.MethodPost)
		}
		if q.Timeout == 0 {
			q.Timeout = defaultQueueWait
		}
	}
}

func setMethod(c *Call, def string) {
	if c.Method == "" {
		c.Method = def
	}
	c.Method = strings.ToUpper(c.Method)
}

// Validate reports every problem in the job block, joined, each as an
// [adapters.FieldError] whose path is relative to the block (for example
// "start.path" or "status.states.RUNNING"), with the position of a mistake
// inside an expression. It may be called before or after SetDefaults. It
// does not check {args.NAME} against the tool's input schema; see
// [JobConfig.ArgNames].
func (c *JobConfig) Validate() error {
	cfg := *c
	cfg.SetDefaults()
	_, errs := compileJob("", &cfg)
	return errors.Join(errs...)
}

// ArgNames returns the sorted names NAME of the arguments the job block
// reads, as {args.NAME} or in expressions, so that the catalog can check
// them against the tool's input schema.
func (c *JobConfig) ArgNames() []string {
	cfg := *c
	cfg.SetDefaults()
	t, _ := compileJob("", &cfg)
	if t == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, n := range t.argNames {
		seen[n] = true
	}
	return sortedKeys(seen)
}

// parseHTTPURL parses a required absolute http(s) URL without user
// information; credentials says where credentials go instead.
func parseHTTPURL(raw, credentials string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry credentials; " + credentials)
	}
	return u, nil
}

func checkBaseURL(raw string) error {
	u, err := parseHTTPURL(raw, "send them in headers")
	switch {
	case err != nil:
		return err
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not have a query or fragment")
	case numericHost(u.Hostname()):
		if _, err := netip.ParseAddr(u.Hostname()); err != nil {
			return fmt.Errorf("host %q is an IP address in a non-standard form; write it as a dotted quad", u.Hostname())
		}
	}
	return nil
}

// checkHeader checks a header's name and value. The value is a secret: the
// errors never quote it.
func checkHeader(path, name, value string) []error {
	var errs []error
	if !validHeaderName(name) {
		errs = append(errs, adapters.Fieldf(path, "%q is not a valid header name", name))
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		errs = append(errs, adapters.Fieldf(path, "value contains a line break or NUL"))
	}
	return errs
}

// backendHeaderScope is the scope of backend header values: secrets only.
var backendHeaderScope = expr.Scope{Secrets: true, Missing: map[string]string{
	expr.Args:          "backend headers are sent with every request; use a call's headers",
	expr.CorrelationID: "backend headers are sent with every request; use a call's headers",
	expr.Job:           "backend headers are sent with every request; use a call's headers",
}}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
