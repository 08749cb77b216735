// Package rest is the adapter for generic REST job APIs: an operator describes
// in YAML how to start a job (a request template), where the response carries
// the job's ID, how to ask for its status and how to read the answer (a JSON
// path and a table from status values to states), and optionally how to
// cancel it, answer its questions and find it by correlation ID.
//
// Every request stays under the backend's base_url: tool arguments only fill
// escaped path segments, query values, header values and body values, and the
// adapter refuses a rendered URL that would leave base_url. Header values from
// the configuration are secrets; they never appear in errors or logs.
//
// Egress is restricted at connect time: the dialer checks the address it is
// about to connect to, after name resolution, and refuses loopback, private,
// link-local (incl. 169.254.169.254), CGNAT, multicast and other
// special-purpose addresses in IPv4, IPv6 and IPv4-mapped forms, unless the
// backend's allow_networks lists them. Redirects are never followed, and
// proxy environment variables are ignored.
//
// A start request is sent once: a submission whose outcome is unknown is
// reported as such (wrapping [adapters.ErrOutcomeUnknown]) and never re-sent,
// unless the backend declares an idempotency header. Status and find requests
// are GETs and are retried on connection errors, 429 and 5xx, honouring
// Retry-After.
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
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/errgroup"

	"github.com/jobbridge/jobbridge/adapters"
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
	// safe request (defaults 250ms and 5s). A Retry-After longer than
	// RetryWaitMax ends the retries instead of sleeping.
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
}

// Adapter talks to one REST job API. It is safe for concurrent use.
type Adapter struct {
	name        string
	base        *url.URL
	baseURL     string // base_url without a trailing slash
	headers     http.Header
	idempotency string
	tools       map[string]*tool

	once         *http.Client          // requests sent at most once
	retry        *retryablehttp.Client // safe requests, retried
	redactor     *redactor
	log          *slog.Logger
	retryWaitMax time.Duration
}

// tool is a compiled JobConfig.
type tool struct {
	name    string
	start   *call
	status  *call
	cancel  *call
	respond *call
	find    *call

	jobIDField   string
	fromLocation bool
	statusCfg    StatusConfig
	states       map[string]adapters.State
	links        []link
	findField    string

	// carryArgs are the arguments later calls use; they travel in the JobRef.
	carryArgs        []string
	carryCorrelation bool
}

type call struct {
	method  string
	path    template
	query   []param
	headers []param
	body    any
}

type param struct {
	name string
	t    template
}

type link struct {
	title string
	t     template
}

