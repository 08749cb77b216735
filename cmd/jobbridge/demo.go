package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/auth/authtest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/configs"
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
	cmd := newCommand("demo", demoUsage, stdout, stderr)
	fs := cmd.fs
	configPath := fs.String("config", "", "catalog `file` (default: the demo catalog built into the binary)")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen `address` (loopback only)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log `format`: text (key=value) or json (one object per line)")
	withAuth := fs.Bool("auth", false, "require OAuth bearer tokens from a built-in test issuer")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP (logs and the fakes' addresses go to stderr)")
	check := fs.Bool("check", false, "only load and validate the catalog demo would serve, print its summary as validate does and exit: 0 valid, 1 not")
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return cmd.usageErrorf("unexpected argument %q (the catalog is given with --config FILE)", positional[0])
	}
	if *stdio && *withAuth {
		return cmd.usageErrorf("--auth applies to HTTP only; stdio has no bearer tokens")
	}
	if *check {
		// Unset environment references are no warning: demo expands them
		// to placeholders (demoGetenv).
		name, cat, err := parseDemoCatalog(*configPath)
		if !reportValidation(name, cat, err, demoGetenv, stdout, stderr) {
			return exitError(1)
		}
		return nil
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logJSON, err := parseLogFormat(*logFormat)
	if err != nil {
		return err
	}
	cat, err := loadDemoCatalog(*configPath, stderr)
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
	// Runs once serve has returned, having closed the store.
	defer os.RemoveAll(dir)
	tool, toolArgs := exampleCall(cat)
	storePath := filepath.Join(dir, "tasks.db")
	fmt.Fprintf(stderr, "jobbridge demo: fakes: REST job API %s, AWS Batch %s, GitHub %s; task store %s\n", fakes.jobAPI, fakes.batch, fakes.github, storePath)

	return serve(ctx, serveConfig{
		catalog:  cat,
		listen:   *listen,
		stdio:    *stdio,
		store:    "sqlite:" + storePath,
		logLevel: lvl,
		logJSON:  logJSON,
		sweep:    2 * time.Second,
		// The Batch fake accepts any signature; no AWS account is involved.
		awsCredentials:       credentials.NewStaticCredentialsProvider("demo", "demo", ""),
		resourceFromListener: *withAuth,
		// SIGHUP reloads a --config file as serve does, each new catalog
		// pointed at the fakes and given the test issuer like the first;
		// the built-in catalog has nothing to reload, which is logged.
		configPath: *configPath,
		builtIn:    *configPath == "",
		prepareReload: func(next *catalog.Catalog) {
			pointAtFakes(next, fakes)
			if cat.Auth != nil {
				next.Auth = cat.Auth
			}
		},
		ready: func(url string) {
			wireDemoEvents(ctx, cat, fakes, strings.TrimSuffix(url, "/mcp"), stderr)
			fmt.Fprintf(stdout, `
jobbridge demo is serving %d tools from %s at

    %s
`, len(cat.Tools), cat.File, url)
			self := selfCommand()
			env := []string{"export JOBBRIDGE_URL=" + url}
			if issuer != nil {
				// A token for the principal "alice", for this server only.
				token, err := issuer.Sign(map[string]any{"sub": "alice", "client_id": "alice", "aud": url}, authtest.ExpiresIn(demoTokenTTL))
				if err != nil {
					fmt.Fprintf(stderr, "jobbridge demo: minting a token: %v\n", err)
				}
				fmt.Fprintf(stdout, `
Authentication is on: every request needs a bearer token for resource %s.
The commands below carry one for the principal alice, valid for an hour, in
$JOBBRIDGE_TOKEN; the test issuer at %s gives more (any client_id becomes
the principal):

    curl -s -d grant_type=client_credentials -d client_id=bob -d resource=%s %s/token
`, url, issuer.URL(), url, issuer.URL())
				env = append(env, "export JOBBRIDGE_TOKEN="+token)
			}
			if tool != "" {
				fmt.Fprintf(stdout, `
Try it from another terminal:

    %s
    %s call %s %s
    %s tools
`, strings.Join(env, "\n    "), self, tool, shellQuote(toolArgs), self)
			}
			fmt.Fprintf(stdout, `
Any MCP client that speaks protocol 2026-07-28 can connect to the URL above
(Streamable HTTP, stateless). Press Ctrl-C to stop; the task store in %s
is removed then.

`, dir)
		},
	}, demoGetenv, stdout, stderr)
}

const demoUsage = `usage: jobbridge demo [--config FILE] [--listen HOST:PORT | --stdio] [--auth] [--log-level L] [--log-format text|json]
       jobbridge demo --check [--config FILE]

Serves a catalog (without --config, the demo catalog built into the binary,
so that it works from any directory) as "jobbridge serve" does, offline:
every backend points at an in-process fake (rest backends at a REST job
API, aws_batch at an AWS Batch fake reached through the real AWS SDK,
github_actions at a GitHub REST fake), environment references that are unset
expand to placeholders, and the task store is a SQLite file in a temporary
directory removed on exit. It prints the URL and commands to try one of the
catalog's tools, with the URL in $JOBBRIDGE_URL; with --auth every request
needs an OAuth bearer token from a built-in test issuer, and the printed
commands carry one in $JOBBRIDGE_TOKEN.

SIGHUP reloads a --config file as it does for "jobbridge serve" (a catalog
with errors is refused and the old one stays; the new one's backends point
at the fakes too); the built-in catalog cannot change, so SIGHUP only logs
that there is nothing to reload.

--check serves nothing: it loads and validates the catalog demo would serve
(the built-in one without --config, which checks the binary itself from any
directory), prints the summary "jobbridge validate" prints, and exits 0
when it is valid, 1 when not. Environment references are not reported:
demo expands unset ones to placeholders.

Example:

  jobbridge demo --config configs/aws-batch.yaml --auth
  jobbridge demo --check

Flags:
`

