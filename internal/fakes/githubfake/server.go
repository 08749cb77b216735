package githubfake

import (
	"cmp"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/loopback"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// maxInputs is GitHub's limit on workflow_dispatch inputs.
const maxInputs = 25

// ScriptInput is the dispatch input that picks a script from
// [Options.Scripts] by name instead of the workflow's own.
const ScriptInput = "fake_script"

// Secondary-rate-limit documentation path. go-github recognises a secondary
// limit by the suffix of documentation_url.
const secondaryDocs = "/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
const primaryDocs = "/rest/using-the-rest-api/rate-limits-for-the-rest-api"

// Options configures a [Server]. A nil *Options selects the defaults.
type Options struct {
	// Now is the server's clock. Default time.Now.
	Now func() time.Time
	// Workflows the server knows, in every owner/repo. Nil: [DemoWorkflows].
	Workflows []Workflow
	// Scripts can be picked by name with the dispatch input [ScriptInput].
	Scripts map[string]Script
	// Tokens are the accepted bearer tokens. Empty: any request is
	// accepted, with or without a token.
	Tokens []string
	// RejectRunDetails, when 400 or 422, makes the server behave like
	// GitHub Enterprise Server 3.20 and older: a dispatch that carries
	// return_run_details is refused with that status.
	RejectRunDetails int
	// RateLimit is the primary limit per token and hour; requests answered
	// 304 do not count. Default 5000.
	RateLimit int
	// ListDelay is how long a new run stays out of run listings, as on
	// GitHub, where a dispatched run appears after a few seconds. Zero:
	// [DefaultListDelay]; [NoListDelay] (any negative value) lists runs at
	// once.
	ListDelay time.Duration
	// Refs are the branches and tags that exist (a dispatch may name one
	// as "NAME", "refs/heads/NAME" or "refs/tags/NAME"); a dispatch to
	// another ref is answered 422 "No ref found for: REF". Nil: every ref
	// exists.
	Refs []string
	// SecondaryLimits, when set, models GitHub's secondary rate limits.
	SecondaryLimits *SecondaryLimits
	// JobsLeaveRunUnchanged makes a job that finishes while the next one
	// runs leave the run document (and so its ETag) unchanged: only the
	// run's own status changes move its updated_at. GitHub does not
	// document either way, so clients must not rely on the run's ETag to
	// learn of job progress.
	JobsLeaveRunUnchanged bool

	// AppPublicKey, when set, makes the server a GitHub App installation:
	// POST app/installations/{InstallationID}/access_tokens exchanges a
	// JWT signed by the matching private key (RS256, iss AppID) for an
	// installation token that lives AppTokenLifetime (default
	// [DefaultAppTokenLifetime]), and API requests must carry an unexpired
	// issued token (or one of Tokens).
	AppPublicKey     *rsa.PublicKey
	AppID            int64
	InstallationID   int64
	AppTokenLifetime time.Duration
}

// DefaultListDelay is [Options.ListDelay] when it is zero: short, so that
// tests stay fast, yet every test meets a lagging listing.
const DefaultListDelay = 2 * time.Second

// NoListDelay, as [Options.ListDelay], lists new runs at once.
const NoListDelay time.Duration = -1

// SecondaryLimits are GitHub's secondary rate limits: at most Concurrent
// requests in flight (default 100), and at most PointsPerMinute points per
// endpoint and minute (default 900; a GET costs 1 point, a POST, PATCH, PUT
// or DELETE 5). A request beyond either is answered 403 with the
// secondary-limit message and retry-after, and takes no effect.
type SecondaryLimits struct {
	Concurrent      int
	PointsPerMinute int
}

// Workflow is a workflow file the server knows.
type Workflow struct {
	// ID is its numeric ID; 0 assigns one.
	ID int64
	// File is its file name, e.g. "deploy.yml".
	File string
	// Name is its display name; default File.
	Name   string
	Script Script
	// Inputs are the workflow's declared workflow_dispatch inputs; a
	// dispatch with another input is answered 422 "Unexpected inputs
	// provided: [...]". Nil: any input is accepted. [ScriptInput] is
	// always accepted.
	Inputs []string
	// NoDispatchTrigger makes the workflow lack the workflow_dispatch
	// trigger: a dispatch is answered 422 "Workflow does not have
	// 'workflow_dispatch' trigger".
	NoDispatchTrigger bool
}

// Server is the fake GitHub REST API. It is an [http.Handler] and is safe
// for concurrent use.
type Server struct {
	now              func() time.Time
	scripts          map[string]Script
	tokens           map[string]bool
	rejectRunDetails int
	rateLimit        int
	listDelay        time.Duration
	refs             map[string]bool
	jobsQuiet        bool
	secondary        *SecondaryLimits
	exchangeDir      string
	appKey           *rsa.PublicKey
	appID            int64
	installationID   int64
	appTokenLifetime time.Duration

	mu           sync.Mutex
	workflows    map[string]*Workflow // by file name and by ID
	runs         map[int64]*run
	jobs         map[int64]jobRef
	nextRun      int64
	nextJob      int64
	runNumbers   map[int64]int
	requests     int
	notModified  int
	counted      int
	versions     map[string]int
	dispatches   map[string]int
	dispatched   int
	cancels      map[int64]int
	forceCancels map[int64]int
	reviews      map[int64][]Review
	windows      map[string]*window
	faults       []*Fault
	issued       map[string]time.Time // installation tokens and their expiry
	exchanges    int
	inFlight     int
	points       map[string]*pointWindow

	// hook is where webhook deliveries go (nil: none); hookMu
	// serialises sending them, so that they leave in order. base is the
	// server's own URL, for the documents deliveries carry.
	hookMu sync.Mutex
	hook   *webhook
	base   string

	life loopback.Server
}

type jobRef struct {
	run   int64
	index int
}

// window is one token's primary rate-limit window.
type window struct {
	reset time.Time
	used  int
	limit int
}

// pointWindow is one endpoint's secondary-limit minute.
type pointWindow struct {
	start  time.Time
	points int
}

// New returns a server with no runs.
func New(opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{
		now:              time.Now,
		scripts:          maps.Clone(opts.Scripts),
		tokens:           map[string]bool{},
		rejectRunDetails: opts.RejectRunDetails,
		rateLimit:        cmp.Or(opts.RateLimit, 5000),
		listDelay:        opts.ListDelay,
		secondary:        opts.SecondaryLimits,
		jobsQuiet:        opts.JobsLeaveRunUnchanged,
		exchangeDir:      os.Getenv(ExchangesEnv),
		points:           map[string]*pointWindow{},
		appKey:           opts.AppPublicKey,
		appID:            opts.AppID,
		installationID:   opts.InstallationID,
		appTokenLifetime: cmp.Or(opts.AppTokenLifetime, DefaultAppTokenLifetime),
		issued:           map[string]time.Time{},
		workflows:        map[string]*Workflow{},
		runs:             map[int64]*run{},
		jobs:             map[int64]jobRef{},
		nextRun:          30000000000,
		nextJob:          70000000000,
		runNumbers:       map[int64]int{},
		versions:         map[string]int{},
		dispatches:       map[string]int{},
		cancels:          map[int64]int{},
		forceCancels:     map[int64]int{},
		reviews:          map[int64][]Review{},
		windows:          map[string]*window{},
	}
	if opts.Now != nil {
		s.now = opts.Now
	}
	switch {
	case s.listDelay == 0:
		s.listDelay = DefaultListDelay
	case s.listDelay < 0:
		s.listDelay = 0
	}
	if opts.Refs != nil {
		s.refs = map[string]bool{}
		for _, ref := range opts.Refs {
			s.refs[ref], s.refs["refs/heads/"+ref], s.refs["refs/tags/"+ref] = true, true, true
		}
	}
	if sl := s.secondary; sl != nil {
		s.secondary = &SecondaryLimits{Concurrent: cmp.Or(sl.Concurrent, 100), PointsPerMinute: cmp.Or(sl.PointsPerMinute, 900)}
	}
	for _, t := range opts.Tokens {
		s.tokens[t] = true
	}
	wfs := opts.Workflows
	if wfs == nil {
		wfs = DemoWorkflows()
	}
	nextID := int64(160000000)
	for _, w := range wfs {
		w := w
		if w.ID == 0 {
			nextID++
			w.ID = nextID
		}
		if w.Name == "" {
			w.Name = w.File
		}
		s.workflows[w.File] = &w
		s.workflows[strconv.FormatInt(w.ID, 10)] = &w
	}
	return s
}

// DemoWorkflows are the workflows of a server created without any: what
// `jobbridge demo` and configs/github-actions.yaml use. Each echoes the
// dispatch input "correlation_id" in its run name.
func DemoWorkflows() []Workflow {
	const runName = "{inputs.correlation_id}"
	return []Workflow{
		{File: "ci.yml", Name: "CI", Script: Script{
			RunName: "CI [" + runName + "]", Queued: 2 * time.Second,
			Jobs: []JobScript{
				{Name: "build", Duration: 4 * time.Second},
				{Name: "test", Duration: 6 * time.Second},
			},
			Artifacts: []ArtifactScript{{Name: "coverage-report", Size: 48213}},
		}},
		{File: "flaky-tests.yml", Name: "Flaky tests", Script: Script{
			RunName: "Flaky tests [" + runName + "]", Queued: 2 * time.Second,
			Jobs: []JobScript{
				{Name: "build", Duration: 3 * time.Second},
				{Name: "integration", Duration: 5 * time.Second, LogLines: 300},
			},
			Conclusion: conclusionFailure,
			Artifacts:  []ArtifactScript{{Name: "test-results", Size: 1024}},
		}},
		{File: "deploy.yml", Name: "Deploy", Script: Script{
			RunName: "Deploy [" + runName + "]", Queued: time.Second,
			Jobs: []JobScript{
				{Name: "build", Duration: 3 * time.Second},
				{Name: "deploy", Duration: 5 * time.Second},
			},
			Approval: &Approval{Job: 1, Environment: "production", EnvironmentID: 161088068,
				Reviewers: []string{"octocat", "team:release-managers"}, CanApprove: true},
		}},
		{File: "nightly.yml", Name: "Nightly", Script: Script{
			RunName: "Nightly [" + runName + "]", Queued: time.Second,
			Jobs:     []JobScript{{Name: "soak", Duration: time.Hour}},
			OnCancel: OnCancelIgnore,
		}},
	}
}

// Start listens on addr ("127.0.0.1:0" when empty) and serves in the
// background until [Server.Close]. It returns the base URL, such as
// "http://127.0.0.1:41234/", to give go-github as its base URL.
func (s *Server) Start(addr string) (baseURL string, err error) {
	addr, err = s.life.Start("GitHub fake", addr, s)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.base = "http://" + addr + "/"
	s.mu.Unlock()
	return "http://" + addr + "/", nil
}

// Close stops the listener started by [Server.Start]. Runs are kept.
func (s *Server) Close() error { return s.life.Close("GitHub fake") }

// Requests returns how many requests the server received, faults included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// NotModified returns how many requests were answered 304.
func (s *Server) NotModified() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notModified
}

