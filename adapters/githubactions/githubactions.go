// Package githubactions is the adapter for GitHub Actions: a tool call
// dispatches a workflow (workflow_dispatch), the task follows the workflow
// run, and a cancel stops it.
//
// It talks to GitHub's REST API (GitHub.com or Enterprise Server) through
// go-github v93, the first major whose dispatch call returns the run's ID
// (return_run_details, added in v84; v88 brought the options-style
// constructor used here). Servers that refuse return_run_details (Enterprise
// Server 3.20 and older) are handled by a fallback per backend: the
// dispatch carries a correlation input that the workflow echoes in its
// run-name, and the adapter finds the run among the recent dispatch runs by
// its title. A dispatch whose outcome is unknown (a timeout, a 5xx) is never
// re-sent; it is reported wrapping [adapters.ErrOutcomeUnknown] and
// reconciled through [Adapter.Find].
//
// Observing a run is one conditional GET: an ETag cache under go-github
// (keyed by URL and a hash of the credential) turns unchanged runs into 304
// answers, which do not count against GitHub's primary rate limit, and the
// adapter reuses its last observation of an unchanged run without asking
// anything else. Concurrent polls of one run share one request. Jobs,
// pending deployments, artifacts and log tails are fetched when the run has
// changed, and, because GitHub does not document that a job finishing
// changes the run document, at least every fifth poll of a run that has not
// completed (conditionally: unchanged jobs cost no rate limit). Jobs and
// artifacts are read page after page (100 each), every page within the
// request budget.
//
// Only a 400 or 422 that names return_run_details switches a backend to
// the correlation search; any other refusal of a dispatch (GitHub's 422s
// "No ref found for: X", "Unexpected inputs provided: [...]", "Workflow
// does not have 'workflow_dispatch' trigger") ends the call with GitHub's
// message. Find does not report a run as missing before the backend's
// listing_lag (default 60s) has passed since the submission: GitHub lists
// a dispatched run seconds after it accepted it, so until then Find returns
// an error wrapping [adapters.ErrNotListedYet] and the bridge searches
// again later.
//
// Rate limits (403 or 429 with retry-after, x-ratelimit-remaining 0, or the
// secondary-limit message) hold every request back for as long as GitHub
// asks: retry-after, else until x-ratelimit-reset when the primary limit is
// spent, else a minute. A request budget per hour keeps the adapter within
// its share of the token's limit. Either way the adapter sends nothing
// meanwhile and never sleeps: Start, Poll (the whole call, not only one
// observation) and Cancel return an [adapters.ThrottledError] at once, which
// wraps [adapters.ErrThrottled] and [ErrRateLimited] and carries the pause,
// so that the bridge pauses the backend. A throttled dispatch created no
// run. A completed run's observation carries its updated_at (when it
// completed) as FinishedAt.
//
// Cancel sends POST .../cancel. A 202 is success. A 409 is checked against
// the run: when it has completed (GitHub answers "Cannot cancel a workflow
// run that is completed."), Cancel returns an error wrapping
// [adapters.ErrAlreadyFinished] and the run keeps its own conclusion; when
// it has not, or GitHub refuses for another reason (a 403 without a rate
// limit, a 422), the error wraps [adapters.ErrCancelRefused] with GitHub's
// message. The adapter remembers, in memory, when GitHub accepted a cancel
// of a run: a run that then concludes "failure" is reported cancelled, and a
// run still going after the tool's force_cancel_after is force-cancelled
// once, by the next poll or the next Cancel.
//
// Instead of a token, the backend may authenticate as a GitHub App
// installation: the app's RSA private key (PEM, PKCS#1 or PKCS#8) is read
// at New; an RS256 JWT signed with it is exchanged for an installation
// token, which is kept until five minutes before it expires and then
// renewed on demand (concurrent requests share one exchange). A rotated
// token starts the ETag cache afresh, as its entries are per credential.
//
// With an events: block the backend also takes GitHub's webhooks
// ([Adapter.ReadEvents]): a repository or organization webhook (or a GitHub
// App's) with content type application/json, the block's secret, and the
// events "Workflow runs" and "Workflow jobs" sends each run's and job's
// changes to the bridge, which then polls those runs only every
// poll_interval. Deliveries are authenticated by X-Hub-Signature-256 alone
// (HMAC-SHA256 of the raw body; the SHA-1 X-Hub-Signature is never enough);
// X-GitHub-Delivery identifies each for de-duplication, as GitHub signs no
// timestamp. A workflow_run event reads like a poll of the run, except that
// a completed run's result, from the event alone, does not list its jobs,
// artifacts and log tails; a workflow_job event keeps its run working and
// says what the job does.
//
// Credentials are secrets: the token, the installation tokens, the app
// JWTs and the webhook secret are never logged and are redacted from every
// error and observation; errors about the key file name the file, never its
// contents.
package githubactions

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v93/github"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/secrets"
)

