package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/auth/authtest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// runDemo serves a catalog with every backend pointed at in-process fakes,
// so that it works offline: rest backends talk to the REST job API fake,
// aws_batch backends to the AWS Batch fake (through the real AWS SDK), and
// github_actions backends to the GitHub REST fake (through go-github).
// The task store is a SQLite file in a fresh temporary directory. With
// --stdio it serves the same server over stdin/stdout instead of HTTP (for
// clients that spawn their server, such as desktop MCP clients), logging to
// stderr and writing nothing else to stdout.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "configs/demo.yaml", "catalog `file`")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen `address` (loopback only)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn, error")
	withAuth := fs.Bool("auth", false, "require OAuth bearer tokens from a built-in test issuer")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP (logs and the fakes' addresses go to stderr)")
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: jobbridge demo [--config FILE] [--listen HOST:PORT | --stdio] [--auth]")
		return exitError(2)
	}
	if *stdio && *withAuth {
		fmt.Fprintln(stderr, "jobbridge demo: --auth applies to HTTP only; stdio has no bearer tokens")
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
	if err := checkLoopback(*listen); err != nil {
		return err
	}

	fakes, closeFakes, err := startFakes()
	if err != nil {
		return err
	}
	defer closeFakes()
	pointAtFakes(cat, fakes)

	var issuer *authtest.Issuer
	if *withAuth {
		issuer, err = authtest.NewIssuerServer("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("starting the test issuer: %w", err)
		}
		defer issuer.Close()
		cat.Auth = &auth.Config{
			OAuth: &auth.OAuthConfig{Issuer: issuer.URL(), JWKSURL: issuer.JWKSURL()},
		}
		cat.Auth.SetDefaults()
	}

	dir, err := os.MkdirTemp("", "jobbridge-demo-")
	if err != nil {
		return fmt.Errorf("creating the demo state directory: %w", err)
	}
	storePath := filepath.Join(dir, "tasks.db")
	fmt.Fprintf(stderr, "jobbridge demo: fakes: REST job API %s, AWS Batch %s, GitHub %s; task store %s\n", fakes.jobAPI, fakes.batch, fakes.github, storePath)

	return serve(ctx, serveConfig{
		catalog:  cat,
		listen:   *listen,
		stdio:    *stdio,
		store:    "sqlite:" + storePath,
		logLevel: lvl,
		sweep:    2 * time.Second,
		// The Batch fake accepts any signature; no AWS account is involved.
		awsCredentials:       credentials.NewStaticCredentialsProvider("demo", "demo", ""),
		resourceFromListener: *withAuth,
		ready: func(url string) {
			if issuer != nil {
				fmt.Fprintf(stdout, `
Authentication is on: every request needs a bearer token for resource %s.
Get one from the test issuer (any client_id becomes the principal):

    TOKEN=$(curl -s -d grant_type=client_credentials -d client_id=alice -d resource=%s %s/token | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
    go run ./cmd/jobbridge call --url %s --header "Authorization: Bearer $TOKEN" build_report '{"report": "sales"}'
`, url, url, issuer.URL(), url)
			}
			fmt.Fprintf(stdout, `
jobbridge demo is serving %d tools from %s at

    %s

Try it from another terminal:

    go run ./cmd/jobbridge call --url %s build_report '{"report": "sales"}'

Any MCP client that speaks protocol 2026-07-28 can connect to the URL above
(Streamable HTTP, stateless). Press Ctrl-C to stop; the task store stays in
%s.

`, len(cat.Tools), cat.File, url, url, dir)
		},
	}, demoGetenv, stdout, stderr)
}

// startFakes starts the demo's in-process fakes on loopback ports; stop
// closes them.
func startFakes() (f demoFakes, stop func(), err error) {
	var closers []func()
	stop = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	jobs := jobapi.New(nil)
	if f.jobAPI, err = jobs.Start("127.0.0.1:0"); err != nil {
		return f, nil, fmt.Errorf("starting the REST job API fake: %w", err)
	}
	closers = append(closers, func() { jobs.Close() })
	// A short SIGTERM grace, so that a cancelled demo job ends in seconds.
	batch := batchfake.New(&batchfake.Options{TerminateGrace: 2 * time.Second})
	if f.batch, err = batch.Start("127.0.0.1:0"); err != nil {
		return f, nil, fmt.Errorf("starting the AWS Batch fake: %w", err)
	}
	closers = append(closers, func() { batch.Close() })
	github := githubfake.New(nil)
	if f.github, err = github.Start("127.0.0.1:0"); err != nil {
		return f, nil, fmt.Errorf("starting the GitHub fake: %w", err)
	}
	closers = append(closers, func() { github.Close() })
	return f, stop, nil
}

// pointAtFakes points every backend of the catalog at the demo's fakes.
func pointAtFakes(cat *catalog.Catalog, f demoFakes) {
	for _, be := range cat.Backends {
		// Every backend has a kind: loadCatalog knows no other types.
		if kind, ok := kindOf(be.Type); ok {
			kind.useFakes(be.Config, f)
		}
	}
}

// demoGetenv resolves environment references for backends pointed at the
// fakes, which need no secrets: a reference to an unset variable expands
// to a placeholder instead of failing.
func demoGetenv(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	return "demo-" + name, true
}