// Counted returns how many requests counted against a primary rate limit
// (every authorised API request not answered 304).
func (s *Server) Counted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counted
}

// APIVersions counts the X-GitHub-Api-Version values requests carried ("" for
// none).
func (s *Server) APIVersions() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.versions)
}

// Dispatches returns how many accepted dispatches carried value as one of
// their inputs (for example a correlation ID).
func (s *Server) Dispatches(value string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispatches[value]
}

// Dispatched returns how many dispatches the server accepted.
func (s *Server) Dispatched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispatched
}

// Cancels returns how many cancel requests for the run were handled.
func (s *Server) Cancels(runID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels[runID]
}

// ForceCancels returns how many force-cancel requests for the run were
// handled.
func (s *Server) ForceCancels(runID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forceCancels[runID]
}

// Reviews returns the accepted reviews of the run's pending deployments.
func (s *Server) Reviews(runID int64) []Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reviews[runID])
}

// Inputs returns the inputs the run was dispatched with, or nil.
func (s *Server) Inputs(runID int64) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[runID]; ok {
		return maps.Clone(r.inputs)
	}
	return nil
}

// Purge forgets a run, as GitHub does when a run is deleted.
func (s *Server) Purge(runID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, runID)
}

// Rerun starts a new attempt of the run now, as "Re-run all jobs" does: same
// run ID, run_attempt incremented, status queued again.
func (s *Server) Rerun(runID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[runID]; ok {
		r.attempt++
		r.createdAt = s.now()
		r.review, r.end, r.cancelRequested = nil, nil, time.Time{}
	}
}

