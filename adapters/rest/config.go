package rest

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
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
}

// JobConfig is a tool's `job:` block on a rest backend: the calls that start,
// observe, cancel and answer a job.
//
// Templates. Path, query and header values may contain placeholders in braces:
// {args.NAME} (a tool argument), {job.id} (the job ID), {job.location} (the
// Location the start call returned) and {correlation_id}. A placeholder in a
// path is path-escaped as one segment, in a query value query-escaped. In a
// body, a string leaf that is exactly one placeholder is replaced by the value
// with its JSON type kept ({args.count} stays a number); placeholders inside a
// longer string are interpolated as text. In a respond body, {answers} is the
// map of answers by key, each {"action": ..., "content": {...}}.
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
	Method  string            `yaml:"method"`
	Path    string            `yaml:"path"`
	Query   map[string]string `yaml:"query"`
	Headers map[string]string `yaml:"headers"`
	// Body is built as structured data (a YAML mapping or list) and sent as
	// JSON; it is never a string template.
	Body any `yaml:"body"`
}

// JobIDConfig locates the job ID in the start response.
type JobIDConfig struct {
	// Field is a JSON path (gjson syntax, e.g. "id" or "job.id") into the
	// response body.
	Field string `yaml:"field"`
	// FromLocation takes the job ID from the last path segment of the
	// Location header, and makes {job.location} available to later calls.
	FromLocation bool `yaml:"from_location"`
}

// StatusConfig is the status call and how to read its answer.
type StatusConfig struct {
	Call `yaml:",inline"`
	// Field is the JSON path of the status value, e.g. "status".
	Field string `yaml:"field"`
	// States maps status values to adapter states: working, input_required,
	// succeeded, tool_error, cancelled, failed. A value not in the table keeps
	// the task working, with the raw value in the status message, and is
	// logged as a warning.
	States map[string]string `yaml:"states"`
	// Message is the JSON path of a human-readable status message.
	Message string `yaml:"message"`
	// FinishedAt is the JSON path of the time (RFC 3339) the job finished,
	// read for finished jobs. It lets the bridge tell a job that failed
	// before a cancel took effect from one the cancel stopped.
	FinishedAt string `yaml:"finished_at"`
	// Progress locates progress counters.
	Progress *ProgressConfig `yaml:"progress"`
	// Result locates the job's output once it has finished.
	Result *ResultConfig `yaml:"result"`
	// Error locates a protocol-level error for the failed state.
	Error *ErrorConfig `yaml:"error"`
	// InputRequests is the JSON path of the job's outstanding questions: an
	// array of objects {"key", "message", "schema"} where schema is an
	// elicitation requestedSchema.
	InputRequests string `yaml:"input_requests"`
	// Links are titled URL templates added to the task's result; they may use
	// the same placeholders as paths, plus {base_url}.
	Links map[string]string `yaml:"links"`
}

// ProgressConfig locates progress counters in the status answer.
type ProgressConfig struct {
	Done  string `yaml:"done"`
	Total string `yaml:"total"`
}

// ResultConfig locates a finished job's output in the status answer.
type ResultConfig struct {
	// Text is the JSON path of a text summary.
	Text string `yaml:"text"`
	// Structured is the JSON path of an object returned as structured content.
	Structured string `yaml:"structured"`
}

// ErrorConfig locates a protocol-level error in the status answer.
type ErrorConfig struct {
	Code    string `yaml:"code"`
	Message string `yaml:"message"`
}

// FindConfig is a lookup by correlation ID.
type FindConfig struct {
	Call `yaml:",inline"`
	// Field is the JSON path of the found job's ID in the answer; absent or
	// empty means no job carries the correlation ID.
	Field string `yaml:"field"`
}

// Defaults applied by SetDefaults.
const (
	defaultTimeout    = 10 * time.Second
	defaultMaxRetries = 3
	defaultListingLag = time.Minute
	maxMaxRetries     = 10
)

// SetDefaults fills the fields the operator left out: a 10s timeout, 3
// retries and a listing lag of 60s.
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
}

