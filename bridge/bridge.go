// Package bridge is the MCP side of jobbridge: it serves the catalog's tools
// over MCP 2026-07-28 and 2025-11-25 (go-sdk; HTTP and stdio), turns
// tools/call into durable tasks of the Tasks extension
// (io.modelcontextprotocol/tasks) or into synchronous results, answers
// tasks/get, tasks/update, tasks/cancel (and, for 2025-11-25, tasks/list and
// tasks/result), pushes task changes to subscriptions/listen streams, binds
// every task to its caller, and serves the backends' event endpoints.
//
// A task's life belongs to package lifecycle: it writes every task row, and
// it asks the backends (through each backend's gate, sharing concurrent polls
// of one task), submits jobs and reconciles submissions, forwards cancels,
// sweeps the live tasks and applies pushed events. The bridge gives it each
// task's tool (from the catalog generation the task started under, see
// reload.go), renders the tool results it stores, and counts what it does in
// the bridge's metrics. A task is created in the store before its handle is
// returned; the job is then submitted once; every tasks/get has the
// lifecycle bring the task up to date (a poll within the tool's refresh
// interval is served from the last observation); the first terminal
// observation is stored and never changes. Tasks outlive the requests that
// create them, so the work they start runs on the bridge's own lifetime
// context, on purpose.
package bridge

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// Options configure a Bridge.
type Options struct {
	// Catalog is the loaded tool catalog. Required.
	Catalog *catalog.Catalog
	// Store is the durable task store. Required.
	Store mapping.Store
	// Adapters maps each backend name of the catalog to its adapter. Required
	// for every backend a tool uses.
	Adapters map[string]adapters.Adapter
	// Build identifies this server build; it is recorded on every task.
	Build string
	// Logger receives operational logs. Task IDs are never logged; a short
	// hash of the store key is. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// SubmitTimeout bounds one submission to a backend, including its
	// retries after throttling. With a shared store, a task still submitting
	// after it (because the replica that was submitting stopped) is
	// reconciled; alone on its store, the process reconciles at once a
	// submitting task it is not running itself. Default 30s.
	SubmitTimeout time.Duration
	// CallTimeout bounds every other backend call (poll, cancel, respond).
	// Default 15s.
	CallTimeout time.Duration
	// ObserveBudget is the longest a tasks/get waits for a backend
	// observation. Past it, the answer is the last observation (with its
	// age), and the observation goes on in the background for the next poll.
	// Default 250ms.
	ObserveBudget time.Duration
	// LookupBackoff is the first pause between lookups of a submission whose
	// outcome is not settled yet (the backend's listing lags, or the lookup
	// failed); it doubles up to 15 times its value. Default 2s.
	LookupBackoff time.Duration
	// SweepInterval is how often the lifecycle's background sweep runs: it
	// purges expired tasks, reconciles interrupted submissions, forwards
	// pending cancels and observes live tasks no client is polling.
	// Default 10s.
	SweepInterval time.Duration
	// SweepLease is how long a replica holds the tasks a sweep claimed from a
	// shared store; a replica that dies loses them after this. Default three
	// sweep intervals.
	SweepLease time.Duration
	// ReplicaID names this process in sweep leases. Default: random.
	ReplicaID string
	// SweepObserveAge is how old a live task's last observation may get
	// before the sweep observes it: the sweep observes a task whose last
	// observation is older than both SweepObserveAge and its tool's refresh
	// interval (or that was never observed). Default 1m.
	SweepObserveAge time.Duration
	// StateKey signs the requestState of multi-round argument collection.
	// Default: random per process (a retry must then reach the same process).
	StateKey []byte
	// HTTPPrincipal names the principal of HTTP requests while the server has
	// no authentication. Default "anonymous".
	HTTPPrincipal string
	// StdioPrincipal names the principal of stdio requests. Default
	// "local:" + the user name.
	StdioPrincipal string
	// Auth, when set, authenticates every HTTP request; each task is bound
	// to its caller (tenant and identity) and tool policies apply. Without
	// it, HTTP callers share HTTPPrincipal and the server must only be
	// reachable from this machine.
	Auth *auth.Authenticator
	// TracerProvider receives the bridge's spans: one per MCP request, one
	// per backend call, with task lifecycle events. Default (nil): no-op.
	TracerProvider trace.TracerProvider
}

