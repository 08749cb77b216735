// Package rest is the adapter for generic REST job APIs: an operator describes
// in YAML how to start a job (a request template), where the response carries
// the job's ID, how to ask for its status and how to read the answer (a JSON
// path and a table from status values to states), and optionally how to
// cancel it, answer its questions and find it by correlation ID.
//
// Every request stays under the backend's base_url: tool arguments only fill
// escaped path segments, query values, header values and body values, and the
// adapter refuses a rendered URL that would leave base_url, also when its
// escaped separators ("%2F"), backslashes ("\" or "%5C") and dot segments
// are read as a lenient server reads them. Header values from the
// configuration are secrets; they never appear in errors or logs.
//
// Egress is restricted at connect time: the dialer checks the address it is
// about to connect to, after name resolution, and refuses loopback, private,
// link-local (incl. 169.254.169.254), CGNAT, multicast and other
// special-purpose addresses in IPv4, IPv6 and IPv4-mapped forms, unless the
// backend's allow_networks lists them. Redirects are never followed, and
// proxy environment variables are ignored.
//
// # Starting a job
//
// A start request is sent once: a submission whose outcome is unknown (a
// timeout, a connection lost after the request was written, a 5xx, a
// redirect) is reported as such (wrapping [adapters.ErrOutcomeUnknown]) and
// never re-sent, unless the backend declares an idempotency header, in which
// case it is repeated on connection errors and 5xx like a status request.
// A start answered 429 certainly created no job: it is reported as
// throttling (see below). A start refused with another 4xx (except 408) is
// an error whose text carries the backend's own message: a JSON "message",
// "error", "detail" (or similar) field when there is one, else the answer's
// text, redacted and cut to 500 bytes (an HTML page is summarized by its
// title).
//
// # Problems
//
// Every call that is answered otherwise than asked, or not answered, is
// reported as an [adapters.CallError]: its class (throttled, unreachable,
// refused for a 401 or 403, unreadable, not_found, unmapped_state, error),
// the request's method and path (never its query or host), the HTTP status
// and the backend's words (the matching outcome rule's message, else the
// answer's own message), in one sentence such as
// "GET /jobs/104 answered 500: an expired or rejected token". It wraps the
// sentinel that applies ([adapters.ErrJobNotFound],
// [adapters.ErrOutcomeUnknown], ...).
//
// A start answered 2xx created a job. When the answer does not say how to
// address it (job_id.field is missing, empty, or not a string or number;
// job_id.from_location and no Location header), or names a reference later
// calls would refuse (a Location on another origin or outside base_url, a
// job ID "." or "..", or one containing "/", "\", control characters or
// invalid UTF-8), Start returns an error wrapping
// [adapters.ErrJobUnaddressable] that names what was wrong, the HTTP status
// and a redacted excerpt of the answer (at most 300 bytes).
//
// # Observing a job
//
// Status and find requests are GETs. They are repeated on connection errors
// and 5xx answers (except 501), up to the backend's max_retries times, after
// an exponential backoff with jitter (a random wait between half and all of
// min(RetryWaitMin×2ⁿ, RetryWaitMax)); the adapter never starts a wait that
// would outlast ctx's deadline, and returns as soon as ctx ends. Once one
// status request of a Poll has used up its retries without an answer, the
// others of that Poll are not repeated. So a Poll of N jobs sends N requests
// in calm weather and at most N × (1 + max_retries) in a storm of 5xx
// answers.
//
// A status answer must be JSON with the configured status field holding a
// string or a number; otherwise the job's observation fails with an error
// wrapping [adapters.ErrUnreadableStatus] that says what is wrong (the field
// is missing, or is an object, an array, a boolean or null), with the HTTP
// status and an excerpt of the answer. A status value that is not in the
// states table is the catalog's mistake: the job's observation fails with
// an error wrapping [adapters.ErrUnmappedState] that names the value and
// the mapped ones, and it is logged once.
//
// A submission whose start answer names a queue item (job_id.queue) is
// working, "queued at the backend", until the queue names the job; the job
// is then observed under its own reference ([adapters.Observation.Ref]). A
// queued request the backend cancels (an `is: cancelled` rule), refuses
// (`is: refused`) or drops (the queue item answers 404 or 410, or a
// `not_found` rule), or that is still queued after job_id.queue.timeout,
// never started: its observation's Err wraps [adapters.ErrNeverStarted] in
// an [adapters.CallError] with the call and the backend's words (a dropped
// one also wraps [adapters.ErrJobNotFound], so that the bridge waits the
// tool's missing_grace), never a failed state. Before a gone queue item is
// reported, a tool with a find call looks its job up by correlation ID: a
// backend forgets items that left its queue (Jenkins after five minutes),
// and a job that started while nobody asked is then observed.
//
// # Throttling
//
// A 429 answer to any request, and a 503 with a Retry-After header to any
// request except a start, is throttling: the request is not repeated inside
// the adapter, and the error wraps an [adapters.ThrottledError] carrying the
// Retry-After pause (delay seconds or an HTTP date; zero when absent). A
// throttled status request ends the whole Poll with that error, so that the
// bridge pauses every call to the backend. (A 503 to a start stays an unknown
// outcome, Retry-After or not: the backend may have acted on it.)
//
// # Cancelling a job
//
// The cancel call's method is POST unless the catalog says otherwise; it is
// sent once. A 2xx answer is success. A 404, 409 or 410 answer is checked
// with one status request: when the job has finished (a final state) or is
// gone (404 or 410), Cancel returns an error wrapping
// [adapters.ErrAlreadyFinished]; when it is still working or waiting for
// input, an error wrapping [adapters.ErrCancelRefused] with the backend's
// message; when the status cannot be read, an error wrapping neither (ask
// again later). Another 4xx answer (except 429) is a refusal
// ([adapters.ErrCancelRefused] with the backend's message). A 5xx answer is
// an error wrapping neither that says what the backend answered; only a
// connection error (class unreachable) means that the backend could not be
// asked. Every one of them is an [adapters.CallError]. A tool without a
// cancel block records the cancellation in the bridge only.
//
// The adapter reports no finish time ([adapters.Observation.FinishedAt]):
// a generic REST API has no standard field for it.
//
// # Callbacks
//
// A backend with an `events:` block ([EventsConfig]) is an
// [adapters.EventSource]: the job API calls the bridge back when a job
// changes state, and [Adapter.ReadEvents] checks the callback's HMAC-SHA256
// signature (Standard Webhooks by default, or a hex or base64 signature
// header) and its signed timestamp's age before it reads anything, then
// reads the body with the same status rules, and the same code, as a poll's
// status answer. Polling goes on, slower, as a safety net.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/sync/errgroup"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/secrets"
)