// refData is the adapter-owned part of a JobRef.
type refData struct {
	Tool          string         `json:"tool"`
	Location      string         `json:"location,omitempty"`
	Args          map[string]any `json:"args,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
}

// New returns an adapter for the backend called name, serving the given
// tools (by tool name). It applies defaults to copies of the configs,
// validates them and expands ${NAME} in header values; an unset variable is
// an error that names the variable.
func New(name string, backend BackendConfig, tools map[string]JobConfig, opts *Options) (*Adapter, error) {
	if opts == nil {
		opts = &Options{}
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	red := &redactor{}
	getenv = red.watch(getenv)

	backend.SetDefaults()
	var errs []error
	if err := backend.Validate(); err != nil {
		errs = append(errs, err)
	}
	a := &Adapter{
		name:        name,
		headers:     http.Header{},
		idempotency: backend.IdempotencyHeader,
		tools:       map[string]*tool{},
		redactor:    red,
		log:         opts.Logger,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
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
	for _, k := range sortedKeys(backend.Headers) {
		t, err := parseTemplate(backend.Headers[k], true).resolveEnv(getenv)
		if err != nil {
			errs = append(errs, adapters.Fieldf("headers."+k, "%v", err))
			continue
		}
		v := t.literal()
		red.add(v)
		a.headers.Set(k, v)
	}
	for _, tn := range sortedKeys(tools) {
		t, err := compileTool(tn, tools[tn], backend, getenv, red)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, err))
			continue
		}
		a.tools[tn] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("rest backend %q: %w", name, err)
	}

	a.retryWaitMax = opts.RetryWaitMax
	if a.retryWaitMax <= 0 {
		a.retryWaitMax = 5 * time.Second
	}
	waitMin := opts.RetryWaitMin
	if waitMin <= 0 {
		waitMin = min(250*time.Millisecond, a.retryWaitMax)
	}
	a.once = newHTTPClient(opts.HTTPClient, backend.Timeout, eg)
	a.retry = &retryablehttp.Client{
		HTTPClient:   a.once,
		RetryWaitMin: waitMin,
		RetryWaitMax: a.retryWaitMax,
		RetryMax:     *backend.MaxRetries,
		CheckRetry:   a.checkRetry,
		Backoff:      a.backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return a, nil
}

func compileTool(name string, cfg JobConfig, backend BackendConfig, getenv func(string) (string, bool), red *redactor) (*tool, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	compile := func(block string, c *Call) *call {
		if c == nil {
			return nil
		}
		cc, err := compileCall(c, getenv, red)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", block, err))
		}
		return cc
	}
	t := &tool{
		name:         name,
		start:        compile("start", &cfg.Start),
		status:       compile("status", &cfg.Status.Call),
		cancel:       compile("cancel", cfg.Cancel),
		respond:      compile("respond", cfg.Respond),
		jobIDField:   cfg.JobID.Field,
		fromLocation: cfg.JobID.FromLocation,
		statusCfg:    cfg.Status,
		states:       map[string]adapters.State{},
	}
	if cfg.Find != nil {
		t.find = compile("find", &cfg.Find.Call)
		t.findField = cfg.Find.Field
		if backend.IdempotencyHeader == "" && !slices.Contains(callPlaceholders(&cfg.Start), phCorrelationID) {
			errs = append(errs, adapters.Fieldf("find", "the start call does not send {correlation_id} and the backend has no idempotency_header, so find cannot match a job"))
		}
	}
	for k, v := range cfg.Status.States {
		st, _ := adapters.ParseState(v)
		t.states[k] = st
	}
	for _, title := range sortedKeys(cfg.Status.Links) {
		t.links = append(t.links, link{title: title, t: parseTemplate(cfg.Status.Links[title], false)})
	}

	// Later calls run without the tool arguments: carry the ones they use.
	args := map[string]bool{}
	later := cfg.laterCalls()
	var names []string
	for _, c := range later {
		names = append(names, callPlaceholders(c.call)...)
	}
	for _, l := range t.links {
		names = append(names, l.t.placeholders()...)
	}
	for _, n := range names {
		if a, ok := strings.CutPrefix(n, argsPrefix); ok {
			args[a] = true
		}
		if n == phCorrelationID {
			t.carryCorrelation = true
		}
	}
	t.carryArgs = sortedKeys(args)
	return t, errors.Join(errs...)
}

func compileCall(c *Call, getenv func(string) (string, bool), red *redactor) (*call, error) {
	cc := &call{method: c.Method, path: parseTemplate(c.Path, false), body: c.Body}
	for _, k := range sortedKeys(c.Query) {
		cc.query = append(cc.query, param{name: k, t: parseTemplate(c.Query[k], false)})
	}
	var errs []error
	for _, k := range sortedKeys(c.Headers) {
		t, err := parseTemplate(c.Headers[k], true).resolveEnv(getenv)
		if err != nil {
			errs = append(errs, adapters.Fieldf("headers."+k, "%v", err))
			continue
		}
		for _, seg := range t {
			red.add(seg.lit)
		}
		cc.headers = append(cc.headers, param{name: k, t: t})
	}
	return cc, errors.Join(errs...)
}

// Start submits one job. See [adapters.Adapter] for how outcomes are
// classified.
func (a *Adapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, err
	}
	v := &values{args: req.Arguments, correlationID: req.CorrelationID, baseURL: a.baseURL}
	hreq, err := a.newRequest(ctx, t.start, v)
	if err != nil {
		return adapters.JobRef{}, fmt.Errorf("starting %s job: %w", t.name, err)
	}
	if err := ctx.Err(); err != nil {
		return adapters.JobRef{}, fmt.Errorf("starting %s job: %w", t.name, err)
	}
	rec := &sendRecord{}
	hreq = hreq.WithContext(context.WithValue(ctx, sendRecordKey{}, rec))

	var resp *http.Response
	if a.idempotency != "" {
		hreq.Header.Set(a.idempotency, req.CorrelationID)
		rreq, err := retryablehttp.FromRequest(hreq)
		if err != nil {
			return adapters.JobRef{}, fmt.Errorf("starting %s job: %w", t.name, err)
		}
		resp, err = a.retry.Do(rreq)
	} else {
		resp, err = a.once.Do(hreq)
	}
	if err != nil {
		closeBody(resp)
		if !rec.maybeSent.Load() {
			return adapters.JobRef{}, fmt.Errorf("starting %s job: request not sent: %w", t.name, err)
		}
		return adapters.JobRef{}, fmt.Errorf("starting %s job: %w: %w", t.name, adapters.ErrOutcomeUnknown, err)
	}
	body, readErr := readBody(resp)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return adapters.JobRef{}, fmt.Errorf("starting %s job: backend refused it: %s", t.name, a.statusText(resp, body))
	default:
		return adapters.JobRef{}, fmt.Errorf("starting %s job: %s: %w", t.name, a.statusText(resp, body), adapters.ErrOutcomeUnknown)
	}
	if readErr != nil {
		return adapters.JobRef{}, fmt.Errorf("starting %s job: reading answer: %w: %w", t.name, adapters.ErrOutcomeUnknown, readErr)
	}

	data := refData{Tool: t.name}
	var id string
	if t.fromLocation {
		loc := resp.Header.Get("Location")
		if loc == "" {
			return adapters.JobRef{}, fmt.Errorf("starting %s job: answer has no Location header: %w", t.name, adapters.ErrOutcomeUnknown)
		}
		id, data.Location, err = a.parseLocation(hreq.URL, loc)
		if err != nil {
			return adapters.JobRef{}, fmt.Errorf("starting %s job: %w: %w", t.name, adapters.ErrOutcomeUnknown, err)
		}
	} else {
		r := gjson.GetBytes(body, t.jobIDField)
		if !gjson.ValidBytes(body) || !r.Exists() || r.String() == "" {
			return adapters.JobRef{}, fmt.Errorf("starting %s job: answer has no job ID at %q: %w", t.name, t.jobIDField, adapters.ErrOutcomeUnknown)
		}
		id = r.String()
	}
	return t.ref(id, data, req), nil
}

// ref builds a JobRef, carrying what later calls need.
func (t *tool) ref(id string, data refData, req adapters.StartRequest) adapters.JobRef {
	for _, name := range t.carryArgs {
		if v, ok := req.Arguments[name]; ok {
			if data.Args == nil {
				data.Args = map[string]any{}
			}
			data.Args[name] = v
		}
	}
	if t.carryCorrelation {
		data.CorrelationID = req.CorrelationID
	}
	b, _ := json.Marshal(data) // marshalling decoded JSON values cannot fail
	return adapters.JobRef{ID: id, Data: b}
}

// parseLocation resolves a Location header against the request URL and
// returns the job ID (its last path segment) and the location to keep: a path
// when it is on the backend's origin, else the absolute URL (which later
// calls then refuse, as it leaves base_url).
func (a *Adapter) parseLocation(reqURL *url.URL, loc string) (id, keep string, err error) {
	ref, err := url.Parse(loc)
	if err != nil {
		return "", "", errors.New("malformed Location header")
	}
	u := reqURL.ResolveReference(ref)
	seg := u.EscapedPath()
	seg = strings.TrimSuffix(seg, "/")
	seg = seg[strings.LastIndexByte(seg, '/')+1:]
	if id, err = url.PathUnescape(seg); err != nil || id == "" {
		return "", "", errors.New("location header has no job ID")
	}
	if sameOrigin(u, a.base) {
		u.Scheme, u.Host, u.User = "", "", nil
	}
	u.Fragment = ""
	return id, u.String(), nil
}

// Poll observes the jobs, one status request each, several at a time. It
// returns an error only when ctx ends.
func (a *Adapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	obs := make([]adapters.Observation, len(refs))
	var g errgroup.Group
	g.SetLimit(pollConcurrency)
	for i, ref := range refs {
		g.Go(func() error {
			obs[i] = a.poll(ctx, ref)
			return nil
		})
	}
	_ = g.Wait() // the functions report through obs
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("polling %s jobs: %w", a.name, err)
	}
	return obs, nil
}

func (a *Adapter) poll(ctx context.Context, ref adapters.JobRef) adapters.Observation {
	fail := func(err error) adapters.Observation {
		return adapters.Observation{Err: fmt.Errorf("polling job %s: %w", ref.ID, err)}
	}
	t, v, err := a.decodeRef(ref)
	if err != nil {
		return fail(err)
	}
	resp, body, err := a.sendRetried(ctx, t.status, v)
	if err != nil {
		return fail(err)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return fail(fmt.Errorf("%s: %w", a.statusText(resp, body), adapters.ErrJobNotFound))
	case code < 200 || code >= 300:
		return fail(errors.New(a.statusText(resp, body)))
	}
	return a.observe(t, ref, v, body, resp.Header)
}

// Cancel asks the backend to stop the job. A 404, 409 or 410 answer means
// the job has already finished and is not an error. A tool without a cancel
// block returns nil: cancellation is then recorded by the bridge only and
// nothing is sent downstream.
func (a *Adapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	t, v, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("cancelling job %s: %w", ref.ID, err)
	}
	if t.cancel == nil {
		return nil
	}
	if err := a.sendOnce(ctx, t.cancel, v); err != nil {
		return fmt.Errorf("cancelling job %s: %w", ref.ID, err)
	}
	return nil
}

// Respond delivers answers to the job's input requests. A 404, 409 or 410
// answer means the job no longer waits and is not an error. A tool without a
// respond block returns an error wrapping [errors.ErrUnsupported].
func (a *Adapter) Respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	t, v, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("answering job %s: %w", ref.ID, err)
	}
	if t.respond == nil {
		return fmt.Errorf("answering job %s: tool %s has no respond call: %w", ref.ID, t.name, errors.ErrUnsupported)
	}
	v.answers = answers
	if err := a.sendOnce(ctx, t.respond, v); err != nil {
		return fmt.Errorf("answering job %s: %w", ref.ID, err)
	}
	return nil
}

// Find looks a job up by the request's correlation ID. A tool without a find
// block returns an error wrapping [errors.ErrUnsupported].
func (a *Adapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	if t.find == nil {
		return adapters.JobRef{}, false, fmt.Errorf("finding %s job: no find call: %w", t.name, errors.ErrUnsupported)
	}
	v := &values{args: req.Arguments, correlationID: req.CorrelationID, baseURL: a.baseURL}
	resp, body, err := a.sendRetried(ctx, t.find, v)
	if err != nil {
		return adapters.JobRef{}, false, fmt.Errorf("finding %s job: %w", t.name, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return adapters.JobRef{}, false, fmt.Errorf("finding %s job: %s", t.name, a.statusText(resp, body))
	}
	if !gjson.ValidBytes(body) {
		return adapters.JobRef{}, false, fmt.Errorf("finding %s job: answer is not JSON", t.name)
	}
	id := gjson.GetBytes(body, t.findField).String()
	if id == "" {
		return adapters.JobRef{}, false, nil
	}
	return t.ref(id, refData{Tool: t.name}, req), true, nil
}

func (a *Adapter) tool(name string) (*tool, error) {
	t, ok := a.tools[name]
	if !ok {
		return nil, fmt.Errorf("rest backend %q has no tool %q", a.name, name)
	}
	return t, nil
}

func (a *Adapter) decodeRef(ref adapters.JobRef) (*tool, *values, error) {
	var d refData
	if err := json.Unmarshal(ref.Data, &d); err != nil {
		return nil, nil, fmt.Errorf("decoding job reference: %w", err)
	}
	t, err := a.tool(d.Tool)
	if err != nil {
		return nil, nil, err
	}
	return t, &values{
		args:          d.Args,
		jobID:         ref.ID,
		location:      d.Location,
		correlationID: d.CorrelationID,
		baseURL:       a.baseURL,
	}, nil
}

// newRequest renders a call into an HTTP request.
func (a *Adapter) newRequest(ctx context.Context, c *call, v *values) (*http.Request, error) {
	u, err := a.buildURL(c, v)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if c.body != nil {
		rendered, _, err := renderBody(c.body, v)
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
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range a.headers {
		req.Header[k] = slices.Clone(vs)
	}
	for _, h := range c.headers {
		s, missing, err := h.t.render(v, raw)
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
	return req, nil
}

// buildURL renders the call's path and query under base_url and refuses a
// URL that would leave it.
func (a *Adapter) buildURL(c *call, v *values) (*url.URL, error) {
	var u *url.URL
	path := c.path
	if len(path) > 0 && path[0].ph == phJobLocation {
		if v.location == "" {
			return nil, errors.New("the job has no location")
		}
		loc, err := url.Parse(v.location)
		if err != nil {
			return nil, errors.New("malformed job location")
		}
		u = a.base.ResolveReference(loc)
		path = path[1:]
	} else {
		base := *a.base
		u = &base
		u.RawQuery = ""
		u.RawPath = strings.TrimSuffix(u.EscapedPath(), "/")
		u.Path = strings.TrimSuffix(u.Path, "/")
	}
	suffix, _, err := path.render(v, pathSegment)
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
		s, missing, err := p.t.render(v, raw)
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
// path inside base_url's path, also when its escaped separators and dot
// segments are read as a lenient server would.
func (a *Adapter) underBase(u *url.URL) bool {
	if !sameOrigin(u, a.base) || u.User != nil {
		return false
	}
	prefix := strings.TrimSuffix(a.base.Path, "/")
	for _, p := range []string{u.Path, u.EscapedPath()} {
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