// Tuning constants.
const (
	// pollConcurrency bounds the runs one Poll call observes at once
	// (GitHub asks for few concurrent requests).
	pollConcurrency = 8
	// cacheEntries bounds the ETag cache; a live run uses up to four
	// entries (run, jobs, pending deployments, artifacts).
	cacheEntries = 16384
	// memoEntries bounds the remembered observations of unchanged runs.
	memoEntries = 8192
	// cancelEntries bounds the remembered cancels.
	cancelEntries = 65536
	// findLookback is how far back Find looks for a run.
	findLookback = 7 * 24 * time.Hour
	// searchPages bounds the pages (of 100 runs) one search reads.
	searchPages = 5
	// createdSkew allows for clock skew between us and GitHub when a search
	// filters on a run's creation time.
	createdSkew = 2 * time.Minute
	// rereadEvery bounds how many polls in a row may reuse the observation
	// of a run that has not completed while its ETag holds: GitHub does not
	// document that a job starting or finishing changes the run document,
	// so every rereadEvery-th poll reads the jobs (or pending deployments)
	// again, conditionally, which costs no rate limit when they have not
	// changed either.
	rereadEvery = 5
)

// Options are the adapter's dependencies. The zero value is ready to use.
type Options struct {
	// HTTPClient supplies the base transport (tests hand in one that
	// reaches a fake). Default: a transport that ignores proxy environment
	// variables.
	HTTPClient *http.Client
	// Logger receives warnings; pass it already scoped. Default: none.
	Logger *slog.Logger
	// Getenv resolves the token's ${NAME}. Default: os.LookupEnv.
	Getenv func(string) (string, bool)
	// Now is the clock for rate limits, the request budget and
	// force-cancel grace. Default time.Now.
	Now func() time.Time
	// SearchWait bounds how long Start looks for a dispatched run by its
	// correlation input when the server returned no run ID (default 20s;
	// runs appear in listings after a few seconds). SearchInterval is the
	// pause between looks (default 1s).
	SearchWait     time.Duration
	SearchInterval time.Duration
}

// Adapter dispatches and follows GitHub Actions workflow runs. It is safe
// for concurrent use.
type Adapter struct {
	name  string
	gh    *github.Client
	blobs *http.Client // log downloads: no credentials, no budget
	tools map[string]*tool
	now   func() time.Time
	log   *slog.Logger
	red   *secrets.Redactor
	// secrets resolves the token's and the webhook secret's references.
	secrets *secrets.Source
	meter   *meter
	cache   *etagCache
	search  struct{ wait, interval time.Duration }
	// listingLag is how long a dispatched run may stay out of listings.
	listingLag time.Duration

	// runDetails is whether dispatches ask for the run ID; it turns false
	// when the server turns out to refuse it.
	runDetails atomic.Bool

	polls singleflight.Group

	// events is the backend's events: block; nil without one.
	events *eventsSetup

	mu      sync.Mutex
	memo    *lru[memoEntry]
	cancels *lru[*cancelRecord]
	// attempts is the latest run_attempt seen of each run, by run ID.
	attempts *lru[int64]
}

// tool is a compiled JobConfig.
type tool struct {
	name       string
	cfg        JobConfig
	workflowID int64 // when the workflow is given by ID
	ref        expr.Template
	inputs     []input
}

type input struct {
	name string
	t    expr.Template
}

// refData is the adapter-owned part of a JobRef.
type refData struct {
	Tool  string `json:"tool"`
	Owner string `json:"owner"`
	Repo  string `json:"repo"`
	RunID int64  `json:"run_id"`
}

// key names the run in the adapter's memory. Owner and repository names
// are case-insensitive on GitHub, and a webhook may spell them otherwise
// than the catalog does.
func (d refData) key() string {
	return strings.ToLower(d.Owner+"/"+d.Repo) + "/" + strconv.FormatInt(d.RunID, 10)
}

// memoEntry is the last observation of a run, valid while its ETag holds.
type memoEntry struct {
	etag string
	obs  adapters.Observation
	// reused counts the polls that reused obs.
	reused int
}

// cancelRecord is what the adapter remembers of a cancel it sent.
type cancelRecord struct {
	at     time.Time
	forced bool
}