// Bridge serves a catalog over MCP. Create it with New, serve it with
// Handler or ServeStdio, and Close it when done.
type Bridge struct {
	opts  Options
	cat   *catalog.Catalog
	store mapping.Store
	// lc owns every task's life: it is the only writer of task rows, and
	// it observes, submits, cancels downstream, sweeps and applies events.
	lc       *lifecycle.Lifecycle
	adapters map[string]adapters.Adapter
	tools    map[string]*tool
	server   *mcp.Server
	log      *slog.Logger

	// ctx is the bridge's lifetime: the lifecycle's work and the bridge's
	// own (streams, synchronous calls' cancels) outlive the requests that
	// cause them and run on it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// limits are the catalog's limits; metrics count what they refuse.
	limits  catalog.Limits
	metrics *metrics
	tracer  trace.Tracer
	rates   *rateLimits
	// hub pushes task changes to subscriptions/listen streams.
	hub *hub
	// sessions follow the tasks of 2025-11-25 sessions (legacypush.go).
	sessions *legacySessions
	// streamsEnd is closed by EndStreams: every stream ends gracefully.
	streamsEnd     chan struct{}
	streamsEndOnce sync.Once

	// sealOnce makes sealAEAD, which seals task IDs for tasks/list.
	sealOnce sync.Once
	sealAEAD cipher.AEAD

	// reload holds the catalog generations (reload.go).
	reload reloadState

	mu     sync.Mutex
	closed bool
}

// tool is a catalog tool with its resolved schema and adapter.
type tool struct {
	*catalog.Tool
	schema  *jsonschema.Resolved
	raw     map[string]any // the input schema as a generic object
	adapter adapters.Adapter
	// revision is the catalog revision the tool was loaded from by Reload
	// (empty: the catalog given to New).
	revision string
}