// Validate reports every problem in the backend block, joined, each as an
// [adapters.FieldError] whose path is relative to the block. It may be called
// before or after SetDefaults. Header values are secrets and never appear in
// its errors.
func (c *BackendConfig) Validate() error {
	var errs []error
	if err := checkBaseURL(c.BaseURL); err != nil {
		errs = append(errs, adapters.Fieldf("base_url", "%v", err))
	}
	for _, name := range sortedKeys(c.Headers) {
		errs = append(errs, checkHeader("headers."+name, name, c.Headers[name])...)
		if ph := parseTemplate(c.Headers[name], true).placeholders(); len(ph) > 0 {
			errs = append(errs, adapters.Fieldf("headers."+name, "backend headers take no placeholders ({%s}); use a call's headers", ph[0]))
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
}

func setMethod(c *Call, def string) {
	if c.Method == "" {
		c.Method = def
	}
	c.Method = strings.ToUpper(c.Method)
}

// Validate reports every problem in the job block, joined, each as an
// [adapters.FieldError] whose path is relative to the block (for example
// "start.path" or "status.states.RUNNING"). It may be called before or after
// SetDefaults. It does not check {args.NAME} against the tool's input schema;
// see [JobConfig.ArgNames].
func (c *JobConfig) Validate() error {
	var errs []error
	add := func(e ...error) { errs = append(errs, e...) }

	after := scope{job: true, location: c.JobID.FromLocation}
	add(checkCall("start", &c.Start, scope{}, anyMethod)...)

	switch {
	case c.JobID.Field == "" && !c.JobID.FromLocation:
		add(adapters.Fieldf("job_id", "set either field or from_location"))
	case c.JobID.Field != "" && c.JobID.FromLocation:
		add(adapters.Fieldf("job_id", "set only one of field and from_location"))
	}

	add(checkCall("status", &c.Status.Call, after, getOnly)...)
	add(checkStatus(&c.Status, after)...)
	add(c.checkJSONPaths()...)

	if c.Cancel != nil {
		add(checkCall("cancel", c.Cancel, after, anyMethod)...)
	}
	if c.Respond != nil {
		respond := after
		respond.answers = true
		add(checkCall("respond", c.Respond, respond, anyMethod)...)
	}
	if c.Find != nil {
		add(checkCall("find", &c.Find.Call, scope{noArgs: true}, getOnly)...)
		if c.Find.Field == "" {
			add(adapters.Fieldf("find.field", "required"))
		}
		if c.JobID.FromLocation {
			// A job found by correlation ID has an ID but no Location.
			for _, p := range c.laterCalls() {
				if strings.Contains(p.call.Path, "{job.location}") && checkPath(p.call.Path, after) == nil {
					add(adapters.Fieldf(p.name+".path", "uses {job.location}, which a job recovered through find does not have; use {job.id}"))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ArgNames returns the sorted names NAME of the {args.NAME} placeholders the
// job block uses, so that the catalog can check them against the tool's input
// schema.
func (c *JobConfig) ArgNames() []string {
	seen := map[string]bool{}
	for _, p := range c.allCalls() {
		for _, ph := range callPlaceholders(p.call) {
			if name, ok := strings.CutPrefix(ph, argsPrefix); ok {
				seen[name] = true
			}
		}
	}
	for _, l := range c.Status.Links {
		for _, ph := range parseTemplate(l, false).placeholders() {
			if name, ok := strings.CutPrefix(ph, argsPrefix); ok {
				seen[name] = true
			}
		}
	}
	return sortedKeys(seen)
}

type namedCall struct {
	name string
	call *Call
}

// allCalls lists the job's calls with their block names.
func (c *JobConfig) allCalls() []namedCall {
	calls := []namedCall{{"start", &c.Start}}
	calls = append(calls, c.laterCalls()...)
	if c.Find != nil {
		calls = append(calls, namedCall{"find", &c.Find.Call})
	}
	return calls
}

// laterCalls lists the calls made about a job that exists.
func (c *JobConfig) laterCalls() []namedCall {
	calls := []namedCall{{"status", &c.Status.Call}}
	if c.Cancel != nil {
		calls = append(calls, namedCall{"cancel", c.Cancel})
	}
	if c.Respond != nil {
		calls = append(calls, namedCall{"respond", c.Respond})
	}
	return calls
}

// scope says which placeholders a template may use; {correlation_id} is
// always allowed, and {args.NAME} unless noArgs is set.
type scope struct {
	noArgs   bool // no {args.NAME}: find is sent with the correlation ID only
	job      bool // {job.id}
	location bool // {job.location}
	answers  bool // {answers}
	baseURL  bool // {base_url}
}

func (s scope) allows(name string) error {
	switch {
	case strings.HasPrefix(name, argsPrefix):
		if !validArgName(strings.TrimPrefix(name, argsPrefix)) {
			return fmt.Errorf("placeholder {%s} has an invalid argument name", name)
		}
		if s.noArgs {
			return fmt.Errorf("placeholder {%s} cannot be filled here: find looks a job up after a submission whose outcome is unknown, and has only {%s}", name, phCorrelationID)
		}
		return nil
	case name == phCorrelationID:
		return nil
	case name == phJobID:
		if !s.job {
			return fmt.Errorf("placeholder {%s} is not known here (the job does not exist yet)", name)
		}
		return nil
	case name == phJobLocation:
		if !s.job {
			return fmt.Errorf("placeholder {%s} is not known here (the job does not exist yet)", name)
		}
		if !s.location {
			return fmt.Errorf("placeholder {%s} needs job_id.from_location", name)
		}
		return nil
	case name == phAnswers:
		if !s.answers {
			return fmt.Errorf("placeholder {%s} is only allowed in the respond body", name)
		}
		return nil
	case name == phBaseURL:
		if !s.baseURL {
			return fmt.Errorf("placeholder {%s} is only allowed in links", name)
		}
		return nil
	}
	return unknownPlaceholder(name)
}

type methodRule int

const (
	anyMethod methodRule = iota
	getOnly
)

var validMethods = []string{
	http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

func checkCall(block string, c *Call, s scope, rule methodRule) []error {
	var errs []error
	method := strings.ToUpper(c.Method)
	switch {
	case method == "":
		// SetDefaults fills it.
	case rule == getOnly && method != http.MethodGet:
		errs = append(errs, adapters.Fieldf(block+".method", "must be GET (the adapter retries this call)"))
	case !slices.Contains(validMethods, method):
		errs = append(errs, adapters.Fieldf(block+".method", "%q is not one of %s", c.Method, strings.Join(validMethods, ", ")))
	}
	if err := checkPath(c.Path, s); err != nil {
		errs = append(errs, adapters.Fieldf(block+".path", "%v", err))
	}
	// {answers} is for bodies only.
	hs := s
	hs.answers = false
	for _, k := range sortedKeys(c.Query) {
		if k == "" {
			errs = append(errs, adapters.Fieldf(block+".query", "empty parameter name"))
		}
		if err := checkTemplate(parseTemplate(c.Query[k], false), hs); err != nil {
			errs = append(errs, adapters.Fieldf(block+".query."+k, "%v", err))
		}
	}
	for _, k := range sortedKeys(c.Headers) {
		errs = append(errs, checkHeader(block+".headers."+k, k, c.Headers[k])...)
		if err := checkTemplate(parseTemplate(c.Headers[k], true), hs); err != nil {
			errs = append(errs, adapters.Fieldf(block+".headers."+k, "%v", err))
		}
	}
	if c.Body != nil {
		if method == "" && rule == getOnly {
			method = http.MethodGet
		}
		if method == http.MethodGet || method == http.MethodDelete {
			errs = append(errs, adapters.Fieldf(block+".body", "a %s request has no body", method))
		}
		errs = append(errs, checkBody(block+".body", c.Body, s)...)
	}
	return errs
}

func checkPath(p string, s scope) error {
	if p == "" {
		return errors.New("required")
	}
	t := parseTemplate(p, false)
	for i, seg := range t {
		if seg.ph == phJobLocation && i != 0 {
			return errors.New("{job.location} may only begin a path")
		}
		if seg.ph == phAnswers || seg.ph == phBaseURL {
			return fmt.Errorf("placeholder {%s} is not allowed in a path", seg.ph)
		}
		if seg.ph == "" && strings.ContainsAny(seg.lit, "?# \t\r\n") {
			return errors.New("must not contain '?', '#' or whitespace (use query for parameters)")
		}
	}
	switch {
	case strings.HasPrefix(p, "/"):
	case strings.HasPrefix(p, "{"+phJobLocation+"}"):
		rest := strings.TrimPrefix(p, "{"+phJobLocation+"}")
		if rest != "" && !strings.HasPrefix(rest, "/") {
			return errors.New("after {job.location} the path must continue with '/'")
		}
	default:
		return errors.New(`must start with "/" or be "{job.location}"`)
	}
	return checkTemplate(t, s)
}

func checkTemplate(t template, s scope) error {
	var errs []error
	for _, seg := range t {
		if seg.ph != "" {
			if err := s.allows(seg.ph); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func checkBody(path string, v any, s scope) []error {
	var errs []error
	switch v := v.(type) {
	case string:
		if err := checkTemplate(parseTemplate(v, false), s); err != nil {
			errs = append(errs, adapters.Fieldf(path, "%v", err))
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			errs = append(errs, checkBody(path+"."+k, v[k], s)...)
		}
	case map[any]any:
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				errs = append(errs, adapters.Fieldf(path, "key %v is not a string", k))
				continue
			}
			errs = append(errs, checkBody(path+"."+ks, e, s)...)
		}
	case []any:
		for i, e := range v {
			errs = append(errs, checkBody(path+"."+strconv.Itoa(i), e, s)...)
		}
	case nil, bool, int, int64, uint64, float64, time.Time:
	default:
		errs = append(errs, adapters.Fieldf(path, "unsupported value of type %T", v))
	}
	return errs
}

func checkStatus(c *StatusConfig, after scope) []error {
	var errs []error
	if c.Field == "" {
		errs = append(errs, adapters.Fieldf("status.field", "required"))
	}
	if len(c.States) == 0 {
		errs = append(errs, adapters.Fieldf("status.states", "required: map the backend's status values to states"))
	}
	terminal := false
	for _, k := range sortedKeys(c.States) {
		st, ok := adapters.ParseState(c.States[k])
		if !ok {
			errs = append(errs, adapters.Fieldf("status.states."+k, "%q is not a state (working, input_required, succeeded, tool_error, cancelled, failed)", c.States[k]))
			continue
		}
		terminal = terminal || st.Terminal()
	}
	if len(c.States) > 0 && !terminal {
		errs = append(errs, adapters.Fieldf("status.states", "no value maps to a final state (succeeded, tool_error, cancelled, failed), so tasks would never finish"))
	}
	if c.Progress != nil && c.Progress.Done == "" {
		errs = append(errs, adapters.Fieldf("status.progress.done", "required"))
	}
	if c.Result != nil && c.Result.Text == "" && c.Result.Structured == "" {
		errs = append(errs, adapters.Fieldf("status.result", "set text, structured or both"))
	}
	if c.Error != nil && c.Error.Code == "" && c.Error.Message == "" {
		errs = append(errs, adapters.Fieldf("status.error", "set code, message or both"))
	}
	links := after
	links.baseURL = true
	for _, title := range sortedKeys(c.Links) {
		l := c.Links[title]
		if title == "" {
			errs = append(errs, adapters.Fieldf("status.links", "empty title"))
		}
		if !strings.HasPrefix(l, "{"+phBaseURL+"}") && !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") {
			errs = append(errs, adapters.Fieldf("status.links."+title, "must start with {base_url}, http:// or https://"))
		}
		if err := checkTemplate(parseTemplate(l, false), links); err != nil {
			errs = append(errs, adapters.Fieldf("status.links."+title, "%v", err))
		}
	}
	return errs
}

func checkBaseURL(raw string) error {
	if raw == "" {
		return errors.New("required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not carry credentials; send them in headers")
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
	if err := checkEnvRefs(value); err != nil {
		errs = append(errs, adapters.Fieldf(path, "%v", err))
	}
	return errs
}

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

func validArgName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isNameRune(r) || r == '.' {
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