// New returns an adapter for the backend called name, serving the given
// tools (by tool name). It applies defaults to copies of the configs,
// validates them and expands the token's ${NAME}; an unset variable is an
// error that names the variable.
func New(name string, backend BackendConfig, tools map[string]JobConfig, opts *Options) (*Adapter, error) {
	if opts == nil {
		opts = &Options{}
	}
	backend.SetDefaults()
	var errs []error
	if err := backend.Validate(); err != nil {
		errs = append(errs, err)
	}
	a := &Adapter{
		name:     name,
		tools:    map[string]*tool{},
		now:      opts.Now,
		log:      opts.Logger,
		secrets:  secrets.NewSource(&secrets.Options{Getenv: opts.Getenv, Logger: opts.Logger}),
		memo:     newLRU[memoEntry](memoEntries),
		cancels:  newLRU[*cancelRecord](cancelEntries),
		attempts: newLRU[int64](attemptEntries),
	}
	a.red = a.secrets.Redactor()
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.listingLag = backend.ListingLag
	a.search.wait, a.search.interval = opts.SearchWait, opts.SearchInterval
	if a.search.wait <= 0 {
		a.search.wait = 20 * time.Second
	}
	if a.search.interval <= 0 {
		a.search.interval = time.Second
	}

	var token string
	var appKey *rsa.PrivateKey
	if backend.App != nil {
		if backend.App.PrivateKeyFile != "" {
			k, err := loadAppKey(backend.App.PrivateKeyFile)
			if err != nil {
				errs = append(errs, adapters.Fieldf("app.private_key_file", "%v", err))
			}
			appKey = k
		}
	} else if envName, ok := envRef(backend.Token); ok {
		v, err := a.secrets.Env(envName)
		switch {
		case err != nil:
			errs = append(errs, adapters.Fieldf("token", "%v", err))
		case v == "":
			errs = append(errs, adapters.Fieldf("token", "environment variable %s is empty", envName))
		case strings.ContainsAny(v, " \t"):
			errs = append(errs, adapters.Fieldf("token", "environment variable %s contains white space", envName))
		default:
			token = v
		}
	}
	if e := backend.Events; e != nil {
		if ref, err := secretRef(e.Secret); err == nil { // else Validate said why
			v, err := a.secrets.Value(ref)
			switch {
			case err != nil:
				errs = append(errs, adapters.Fieldf("events.secret", "%v", err))
			case v == "":
				errs = append(errs, adapters.Fieldf("events.secret", "%s is empty", ref))
			default:
				a.events = &eventsSetup{secret: ref, polling: eventsPolling(e)}
			}
		}
	}
	for _, tn := range sortedKeys(tools) {
		t, err := compileTool(tn, tools[tn])
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, err))
			continue
		}
		if !*backend.DispatchRunDetails && t.cfg.CorrelationInput == "" {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, adapters.Fieldf("correlation_input",
				"required: the backend sets dispatch_run_details: false, so runs are found by their correlation input")))
			continue
		}
		a.tools[tn] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err // the caller names the backend
	}

	base := http.RoundTripper(nil)
	if opts.HTTPClient != nil {
		base = opts.HTTPClient.Transport
	}
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		keepIdle(t)
		base = t
	}
	a.meter = newMeter(base, a.now, backend.APIVersion, backend.RequestsPerHour)
	a.cache = newETagCache(a.meter, cacheEntries)
	apiURL := ""
	if backend.APIURL != "" {
		apiURL = strings.TrimSuffix(backend.APIURL, "/") + "/"
	}
	api := http.RoundTripper(a.cache)
	var auth []github.ClientOptionsFunc
	if token != "" {
		auth = append(auth, github.WithAuthToken(token))
	}
	if appKey != nil {
		// Token exchanges have their own rate limits: a meter of their
		// own, so that neither holds the other back.
		exchange := newMeter(base, a.now, backend.APIVersion, backend.RequestsPerHour)
		tokens, err := newAppTokens(*backend.App, appKey, exchange, apiURL, backend.Timeout, a.now, a.red)
		if err != nil {
			return nil, fmt.Errorf("github_actions backend %q: %w", name, err)
		}
		api = &installationAuth{base: a.cache, tokens: tokens}
	}
	ghOpts := append(auth,
		github.WithHTTPClient(&http.Client{Transport: api, Timeout: backend.Timeout}),
		// The adapter keeps its own rate-limit state on its own clock.
		github.WithDisableRateLimitCheck(),
		github.WithUserAgent("jobbridge-github-actions"),
	)
	if apiURL != "" {
		ghOpts = append(ghOpts, github.WithURLs(&apiURL, &apiURL))
	}
	gh, err := github.NewClient(ghOpts...)
	if err != nil {
		return nil, fmt.Errorf("github_actions backend %q: creating the GitHub client: %v", name, a.red.Redact(err.Error()))
	}
	a.gh = gh
	a.blobs = &http.Client{
		Transport:     base,
		Timeout:       max(backend.Timeout, 30*time.Second),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	a.runDetails.Store(*backend.DispatchRunDetails)
	return a, nil
}

func compileTool(name string, cfg JobConfig) (*tool, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ref, err := parseField("ref", cfg.Ref, refScope)
	if err != nil {
		return nil, err
	}
	t := &tool{name: name, cfg: cfg, ref: ref}
	if id, err := strconv.ParseInt(cfg.Workflow, 10, 64); err == nil {
		t.workflowID = id
	}
	for _, k := range sortedKeys(cfg.Inputs) {
		in, err := parseField("inputs."+k, cfg.Inputs[k], inputScope)
		if err != nil {
			return nil, err
		}
		t.inputs = append(t.inputs, input{name: k, t: in})
	}
	return t, nil
}

func (a *Adapter) tool(name string) (*tool, error) {
	t, ok := a.tools[name]
	if !ok {
		return nil, fmt.Errorf("backend %q has no tool %q", a.name, name)
	}
	return t, nil
}