// FaultKind says how a [Fault] answers.
type FaultKind int

const (
	// FaultStatus answers Status with a plain error message.
	FaultStatus FaultKind = iota
	// FaultPrimaryRateLimit answers 403 (or Status) with
	// x-ratelimit-remaining 0 and x-ratelimit-reset RetryAfter from now.
	FaultPrimaryRateLimit
	// FaultSecondaryRateLimit answers 403 (or Status) with the secondary
	// rate-limit message and, when RetryAfter is set, a retry-after header.
	FaultSecondaryRateLimit
)

// Fault is a scripted failure. Each request consumes the first waiting fault
// that matches it.
type Fault struct {
	// Method matches exactly; empty matches any.
	Method string
	// Path matches a substring of the request path; empty matches any.
	Path string
	// Times is how many matching requests the fault affects; 0 means 1.
	Times int
	Kind  FaultKind
	// Status is the answer's status; default 503 for FaultStatus, 403 for
	// rate limits.
	Status int
	// RetryAfter is the wait the answer asks for.
	RetryAfter time.Duration
	// AfterHandling handles the request first, then answers the fault: the
	// client cannot tell whether it took effect.
	AfterHandling bool
	// Drop closes the connection without an answer.
	Drop bool
	// Message, for FaultStatus, is the answer's message (default "injected
	// fault"), answered with the generic documentation_url: for example a
	// secondary rate limit as servers answer whose documentation URLs
	// go-github does not recognise.
	Message string
}

