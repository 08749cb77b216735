package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

const tryUsage = `usage: jobbridge try [--fake] [--timeout D] [--yes] --config FILE TOOL [JSON_ARGS]

Runs one call of TOOL with JSON_ARGS (a JSON object, default {}) through an
in-process jobbridge serving FILE, and shows how the catalog reads every
answer of the backend:

  → start  the request sent (secrets redacted)
  ← start  the backend's answer: HTTP status, headers, body
  · start  how a rule read it: job_id, status.field and states, outcomes

At the end it prints the task as a client sees it (the final tasks/get
result) and exits as "jobbridge call" would: non-zero when the tool reports
an error or the task fails or is cancelled.

The call goes to the real backend unless --fake points every backend at the
demo's in-process fakes. Only rest backends are traced; for aws_batch and
github_actions backends the call runs without a trace. The task store is a
SQLite file in a temporary directory removed at exit; the catalog's auth
settings are not used (the server listens on a loopback port only for this
call). A confirmation or a question of the job is asked on the terminal, as
"jobbridge call" asks it; --yes confirms without asking. Ctrl-C cancels the
task and keeps polling for up to --timeout.

Example:

  jobbridge try --fake --config configs/demo.yaml build_report '{"report": "sales", "seconds": 2}'

Flags:
`

// runTry implements `jobbridge try`.
func runTry(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newCommand("try", tryUsage, stdout, stderr)
	fs := cmd.fs
	configPath := fs.String("config", "", "catalog `file` (required)")
	fake := fs.Bool("fake", false, "point every backend at the demo's in-process fakes instead of the real ones")
	timeout := fs.Duration("timeout", 30*time.Second, "after a cancel request (Ctrl-C), how long to keep polling for the final state")
	yes := fs.Bool("yes", false, "confirm a tool that asks for confirmation without asking")
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	switch {
	case *configPath == "":
		return cmd.usageErrorf("missing --config FILE, the catalog of the tool")
	case len(positional) < 1:
		return cmd.usageErrorf("missing the TOOL to call")
	case len(positional) > 2:
		return cmd.usageErrorf("unexpected argument %q after TOOL and JSON_ARGS", positional[2])
	}
	toolName := positional[0]
	arguments := json.RawMessage(`{}`)
	if len(positional) == 2 {
		if arguments, err = parseArguments(positional[1]); err != nil {
			return cmd.usageErrorf("%v", err)
		}
	}

	// The trace and the log are written from the server's goroutines while
	// the client writes its own lines.
	stdout, stderr = &syncWriter{w: stdout}, &syncWriter{w: stderr}
	cat, err := loadCatalog(*configPath, stderr)
	if err != nil {
		return err
	}
	for _, w := range cat.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Error())
	}
	tool := findTool(cat, toolName)
	if tool == nil {
		names := make([]string, len(cat.Tools))
		for i, t := range cat.Tools {
			names[i] = t.Name
		}
		return fmt.Errorf("%s has no tool %q (tools: %s)", cat.File, toolName, strings.Join(names, ", "))
	}

	getenv := os.LookupEnv
	var awsCreds aws.CredentialsProvider
	if *fake {
		fakes, stop, err := startFakes()
		if err != nil {
			return err
		}
		defer stop()
		pointAtFakes(cat, fakes)
		stopExample, err := useExampleFake(cat, *configPath, stderr) // try_fake.go
		if err != nil {
			return err
		}
		defer stopExample()
		getenv = demoGetenv
		// The Batch fake accepts any signature; no AWS account is involved.
		awsCreds = credentials.NewStaticCredentialsProvider("demo", "demo", "")
		fmt.Fprintf(stderr, "jobbridge try: backends point at the demo's fakes (REST job API %s, AWS Batch %s, GitHub %s)\n", fakes.jobAPI, fakes.batch, fakes.github)
	}
	if be, ok := cat.Backends[tool.Backend]; ok && be.Type != "rest" {
		fmt.Fprintf(stderr, "jobbridge try: backend %q is of type %s, which has no trace: only the task is shown\n", tool.Backend, be.Type)
	}

	tr := &tracePrinter{w: stdout}
	url, stop, err := startTryServer(ctx, cat, adapterOptions{
		getenv:         getenv,
		logger:         slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		awsCredentials: awsCreds,
		trace: func(backend string, e rest.Event) {
			if backend == tool.Backend {
				tr.print(e)
			}
		},
	})
	if err != nil {
		return err
	}
	defer stop()

	lines := newLineReader(stdin)
	defer lines.stop()
	c := &caller{
		client: &taskclient.Client{
			URL: url, Tasks: true, Elicitation: true,
			ClientName: "jobbridge-try", ClientVersion: buildVersion(),
		},
		lines:  lines,
		stdout: stdout,
		stderr: stderr,
		// One line per change: an in-place status line would be torn by
		// the trace lines printed while it is shown.
		status:     &statusLine{w: stderr},
		cancelWait: *timeout,
	}
	return tryCall(ctx, c, toolName, arguments, *yes)
}