// Start dispatches the tool's workflow once and returns the run. See the
// package documentation for how the run's ID is learnt and how outcomes are
// classified.
func (a *Adapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, err
	}
	fail := func(err error) (adapters.JobRef, error) {
		return adapters.JobRef{}, fmt.Errorf("dispatching workflow %s of %s/%s: %w", t.cfg.Workflow, t.cfg.Owner, t.cfg.Repo, err)
	}
	body, err := t.dispatchBody(ctx, req)
	if err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", errNotSent, err))
	}
	withDetails := a.runDetails.Load()
	since := a.now()
	details, err := a.dispatch(ctx, t, body, withDetails)
	if withDetails && isRunDetailsRefusal(err) {
		if t.cfg.CorrelationInput == "" {
			return fail(fmt.Errorf("the server refused return_run_details (%s); for GitHub Enterprise Server 3.20 and older give the tool a correlation_input", a.errText(err)))
		}
		// A 400 or 422 created nothing: ask again without the field.
		details, err = a.dispatch(ctx, t, body, false)
		if err == nil {
			a.runDetails.Store(false)
			a.log.Warn("the server refuses return_run_details; finding dispatched runs by their correlation input from now on")
		}
	}
	if err != nil {
		return adapters.JobRef{}, a.dispatchError(err)
	}
	if id := details.GetWorkflowRunID(); id > 0 {
		return t.jobRef(id), nil
	}
	// Accepted without a run ID (204, or 202 in newer API versions).
	if t.cfg.CorrelationInput == "" {
		return fail(fmt.Errorf("the server accepted the dispatch but returned no run ID, and the tool has no correlation_input to find it by: %w", adapters.ErrOutcomeUnknown))
	}
	ref, found, err := a.awaitRun(ctx, t, req.CorrelationID, since)
	switch {
	case err != nil:
		// The run exists: the error must not say "throttled" to the
		// bridge, which would submit again. Keep its text only.
		return fail(fmt.Errorf("dispatched, but looking for the run failed (%v): %w", err, adapters.ErrOutcomeUnknown))
	case !found:
		return fail(fmt.Errorf("dispatched, but no run titled with correlation ID %s appeared within %v: %w", req.CorrelationID, a.search.wait, adapters.ErrOutcomeUnknown))
	}
	return ref, nil
}

// dispatchBody renders the dispatch's ref and inputs.
func (t *tool) dispatchBody(ctx context.Context, req adapters.StartRequest) (github.CreateWorkflowDispatchEventRequest, error) {
	var body github.CreateWorkflowDispatchEventRequest
	v := vars(req)
	ref, missing, err := t.ref.Render(ctx, v, expr.Raw, nil)
	if err != nil {
		return body, fmt.Errorf("rendering ref: %w", err)
	}
	if missing || strings.TrimSpace(ref) == "" {
		return body, errors.New("the ref is empty: the argument it names was not given")
	}
	body.Ref = ref
	body.Inputs = map[string]any{}
	for _, in := range t.inputs {
		s, missing, err := in.t.Render(ctx, v, expr.Raw, nil)
		if err != nil {
			return body, fmt.Errorf("rendering input %s: %w", in.name, err)
		}
		if !missing {
			body.Inputs[in.name] = s
		}
	}
	if ci := t.cfg.CorrelationInput; ci != "" {
		body.Inputs[ci] = req.CorrelationID
	}
	if len(body.Inputs) == 0 {
		body.Inputs = nil
	}
	return body, nil
}

func (a *Adapter) dispatch(ctx context.Context, t *tool, body github.CreateWorkflowDispatchEventRequest, withDetails bool) (*github.WorkflowDispatchRunDetails, error) {
	if withDetails {
		body.ReturnRunDetails = github.Ptr(true)
	}
	var (
		d   *github.WorkflowDispatchRunDetails
		err error
	)
	if t.workflowID != 0 {
		d, _, err = a.gh.Actions.CreateWorkflowDispatchEventByID(ctx, t.cfg.Owner, t.cfg.Repo, t.workflowID, body)
	} else {
		d, _, err = a.gh.Actions.CreateWorkflowDispatchEventByFileName(ctx, t.cfg.Owner, t.cfg.Repo, t.cfg.Workflow, body)
	}
	if _, ok := errors.AsType[*github.AcceptedError](err); ok {
		return nil, nil
	}
	return d, err
}

// isRunDetailsRefusal reports a 400 or 422 answer to a dispatch that
// refuses the return_run_details field, which is how servers without it
// (GitHub Enterprise Server 3.20 and older) answer. Other 400s and 422s (an
// unknown ref, unexpected inputs, a workflow without the workflow_dispatch
// trigger) are refusals of the dispatch itself.
func isRunDetailsRefusal(err error) bool {
	er, ok := errors.AsType[*github.ErrorResponse](err)
	if !ok || er.Response == nil || (er.Response.StatusCode != http.StatusBadRequest && er.Response.StatusCode != http.StatusUnprocessableEntity) {
		return false
	}
	if strings.Contains(er.Message, "return_run_details") {
		return true
	}
	for _, e := range er.Errors {
		if strings.Contains(e.Field, "return_run_details") || strings.Contains(e.Message, "return_run_details") {
			return true
		}
	}
	return false
}

