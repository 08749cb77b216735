package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/connlimit"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/postgres"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
)

// serveConfig is what serve and demo share.
type serveConfig struct {
	catalog  *catalog.Catalog
	listen   string
	store    string
	stdio    bool
	logLevel slog.Level
	// logJSON writes the logs as JSON lines (--log-format json).
	logJSON bool
	// sweep and submitTimeout tune the bridge (zero: its defaults).
	sweep, submitTimeout time.Duration
	// awsCredentials replace the SDK's credential chain (the demo's fake).
	awsCredentials aws.CredentialsProvider
	// resourceFromListener sets auth.resource to the listener's URL (demo).
	resourceFromListener bool
	// ready, when set, is called with the endpoint URL once listening.
	ready func(url string)
	// http bounds what client connections may hold (nil: the defaults).
	http *httpLimits
	// eventsListen, when set, serves the backends' event endpoints on
	// their own listener instead of the MCP listener.
	eventsListen string
	// configPath, when set, is the catalog's file, reloaded on SIGHUP and,
	// when watch is positive, when its content changes (looked at every
	// watch); reloadNow reloads it too (tests).
	configPath string
	watch      time.Duration
	reloadNow  <-chan struct{}
	// builtIn says the catalog is built into the binary (demo without
	// --config): SIGHUP is caught and logged as having nothing to reload.
	builtIn bool
	// prepareReload, when set, is applied to each reloaded catalog before
	// it is served (demo: point its backends at the fakes).
	prepareReload func(*catalog.Catalog)
}

