package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/awsbatch"
	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
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
	// sweep and submitTimeout tune the bridge (zero: its defaults).
	sweep, submitTimeout time.Duration
	// awsCredentials replace the SDK's credential chain (the demo's fake).
	awsCredentials aws.CredentialsProvider
	// resourceFromListener sets auth.resource to the listener's URL (demo).
	resourceFromListener bool
	// ready, when set, is called with the endpoint URL once listening.
	ready func(url string)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "catalog `file` (required)")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen `address` (loopback only until authentication is configured)")
	store := fs.String("store", "", "task store `URL`: sqlite:PATH or postgres://... (default: $JOBBRIDGE_STORE, the catalog's server.store, else sqlite:jobbridge.db)")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn, error")
	sweep := fs.Duration("sweep-interval", 10*time.Second, "how often the background sweep runs")
	submitTimeout := fs.Duration("submit-timeout", 30*time.Second, "bound on one submission; a task still submitting after it is reconciled")
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	if *configPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: jobbridge serve --config FILE [--listen HOST:PORT] [--store sqlite:PATH] [--stdio]")
		return exitError(2)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
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
	if *store == "" {
		*store = "sqlite:jobbridge.db"
	}
	return serve(ctx, serveConfig{catalog: cat, listen: *listen, store: *store, stdio: *stdio, logLevel: lvl, sweep: *sweep, submitTimeout: *submitTimeout}, os.LookupEnv, stdout, stderr)
}

// loadCatalog loads a catalog and prints every problem in it.
func loadCatalog(path string, stderr io.Writer) (*catalog.Catalog, error) {
	cat, err := catalog.Load(path)
	if err != nil {
		var errs catalog.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(stderr, e)
			}
			return nil, exitError(1)
		}
		return nil, err
	}
	return cat, nil
}

func serve(ctx context.Context, cfg serveConfig, getenv func(string) (string, bool), stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
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
	adapterSet, err := buildAdapters(cfg.catalog, adapterOptions{getenv: getenv, logger: logger, awsCredentials: cfg.awsCredentials})
	if err != nil {
		return err
	}
	stateKey, err := stateKeyFrom(os.LookupEnv)
	if err != nil {
		return err
	}
	opts := bridge.Options{
		StateKey:      stateKey,
		Catalog:       cfg.catalog,
		Store:         store,
		Adapters:      adapterSet,
		Build:         buildVersion(),
		Auth:          authn,
		Logger:        logger,
		SweepInterval: cfg.sweep,
		SubmitTimeout: cfg.submitTimeout,
	}
	b, err := bridge.New(opts)
	if err != nil {
		return err
	}
	defer b.Close()
	if cfg.stdio {
		logger.Info("serving MCP on stdio", "catalog", cfg.catalog.File, "tools", len(cfg.catalog.Tools))
		return b.ServeStdio(ctx)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", b.MetricsHandler())
	if authn != nil {
		// RFC 9728 protected resource metadata, outside authentication.
		for _, p := range authn.MetadataPaths() {
			mux.Handle("GET "+p, authn.MetadataHandler())
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/mcp"
	logger.Info("serving MCP", "url", url, "catalog", cfg.catalog.File, "revision", cfg.catalog.Revision, "tools", len(cfg.catalog.Tools), "store", cfg.store)
	if cfg.ready != nil {
		cfg.ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

// stateKeyFrom reads the key that signs multi-round argument collection from
// JOBBRIDGE_STATE_KEY (at least 32 bytes, hex or base64). Replicas behind one
// load balancer must share it; without it each process picks a random key.
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

// adapterOptions adjust how adapters are built (the demo hands in static
// AWS credentials for the local Batch fake).
type adapterOptions struct {
	getenv         func(string) (string, bool)
	logger         *slog.Logger
	awsCredentials aws.CredentialsProvider
}

// buildAdapters constructs one adapter per backend of the catalog: the
// explicit switchboard of backend types.
func buildAdapters(cat *catalog.Catalog, o adapterOptions) (map[string]adapters.Adapter, error) {
	out := map[string]adapters.Adapter{}
	var errs []error
	pollers := awsbatch.NewPollers()
	for _, name := range cat.BackendOrder {
		be := cat.Backends[name]
		logger := o.logger.With("backend", name)
		var (
			a   adapters.Adapter
			err error
		)
		switch be.Type {
		case "rest":
			jobs := map[string]rest.JobConfig{}
			for _, t := range cat.Tools {
				if t.Backend == name && t.REST != nil {
					jobs[t.Name] = *t.REST
				}
			}
			a, err = rest.New(name, *be.REST, jobs, &rest.Options{Logger: logger, Getenv: o.getenv})
		case "aws_batch":
			jobs := map[string]awsbatch.JobConfig{}
			for _, t := range cat.Tools {
				if t.Backend == name && t.AWSBatch != nil {
					jobs[t.Name] = *t.AWSBatch
				}
			}
			a, err = awsbatch.New(name, *be.AWSBatch, jobs, &awsbatch.Options{Logger: logger, Pollers: pollers, Credentials: o.awsCredentials})
		case "github_actions":
			jobs := map[string]githubactions.JobConfig{}
			for _, t := range cat.Tools {
				if t.Backend == name && t.GitHubActions != nil {
					jobs[t.Name] = *t.GitHubActions
				}
			}
			a, err = githubactions.New(name, *be.GitHubActions, jobs, &githubactions.Options{Logger: logger, Getenv: o.getenv})
		default:
			err = fmt.Errorf("unknown type %q", be.Type)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("backend %q: %w", name, err))
			continue
		}
		out[name] = a
	}
	return out, errors.Join(errs...)
}