// dispatchError classifies a failed dispatch: only an answer that may have
// come after GitHub acted on it, or none at all after the request may have
// been written, is an unknown outcome.
func (a *Adapter) dispatchError(err error) error {
	switch {
	case a.rateLimited(err):
		// Refused or held back for a rate limit: no run was created.
		ce := a.problem(err, ErrRateLimited)
		ce.Class = adapters.ProblemThrottled
		return a.throttled(ce, err)
	case errors.Is(err, errNotSent):
		return a.problem(err, nil)
	}
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil {
		if code := er.Response.StatusCode; code >= 400 && code < 500 && code != http.StatusRequestTimeout {
			return a.problem(err, nil) // refused: no run was created
		}
		return a.problem(err, adapters.ErrOutcomeUnknown)
	}
	if adapters.NotSent(err) {
		return a.problem(err, errNotSent)
	}
	return a.problem(err, adapters.ErrOutcomeUnknown)
}

func (t *tool) jobRef(runID int64) adapters.JobRef {
	b, _ := json.Marshal(refData{Tool: t.name, Owner: t.cfg.Owner, Repo: t.cfg.Repo, RunID: runID}) // plain strings and numbers
	return adapters.JobRef{ID: strconv.FormatInt(runID, 10), Data: b}
}

// awaitRun looks for the run with the correlation ID until it appears or the
// search time runs out.
func (a *Adapter) awaitRun(ctx context.Context, t *tool, correlationID string, since time.Time) (adapters.JobRef, bool, error) {
	deadline := time.Now().Add(a.search.wait)
	for {
		ref, found, err := a.findRun(ctx, t, correlationID, since.Add(-createdSkew))
		if err != nil || found {
			return ref, found, err
		}
		if time.Now().Add(a.search.interval).After(deadline) {
			return adapters.JobRef{}, false, nil
		}
		timer := time.NewTimer(a.search.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return adapters.JobRef{}, false, ctx.Err()
		case <-timer.C:
		}
	}
}

// Find looks the run up by the correlation ID in the titles of the workflow's
// dispatch runs of the last week (newest 500). A tool without a
// correlation_input cannot be searched: the error wraps
// errors.ErrUnsupported.
//
// GitHub lists a dispatched run some seconds after it accepted the
// dispatch. So a search that finds nothing before the backend's
// listing_lag has passed since req.SubmittedAt (zero: now) proves nothing:
// Find then returns an error wrapping [adapters.ErrNotListedYet], and only
// afterwards reports the run as not found.
func (a *Adapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	if t.cfg.CorrelationInput == "" {
		return adapters.JobRef{}, false, fmt.Errorf("tool %s has no correlation_input to find runs by: %w", t.name, errors.ErrUnsupported)
	}
	now := a.now()
	ref, found, err := a.findRun(ctx, t, req.CorrelationID, now.Add(-findLookback))
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	submitted := req.SubmittedAt
	if submitted.IsZero() {
		submitted = now
	}
	if since := now.Sub(submitted); !found && since < a.listingLag {
		return adapters.JobRef{}, false, fmt.Errorf("looking for the run with correlation ID %s: none listed %v after the dispatch, within GitHub's listing lag of %v: %w",
			req.CorrelationID, max(since, 0).Round(time.Second), a.listingLag, adapters.ErrNotListedYet)
	}
	return ref, found, nil
}