// New builds a Bridge and starts its lifecycle's background sweep.
func New(opts Options) (*Bridge, error) {
	if opts.Catalog == nil || opts.Store == nil {
		return nil, errors.New("bridge: Catalog and Store are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	setDefault(&opts.SubmitTimeout, 30*time.Second)
	setDefault(&opts.CallTimeout, 15*time.Second)
	setDefault(&opts.ObserveBudget, 250*time.Millisecond)
	setDefault(&opts.LookupBackoff, 2*time.Second)
	setDefault(&opts.SweepInterval, 10*time.Second)
	setDefault(&opts.SweepObserveAge, time.Minute)
	setDefault(&opts.SweepLease, 3*opts.SweepInterval)
	if opts.ReplicaID == "" {
		opts.ReplicaID = "replica-" + randomToken(6)
	}
	if opts.StateKey == nil {
		opts.StateKey = make([]byte, 32)
		rand.Read(opts.StateKey)
	}
	if opts.HTTPPrincipal == "" {
		opts.HTTPPrincipal = "anonymous"
	}
	if opts.StdioPrincipal == "" {
		opts.StdioPrincipal = "local:" + localUser()
	}
	b := &Bridge{
		opts:     opts,
		cat:      opts.Catalog,
		store:    opts.Store,
		adapters: opts.Adapters,
		tools:    map[string]*tool{},
		log:      opts.Logger,
		limits:   opts.Catalog.Limits,
		metrics:  newMetrics(),
		tracer:   newTracer(opts.TracerProvider),
		rates:    newRateLimits(),
	}
	b.store = traceStore(meterStore(opts.Store, b.metrics, b.log), b)
	metered := map[string]adapters.Adapter{}
	if b.limits == (catalog.Limits{}) {
		b.limits.SetDefaults()
	}
	_, shared := opts.Store.(liveClaimer)
	for _, ct := range opts.Catalog.Tools {
		a := opts.Adapters[ct.Backend]
		if a == nil {
			return nil, fmt.Errorf("bridge: tool %q: no adapter for backend %q", ct.Name, ct.Backend)
		}
		if metered[ct.Backend] == nil {
			metered[ct.Backend] = meterAdapter(ct.Backend, a, b.metrics, b.tracer, b.log)
		}
		t, err := newTool(ct, metered[ct.Backend]) // reload.go
		if err != nil {
			return nil, fmt.Errorf("bridge: %w", err)
		}
		b.tools[ct.Name] = t
		b.metrics.knowTool(ct.Name, ct.Backend, ct.Task != catalog.TaskNever)
	}
	b.streamLimits()
	b.server = b.newServer()
	b.gen() // the first catalog generation (reload.go)
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(context.Background()))
	keys, _ := opts.Store.(mapping.IdempotencyStore)
	lc, err := lifecycle.New(lifecycle.Options{
		Store:           b.store,
		Results:         results{b: b},
		Now:             opts.Now,
		Logger:          b.log,
		Context:         b.ctx,
		CallTimeout:     opts.CallTimeout,
		Forwards:        true,
		Shared:          shared,
		Started:         opts.Now(),
		StaleClaim:      2*opts.CallTimeout + opts.SweepInterval,
		Tools:           lifecycleTools{b: b},
		Metrics:         lifecycleMetrics{m: b.metrics},
		Adapters:        opts.Adapters,
		IdempotencyKeys: keys,
		SubmitTimeout:   opts.SubmitTimeout,
		LookupBackoff:   opts.LookupBackoff,
		SweepInterval:   opts.SweepInterval,
		SweepLease:      opts.SweepLease,
		SweepObserveAge: opts.SweepObserveAge,
		ReplicaID:       opts.ReplicaID,
		MaxInputWait:    b.limits.MaxInputWait,
	})
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	b.lc = lc
	for _, name := range lc.EventBackends() {
		for _, outcome := range eventOutcomes {
			b.metrics.events.WithLabelValues(name, outcome)
		}
	}
	b.streamsEnd = make(chan struct{})
	b.hub = newHub(b)
	b.sessions = newLegacySessions(b)
	lc.StartSweeping()
	return b, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Close stops the background work and waits for it. It does not close the
// store or cancel any backend job: tasks survive the process.
func (b *Bridge) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.EndStreams()
	b.lc.Close()
	b.cancel()
	b.wg.Wait()
	b.hub.close()
	return nil
}

// EndStreams ends every subscriptions/listen stream gracefully (the
// listen's result over HTTP, notifications/cancelled over stdio) and makes
// new ones end at once, without stopping anything else: call it when the
// HTTP server starts shutting down (http.Server.RegisterOnShutdown), so
// that Shutdown does not wait for streams that would otherwise last until
// their clients leave. Clients listen again elsewhere and miss nothing.
func (b *Bridge) EndStreams() {
	b.streamsEndOnce.Do(func() { close(b.streamsEnd) })
}

// goBackground runs fn on the bridge's lifetime, tracked by Close. It
// reports false, and does not run fn, once the bridge is closing.
func (b *Bridge) goBackground(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
	return true
}

// Server returns the underlying MCP server.
func (b *Bridge) Server() *mcp.Server { return b.server }

// Handler returns the Streamable HTTP handler for the MCP endpoint.
// Requests of protocol 2026-07-28 are served statelessly; a client that
// negotiates 2025-11-25 at initialize gets a session (Mcp-Session-Id), which
// its revision needs: the server remembers the capabilities it declared
// (elicitation for confirmations) and can send it requests (the input
// relayed through tasks/result). Sessions live in this process: behind a
// load balancer, route by Mcp-Session-Id. Before the SDK sees a request,
// checkRequest applies the header checks and limits, and every error answer
// is a JSON-RPC error object, never text/plain.
func (b *Bridge) Handler() http.Handler {
	server := func(*http.Request) *mcp.Server { return b.server }
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       sdkLogger(b.log),
		MaxRequestBodyBytes:          b.limits.MaxRequestBytes,
	})
	sessions := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		PropagateRequestCancellation: true,
		Logger:                       sdkLogger(b.log),
		MaxRequestBodyBytes:          b.limits.MaxRequestBytes,
		SessionTimeout:               legacySessionIdle,
	})
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" || r.Context().Value(sessionKey{}) != nil {
			sessions.ServeHTTP(carrierWriter{w}, r) // legacypush.go
			return
		}
		stateless.ServeHTTP(w, r)
	})
	var out http.Handler = jsonErrors(b.checkRequest(route))
	if b.opts.Auth != nil {
		// The authenticator answers 401 with its WWW-Authenticate challenge
		// and puts the caller in the request context; the SDK's bearer
		// middleware then carries it into the MCP request (TokenInfo), where
		// tasks are bound to it.
		carry := sdkauth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
			p, ok := auth.PrincipalFrom(r.Context())
			if !ok {
				return nil, sdkauth.ErrInvalidToken
			}
			return &sdkauth.TokenInfo{
				UserID:     principalKeyOf(p),
				Scopes:     p.Scopes,
				Expiration: b.opts.Now().Add(time.Hour), // validity was checked by the authenticator
				Extra:      map[string]any{principalExtra: p},
			}, nil
		}, nil)
		out = b.opts.Auth.Middleware(carry(out))
	}
	return out
}