// findTool returns the catalog's tool called name, or nil.
func findTool(cat *catalog.Catalog, name string) *catalog.Tool {
	for i := range cat.Tools {
		if cat.Tools[i].Name == name {
			return cat.Tools[i]
		}
	}
	return nil
}

// tryCall runs the call as `jobbridge call` does (tasks on), confirming
// without asking when yes is set, and ends with the final tasks/get result
// as JSON.
func tryCall(ctx context.Context, c *caller, tool string, arguments json.RawMessage, yes bool) error {
	if yes {
		c.autoAnswer = func(key string) (taskclient.ElicitResult, bool) {
			if key != bridge.ConfirmKey {
				return taskclient.ElicitResult{}, false
			}
			fmt.Fprintln(c.stderr, "jobbridge try: confirmed (--yes)")
			return taskclient.ElicitResult{Action: taskclient.ActionAccept, Content: map[string]any{"confirm": true}}, true
		}
	}
	callErr := c.run(ctx, tool, arguments, false)
	if c.taskID == "" {
		if callErr == nil {
			fmt.Fprintln(c.stderr, "jobbridge try: the tool answered at once, without a task")
		}
		return callErr
	}
	// The task is final (or given up on): read it once more as a client
	// would, also after an interrupt.
	getCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelSendTimeout)
	defer cancel()
	final, err := c.client.GetTask(getCtx, c.taskID)
	if err != nil {
		fmt.Fprintf(c.stderr, "jobbridge try: reading the final task: %v\n", err)
		return callErr
	}
	fmt.Fprintln(c.stdout, "\ntask (tasks/get):")
	if err := printJSON(c.stdout, final.Raw); err != nil {
		return err
	}
	return callErr
}

// startTryServer serves the catalog on a loopback port with a throwaway
// SQLite store and returns the MCP endpoint's URL; stop shuts the server
// down and removes the store.
func startTryServer(ctx context.Context, cat *catalog.Catalog, o adapterOptions) (url string, stop func(), err error) {
	var cleanups []func()
	// cleanup is not the named result stop, which each error return sets
	// to nil before the deferred call runs.
	cleanup := func() {
		for _, f := range slices.Backward(cleanups) {
			f()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	dir, err := os.MkdirTemp("", "jobbridge-try-")
	if err != nil {
		return "", nil, fmt.Errorf("creating the task store directory: %w", err)
	}
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	// The store lives as long as this command, not as one request.
	store, err := openStore(context.WithoutCancel(ctx), "sqlite:"+filepath.Join(dir, "tasks.db"))
	if err != nil {
		return "", nil, err
	}
	cleanups = append(cleanups, func() { store.Close() })
	adapterSet, err := buildAdapters(cat, o)
	if err != nil {
		return "", nil, err
	}
	b, err := bridge.New(bridge.Options{
		Catalog:  cat,
		Store:    store,
		Adapters: adapterSet,
		Build:    buildVersion(),
		Logger:   o.logger,
		// Alone on its store: a short sweep forwards a cancel promptly.
		SweepInterval: 2 * time.Second,
	})
	if err != nil {
		return "", nil, err
	}
	cleanups = append(cleanups, func() { b.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listening on a loopback port: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: defaultReadHeaderTimeout}
	go srv.Serve(ln)
	cleanups = append(cleanups, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	return "http://" + ln.Addr().String() + "/mcp", cleanup, nil
}

// syncWriter serializes the writes of several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tracePrinter writes rest trace events as they happen, one block per
// event: a marker for its kind, the call it belongs to, then its text, each
// further line indented under the first. Each block is one write.
type tracePrinter struct {
	w io.Writer
}

// traceMarks are the markers of the event kinds.
var traceMarks = map[string]string{"request": "→", "answer": "←", "rule": "·"}

func (p *tracePrinter) print(e rest.Event) {
	mark, ok := traceMarks[e.Kind]
	if !ok {
		mark = "?"
	}
	head := fmt.Sprintf("%s %-6s ", mark, sanitize(e.Call))
	indent := strings.Repeat(" ", len([]rune(head)))
	var b strings.Builder
	first := true
	for line := range strings.SplitSeq(sanitize(e.Text), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if first {
			b.WriteString(head + line + "\n")
			first = false
			continue
		}
		b.WriteString(indent + line + "\n")
	}
	if first {
		b.WriteString(strings.TrimRight(head, " ") + "\n")
	}
	io.WriteString(p.w, b.String())
}