// findRun searches the workflow's dispatch runs created since the given time
// for one whose title carries the correlation ID.
func (a *Adapter) findRun(ctx context.Context, t *tool, correlationID string, since time.Time) (adapters.JobRef, bool, error) {
	if correlationID == "" {
		return adapters.JobRef{}, false, errors.New("no correlation ID")
	}
	opts := &github.ListWorkflowRunsOptions{
		Event:       "workflow_dispatch",
		Created:     ">=" + since.UTC().Format(time.RFC3339),
		ListOptions: github.ListOptions{PerPage: 100},
	}
	for page := 1; page <= searchPages; page++ {
		opts.Page = page
		var (
			runs *github.WorkflowRuns
			resp *github.Response
			err  error
		)
		if t.workflowID != 0 {
			runs, resp, err = a.gh.Actions.ListWorkflowRunsByID(ctx, t.cfg.Owner, t.cfg.Repo, t.workflowID, opts)
		} else {
			runs, resp, err = a.gh.Actions.ListWorkflowRunsByFileName(ctx, t.cfg.Owner, t.cfg.Repo, t.cfg.Workflow, opts)
		}
		if err != nil {
			return adapters.JobRef{}, false, a.apiError(err)
		}
		for _, r := range runs.WorkflowRuns {
			if titleCarries(r.GetDisplayTitle(), correlationID) {
				return t.jobRef(r.GetID()), true, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
	}
	return adapters.JobRef{}, false, nil
}

// titleCarries reports whether the run title contains the correlation ID as
// a whole word.
func titleCarries(title, id string) bool {
	for i := 0; ; {
		j := strings.Index(title[i:], id)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(id)
		if (start == 0 || !isIDChar(title[start-1])) && (end == len(title) || !isIDChar(title[end])) {
			return true
		}
		i = start + 1
	}
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// decodeRef reads a JobRef this adapter made.
func (a *Adapter) decodeRef(ref adapters.JobRef) (refData, *tool, error) {
	var d refData
	if err := json.Unmarshal(ref.Data, &d); err != nil || d.RunID <= 0 || d.Owner == "" || d.Repo == "" {
		return d, nil, fmt.Errorf("job reference %q was not made by the github_actions adapter", ref.ID)
	}
	t := a.tools[d.Tool]
	if t == nil {
		// The tool left the catalog: observe with default settings.
		t = &tool{name: d.Tool}
		t.cfg.SetDefaults()
	}
	return d, t, nil
}

// Poll observes the runs, several at a time. It returns an error when ctx
// ends, and an [adapters.ThrottledError] when GitHub's rate limits or the
// request budget kept any run from being observed: a rate limit holds back
// every request to GitHub, so the bridge should pause the backend rather
// than ask about the other runs.
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
		return nil, fmt.Errorf("polling %s runs: %w", a.name, err)
	}
	for _, o := range obs {
		if errors.Is(o.Err, adapters.ErrThrottled) {
			return nil, fmt.Errorf("polling %s runs: %w", a.name, o.Err)
		}
	}
	return obs, nil
}

func (a *Adapter) poll(ctx context.Context, ref adapters.JobRef) adapters.Observation {
	d, t, err := a.decodeRef(ref)
	if err != nil {
		return adapters.Observation{Err: err}
	}
	v, err, _ := a.polls.Do(d.key(), func() (any, error) {
		return a.observe(ctx, t, d)
	})
	if err != nil {
		return adapters.Observation{Err: err}
	}
	return v.(adapters.Observation)
}

// observe reads the run and turns it into an observation, reusing the last
// one while the run is unchanged, and force-cancels a run that outlived its
// cancel's grace.
func (a *Adapter) observe(ctx context.Context, t *tool, d refData) (adapters.Observation, error) {
	run, resp, err := a.gh.Actions.GetWorkflowRunByID(ctx, d.Owner, d.Repo, d.RunID)
	if err != nil {
		if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil &&
			(er.Response.StatusCode == http.StatusNotFound || er.Response.StatusCode == http.StatusGone) {
			return adapters.Observation{}, a.problem(err, adapters.ErrJobNotFound)
		}
		return adapters.Observation{}, a.apiError(err)
	}
	key := d.key()
	etag := resp.Header.Get("ETag")
	cancel := a.cancelRecord(key)
	a.latestAttempt(d.RunID, int64(run.GetRunAttempt()))

	var obs adapters.Observation
	m, ok := a.memoGet(key)
	fresh := ok && etag != "" && m.etag == etag
	if fresh && run.GetStatus() != "completed" && m.reused+1 >= rereadEvery {
		fresh = false // the jobs may have moved without the run
	}
	if fresh {
		obs = m.obs
		m.reused++
		a.memoPut(key, m)
	} else {
		obs, err = a.build(ctx, t, d, run)
		if err != nil {
			return adapters.Observation{}, err
		}
		if etag != "" {
			a.memoPut(key, memoEntry{etag: etag, obs: obs})
		}
	}

	if cancel != nil && run.GetStatus() != "completed" && !cancel.forced && a.now().Sub(cancel.at) >= t.cfg.ForceCancelAfter {
		_ = a.forceCancel(ctx, d) // logged; retried by the next poll
		obs.Message += fmt.Sprintf(" (still running %v after the cancel; force-cancel sent)", t.cfg.ForceCancelAfter)
		return obs, nil
	}
	return afterCancel(obs, run.GetStatus() == "completed", run.GetConclusion(), cancel), nil
}

// afterCancel is how a cancel that GitHub accepted (cancel, nil when none)
// changes the observation of the run: a run that then concludes "failure"
// is reported cancelled, and a run still going says that the cancel is
// requested.
func afterCancel(obs adapters.Observation, completed bool, conclusion string, cancel *cancelRecord) adapters.Observation {
	switch {
	case cancel == nil:
	case completed && obs.State == adapters.StateToolError && conclusion == "failure":
		// Runs cancelled while running have been seen to conclude
		// "failure": after our cancel, that is a cancellation.
		obs.State = adapters.StateCancelled
		obs.Message = "cancelled (the run concluded failure after the cancel)"
	case !completed:
		obs.Message += " (cancel requested)"
	}
	return obs
}

// Cancel asks GitHub to cancel the run. A 202 is success, and so is a 404
// (the run is gone). A 409 is checked against the run: completed means it
// had finished (an error wrapping [adapters.ErrAlreadyFinished]), unless an
// earlier cancel of this adapter's was accepted; still going means GitHub
// refused ([adapters.ErrCancelRefused]). Another refusal (a 403 or 422) wraps
// [adapters.ErrCancelRefused]; a rate limit is an [adapters.ThrottledError].
// When GitHub accepted a cancel before and the tool's force_cancel_after has
// passed, Cancel force-cancels the run instead (once).
func (a *Adapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	d, t, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("cancelling run: %w", err)
	}
	key := d.key()
	a.mu.Lock()
	rec, cancelledBefore := a.cancels.get(key)
	escalate := cancelledBefore && !rec.forced && a.now().Sub(rec.at) >= t.cfg.ForceCancelAfter
	a.memo.drop(key)
	a.mu.Unlock()
	if escalate {
		if err := a.forceCancel(ctx, d); err != nil {
			return fmt.Errorf("force-cancelling run %d of %s/%s: %w", d.RunID, d.Owner, d.Repo, err)
		}
		return nil
	}
	_, err = a.gh.Actions.CancelWorkflowRunByID(ctx, d.Owner, d.Repo, d.RunID)
	accepted, err := a.cancelAnswer(ctx, d, err, cancelledBefore)
	if accepted {
		a.mu.Lock()
		if _, ok := a.cancels.get(key); !ok {
			a.cancels.put(key, &cancelRecord{at: a.now()})
		}
		a.memo.drop(key)
		a.mu.Unlock()
	}
	return err
}