// Inject adds a fault after those already waiting.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
		if f.Kind != FaultStatus {
			f.Status = http.StatusForbidden
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults drops the faults still waiting.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) takeFault(method, path string) (Fault, bool) {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != method) || !strings.Contains(path, f.Path) {
			continue
		}
		f.Times--
		if f.Times == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return *f, true
	}
	return Fault{}, false
}

// response is an answer computed under the lock and written after it.
type response struct {
	status   int
	header   http.Header
	body     any    // JSON
	text     string // text/plain when body is nil
	etag     bool   // a cacheable GET answer
	rate     *window
	noCharge bool
	data     []byte // the marshalled body
}

type apiError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url,omitempty"`
	Status           string `json:"status,omitempty"`
}

func errorResponse(status int, format string, args ...any) response {
	return response{status: status, body: apiError{
		Message:          fmt.Sprintf(format, args...),
		DocumentationURL: "/rest",
		Status:           strconv.Itoa(status),
	}}
}

func notFound() response { return errorResponse(http.StatusNotFound, "Not Found") }

// ServeHTTP implements the endpoints described in the package
// documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))

	s.mu.Lock()
	s.requests++
	if s.base == "" {
		s.base = baseURL(r)
	}
	s.versions[r.Header.Get("X-GitHub-Api-Version")]++
	fault, faulted := s.takeFault(r.Method, r.URL.Path)
	var resp response
	if !faulted || fault.AfterHandling {
		resp = s.serve(r, body, readErr)
	}
	if faulted && !fault.Drop {
		resp = s.faultResponse(fault)
		if fault.Kind == FaultSecondaryRateLimit {
			// GitHub sends the primary window's headers on every answer,
			// secondary limits included (remaining is then not 0).
			resp.rate, resp.noCharge = s.window(bearer(r.Header.Get("Authorization"))), true
		}
	}
	if resp.rate == nil && resp.header.Get("X-RateLimit-Limit") == "" && !strings.HasPrefix(r.URL.Path, "/_blobs/") {
		// GitHub sends the x-ratelimit-* headers on every REST answer: a
		// refusal, an error and an answer before routing too. An injected
		// fault shows them without counting, so that a test's faults do
		// not change its rate-limit arithmetic.
		resp.rate = s.windowFor(r)
		resp.noCharge = resp.noCharge || faulted
	}
	s.finish(r, &resp)
	s.mu.Unlock()

	if faulted && fault.Drop {
		dropConnection(w)
		return
	}
	write(w, resp)
	s.record(r, body, resp, faulted)
}

func (s *Server) faultResponse(f Fault) response {
	now := s.now()
	switch f.Kind {
	case FaultPrimaryRateLimit:
		resp := errorResponse(f.Status, "API rate limit exceeded for user ID 1.")
		resp.body = apiError{Message: "API rate limit exceeded for user ID 1.", DocumentationURL: primaryDocs}
		resp.header = http.Header{}
		resp.header.Set("X-RateLimit-Limit", strconv.Itoa(s.rateLimit))
		resp.header.Set("X-RateLimit-Remaining", "0")
		resp.header.Set("X-RateLimit-Used", strconv.Itoa(s.rateLimit))
		resp.header.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(f.RetryAfter).Unix(), 10))
		resp.header.Set("X-RateLimit-Resource", "core")
		return resp
	case FaultSecondaryRateLimit:
		resp := response{status: f.Status, header: http.Header{}, body: apiError{
			Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			DocumentationURL: secondaryDocs,
		}}
		if f.RetryAfter > 0 {
			resp.header.Set("Retry-After", strconv.FormatInt(int64((f.RetryAfter+time.Second-1)/time.Second), 10))
		}
		return resp
	}
	if f.Message != "" {
		return errorResponse(f.Status, "%s", f.Message)
	}
	return errorResponse(f.Status, "injected fault")
}