// MetricsHandler serves the bridge's Prometheus metrics (its own registry,
// with the Go runtime and process collectors) in the exposition format the
// scraper negotiates. The README's "Operating jobbridge" section lists them.
func (b *Bridge) MetricsHandler() http.Handler { return b.metrics.handler() }

// ServeStdio serves MCP over stdin/stdout until ctx is done or the client
// closes stdin; either is a normal end (nil), and the requests read before
// it are answered first (see ServeIO).
func (b *Bridge) ServeStdio(ctx context.Context) error {
	return b.ServeIO(ctx, os.Stdin, os.Stdout)
}

func (b *Bridge) newServer() *mcp.Server {
	// The SDK answers prompts/list (with an empty list) whatever the server
	// offers, so the capability is declared to match what it answers.
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Prompts: &mcp.PromptCapabilities{}}
	caps.AddExtension(TasksExtension, nil)
	name, version := b.cat.Server.Name, b.cat.Server.Version
	if name == "" {
		name = "jobbridge"
	}
	if version == "" {
		version = b.opts.Build
	}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: version}, &mcp.ServerOptions{
		Instructions: b.cat.Server.Instructions,
		Capabilities: caps,
		Logger:       sdkLogger(b.log),
	})
	for _, ct := range b.cat.Tools {
		t := b.tools[ct.Name]
		s.AddTool(t.mcpTool(), b.syncHandler(t))
	}
	b.addCompanions(s) // handle.go: task_status, task_cancel, task_answer
	s.AddReceivingMiddleware(b.traceRequests, b.countCalls, b.middleware)
	// Registration only fails for names that shadow standard methods.
	must(mcp.AddReceivingCustomMethod(s, "tasks/get", b.tasksGet))
	must(mcp.AddReceivingCustomMethod(s, "tasks/update", b.tasksUpdate))
	must(mcp.AddReceivingCustomMethod(s, "tasks/cancel", b.tasksCancel))
	// 2025-11-25 only; the middleware answers -32601 for other requests.
	must(mcp.AddReceivingCustomMethod(s, "tasks/list", b.tasksList))
	must(mcp.AddReceivingCustomMethod(s, "tasks/result", b.tasksResult))
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (t *tool) mcpTool() *mcp.Tool {
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: json.RawMessage(t.InputSchema),
	}
	if s, err := outputSchemaOf(t.OutputSchema); err == nil && s != nil {
		mt.OutputSchema = s // results.go: the envelope, with data typed by the catalog's schema
	}
	if a := t.Annotations; a != nil {
		mt.Annotations = &mcp.ToolAnnotations{
			DestructiveHint: a.Destructive,
			OpenWorldHint:   a.OpenWorld,
		}
		if a.ReadOnly != nil {
			mt.Annotations.ReadOnlyHint = *a.ReadOnly
		}
		if a.Idempotent != nil {
			mt.Annotations.IdempotentHint = *a.Idempotent
		}
	}
	return mt
}

// principal is the identity a request acts as; tasks are bound to it.
type principalKey struct{}

func withPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// callerKey carries the authenticated caller, when there is one.
type callerKey struct{}

func withCaller(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

func callerFrom(ctx context.Context) *auth.Principal {
	p, _ := ctx.Value(callerKey{}).(*auth.Principal)
	return p
}

// middleware binds the caller's principal to the context of every request
// and routes tools/call: it decides between a task, a synchronous call and a
// -32021 error.
func (b *Bridge) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p := b.opts.StdioPrincipal
		var caller *auth.Principal
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			p = b.opts.HTTPPrincipal
			if extra.TokenInfo != nil {
				caller, _ = extra.TokenInfo.Extra[principalExtra].(*auth.Principal)
			}
			if b.opts.Auth != nil {
				if caller == nil {
					// Unreachable behind the authenticating handler; refuse
					// rather than fall back to a shared principal.
					return nil, internalError("request is not authenticated")
				}
				p = principalKeyOf(caller)
			}
		}
		ctx = withPrincipal(ctx, p)
		ctx = withCaller(ctx, caller)
		ctx = withRevision(ctx, requestRevision(req))
		ctx = withIdempotencyMeta(ctx, req) // idempotency.go
		if res, err, handled := b.legacyMiddleware(ctx, method, req, next); handled {
			return res, err
		}
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && caller != nil {
				// Show a caller only the tools it may call.
				visible := make([]*mcp.Tool, 0, len(lr.Tools))
				for _, mt := range lr.Tools {
					if t := b.toolNamed(mt.Name); t == nil || t.allows(caller) {
						visible = append(visible, mt)
					}
				}
				lr.Tools = visible
			}
			return res, err
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		t := b.toolNamed(r.Params.Name)
		if t == nil {
			return next(ctx, method, req)
		}
		if caller != nil && !t.allows(caller) {
			// A tool the caller may not use answers like one that does not
			// exist.
			b.metrics.reject("tool_denied")
			return nil, invalidParams("unknown tool %q", r.Params.Name)
		}
		if len(r.Params.Arguments) > b.limits.MaxArgumentBytes {
			b.metrics.reject("argument_size")
			return toolError("the arguments are %d bytes; this server accepts at most %d", len(r.Params.Arguments), b.limits.MaxArgumentBytes), nil
		}
		caps := r.ClientCapabilities()
		// A task is created only for a request that declares the extension
		// in its own _meta under protocol 2026-07-28 or later; a declaration
		// made at initialize (2025-11-25) does not count.
		tasksOK := requestDeclaresTasks(r.Params.GetMeta())
		switch {
		case t.Task == catalog.TaskNever, t.Task == catalog.TaskOptional && !tasksOK:
			return next(ctx, method, req) // the synchronous handler
		case !tasksOK:
			return nil, missingCapability(tasksCapability(), TasksExtension)
		}
		elicitOK := caps.Elicitation != nil
		args, pending, err := b.resolveArgs(t, r.Params, elicitOK)
		if err != nil {
			return nil, err
		}
		if pending != nil {
			// Let the SDK's tools/call path send the interim result, so that it
			// is marked input_required; the handler asks the same question.
			return next(ctx, method, req)
		}
		return b.createTask(ctx, t, args, elicitOK)
	}
}

// principalExtra is the TokenInfo.Extra key that carries the authenticated
// caller from the HTTP layer to the MCP handlers.
const principalExtra = "jobbridge.principal"

// principalKeyOf is the principal a task is bound to: the caller's tenant
// and identity.
func principalKeyOf(p *auth.Principal) string {
	if p.Tenant == "" {
		return p.ID
	}
	return p.Tenant + "/" + p.ID
}

// allows applies the tool's policy to a caller.
func (t *tool) allows(p *auth.Principal) bool {
	return t.Allow.Allows(p.ID, p.Groups, p.Scopes)
}

// ID generation.

// newTaskID returns 192 random bits, base64url: unguessable and safe in an
// HTTP header.
func newTaskID() string { return randomToken(24) }

// newCorrelationID returns the identifier sent to backends. It is random and
// unrelated to the task ID.
func newCorrelationID() string { return "jb-" + randomToken(12) }

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails
	return base64URL(b)
}