// loadDemoCatalog loads the catalog file at path, or the demo catalog built
// into the binary when path is empty, so that demo works from any
// directory, and prints every problem in it.
func loadDemoCatalog(path string, stderr io.Writer) (*catalog.Catalog, error) {
	_, cat, err := parseDemoCatalog(path)
	return cat, reportCatalogErrors(err, stderr)
}

// parseDemoCatalog loads the catalog demo serves: the file at path, or the
// built-in demo catalog when path is empty. name is what messages call it.
func parseDemoCatalog(path string) (name string, cat *catalog.Catalog, err error) {
	if path != "" {
		cat, err = catalog.Load(path, catalogTypes()...)
		return path, cat, err
	}
	cat, err = catalog.Parse(configs.DemoName, configs.Demo, catalogTypes()...)
	return configs.DemoName, cat, err
}

// demoTokenTTL is how long the token printed by demo --auth is valid.
const demoTokenTTL = time.Hour

// exampleCall picks a tool of the catalog for the try-it line and arguments
// for it: build_report of the demo catalog, else the first tool with its
// required arguments (default, first choice or a placeholder of the type).
func exampleCall(cat *catalog.Catalog) (tool, args string) {
	if len(cat.Tools) == 0 {
		return "", ""
	}
	for _, t := range cat.Tools {
		if t.Name == "build_report" {
			return t.Name, `{"report": "sales"}`
		}
	}
	t := cat.Tools[0]
	var schema struct {
		Properties map[string]struct {
			Type     any               `json:"type"`
			Format   string            `json:"format"`
			Minimum  json.RawMessage   `json:"minimum"`
			Default  json.RawMessage   `json:"default"`
			Enum     []json.RawMessage `json:"enum"`
			Examples []json.RawMessage `json:"examples"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(t.InputSchema, &schema)
	var parts []string
	for _, name := range schema.Required {
		p := schema.Properties[name]
		var v json.RawMessage
		switch {
		case len(p.Default) > 0:
			v = p.Default
		case len(p.Enum) > 0:
			v = p.Enum[0]
		case len(p.Examples) > 0:
			v = p.Examples[0]
		default:
			typ, _ := p.Type.(string)
			switch {
			case (typ == "integer" || typ == "number") && len(p.Minimum) > 0:
				v = p.Minimum
			case typ == "integer" || typ == "number":
				v = json.RawMessage(`1`)
			case p.Format == "date":
				v, _ = json.Marshal(time.Now().Format(time.DateOnly))
			case p.Format == "date-time":
				v, _ = json.Marshal(time.Now().UTC().Format(time.RFC3339))
			case p.Format == "uri" || p.Format == "url":
				v = json.RawMessage(`"https://example.com/"`)
			case p.Format == "email":
				v = json.RawMessage(`"someone@example.com"`)
			case typ == "boolean":
				v = json.RawMessage(`true`)
			case typ == "array":
				v = json.RawMessage(`[]`)
			case typ == "object":
				v = json.RawMessage(`{}`)
			default:
				v = json.RawMessage(`"example"`)
			}
		}
		key, _ := json.Marshal(name)
		var compact bytes.Buffer
		if json.Compact(&compact, v) != nil {
			compact.Reset()
			compact.WriteString("null")
		}
		parts = append(parts, string(key)+": "+compact.String())
	}
	return t.Name, "{" + strings.Join(parts, ", ") + "}"
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	f.githubFake = github
	return f, stop, nil
}

// wireDemoEvents has the GitHub fake send its webhooks, signed, to the
// demo's event endpoint of the (first) GitHub backend with an events:
// block, as a repository webhook would, once a second. The fake has one
// webhook, as a repository may.
func wireDemoEvents(ctx context.Context, cat *catalog.Catalog, f demoFakes, base string, stderr io.Writer) {
	for name, be := range cat.Backends {
		c, ok := be.Config.(*githubactions.BackendConfig)
		if !ok || c.Events == nil || f.githubFake == nil {
			continue
		}
		m := envRef.FindStringSubmatch(c.Events.Secret)
		if m == nil {
			fmt.Fprintf(stderr, "jobbridge demo: backend %s: the fake sends webhooks only for an events.secret of the form ${NAME}\n", name)
			continue
		}
		secret, _ := demoGetenv(m[1])
		f.githubFake.Webhook(base+eventsPrefix+name, secret)
		go f.githubFake.DeliverEventsEvery(ctx, time.Second)
		return
	}
}

// envRef matches a whole ${NAME} reference.
var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

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
	if strings.HasPrefix(name, "OTEL_") {
		// Settings, not secrets: unset means off (no tracing).
		return "", false
	}
	return "demo-" + name, true
}