// pollConcurrency bounds the status requests one Poll call has in flight.
const pollConcurrency = 8

// Options are the adapter's dependencies. The zero value is ready to use.
type Options struct {
	// HTTPClient supplies the base transport. The adapter uses a copy with
	// its own timeout and redirect policy. An *http.Transport is cloned and
	// given the adapter's checked dialer and no proxy; any other
	// RoundTripper (a test mock) is used as is, without the egress checks.
	// Default: a transport with http.DefaultTransport's settings, treated
	// the same way.
	HTTPClient *http.Client
	// Resolver resolves the backend's host name each time the adapter
	// connects. Default: net.DefaultResolver.
	Resolver Resolver
	// Logger receives warnings such as unknown status values; pass it
	// already scoped (for example with the backend's name). Default: none.
	Logger *slog.Logger
	// Getenv resolves ${NAME} in header values. Default: os.LookupEnv.
	Getenv func(string) (string, bool)
	// RetryWaitMin and RetryWaitMax bound the backoff between retries of a
	// request that may be repeated (defaults 250ms and 5s): before retry n
	// (from 0) the adapter waits a random duration between half and all of
	// min(RetryWaitMin×2ⁿ, RetryWaitMax). Throttling answers are never
	// retried, so Retry-After does not lengthen these waits.
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// Trace, when set, is told every request the adapter sends, every
	// answer it gets and how each rule read it, with secrets redacted
	// (`jobbridge try` prints them). It is called from the goroutines
	// making the requests.
	Trace func(Event)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Adapter talks to one REST job API. It is safe for concurrent use.
type Adapter struct {
	name        string
	base        *url.URL
	baseURL     string // base_url without a trailing slash
	headers     []param
	idempotency string
	propagate   bool // propagate_trace
	tools       map[string]*tool
	callbacks   *callbacks // nil without an events block

	once         *http.Client // all requests; repeated only by do
	retries      int          // max_retries
	listingLag   time.Duration
	now          func() time.Time
	redactor     *secrets.Redactor
	creds        *credentials
	log          *slog.Logger
	trace        func(Event)
	retryWaitMin time.Duration
	retryWaitMax time.Duration

	// unmapped holds the tool and status values logged as unmapped (see
	// logUnmapped); unmappedLogged counts them.
	unmapped       sync.Map
	unmappedLogged atomic.Int64
}

// refData is the adapter-owned part of a JobRef.
type refData struct {
	Tool          string         `json:"tool"`
	Location      string         `json:"location,omitempty"`
	Args          map[string]any `json:"args,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	// QueuedAt is set while the reference names a queue item, not the job:
	// when the submission was queued.
	QueuedAt *time.Time `json:"queued_at,omitempty"`
}

// New returns an adapter for the backend called name, serving the given
// tools (by tool name). It applies defaults to copies of the configs,
// validates them and checks that the ${NAME} environment variables their
// headers reference are set; an unset variable is an error that names the
// variable.
func New(name string, backend BackendConfig, tools map[string]JobConfig, opts *Options) (*Adapter, error) {
	if opts == nil {
		opts = &Options{}
	}
	src := secrets.NewSource(&secrets.Options{Getenv: opts.Getenv, Logger: opts.Logger})
	red := src.Redactor()

	backend.SetDefaults()
	var errs []error
	if err := backend.Validate(); err != nil {
		errs = append(errs, err)
	}
	a := &Adapter{
		name:        name,
		idempotency: backend.IdempotencyHeader,
		propagate:   backend.PropagateTrace,
		tools:       map[string]*tool{},
		redactor:    red,
		log:         opts.Logger,
		trace:       opts.Trace,
		now:         opts.Now,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	eg := newEgress(parseNetworks(backend.AllowNetworks), opts.Resolver)
	if u, err := url.Parse(backend.BaseURL); err == nil {
		a.base = u
		a.baseURL = strings.TrimSuffix(backend.BaseURL, "/")
		// A literal address that would be refused at every connect is a
		// configuration error; say so at start.
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := eg.check(ip); err != nil {
				errs = append(errs, adapters.Fieldf("base_url", "%v", err))
			}
		}
	}
	a.once = newHTTPClient(opts.HTTPClient, backend.Timeout, eg)
	if len(errs) == 0 {
		creds, err := newCredentials(src, backend.OAuth2, a.once)
		if err != nil {
			errs = append(errs, err)
		}
		a.creds = creds
	}
	if a.creds == nil {
		// The backend block is invalid: report its problems, and the
		// tools' below, without resolving credentials.
		a.creds, _ = newCredentials(src, nil, a.once)
	}
	for _, k := range sortedKeys(backend.Headers) {
		t, err := expr.ParseTemplate(backend.Headers[k], backendHeaderScope)
		if err != nil {
			continue // Validate reported it
		}
		if err := a.checkSecrets("headers."+k, t); err != nil {
			errs = append(errs, err)
		}
		a.headers = append(a.headers, param{name: k, t: t})
	}
	for _, tn := range sortedKeys(tools) {
		cfg := tools[tn]
		cfg.SetDefaults()
		t, terrs := compileJob(tn, &cfg)
		if t != nil && t.find != nil && backend.IdempotencyHeader == "" && !t.sendsCorrelation {
			terrs = append(terrs, adapters.Fieldf("find", "the start call does not send {correlation_id} and the backend has no idempotency_header, so find cannot match a job"))
		}
		if t != nil {
			for _, c := range t.calls() {
				for _, h := range c.headers {
					if err := a.checkSecrets(c.name+".headers."+h.name, h.t); err != nil {
						terrs = append(terrs, err)
					}
				}
			}
		}
		if err := errors.Join(terrs...); err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, err))
			continue
		}
		a.tools[tn] = t
	}
	if backend.Events != nil && len(errs) == 0 {
		cb, err := a.newCallbacks(*backend.Events, tools)
		if err != nil {
			errs = append(errs, err)
		}
		a.callbacks = cb
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err // the caller names the backend
	}

	a.retryWaitMax = opts.RetryWaitMax
	if a.retryWaitMax <= 0 {
		a.retryWaitMax = 5 * time.Second
	}
	a.retryWaitMin = opts.RetryWaitMin
	if a.retryWaitMin <= 0 {
		a.retryWaitMin = min(250*time.Millisecond, a.retryWaitMax)
	}
	a.retries = *backend.MaxRetries
	a.listingLag = *backend.ListingLag
	return a, nil
}

// checkSecrets resolves the template's secret references once at start, so
// that an unset variable or an unreadable file is an error now; its error
// names the variable or file, never a value.
func (a *Adapter) checkSecrets(path string, t expr.Template) error {
	for _, ref := range t.Secrets() {
		if _, err := a.creds.secret(ref); err != nil {
			return adapters.Fieldf(path, "%v", err)
		}
	}
	return nil
}

// calls lists the tool's calls.
func (t *tool) calls() []*call {
	var out []*call
	for _, c := range []*call{t.start, t.status, t.cancel, t.respond, t.find} {
		if c != nil {
			out = append(out, c)
		}
	}
	if t.queue != nil {
		out = append(out, t.queue.call)
		if t.queue.cancel != nil {
			out = append(out, t.queue.cancel)
		}
	}
	return out
}

// Start submits one job. See the package documentation and
// [adapters.Adapter] for how outcomes are classified.
func (a *Adapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, err
	}
	v := &values{args: req.Arguments, correlationID: req.CorrelationID, baseURL: a.baseURL}
	hreq, err := a.newRequest(ctx, t.start, v)
	if err != nil {
		return adapters.JobRef{}, fmt.Errorf("the start call cannot be made: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return adapters.JobRef{}, a.unanswered(hreq, nil, err)
	}
	rec := &sendRecord{}
	hreq = hreq.WithContext(context.WithValue(hreq.Context(), sendRecordKey{}, rec))
	if ruled := a.ruled(t.start, v); ruled != nil {
		hreq = hreq.WithContext(context.WithValue(hreq.Context(), ruledKey{}, ruled))
	}

	retries := 0
	if a.idempotency != "" {
		hreq.Header.Set(a.idempotency, req.CorrelationID)
		retries = a.retries
	}
	a.traceRequest(t.start, hreq)
	resp, err := a.do(hreq, retries, nil)
	if err != nil {
		closeBody(resp)
		a.traceText(t.start, "answer", "no answer: "+a.redactor.Redact(err.Error()))
		if !rec.maybeSent.Load() {
			return adapters.JobRef{}, a.unanswered(hreq, nil, err)
		}
		return adapters.JobRef{}, a.unanswered(hreq, adapters.ErrOutcomeUnknown, err)
	}
	body, readErr := readBody(resp)
	a.traceAnswer(t.start, resp, body)
	if readErr != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		ce := a.unanswered(hreq, adapters.ErrOutcomeUnknown, readErr)
		ce.Status = resp.StatusCode
		ce.Message = "reading the answer failed: " + ce.Message
		return adapters.JobRef{}, ce
	}
	ans := answerOf(v, resp.StatusCode, resp.Header, body)
	is, words := a.classify(ctx, t.start, resp, body, ans)
	switch is {
	case isSuccess:
	case isRetryLater:
		return adapters.JobRef{}, a.throttle(resp, words)
	case isRefused:
		return adapters.JobRef{}, a.answered(statusClass(resp.StatusCode), nil, resp, words)
	default:
		return adapters.JobRef{}, a.answered(adapters.ProblemError, adapters.ErrOutcomeUnknown, resp, words)
	}
	id, data, err := a.jobReference(ctx, t, hreq.URL, resp, body, ans)
	if err != nil {
		return adapters.JobRef{}, err
	}
	if t.queue != nil {
		at := a.now().UTC()
		data.QueuedAt = &at
	}
	ref := t.ref(id, data, req.Arguments, req.CorrelationID)
	if err := a.checkAddressable(t, ref); err != nil {
		return adapters.JobRef{}, a.unaddressable(resp, body, "the job it names cannot be addressed: %v", err)
	}
	return ref, nil
}

// ref builds a JobRef, carrying what later calls need.
func (t *tool) ref(id string, data refData, args map[string]any, correlationID string) adapters.JobRef {
	for name, v := range args {
		if !t.carryAll && !slices.Contains(t.carryArgs, name) {
			continue
		}
		if data.Args == nil {
			data.Args = map[string]any{}
		}
		data.Args[name] = v
	}
	if t.carryCorrelation {
		data.CorrelationID = correlationID
	}
	b, _ := json.Marshal(data) // marshalling decoded JSON values cannot fail
	return adapters.JobRef{ID: id, Data: b}
}

// unaddressable is the error of a start the backend accepted but whose
// answer gives no usable job reference: the reason, the HTTP status and an
// excerpt of the answer.
func (a *Adapter) unaddressable(resp *http.Response, body []byte, format string, args ...any) error {
	return reasonf(adapters.ErrJobUnaddressable, "the backend accepted the job (HTTP %d) but %s; answer: %s",
		resp.StatusCode, fmt.Sprintf(format, args...), a.excerpt(body))
}

// jobReference reads the job's ID (and Location) from a 2xx start answer.
// A Location is resolved against the request URL and must stay under
// base_url; it is kept as a path.
func (a *Adapter) jobReference(ctx context.Context, t *tool, reqURL *url.URL, resp *http.Response, body []byte, ans expr.Answer) (string, refData, error) {
	data := refData{Tool: t.name}
	fail := func(format string, args ...any) (string, refData, error) {
		return "", refData{}, a.unaddressable(resp, body, format, args...)
	}
	var id string
	if t.fromLocation {
		loc := resp.Header.Get("Location")
		if loc == "" {
			return fail("its answer has no Location header")
		}
		shown := a.redactor.Clean(loc, maxExcerpt)
		ref, err := url.Parse(loc)
		if err != nil {
			return fail("its Location header %q is not a URL", shown)
		}
		u := reqURL.ResolveReference(ref)
		u.Fragment, u.RawFragment = "", ""
		if !a.underBase(u) {
			return fail("its Location header %q points outside base_url", shown)
		}
		seg := strings.TrimSuffix(u.EscapedPath(), "/")
		seg = seg[strings.LastIndexByte(seg, '/')+1:]
		if id, err = url.PathUnescape(seg); err != nil || id == "" {
			return fail("its Location header %q has no job ID as its last path segment", shown)
		}
		u.Scheme, u.Host, u.User = "", "", nil
		data.Location = u.String()
		a.traceText(t.start, "rule", fmt.Sprintf("job_id.from_location: Location %q → job ID %q", shown, a.redactor.Redact(id)))
	} else {
		val, ok, err := t.jobID.Read(ctx, ans)
		switch {
		case err != nil:
			return fail("reading the job ID (%s) failed: %v", t.jobID, err)
		case !ok && t.jobID.Program() == nil && !validJSON(body):
			return fail("its answer is not JSON, so it has no job ID at %q", t.jobID)
		case !ok && t.jobID.IsNull(ans):
			return fail("the job ID at %q is null, not a string or number", t.jobID)
		case !ok:
			return fail("its answer has no job ID at %q", t.jobID)
		}
		s, kind := scalarText(val)
		switch {
		case kind != "":
			return fail("the job ID at %q is %s, not a string or number", t.jobID, kind)
		case s == "":
			return fail("the job ID at %q is empty", t.jobID)
		}
		id = s
		a.traceText(t.start, "rule", fmt.Sprintf("job_id.field %s → %q", t.jobID, a.redactor.Redact(id)))
	}
	if err := a.checkJobID(id); err != nil {
		return fail("%v", err)
	}
	return id, data, nil
}

// scalarText returns the text of a string or number; kind names any other
// JSON type ("a boolean", "an object", ...).
func scalarText(v any) (s, kind string) {
	switch v := v.(type) {
	case string:
		return v, ""
	case int64, uint64, float64, int:
		s, _ := expr.Text(v)
		return s, ""
	case bool:
		return "", "a boolean"
	case nil:
		return "", "null"
	case []any:
		return "", "an array"
	}
	return "", "an object"
}

func validJSON(b []byte) bool {
	_, err := expr.DecodeJSON(b)
	return err == nil
}

// maxShownID bounds a job ID quoted in an error.
const maxShownID = 100

// checkJobID refuses a job ID that would address another resource once
// interpolated into a path, or that cannot be shown to people.
func (a *Adapter) checkJobID(id string) error {
	shown := a.redactor.Redact(id)
	if len(shown) > maxShownID {
		shown = shown[:maxShownID] + "…"
	}
	switch {
	case id == "." || id == "..":
		return fmt.Errorf("the job ID %q is a dot segment, which would address another resource", shown)
	case strings.ContainsAny(id, `/\`):
		return fmt.Errorf("the job ID %q contains a path separator (/ or \\), which would address another resource", shown)
	case strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("the job ID %q contains control characters", shown)
	case !utf8.ValidString(id):
		return fmt.Errorf("the job ID %q is not valid UTF-8", shown)
	}
	return nil
}

// checkAddressable renders the URLs of the calls later made about the job
// (status, cancel, respond, or the queue's while it is queued), so that a
// reference they would refuse is refused when the job is started rather
// than at every later poll.
func (a *Adapter) checkAddressable(t *tool, ref adapters.JobRef) error {
	_, v, queued, err := a.decodeRef(ref)
	if err != nil {
		return err
	}
	calls := []*call{t.status, t.cancel, t.respond}
	if queued {
		calls = []*call{t.queue.call, t.queue.cancel}
	}
	for _, c := range calls {
		if c == nil {
			continue
		}
		if _, err := a.buildURL(context.Background(), c, v); err != nil {
			return fmt.Errorf("the %s call: %w", c.name, err)
		}
	}
	return nil
}

// Poll observes the jobs, one status request each, several at a time. It
// returns an error when ctx ends, and when a status request is throttled:
// then the error wraps [adapters.ErrThrottled] and the Poll stops sending.
func (a *Adapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	obs := make([]adapters.Observation, len(refs))
	pctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var giveUp atomic.Bool
	var g errgroup.Group
	g.SetLimit(pollConcurrency)
	for i, ref := range refs {
		g.Go(func() error {
			if pctx.Err() != nil {
				return nil
			}
			o, err := a.poll(pctx, ref, a.retries, &giveUp)
			if err != nil {
				stop(err)
			}
			obs[i] = o
			return nil
		})
	}
	_ = g.Wait() // the functions report through obs and stop
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("polling %s jobs: %w", a.name, err)
	}
	if err := context.Cause(pctx); err != nil {
		return nil, fmt.Errorf("polling %s jobs: %w", a.name, err)
	}
	return obs, nil
}

// poll observes one job. Its error is a throttling answer, which concerns
// every job of the backend; a problem with this job is in the observation.
func (a *Adapter) poll(ctx context.Context, ref adapters.JobRef, retries int, giveUp *atomic.Bool) (adapters.Observation, error) {
	fail := func(err error) (adapters.Observation, error) {
		return adapters.Observation{Err: err}, nil
	}
	t, v, queued, err := a.decodeRef(ref)
	if err != nil {
		return fail(fmt.Errorf("job %s: %w", ref.ID, err))
	}
	if queued {
		return a.pollQueued(ctx, t, ref, v, retries, giveUp)
	}
	resp, body, err := a.sendSafe(ctx, t.status, v, retries, giveUp)
	if err != nil {
		return fail(err)
	}
	ans := answerOf(v, resp.StatusCode, resp.Header, body)
	switch is, words := a.classify(ctx, t.status, resp, body, ans); is {
	case isRetryLater:
		return adapters.Observation{}, a.throttle(resp, words)
	case isNotFound:
		return fail(a.answered(adapters.ProblemNotFound, adapters.ErrJobNotFound, resp, words))
	case isError:
		return fail(a.answered(statusClass(resp.StatusCode), nil, resp, words))
	}
	return a.observe(ctx, t, ref, v, resp, body, ans), nil
}

// Cancel asks the backend to stop the job; see the package documentation
// for how its answers are read. A tool without a cancel block returns nil:
// cancellation is then recorded by the bridge only and nothing is sent
// downstream.
func (a *Adapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	t, v, queued, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("cancelling job %s: %w", ref.ID, err)
	}
	c := t.cancel
	if queued {
		if t.queue.cancel == nil {
			return reasonf(adapters.ErrCancelRefused, "job %s is still queued at the backend, and the catalog has no job_id.queue.cancel call to remove it from the queue; the cancel is tried again once the job has started", ref.ID)
		}
		c = t.queue.cancel
	}
	if c == nil {
		return nil
	}
	req, err := a.newRequest(ctx, c, v)
	if err != nil {
		return fmt.Errorf("the %s call for job %s cannot be made: %w", c.name, ref.ID, err)
	}
	a.traceRequest(c, req)
	resp, err := a.do(req, 0, nil)
	if err != nil {
		closeBody(resp)
		a.traceText(c, "answer", "no answer: "+a.redactor.Redact(err.Error()))
		return a.unanswered(req, nil, err)
	}
	body, _ := readBody(resp) // only quoted in an error
	a.traceAnswer(c, resp, body)
	switch is, words := a.classify(ctx, c, resp, body, answerOf(v, resp.StatusCode, resp.Header, body)); is {
	case isSuccess:
		return nil
	case isRetryLater:
		return a.throttle(resp, words)
	case isAlreadyFinished, isNotFound:
		return a.answered(adapters.ProblemError, adapters.ErrAlreadyFinished, resp, words)
	case isRefused:
		return a.answered(statusClass(resp.StatusCode), adapters.ErrCancelRefused, resp, words)
	case isDeclined:
		if queued {
			return a.answered(statusClass(resp.StatusCode), adapters.ErrCancelRefused, resp, words)
		}
		return a.cancelDeclined(ctx, ref, a.answered(adapters.ProblemError, nil, resp, words))
	default:
		// The backend answered: say what, not that it could not be asked.
		return a.answered(statusClass(resp.StatusCode), nil, resp, words)
	}
}

// cancelDeclined tells a job that finished before the cancel reached it
// from one the backend will not stop, after a 404, 409 or 410 answer
// (declined, whose Err it sets), by asking once for the job's status.
func (a *Adapter) cancelDeclined(ctx context.Context, ref adapters.JobRef, declined *adapters.CallError) error {
	o, err := a.poll(ctx, ref, 0, nil)
	switch {
	case err != nil:
		// Throttled (or ctx ended): ask again later.
		return err
	case errors.Is(o.Err, adapters.ErrJobNotFound):
		declined.Err = adapters.ErrAlreadyFinished
		declined.Message = joinWords(declined.Message, "the job had already finished: the backend no longer reports it")
		return declined
	case o.Err != nil:
		declined.Message = joinWords(declined.Message, fmt.Sprintf("whether the job has finished is unknown, as %v", o.Err))
		return declined
	case o.State.Terminal():
		declined.Err = adapters.ErrAlreadyFinished
		declined.Message = joinWords(declined.Message, fmt.Sprintf("the job had already finished (%s)", o.State))
		return declined
	}
	state := "working"
	if o.State == adapters.StateInputRequired {
		state = "waiting for input (input_required)"
	}
	declined.Err = adapters.ErrCancelRefused
	declined.Message = joinWords(declined.Message, "the job is still "+state)
	return declined
}

// joinWords joins the backend's words and the adapter's finding.
func joinWords(words, finding string) string {
	if words == "" {
		return finding
	}
	return words + "; " + finding
}

// Respond delivers answers to the job's input requests. A 404, 409 or 410
// answer means the job no longer waits and is not an error; a throttling
// answer wraps [adapters.ErrThrottled]. A tool without a respond block
// returns an error wrapping [errors.ErrUnsupported].
func (a *Adapter) Respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	t, v, _, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("answering job %s: %w", ref.ID, err)
	}
	if t.respond == nil {
		return fmt.Errorf("answering job %s: tool %s has no respond call: %w", ref.ID, t.name, errors.ErrUnsupported)
	}
	v.answers = answers
	req, err := a.newRequest(ctx, t.respond, v)
	if err != nil {
		return fmt.Errorf("the respond call for job %s cannot be made: %w", ref.ID, err)
	}
	a.traceRequest(t.respond, req)
	resp, err := a.do(req, 0, nil)
	if err != nil {
		closeBody(resp)
		return a.unanswered(req, nil, err)
	}
	body, _ := readBody(resp) // only quoted in an error
	a.traceAnswer(t.respond, resp, body)
	switch is, words := a.classify(ctx, t.respond, resp, body, answerOf(v, resp.StatusCode, resp.Header, body)); is {
	case isSuccess, isNotFound, isDeclined:
		return nil
	case isRetryLater:
		return a.throttle(resp, words)
	default:
		return a.answered(statusClass(resp.StatusCode), nil, resp, words)
	}
}

// Find looks a job up by the request's correlation ID. A tool without a find
// block returns an error wrapping [errors.ErrUnsupported]; a job whose ID
// later calls would refuse, and an answer naming several jobs, are errors
// wrapping [adapters.ErrJobUnaddressable].
func (a *Adapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	if t.find == nil {
		return adapters.JobRef{}, false, fmt.Errorf("finding %s job: no find call: %w", t.name, errors.ErrUnsupported)
	}
	v := &values{args: req.Arguments, correlationID: req.CorrelationID, baseURL: a.baseURL}
	resp, body, err := a.sendSafe(ctx, t.find, v, a.retries, nil)
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	ans := answerOf(v, resp.StatusCode, resp.Header, body)
	var ids []string
	switch is, words := a.classify(ctx, t.find, resp, body, ans); is {
	case isRetryLater:
		return adapters.JobRef{}, false, a.throttle(resp, words)
	case isNotFound:
		a.traceText(t.find, "rule", "the answer means: no such job")
	case isSuccess:
		val, ok, err := t.findField.Read(ctx, ans)
		if err != nil {
			return adapters.JobRef{}, false, a.answered(adapters.ProblemUnreadable, nil, resp,
				fmt.Sprintf("reading find.field %s failed: %v", t.findField, a.redactor.Redact(err.Error())))
		}
		if !ok && t.findField.Program() == nil && !validJSON(body) {
			return adapters.JobRef{}, false, a.answered(adapters.ProblemUnreadable, nil, resp,
				"the find answer is not JSON: "+a.excerpt(body))
		}
		if ids, err = foundIDs(val, ok); err != nil {
			return adapters.JobRef{}, false, reasonf(adapters.ErrJobUnaddressable, "the found job's ID at %q is %v; answer: %s", t.findField, err, a.excerpt(body))
		}
		a.traceText(t.find, "rule", fmt.Sprintf("find.field %s → %q", t.findField, ids))
	default:
		return adapters.JobRef{}, false, a.answered(statusClass(resp.StatusCode), nil, resp, words)
	}
	switch len(ids) {
	case 0:
		submitted := req.SubmittedAt
		if submitted.IsZero() {
			submitted = a.now()
		}
		if wait := a.listingLag - a.now().Sub(submitted); wait > 0 {
			return adapters.JobRef{}, false, fmt.Errorf("finding %s job: none carries correlation ID %s yet, %s after the submission (listing_lag %s): %w",
				t.name, req.CorrelationID, a.now().Sub(submitted).Round(time.Second), a.listingLag, adapters.ErrNotListedYet)
		}
		return adapters.JobRef{}, false, nil
	case 1:
	default:
		return adapters.JobRef{}, false, reasonf(adapters.ErrJobUnaddressable, "%d jobs carry correlation ID %s (%s), so the bridge cannot tell which one is the task's", len(ids), req.CorrelationID, a.redactor.Clean(strings.Join(ids, ", "), maxExcerpt))
	}
	id := ids[0]
	ref := t.ref(id, refData{Tool: t.name}, req.Arguments, req.CorrelationID)
	err = a.checkJobID(id)
	if err == nil {
		err = a.checkAddressable(t, ref)
	}
	if err != nil {
		return adapters.JobRef{}, false, reasonf(adapters.ErrJobUnaddressable, "the backend reports a job for the correlation ID, but %v", err)
	}
	return ref, true, nil
}

// foundIDs reads find.field's value: a string or number (one job), a list
// of them, or nothing.
func foundIDs(val any, present bool) ([]string, error) {
	if !present {
		return nil, nil
	}
	list, isList := val.([]any)
	if !isList {
		list = []any{val}
	}
	var ids []string
	for _, e := range list {
		s, kind := scalarText(e)
		if kind != "" {
			return nil, fmt.Errorf("%s, not a string or number", kind)
		}
		if s != "" && !slices.Contains(ids, s) {
			ids = append(ids, s)
		}
	}
	return ids, nil
}

func (a *Adapter) tool(name string) (*tool, error) {
	t, ok := a.tools[name]
	if !ok {
		return nil, fmt.Errorf("rest backend %q has no tool %q", a.name, name)
	}
	return t, nil
}

// decodeRef reads a job reference; queued is true while it names a queue
// item rather than the job.
func (a *Adapter) decodeRef(ref adapters.JobRef) (*tool, *values, bool, error) {
	var d refData
	if err := json.Unmarshal(ref.Data, &d); err != nil {
		return nil, nil, false, fmt.Errorf("decoding job reference: %w", err)
	}
	t, err := a.tool(d.Tool)
	if err != nil {
		return nil, nil, false, err
	}
	queued := d.QueuedAt != nil && t.queue != nil
	return t, &values{
		args:          d.Args,
		jobID:         ref.ID,
		location:      d.Location,
		correlationID: d.CorrelationID,
		baseURL:       a.baseURL,
		queuedAt:      d.QueuedAt,
	}, queued, nil
}

// newRequest renders a call into an HTTP request. Header values holding
// secrets are rendered by the request's signer, so that a refreshed
// credential can be put in after a 401.
func (a *Adapter) newRequest(ctx context.Context, c *call, v *values) (*http.Request, error) {
	vars := v.vars()
	u, err := a.buildURLVars(ctx, c, v, vars)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if c.body != nil {
		rendered, _, err := renderBody(ctx, c.body, vars)
		if err != nil {
			return nil, fmt.Errorf("rendering body: %w", err)
		}
		b, err := json.Marshal(rendered)
		if err != nil {
			return nil, fmt.Errorf("encoding body: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "jobbridge")
	if a.propagate {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	var secret []param
	for _, h := range append(slices.Clip(a.headers), c.headers...) {
		if len(h.t.Secrets()) > 0 {
			secret = append(secret, h)
			continue
		}
		s, missing, err := h.t.Render(ctx, vars, raw, nil)
		if err != nil {
			return nil, fmt.Errorf("rendering header %s: %w", h.name, err)
		}
		if missing {
			continue
		}
		if strings.ContainsAny(s, "\r\n\x00") {
			return nil, fmt.Errorf("header %s: value contains a line break or NUL", h.name)
		}
		req.Header.Set(h.name, s)
	}
	sign := func(r *http.Request) error {
		for _, h := range secret {
			s, _, err := h.t.Render(r.Context(), vars, raw, a.creds.secret)
			if err != nil {
				return fmt.Errorf("header %s: %w", h.name, err)
			}
			if strings.ContainsAny(s, "\r\n\x00") {
				return fmt.Errorf("header %s: value contains a line break or NUL", h.name)
			}
			r.Header.Set(h.name, s)
		}
		return a.creds.authorize(r)
	}
	return req.WithContext(withSigner(req.Context(), sign)), nil
}

// buildURL renders the call's path and query under base_url and refuses a
// URL that would leave it.
func (a *Adapter) buildURL(ctx context.Context, c *call, v *values) (*url.URL, error) {
	return a.buildURLVars(ctx, c, v, v.vars())
}

func (a *Adapter) buildURLVars(ctx context.Context, c *call, v *values, vars expr.Vars) (*url.URL, error) {
	var u *url.URL
	path := c.path
	if segs := path.Segments(); len(segs) > 0 && segs[0].Name == phJobLocation {
		if v.location == "" {
			return nil, errors.New("the job has no location")
		}
		loc, err := url.Parse(v.location)
		if err != nil {
			return nil, errors.New("malformed job location")
		}
		u = a.base.ResolveReference(loc)
		path = path.Tail(1)
	} else {
		base := *a.base
		u = &base
		u.RawQuery = ""
		u.RawPath = strings.TrimSuffix(u.EscapedPath(), "/")
		u.Path = strings.TrimSuffix(u.Path, "/")
	}
	suffix, _, err := path.Render(ctx, vars, pathSegment, nil)
	if err != nil {
		return nil, fmt.Errorf("rendering path: %w", err)
	}
	escaped := u.EscapedPath() + suffix
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, errors.New("rendered path is not validly escaped")
	}
	u.Path, u.RawPath = unescaped, escaped
	q := u.Query()
	for _, p := range c.query {
		s, missing, err := p.t.Render(ctx, vars, raw, nil)
		if err != nil {
			return nil, fmt.Errorf("rendering query parameter %s: %w", p.name, err)
		}
		if !missing {
			q.Set(p.name, s)
		}
	}
	u.RawQuery = q.Encode()
	u.Fragment, u.RawFragment = "", ""
	if !a.underBase(u) {
		return nil, errors.New("rendered URL leaves base_url")
	}
	return u, nil
}

// underBase reports whether u has base_url's scheme, host and port and a
// path inside base_url's path, also when its escaped separators ("%2F"),
// backslashes ("\" or "%5C") and dot segments are read as a lenient server
// would (some servers take a backslash for a "/").
func (a *Adapter) underBase(u *url.URL) bool {
	if !sameOrigin(u, a.base) || u.User != nil {
		return false
	}
	prefix := strings.TrimSuffix(a.base.Path, "/")
	for _, p := range []string{u.Path, u.EscapedPath(), strings.ReplaceAll(u.Path, `\`, "/")} {
		clean := cleanPath(p)
		if prefix != "" && clean != prefix && !strings.HasPrefix(clean, prefix+"/") {
			return false
		}
	}
	return true
}

var _ adapters.Adapter = (*Adapter)(nil)
var _ adapters.Responder = (*Adapter)(nil)
var _ adapters.Finder = (*Adapter)(nil)