// cancelAnswer classifies the answer to POST .../cancel; accepted is true
// when GitHub took the cancel (202).
func (a *Adapter) cancelAnswer(ctx context.Context, d refData, err error, cancelledBefore bool) (accepted bool, _ error) {
	if err == nil {
		return true, nil
	}
	if _, ok := errors.AsType[*github.AcceptedError](err); ok {
		return true, nil
	}
	if a.rateLimited(err) {
		return false, a.apiError(err)
	}
	er, ok := errors.AsType[*github.ErrorResponse](err)
	if !ok || er.Response == nil {
		return false, a.apiError(err) // not answered: ask again later
	}
	switch code := er.Response.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return false, nil
	case code == http.StatusConflict && cancelledBefore:
		// Our accepted cancel has taken effect, or the run is finishing.
		return false, nil
	case code == http.StatusConflict:
		return false, a.conflict(ctx, d, er)
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
		return false, a.problem(err, adapters.ErrCancelRefused)
	}
	return false, a.apiError(err)
}

// conflict reads the run after a 409 to a cancel: a completed run had
// finished before the cancel; a run still going is a refusal. When the run
// cannot be read, GitHub's message decides.
func (a *Adapter) conflict(ctx context.Context, d refData, er *github.ErrorResponse) error {
	run, _, err := a.gh.Actions.GetWorkflowRunByID(ctx, d.Owner, d.Repo, d.RunID)
	var ce *adapters.CallError
	switch {
	case err == nil && run.GetStatus() == "completed":
		ce = a.problem(er, adapters.ErrAlreadyFinished)
		ce.Message += fmt.Sprintf("; the run had already completed (conclusion %s)", orNone(run.GetConclusion()))
	case err == nil:
		ce = a.problem(er, adapters.ErrCancelRefused)
		ce.Message += fmt.Sprintf("; the run is still %s", a.red.Clean(run.GetStatus(), 50))
	case strings.Contains(strings.ToLower(er.Message), "completed"):
		ce = a.problem(er, adapters.ErrAlreadyFinished)
	default:
		ce = a.problem(er, adapters.ErrCancelRefused)
	}
	ce.Class = adapters.ProblemError // a 409 is no refusal of the caller
	return ce
}

// forceCancel sends POST .../force-cancel, once per cancel the adapter
// remembers. go-github has no wrapper for it.
func (a *Adapter) forceCancel(ctx context.Context, d refData) error {
	key := d.key()
	a.mu.Lock()
	rec, ok := a.cancels.get(key)
	if !ok || rec.forced {
		a.mu.Unlock()
		return nil
	}
	rec.forced = true
	a.memo.drop(key)
	a.mu.Unlock()
	req, err := a.gh.NewRequest(ctx, http.MethodPost, fmt.Sprintf("repos/%s/%s/actions/runs/%d/force-cancel", d.Owner, d.Repo, d.RunID), nil)
	if err == nil {
		_, err = a.gh.Do(req, nil)
	}
	if err := a.forceCancelResult(err); err != nil {
		a.mu.Lock()
		rec.forced = false // try again next time
		a.mu.Unlock()
		a.log.Warn("force-cancelling run", "run", d.RunID, "error", err)
		return err
	}
	a.log.Info("force-cancel sent", "run", d.RunID)
	return nil
}

// forceCancelResult classifies the answer to a force-cancel: a 409 (the run
// has completed) and a 404 (it is gone) leave nothing to do.
func (a *Adapter) forceCancelResult(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*github.AcceptedError](err); ok {
		return nil
	}
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusConflict, http.StatusNotFound, http.StatusGone:
			return nil
		}
	}
	return a.apiError(err)
}