// serve authenticates, accounts and routes one request. It runs with s.mu
// held.
func (s *Server) serve(r *http.Request, body []byte, readErr error) response {
	if readErr != nil {
		return errorResponse(http.StatusRequestEntityTooLarge, "request body too large")
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != "2022-11-28" && v != "2026-03-10" {
		return errorResponse(http.StatusBadRequest, "API version '%s' is not supported.", v)
	}
	if strings.HasPrefix(r.URL.Path, "/_blobs/") {
		// Pre-signed downloads: no token, no rate limit.
		return s.blob(r)
	}
	if id, ok := appTokensPath(r.URL.Path); ok && s.appKey != nil {
		// Authenticated by the app JWT; not counted against a token's
		// rate limit.
		return s.exchangeToken(r, id)
	}
	token := bearer(r.Header.Get("Authorization"))
	if !s.authorized(token) {
		// GitHub answers with the unauthenticated window's headers
		// (60 requests an hour), and the failed request counts.
		resp := errorResponse(http.StatusUnauthorized, "Bad credentials")
		resp.rate = s.windowOf("unauthenticated "+r.RemoteAddr, unauthenticatedLimit)
		return resp
	}
	win := s.window(token)
	if resp, limited := s.secondaryLimit(r, win); limited {
		return resp
	}
	if win.used >= win.limit {
		resp := errorResponse(http.StatusForbidden, "API rate limit exceeded for user ID 1.")
		resp.rate = win
		resp.noCharge = true
		return resp
	}
	resp := s.route(r, body)
	resp.rate = win
	return resp
}

func bearer(h string) string {
	for _, p := range []string{"Bearer ", "bearer ", "token "} {
		if t, ok := strings.CutPrefix(h, p); ok {
			return t
		}
	}
	return ""
}

// unauthenticatedLimit is GitHub's primary limit for requests without
// valid credentials, per hour.
const unauthenticatedLimit = 60

// windowFor returns the rate-limit window a request counts against: its
// token's, the app's for a JWT-authenticated token exchange, or its
// address's unauthenticated one. It runs with s.mu held.
func (s *Server) windowFor(r *http.Request) *window {
	token := bearer(r.Header.Get("Authorization"))
	if _, ok := appTokensPath(r.URL.Path); ok && s.appKey != nil {
		return s.windowOf("app", s.rateLimit)
	}
	if s.authorized(token) {
		return s.window(token)
	}
	return s.windowOf("unauthenticated "+r.RemoteAddr, unauthenticatedLimit)
}

// window returns the token's current rate-limit window.
func (s *Server) window(token string) *window { return s.windowOf(token, s.rateLimit) }

func (s *Server) windowOf(key string, limit int) *window {
	now := s.now()
	w := s.windows[key]
	if w == nil || !now.Before(w.reset) {
		w = &window{reset: now.Add(time.Hour).Truncate(time.Second), limit: limit}
		s.windows[key] = w
	}
	return w
}

// secondaryLimit charges the request's points to its endpoint and answers
// the secondary-limit refusal when it goes beyond [Options.SecondaryLimits].
// It runs with s.mu held.
func (s *Server) secondaryLimit(r *http.Request, win *window) (response, bool) {
	sl := s.secondary
	if sl == nil {
		return response{}, false
	}
	cost := 5
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		cost = 1
	}
	now := s.now()
	key := r.Method + " " + endpointOf(r.URL.Path)
	pw := s.points[key]
	if pw == nil || now.Sub(pw.start) >= time.Minute {
		pw = &pointWindow{start: now}
		s.points[key] = pw
	}
	wait := time.Duration(0)
	switch {
	case s.inFlight > sl.Concurrent:
		wait = time.Second
	case pw.points+cost > sl.PointsPerMinute:
		wait = pw.start.Add(time.Minute).Sub(now)
	default:
		pw.points += cost
		return response{}, false
	}
	resp := s.faultResponse(Fault{Kind: FaultSecondaryRateLimit, Status: http.StatusForbidden, RetryAfter: max(wait, time.Second)})
	resp.rate, resp.noCharge = win, true
	return resp, true
}

// endpointOf is a request path with its numeric segments and names under
// workflows/ and repos/ replaced, so that requests for different runs count
// against one endpoint.
func endpointOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if _, err := strconv.ParseInt(p, 10, 64); err == nil {
			parts[i] = "{id}"
		}
		if i > 0 && parts[i-1] == "workflows" {
			parts[i] = "{workflow}"
		}
	}
	if len(parts) >= 3 && parts[0] == "repos" {
		parts[1], parts[2] = "{owner}", "{repo}"
	}
	return "/" + strings.Join(parts, "/")
}

// route dispatches on the path. It runs with s.mu held.
func (s *Server) route(r *http.Request, body []byte) response {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// repos/{owner}/{repo}/actions/...
	if len(parts) < 5 || parts[0] != "repos" || parts[3] != "actions" {
		return notFound()
	}
	owner, repo, rest := parts[1], parts[2], parts[4:]
	method := r.Method
	switch {
	case len(rest) == 3 && rest[0] == "workflows" && rest[2] == "dispatches":
		if method != http.MethodPost {
			return notFound()
		}
		return s.dispatch(r, owner, repo, rest[1], body)
	case len(rest) == 3 && rest[0] == "workflows" && rest[2] == "runs":
		if method != http.MethodGet {
			return notFound()
		}
		return s.listRuns(r, owner, repo, rest[1])
	case len(rest) == 3 && rest[0] == "jobs" && rest[2] == "logs":
		if method != http.MethodGet {
			return notFound()
		}
		return s.jobLogs(r, owner, repo, rest[1])
	case len(rest) >= 2 && rest[0] == "runs":
		id, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil {
			return notFound()
		}
		rn, ok := s.runs[id]
		if !ok || rn.owner != owner || rn.repo != repo {
			return notFound()
		}
		action := strings.Join(rest[2:], "/")
		switch {
		case action == "" && method == http.MethodGet:
			return response{status: http.StatusOK, body: s.runDoc(r, rn), etag: true}
		case action == "jobs" && method == http.MethodGet:
			return s.jobsDoc(r, rn)
		case action == "artifacts" && method == http.MethodGet:
			return s.artifactsDoc(r, rn)
		case action == "pending_deployments" && method == http.MethodGet:
			return response{status: http.StatusOK, body: s.pendingDoc(r, rn), etag: true}
		case action == "pending_deployments" && method == http.MethodPost:
			return s.review(r, rn, body)
		case action == "cancel" && method == http.MethodPost:
			s.cancels[id]++
			return s.cancel(rn, false)
		case action == "force-cancel" && method == http.MethodPost:
			s.forceCancels[id]++
			return s.cancel(rn, true)
		}
	}
	return notFound()
}