const serveUsage = `usage: jobbridge serve --config FILE [--listen HOST:PORT] [--store URL] [--stdio] [flags]

Serves the tools of a catalog over MCP: Streamable HTTP at /mcp (stateless
for 2026-07-28 clients, sessions for 2025-11-25 ones), or stdin/stdout with
--stdio. Each tool call starts a job on the tool's backend and, for clients
that ask for tasks, returns a durable task handle at once. GET /healthz
answers ok while the process runs (liveness), GET /readyz answers 200 when
the catalog is loaded and the task store answers, 503 with the reason
otherwise (readiness), GET /metrics serves metrics. Backends configured with an events:
block receive pushed job events at POST /events/BACKEND (authenticated by
the backend's signature, not by MCP auth), on --events-listen if given.

The task store is --store, else $JOBBRIDGE_STORE, else the catalog's
server.store, else sqlite:jobbridge.db (with --stdio: tasks.db in the user's
state directory, printed at start); postgres://... lets several replicas
share it. The state key (signs argument collection, seals task IDs in task
lists) is $JOBBRIDGE_STATE_KEY, else one generated once and kept in the
store, which replicas on one store share. Without an auth: block
in the catalog the server listens on loopback addresses only.

SIGHUP reloads the catalog, and so does a change of its content with
--watch: a catalog with errors is refused (logged with file:line:col, the old
one stays); a valid one serves new calls at once, while live tasks keep the
tools they started under, and clients with sessions are told
(notifications/tools/list_changed).

Example:

  jobbridge serve --config configs/demo.yaml --listen 127.0.0.1:8080 --store sqlite:/var/lib/jobbridge/tasks.db

Flags:
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("serve", serveUsage, stdout, stderr)
	fs := cmd.fs
	configPath := fs.String("config", "", "catalog `file` (required)")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen `address` (loopback only until authentication is configured)")
	store := fs.String("store", "", "task store `URL`: sqlite:PATH or postgres://... (default: $JOBBRIDGE_STORE, the catalog's server.store, else sqlite:jobbridge.db)")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log `format`: text (key=value) or json (one object per line)")
	sweep := fs.Duration("sweep-interval", 10*time.Second, "how often the background sweep runs")
	submitTimeout := fs.Duration("submit-timeout", 30*time.Second, "bound on one submission; a task still submitting after it is reconciled")
	eventsListen := fs.String("events-listen", "", "serve the backends' event endpoints (POST /events/BACKEND) on this `address` instead of --listen")
	watch := fs.Bool("watch", false, "reload the catalog when its file's content changes (as SIGHUP does)")
	watchInterval := fs.Duration("watch-interval", 5*time.Second, "with --watch, how often the catalog file is read")
	httpLim := httpLimitFlags(fs)
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	switch {
	case *configPath == "":
		return cmd.usageErrorf("missing --config FILE, the catalog to serve")
	case len(positional) > 0:
		return cmd.usageErrorf("unexpected argument %q (the catalog is given with --config FILE)", positional[0])
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logJSON, err := parseLogFormat(*logFormat)
	if err != nil {
		return err
	}
	cat, err := loadCatalog(*configPath, stderr)
	if err != nil {
		return err
	}
	if *store == "" {
		*store = os.Getenv("JOBBRIDGE_STORE")
	}
	if *store == "" {
		*store = os.Expand(cat.Server.Store, os.Getenv)
	}
	if *store == "" && *stdio {
		path, err := defaultStdioStore()
		if err != nil {
			return err
		}
		*store = "sqlite:" + path
		// A desktop client shows the server's stderr in its log.
		fmt.Fprintf(stderr, "jobbridge: task store %s (the user's state directory; --store or $JOBBRIDGE_STORE choose another)\n", path)
	}
	if *store == "" {
		*store = "sqlite:jobbridge.db"
	}
	cfg := serveConfig{catalog: cat, listen: *listen, store: *store, stdio: *stdio, logLevel: lvl, logJSON: logJSON, sweep: *sweep, submitTimeout: *submitTimeout, http: httpLim, eventsListen: *eventsListen, configPath: *configPath}
	if *watch {
		cfg.watch = max(*watchInterval, 10*time.Millisecond)
	}
	return serve(ctx, cfg, os.LookupEnv, stdout, stderr)
}

// parseLogFormat reads --log-format: text or json.
func parseLogFormat(f string) (json bool, err error) {
	switch f {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("--log-format: %q is not text or json", f)
}

// newLogger is the server's logger: key=value text, or JSON lines.
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// loadCatalog loads a catalog and prints every problem in it.
func loadCatalog(path string, stderr io.Writer) (*catalog.Catalog, error) {
	cat, err := catalog.Load(path, catalogTypes()...)
	return cat, reportCatalogErrors(err, stderr)
}

// reportCatalogErrors prints each problem of a catalog that is not valid
// and returns exit status 1; other errors are returned as they are.
func reportCatalogErrors(err error, stderr io.Writer) error {
	var errs catalog.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		return exitError(1)
	}
	return err
}

func serve(ctx context.Context, cfg serveConfig, getenv func(string) (string, bool), stdout, stderr io.Writer) error {
	logger := newLogger(stderr, cfg.logLevel, cfg.logJSON)
	for _, w := range cfg.catalog.Warnings {
		logger.Warn("catalog warning", "at", w.Pos.String(), "path", w.Path, "warning", w.Err.Error())
	}
	if !cfg.stdio && cfg.catalog.Auth == nil {
		if err := checkLoopback(cfg.listen); err != nil {
			return err
		}
	}
	var ln net.Listener
	if !cfg.stdio {
		var err error
		if ln, err = net.Listen("tcp", cfg.listen); err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.listen, err)
		}
		defer ln.Close()
	}
	var authn *auth.Authenticator
	if a := cfg.catalog.Auth; a != nil && !cfg.stdio {
		if cfg.resourceFromListener {
			a.Resource = "http://" + ln.Addr().String() + "/mcp"
		}
		var err error
		// The authenticator's key refresh lives as long as the server.
		authn, err = auth.New(ctx, *a, &auth.Options{Logger: logger.With("component", "auth")})
		if err != nil {
			return fmt.Errorf("authentication: %w", err)
		}
	}
	store, err := openStore(ctx, cfg.store)
	if err != nil {
		return err
	}
	defer store.Close()
	adapterOpts := adapterOptions{getenv: getenv, logger: logger, awsCredentials: cfg.awsCredentials}
	adapterSet, err := buildAdapters(cfg.catalog, adapterOpts)
	if err != nil {
		return err
	}
	stateKey, err := stateKeyFrom(os.LookupEnv)
	if err != nil {
		return err
	}
	if stateKey == nil {
		// Kept with the tasks, so that task lists and argument collection
		// survive restarts, and replicas on one store share it.
		if k, ok := store.(stateKeeper); ok {
			if stateKey, err = k.StateKey(ctx, newStateKey); err != nil {
				return redactDSN(err, cfg.store)
			}
			logger.Debug("state key kept in the task store (JOBBRIDGE_STATE_KEY overrides it)")
		}
	}
	tp, stopTracing, err := newTracerProvider(ctx, getenv)
	if err != nil {
		return err
	}
	defer stopTracing()
	opts := bridge.Options{
		TracerProvider: tp,
		StateKey:       stateKey,
		Catalog:        cfg.catalog,
		Store:          store,
		Adapters:       adapterSet,
		Build:          buildVersion(),
		Auth:           authn,
		Logger:         logger,
		SweepInterval:  cfg.sweep,
		SubmitTimeout:  cfg.submitTimeout,
	}
	b, err := bridge.New(opts)
	if err != nil {
		return err
	}
	defer b.Close()
	current := func() *catalog.Catalog { return cfg.catalog }
	if cfg.configPath != "" || cfg.builtIn {
		r := newReloader(cfg.configPath, cfg.catalog, b, adapterOpts, logger)
		r.prepare = cfg.prepareReload
		current = r.catalog
		rctx, stopReloads := context.WithCancel(ctx)
		defer stopReloads()
		r.start(rctx, cfg.watch, cfg.reloadNow)
	}
	if cfg.stdio {
		logger.Info("serving MCP on stdio", "catalog", cfg.catalog.File, "tools", len(cfg.catalog.Tools))
		return b.ServeStdio(ctx)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	ready := readiness{cat: current, hideIn: cfg.store}
	ready.store, _ = store.(interface{ Ping(context.Context) error })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		ok, reason := ready.check(r.Context())
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", reason)
			return
		}
		fmt.Fprintf(w, "ready: %s\n", reason)
	})
	mux.Handle("GET /metrics", b.MetricsHandler())
	if backends := b.EventBackends(); len(backends) > 0 {
		if cfg.eventsListen == "" {
			mux.Handle(eventsPrefix, b.EventsHandler(eventsPrefix))
		} else {
			events := http.NewServeMux()
			events.Handle(eventsPrefix, b.EventsHandler(eventsPrefix))
			eln, err := net.Listen("tcp", cfg.eventsListen)
			if err != nil {
				return fmt.Errorf("--events-listen %s: %w", cfg.eventsListen, err)
			}
			esrv, esln := newHTTPServer(eln, events, cfg, logger)
			go esrv.Serve(esln)
			defer esrv.Close()
		}
		where := cfg.eventsListen
		if where == "" {
			where = ln.Addr().String()
		}
		slices.Sort(backends)
		logger.Info("accepting backend events", "address", where, "path", eventsPrefix+"{backend}", "backends", strings.Join(backends, ","))
	}
	if authn != nil {
		// RFC 9728 protected resource metadata, outside authentication.
		for _, p := range authn.MetadataPaths() {
			mux.Handle("GET "+p, authn.MetadataHandler())
		}
	}
	srv, sln := newHTTPServer(ln, mux, cfg, logger)
	// Streams would hold Shutdown until their clients leave: end them.
	srv.RegisterOnShutdown(b.EndStreams)
	url := "http://" + ln.Addr().String() + "/mcp"
	logger.Info("serving MCP", "url", url, "catalog", cfg.catalog.File, "revision", cfg.catalog.Revision, "tools", len(cfg.catalog.Tools), "store", cfg.store)
	if cfg.ready != nil {
		cfg.ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(sln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// stateKeeper is a store that keeps the state key the servers on it share
// (mapping/sqlite and mapping/postgres do).
type stateKeeper interface {
	StateKey(ctx context.Context, generate func() []byte) ([]byte, error)
}

// eventsPrefix is where the backends' event endpoints live.
const eventsPrefix = "/events/"

// newTracerProvider returns the provider of the bridge's spans: OTLP over
// HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set (the exporter reads the other standard OTEL_EXPORTER_OTLP_*
// variables itself: headers, timeout, compression, TLS), else nil, which the
// bridge takes for no tracing. stop flushes the spans not yet exported.
func newTracerProvider(ctx context.Context, getenv func(string) (string, bool)) (tp trace.TracerProvider, stop func(), err error) {
	_, all := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, traces := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if !all && !traces {
		return nil, func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "jobbridge"), attribute.String("service.version", buildVersion()))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return sdk, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		sdk.Shutdown(sctx) // an export that fails now has nowhere to go
	}, nil
}

// stateKeyFrom reads the key that signs multi-round argument collection from
// JOBBRIDGE_STATE_KEY (at least 32 bytes, hex or base64); nil when it is
// unset, and the store's kept key is used (see stateKeeper).
func stateKeyFrom(getenv func(string) (string, bool)) ([]byte, error) {
	v, ok := getenv("JOBBRIDGE_STATE_KEY")
	if !ok || v == "" {
		return nil, nil
	}
	if k, err := hex.DecodeString(v); err == nil && len(k) >= 32 {
		return k, nil
	}
	if k, err := base64.StdEncoding.DecodeString(v); err == nil && len(k) >= 32 {
		return k, nil
	}
	return nil, errors.New("JOBBRIDGE_STATE_KEY must be at least 32 bytes, hex or base64 encoded")
}

// checkLoopback refuses addresses other machines could reach when the
// catalog configures no authentication: a task ID must not be the only thing
// between a network and the jobs it starts.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: refusing a non-loopback address without authentication: configure `auth:` in the catalog (OAuth or API keys) to listen elsewhere, or listen on 127.0.0.1, ::1 or localhost", addr)
	}
	return nil
}

// openStore opens the task store named by a store URL.
func openStore(ctx context.Context, url string) (mapping.Store, error) {
	scheme, rest, ok := strings.Cut(url, ":")
	if !ok {
		return nil, errors.New("--store: want sqlite:PATH or postgres://...")
	}
	switch scheme {
	case "sqlite":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return nil, fmt.Errorf("--store %q: missing path", url)
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("creating store directory: %w", err)
			}
		}
		s, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", path, err)
		}
		return s, nil
	case "postgres", "postgresql":
		s, err := postgres.Open(ctx, url, nil)
		if err != nil {
			// pgx errors can quote the DSN; report the store without it.
			return nil, fmt.Errorf("opening the PostgreSQL store: %w", redactDSN(err, url))
		}
		return s, nil
	}
	return nil, fmt.Errorf("--store: unknown store %q (known: sqlite:PATH, postgres://...)", scheme)
}

// redactDSN removes a DSN, which may hold a password, from an error.
func redactDSN(err error, dsn string) error {
	if msg := err.Error(); dsn != "" && strings.Contains(msg, dsn) {
		return errors.New(strings.ReplaceAll(msg, dsn, "<store url>"))
	}
	return err
}

// buildAdapters constructs one adapter per backend of the catalog, each by
// its kind in backendKinds.
func buildAdapters(cat *catalog.Catalog, o adapterOptions) (map[string]adapters.Adapter, error) {
	out := map[string]adapters.Adapter{}
	var errs []error
	builders := map[string]buildFunc{}
	for _, name := range cat.BackendOrder {
		be := cat.Backends[name]
		kind, ok := kindOf(be.Type)
		if !ok {
			errs = append(errs, fmt.Errorf("backend %q: unknown type %q", name, be.Type))
			continue
		}
		build := builders[be.Type]
		if build == nil {
			build = kind.open(o)
			builders[be.Type] = build
		}
		jobs := map[string]any{}
		for _, t := range cat.Tools {
			if t.Backend == name && t.Job != nil {
				jobs[t.Name] = t.Job
			}
		}
		a, err := build(name, be.Config, jobs)
		if err != nil {
			errs = append(errs, fmt.Errorf("backend %q: %w", name, err))
			continue
		}
		out[name] = a
	}
	return out, errors.Join(errs...)
}

// HTTP server limits. Kept apart from the rest of serve: they decide what a
// client connection may hold of the server (issue 10).

// httpLimits bound what client connections may hold of the HTTP server.
// Every value is taken as it is (a zero duration or cap is off), except
// writeTimeout; [defaultHTTPLimits] has the defaults.
type httpLimits struct {
	// readHeaderTimeout bounds reading a request's headers.
	readHeaderTimeout time.Duration
	// bodyTimeout bounds reading a request's body.
	bodyTimeout time.Duration
	// idleTimeout is how long a keep-alive connection may wait for its
	// next request.
	idleTimeout time.Duration
	// writeTimeout bounds answering one request; zero derives it from the
	// catalog (see writeTimeoutFor).
	writeTimeout time.Duration
	// maxConns caps open connections; maxConnsPerIP caps them per client
	// address. Zero: off.
	maxConns, maxConnsPerIP int
}

// Defaults of the HTTP server limits.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	// A body of the largest allowed size (max_request_bytes, 1 MiB by
	// default) arrives in 30s at 35 KB/s.
	defaultBodyTimeout = 30 * time.Second
	// Longer than the idle timeouts of the load balancers and clients that
	// keep connections to the server (AWS ALB 60s, Go's http.Transport
	// 90s): a server that closes a kept connection first races the
	// client's next request on it, which then fails.
	defaultIdleTimeout = 120 * time.Second
	defaultMaxConns    = 4096
	// Generous for a reverse proxy or a busy agent host; idle and stalled
	// connections from the address are closed to make room first.
	defaultMaxConnsPerIP = 512
	// writeMargin is added to the longest synchronous call to get the
	// write deadline.
	writeMargin = 30 * time.Second
	// fdReserve is the file descriptors kept out of maxConns for the store,
	// the backends and the rest of the process.
	fdReserve = 256
)

// defaultHTTPLimits returns the limits serve uses without flags (demo).
func defaultHTTPLimits() httpLimits {
	return httpLimits{
		readHeaderTimeout: defaultReadHeaderTimeout,
		bodyTimeout:       defaultBodyTimeout,
		idleTimeout:       defaultIdleTimeout,
		maxConns:          defaultMaxConns,
		maxConnsPerIP:     defaultMaxConnsPerIP,
	}
}

// httpLimitFlags registers the serve flags of the HTTP server limits.
func httpLimitFlags(fs *flag.FlagSet) *httpLimits {
	l := defaultHTTPLimits()
	fs.DurationVar(&l.readHeaderTimeout, "read-header-timeout", l.readHeaderTimeout, "bound on reading one request's headers (0: none)")
	fs.DurationVar(&l.bodyTimeout, "read-timeout", l.bodyTimeout, "bound on reading one request's body (0: none)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", l.idleTimeout, "how long a kept-alive connection may wait for its next request (0: no limit)")
	fs.DurationVar(&l.writeTimeout, "write-timeout", 0, "bound on answering one request (default: the catalog's longest sync_budget + --submit-timeout + 30s); SSE streams are exempt")
	fs.IntVar(&l.maxConns, "max-conns", l.maxConns, "cap on open client connections, lowered to fit the open-file limit (0: no cap)")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", l.maxConnsPerIP, "cap on open connections from one client address, IPv4 or IPv6 /64 (0: no cap); raise it behind a reverse proxy")
	return &l
}

// newHTTPServer returns the HTTP server and the listener to serve h on:
//
//   - ReadHeaderTimeout and IdleTimeout close connections stalled in their
//     headers or idle between requests;
//   - each request gets a deadline for its body (lifted once the body is
//     read, so that the work after it is not cut) and one for its answer,
//     set per request by connlimit.Handler: the write deadline
//     covers the longest synchronous tools/call (sync_budget after a
//     submission of up to --submit-timeout). Long-lived streams are exempt
//     from it: a GET that accepts text/event-stream (the Streamable HTTP
//     standalone stream) and a POST of subscriptions/listen (per its
//     Mcp-Method header); their handlers set their own deadlines per write
//     with http.ResponseController;
//   - the listener caps open connections in total and per client address,
//     closing the connection that has waited longest on its client (idle,
//     or stalled in its headers or body) to make room for a new one, so
//     that slow or idle connections cannot keep a legitimate client out.
func newHTTPServer(ln net.Listener, h http.Handler, cfg serveConfig, logger *slog.Logger) (*http.Server, net.Listener) {
	lim := defaultHTTPLimits()
	if cfg.http != nil {
		lim = *cfg.http
	}
	write := lim.writeTimeout
	if write <= 0 {
		write = writeTimeoutFor(cfg.catalog, cfg.submitTimeout)
	}
	maxConns := lim.maxConns
	if n, ok := connlimit.OpenFileLimit(); ok && maxConns > 0 && uint64(maxConns)+fdReserve > n {
		fit := max(int(n)-fdReserve, 16)
		logger.Warn("--max-conns lowered to fit the open-file limit", "max_conns", maxConns, "open_file_limit", n, "now", fit)
		maxConns = fit
	}
	cl := connlimit.NewListener(ln, connlimit.Options{MaxConns: maxConns, MaxConnsPerAddr: lim.maxConnsPerIP})
	srv := &http.Server{
		Handler: connlimit.Handler(h, connlimit.HandlerOptions{
			BodyTimeout:  lim.bodyTimeout,
			WriteTimeout: write,
			LongLived:    longLivedStream,
		}),
		ReadHeaderTimeout: lim.readHeaderTimeout,
		IdleTimeout:       lim.idleTimeout,
		// WriteTimeout stays zero: it would bound every answer alike,
		// cutting long synchronous calls and streams. ReadTimeout stays
		// zero too: the body deadline is set per request instead, where
		// the listener also learns that the connection waits for its body.
	}
	cl.Configure(srv)
	logger.Debug("HTTP limits", "read_header_timeout", lim.readHeaderTimeout, "read_timeout", lim.bodyTimeout,
		"idle_timeout", lim.idleTimeout, "write_timeout", write, "max_conns", maxConns, "max_conns_per_ip", lim.maxConnsPerIP)
	return srv, cl
}

// writeTimeoutFor is the write deadline of a request: the longest
// synchronous call of the catalog (its submission, bounded by submit, then
// its sync_budget) plus a margin.
func writeTimeoutFor(cat *catalog.Catalog, submit time.Duration) time.Duration {
	if submit <= 0 {
		submit = 30 * time.Second // the bridge's default
	}
	var budget time.Duration
	for _, t := range cat.Tools {
		budget = max(budget, t.SyncBudget)
	}
	if len(cat.Tools) == 0 {
		budget = catalog.DefaultSyncBudget
	}
	return submit + budget + writeMargin
}

// longLivedStream reports the requests that open a long-lived SSE stream and
// set their own write deadlines: a GET accepting text/event-stream, and a
// POST whose Mcp-Method is subscriptions/listen.
func longLivedStream(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet:
		for _, v := range r.Header.Values("Accept") {
			for part := range strings.SplitSeq(v, ",") {
				mt, _, _ := strings.Cut(part, ";")
				if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
					return true
				}
			}
		}
	case http.MethodPost:
		return r.Header.Get("Mcp-Method") == "subscriptions/listen"
	}
	return false
}