// cancelRecord returns a copy of the run's cancel record, or nil.
func (a *Adapter) cancelRecord(key string) *cancelRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.cancels.get(key)
	if !ok {
		return nil
	}
	c := *rec
	return &c
}

func (a *Adapter) memoGet(key string) (memoEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.memo.get(key)
}

func (a *Adapter) memoPut(key string, m memoEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memo.put(key, m)
}

func (a *Adapter) memoDrop(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memo.drop(key)
}

// rateLimited reports whether err comes from a rate limit or the budget.
// When GitHub named no pause (no retry-after, and the primary limit is not
// spent), it holds requests back for a minute, as GitHub asks for secondary
// limits.
func (a *Adapter) rateLimited(err error) bool {
	if errors.Is(err, ErrRateLimited) {
		return true
	}
	if _, ok := errors.AsType[*github.RateLimitError](err); ok {
		return true // the meter saw x-ratelimit-remaining 0
	}
	var resp *http.Response
	secondary := false
	if ae, ok := errors.AsType[*github.AbuseRateLimitError](err); ok {
		resp, secondary = ae.Response, true
	} else if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil {
		code := er.Response.StatusCode
		if code != http.StatusTooManyRequests && code != http.StatusForbidden {
			return false
		}
		resp = er.Response
		// GitHub Enterprise Server's documentation URLs differ: know the
		// secondary limit by its message too.
		secondary = code == http.StatusTooManyRequests || strings.Contains(strings.ToLower(er.Message), "secondary rate limit")
		if !secondary && resp.Header.Get("Retry-After") == "" {
			return false // a plain 403: a permission, not a rate limit
		}
	} else {
		return false
	}
	if secondary && (resp == nil || resp.Header.Get("Retry-After") == "" && resp.Header.Get("X-RateLimit-Remaining") != "0") {
		a.meter.block(a.now().Add(defaultThrottle))
	}
	return true
}

// apiError turns a go-github error into an [adapters.CallError] that is
// safe to show (see [Adapter.problem]), and, for rate limits, an
// [adapters.ThrottledError] around it wrapping ErrRateLimited.
func (a *Adapter) apiError(err error) error {
	if a.rateLimited(err) {
		ce := a.problem(err, ErrRateLimited)
		ce.Class = adapters.ProblemThrottled
		return a.throttled(ce, err)
	}
	return a.problem(err, nil)
}

// throttled wraps shown (the safe text of cause, a rate-limit error) in an
// [adapters.ThrottledError] with the pause GitHub asked for: until the
// meter lets requests through again, or until the budget refills.
func (a *Adapter) throttled(shown, cause error) error {
	now := a.now()
	d := max(a.meter.throttledUntil().Sub(now), 0)
	if _, ok := errors.AsType[*budgetError](cause); ok {
		d = max(d, a.meter.budgetWait(now))
	}
	return &adapters.ThrottledError{RetryAfter: d, Err: shown}
}

// errText is err's text, redacted and shortened.
func (a *Adapter) errText(err error) string {
	return a.red.Clean(err.Error(), 500)
}

var (
	_ adapters.Adapter     = (*Adapter)(nil)
	_ adapters.Responder   = (*Adapter)(nil)
	_ adapters.Finder      = (*Adapter)(nil)
	_ adapters.EventSource = (*Adapter)(nil)
)

// lru is a small least-recently-used map. It is not safe for concurrent use.
type lru[V any] struct {
	max   int
	items map[string]*lruItem[V]
	head  *lruItem[V] // most recent
	tail  *lruItem[V]
}

type lruItem[V any] struct {
	key        string
	v          V
	prev, next *lruItem[V]
}

func newLRU[V any](n int) *lru[V] { return &lru[V]{max: n, items: map[string]*lruItem[V]{}} }

func (l *lru[V]) get(k string) (V, bool) {
	it, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.unlink(it)
	l.pushFront(it)
	return it.v, true
}

func (l *lru[V]) put(k string, v V) {
	if it, ok := l.items[k]; ok {
		it.v = v
		l.unlink(it)
		l.pushFront(it)
		return
	}
	it := &lruItem[V]{key: k, v: v}
	l.items[k] = it
	l.pushFront(it)
	for len(l.items) > l.max && l.tail != nil {
		old := l.tail
		l.unlink(old)
		delete(l.items, old.key)
	}
}

func (l *lru[V]) drop(k string) {
	if it, ok := l.items[k]; ok {
		l.unlink(it)
		delete(l.items, k)
	}
}

func (l *lru[V]) unlink(it *lruItem[V]) {
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		l.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		l.tail = it.prev
	}
	it.prev, it.next = nil, nil
}

func (l *lru[V]) pushFront(it *lruItem[V]) {
	it.next = l.head
	if l.head != nil {
		l.head.prev = it
	}
	l.head = it
	if l.tail == nil {
		l.tail = it
	}
}