type dispatchBody struct {
	Ref              *string        `json:"ref"`
	Inputs           map[string]any `json:"inputs"`
	ReturnRunDetails *bool          `json:"return_run_details"`
}

func (s *Server) dispatch(r *http.Request, owner, repo, wfName string, body []byte) response {
	wf, ok := s.workflows[wfName]
	if !ok {
		return notFound()
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return errorResponse(http.StatusBadRequest, "Problems parsing JSON")
	}
	if wf.NoDispatchTrigger {
		return errorResponse(http.StatusUnprocessableEntity, "Workflow does not have 'workflow_dispatch' trigger")
	}
	if _, ok := raw["return_run_details"]; ok && s.rejectRunDetails != 0 {
		return errorResponse(s.rejectRunDetails, "Invalid request.\n\n\"return_run_details\" is not a permitted key.")
	}
	var d dispatchBody
	if err := json.Unmarshal(body, &d); err != nil {
		return errorResponse(http.StatusUnprocessableEntity, "Invalid request.\n\n%v", err)
	}
	if d.Ref == nil || *d.Ref == "" {
		return errorResponse(http.StatusUnprocessableEntity, "Invalid request.\n\n\"ref\" wasn't supplied.")
	}
	if s.refs != nil && !s.refs[*d.Ref] {
		return errorResponse(http.StatusUnprocessableEntity, "No ref found for: %s", *d.Ref)
	}
	if len(d.Inputs) > maxInputs {
		return errorResponse(http.StatusUnprocessableEntity, "you may only define up to %d `inputs` for a `workflow_dispatch` event", maxInputs)
	}
	inputs := make(map[string]string, len(d.Inputs))
	for k, v := range d.Inputs {
		switch v := v.(type) {
		case string:
			inputs[k] = v
		case bool, float64:
			inputs[k] = fmt.Sprint(v)
		default:
			return errorResponse(http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'properties/%s', %s is not a string.", k, mustJSON(v))
		}
	}
	if wf.Inputs != nil {
		var unexpected []string
		for _, k := range slices.Sorted(maps.Keys(inputs)) {
			if k != ScriptInput && !slices.Contains(wf.Inputs, k) {
				unexpected = append(unexpected, k)
			}
		}
		if len(unexpected) > 0 {
			return errorResponse(http.StatusUnprocessableEntity, "Unexpected inputs provided: %s", mustJSON(unexpected))
		}
	}
	script := wf.Script
	if name, ok := inputs[ScriptInput]; ok {
		sc, ok := s.scripts[name]
		if !ok {
			return errorResponse(http.StatusUnprocessableEntity, "Unexpected value '%s' for input %s", name, ScriptInput)
		}
		script = sc
	}
	now := s.now()
	s.nextRun++
	s.runNumbers[wf.ID]++
	rn := &run{
		id: s.nextRun, number: s.runNumbers[wf.ID], attempt: 1,
		owner: owner, repo: repo, workflow: wf, ref: *d.Ref, inputs: inputs,
		title: displayTitle(script.RunName, wf.Name, inputs), script: script,
		createdAt: now, firstAt: now, jobsQuiet: s.jobsQuiet,
	}
	for range rn.jobs() {
		s.nextJob++
		rn.jobIDs = append(rn.jobIDs, s.nextJob)
		s.jobs[s.nextJob] = jobRef{run: rn.id, index: len(rn.jobIDs) - 1}
	}
	rn.artifactID = s.nextJob * 10
	s.runs[rn.id] = rn
	s.dispatched++
	for _, v := range inputs {
		s.dispatches[v]++
	}
	if d.ReturnRunDetails != nil && *d.ReturnRunDetails {
		base := baseURL(r)
		return response{status: http.StatusOK, body: map[string]any{
			"workflow_run_id": rn.id,
			"run_url":         fmt.Sprintf("%srepos/%s/%s/actions/runs/%d", base, owner, repo, rn.id),
			"html_url":        htmlURL(r, rn),
		}}
	}
	return response{status: http.StatusNoContent}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// listRuns answers the runs of a workflow, newest first, with GitHub's
// filters event, branch, status and created (">=TIME", "<=TIME",
// "TIME..TIME").
func (s *Server) listRuns(r *http.Request, owner, repo, wfName string) response {
	wf, ok := s.workflows[wfName]
	if !ok {
		return notFound()
	}
	q := r.URL.Query()
	from, to, err := parseCreated(q.Get("created"))
	if err != nil {
		return errorResponse(http.StatusUnprocessableEntity, "Invalid created filter")
	}
	now := s.now()
	var found []*run
	for _, rn := range s.runs {
		st := rn.stateAt(now)
		switch {
		case rn.workflow != wf || rn.owner != owner || rn.repo != repo:
		case now.Before(rn.firstAt.Add(s.listDelay)):
		case q.Get("event") != "" && q.Get("event") != "workflow_dispatch":
		case q.Get("branch") != "" && q.Get("branch") != rn.ref:
		case q.Get("status") != "" && q.Get("status") != st.status && q.Get("status") != st.conclusion:
		case !from.IsZero() && rn.firstAt.Before(from):
		case !to.IsZero() && rn.firstAt.After(to):
		default:
			found = append(found, rn)
		}
	}
	slices.SortFunc(found, func(a, b *run) int { return cmp.Compare(b.id, a.id) })
	perPage := min(max(atoi(q.Get("per_page"), 30), 1), 100)
	page := max(atoi(q.Get("page"), 1), 1)
	total := len(found)
	if total > 1000 {
		found = found[:1000] // GitHub returns at most 1,000 filtered results
	}
	lo, hi := min((page-1)*perPage, len(found)), min(page*perPage, len(found))
	docs := make([]runDocument, 0, hi-lo)
	for _, rn := range found[lo:hi] {
		docs = append(docs, s.runDoc(r, rn))
	}
	resp := response{status: http.StatusOK, body: map[string]any{"total_count": total, "workflow_runs": docs}, etag: true}
	if hi < len(found) {
		u := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		u.RawQuery = q.Encode()
		resp.header = http.Header{"Link": {fmt.Sprintf("<%s%s>; rel=\"next\"", strings.TrimSuffix(baseURL(r), "/"), u.RequestURI())}}
	}
	return resp
}

func atoi(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// parseCreated reads GitHub's date-range syntax for the created filter.
func parseCreated(v string) (from, to time.Time, err error) {
	parse := func(s string) (time.Time, error) {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
		return time.Parse("2006-01-02", s)
	}
	switch {
	case v == "":
		return
	case strings.HasPrefix(v, ">="):
		from, err = parse(v[2:])
	case strings.HasPrefix(v, ">"):
		from, err = parse(v[1:])
	case strings.HasPrefix(v, "<="):
		to, err = parse(v[2:])
	case strings.HasPrefix(v, "<"):
		to, err = parse(v[1:])
	case strings.Contains(v, ".."):
		a, b, _ := strings.Cut(v, "..")
		if from, err = parse(a); err == nil {
			to, err = parse(b)
		}
	default:
		from, err = parse(v)
		to = from.Add(24 * time.Hour)
	}
	return
}

func (s *Server) jobLogs(r *http.Request, owner, repo, idText string) response {
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return notFound()
	}
	ref, ok := s.jobs[id]
	rn := s.runs[ref.run]
	if !ok || rn == nil || rn.owner != owner || rn.repo != repo {
		return notFound()
	}
	if rn.stateAt(s.now()).jobs[ref.index].status == statusQueued {
		return notFound()
	}
	h := http.Header{}
	h.Set("Location", fmt.Sprintf("%s_blobs/jobs/%d/logs?sig=fake", baseURL(r), id))
	return response{status: http.StatusFound, header: h}
}

// blob serves a pre-signed download: a job's log as plain text.
func (s *Server) blob(r *http.Request) response {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 4 || parts[1] != "jobs" || parts[3] != "logs" {
		return notFound()
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return notFound()
	}
	ref, ok := s.jobs[id]
	rn := s.runs[ref.run]
	if !ok || rn == nil {
		return notFound()
	}
	st := rn.stateAt(s.now()).jobs[ref.index]
	return response{status: http.StatusOK, text: rn.logText(ref.index, st), noCharge: true}
}

type reviewBody struct {
	EnvironmentIDs []int64 `json:"environment_ids"`
	State          string  `json:"state"`
	Comment        *string `json:"comment"`
}

func (s *Server) review(r *http.Request, rn *run, body []byte) response {
	var b reviewBody
	if err := json.Unmarshal(body, &b); err != nil {
		return errorResponse(http.StatusBadRequest, "Problems parsing JSON")
	}
	if len(b.EnvironmentIDs) == 0 || b.Comment == nil || (b.State != "approved" && b.State != "rejected") {
		return errorResponse(http.StatusUnprocessableEntity, "Invalid request.\n\nenvironment_ids, state (approved or rejected) and comment are required.")
	}
	now := s.now()
	a := rn.script.Approval
	if rn.stateAt(now).status != statusWaiting || a == nil {
		return errorResponse(http.StatusUnprocessableEntity, "No pending deployments for this workflow run.")
	}
	for _, id := range b.EnvironmentIDs {
		if id != envID(a) {
			return errorResponse(http.StatusUnprocessableEntity, "Environment %d is not waiting for a review.", id)
		}
	}
	if !a.CanApprove {
		return errorResponse(http.StatusForbidden, "You are not a required reviewer of environment %s.", a.Environment)
	}
	rv := Review{EnvironmentIDs: b.EnvironmentIDs, State: b.State, Comment: *b.Comment, At: now}
	rn.review = &rv
	if b.State == "rejected" {
		rn.end = &ending{at: now, conclusion: conclusionFailure}
	}
	s.reviews[rn.id] = append(s.reviews[rn.id], rv)
	depID := rn.id + 1
	depURL := fmt.Sprintf("%srepos/%s/%s/deployments/%d", baseURL(r), rn.owner, rn.repo, depID)
	at := now.UTC().Format(time.RFC3339)
	return response{status: http.StatusOK, body: []map[string]any{{
		"id": depID, "node_id": fmt.Sprintf("DE_fake%d", depID), "sha": fmt.Sprintf("%040x", rn.id),
		"ref": strings.TrimPrefix(rn.ref, "refs/heads/"), "task": "deploy", "environment": a.Environment,
		"original_environment": a.Environment, "payload": map[string]any{}, "description": nil,
		"creator":      userDocument(baseURL(r), "octocat", 583231, "User"),
		"statuses_url": depURL + "/statuses", "repository_url": fmt.Sprintf("%srepos/%s/%s", baseURL(r), rn.owner, rn.repo),
		"url": depURL, "created_at": at, "updated_at": at,
	}}}
}

func envID(a *Approval) int64 {
	if a.EnvironmentID == 0 {
		return 1
	}
	return a.EnvironmentID
}

func (s *Server) cancel(rn *run, force bool) response {
	now := s.now()
	if rn.stateAt(now).status == statusCompleted {
		return errorResponse(http.StatusConflict, "Cannot cancel a workflow run that is completed.")
	}
	switch {
	case force:
		rn.end = &ending{at: now, conclusion: conclusionCancelled}
	case rn.script.OnCancel == OnCancelIgnore:
		rn.cancelRequested = now
	case rn.script.OnCancel == OnCancelFail:
		rn.end = &ending{at: now, conclusion: conclusionFailure}
	default:
		rn.end = &ending{at: now, conclusion: conclusionCancelled}
	}
	return response{status: http.StatusAccepted, body: map[string]any{}}
}

// finish marshals the answer, turns a conditional GET whose ETag matches
// into a 304 and charges the token's rate-limit window. It runs with s.mu
// held.
func (s *Server) finish(r *http.Request, resp *response) {
	if resp.header == nil {
		resp.header = http.Header{}
	}
	h := resp.header
	if resp.body != nil {
		resp.data, _ = json.Marshal(resp.body) // wire documents always marshal
		resp.data = append(resp.data, '\n')
	}
	if resp.etag && resp.status == http.StatusOK {
		sum := sha256.Sum256(resp.data)
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		h.Set("ETag", etag)
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
		h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
		if inm := r.Header.Get("If-None-Match"); inm != "" && strings.TrimPrefix(inm, "W/") == strings.TrimPrefix(etag, "W/") {
			resp.status = http.StatusNotModified
			s.notModified++
		}
	}
	switch {
	case resp.status == http.StatusNotModified, resp.status == http.StatusNoContent, resp.status == http.StatusFound:
	case resp.body != nil:
		h.Set("Content-Type", "application/json; charset=utf-8")
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	if win := resp.rate; win != nil {
		if resp.status != http.StatusNotModified && !resp.noCharge {
			win.used++
			s.counted++
		}
		h.Set("X-RateLimit-Limit", strconv.Itoa(win.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(win.limit-win.used, 0)))
		h.Set("X-RateLimit-Used", strconv.Itoa(win.used))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(win.reset.Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
	}
}

// write sends a finished answer.
func write(w http.ResponseWriter, resp response) {
	h := w.Header()
	for k, v := range resp.header {
		h[k] = v
	}
	switch {
	case resp.status == http.StatusNotModified, resp.status == http.StatusNoContent, resp.status == http.StatusFound:
		w.WriteHeader(resp.status)
	case resp.body != nil:
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.data)
	default:
		w.WriteHeader(resp.status)
		_, _ = io.WriteString(w, resp.text)
	}
}

func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
