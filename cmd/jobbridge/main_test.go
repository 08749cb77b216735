package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/taskclient"
)

func TestValidateShippedCatalogs(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogs in configs/: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if err := runValidate(files, &stdout, &stderr); err != nil {
		t.Fatalf("validate: %v\n%s", err, stderr.String())
	}
	for _, f := range files {
		if !strings.Contains(stdout.String(), f+": ok") {
			t.Errorf("no ok line for %s in:\n%s", f, stdout.String())
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	catalog := `version: 1
backends:
  jobs:
    type: rest
    base_url: https://jobs.example.com/
tools:
  - name: one
    description: first
    backend: nowhere
    input_schema: {type: object}
    colour: blue
  - name: two
    description: second
    backend: jobs
    poll_interval: 5
    input_schema: {type: object}
    job:
      start: {path: /jobs}
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: status, states: {done: finished}}
`
	if err := os.WriteFile(path, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := runValidate([]string{path}, &stdout, &stderr)
	var exit exitError
	if !errors.As(err, &exit) || exit != 1 {
		t.Fatalf("validate returned %v, want exit status 1", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []string{
		path + `:9:14: tools[0].backend: unknown backend "nowhere" (known: jobs)`,
		path + `:11:5: tools[0].colour: unknown key "colour"`,
		path + ":15:20: tools[1].poll_interval: duration needs a unit, e.g. 2s",
		path + ":20:55: tools[1].job.status.states: no value maps to a final state",
		path + `:20:70: tools[1].job.status.states.done: "finished" is not a state`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), stderr.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestServeRefusesNonLoopbackAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", "[::]:8080", "192.0.2.10:8080", ":8080"} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"serve", "--config", "../../configs/demo.yaml", "--listen", addr, "--store", "sqlite:" + filepath.Join(t.TempDir(), "t.db")}, nil, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "refusing a non-loopback address") {
			t.Errorf("serve --listen %s: %v, want a refusal", addr, err)
		}
	}
}

func TestDemoServesTheDemoCatalog(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &syncBuffer{}
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--config", "../../configs/demo.yaml", "--listen", "127.0.0.1:0", "--log-level", "error"}, nil, out, &stderr)
	}()
	var url string
	deadline := time.Now().Add(20 * time.Second)
	for url == "" {
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no URL; stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
		for _, f := range strings.Fields(out.String()) {
			if strings.HasPrefix(f, "http://127.0.0.1:") && strings.HasSuffix(f, "/mcp") {
				url = f
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := &taskclient.Client{URL: url, Tasks: true, Elicitation: true}
	res, err := c.CallTool(ctx, "build_report", map[string]any{"report": "sales", "seconds": 0.2}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("build_report: %v %+v", err, res)
	}
	task, err := taskclient.Wait(ctx, c, res.Task.TaskID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != "completed" || !strings.Contains(task.Result.Text(), "The sales report is ready.") {
		t.Errorf("got %s %q", task.Status, task.Result.Text())
	}
	// The GitHub fake sends its webhooks to the demo: a run's events are
	// applied to its task.
	res, err = c.CallTool(ctx, "run_ci", map[string]any{}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("run_ci: %v %+v", err, res)
	}
	if task, err = taskclient.Wait(ctx, c, res.Task.TaskID, nil); err != nil || task.Status != "completed" {
		t.Fatalf("run_ci: %v %+v", err, task)
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`jobbridge_backend_events_total\{backend="github",outcome="applied"\} (\d+)`).FindSubmatch(scrape); m == nil || string(m[1]) == "0" {
		t.Errorf("no GitHub webhook was applied in the demo:\n%s", regexp.MustCompile(`(?m)^jobbridge_backend_events_total.*$`).FindAll(scrape, -1))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("demo exited with %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestEveryCommandAnswersHelp(t *testing.T) {
	commands := []struct {
		name  string
		flags bool // has flags to list
	}{
		{"serve", true}, {"demo", true}, {"validate", false}, {"call", true}, {"task", true},
		{"tools", true}, {"tasks", true}, {"try", true}, {"version", false}, {"completion", false},
	}
	for _, c := range commands {
		for _, h := range []string{"-h", "--help"} {
			t.Run(c.name+" "+h, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				if err := run(t.Context(), []string{c.name, h}, strings.NewReader(""), &stdout, &stderr); err != nil {
					t.Fatalf("exit: %v", err)
				}
				out := stdout.String()
				if !strings.HasPrefix(out, "usage: jobbridge "+c.name) {
					t.Errorf("no usage line:\n%s", out)
				}
				if !strings.Contains(out, "\nExample:\n\n  jobbridge "+c.name) {
					t.Errorf("no example:\n%s", out)
				}
				if c.flags && !strings.Contains(out, "Flags:\n  -") {
					t.Errorf("no flags:\n%s", out)
				}
				// A description: some prose between the usage line and the example.
				if desc, _, _ := strings.Cut(out, "Example:"); len(strings.Split(strings.TrimSpace(desc), "\n")) < 3 {
					t.Errorf("no description:\n%s", out)
				}
				if stderr.Len() > 0 {
					t.Errorf("stderr: %s", stderr.String())
				}
			})
		}
	}
}

func TestValidateTakesDashedFileAfterDoubleDash(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"validate", "--", "--help"}, nil, &stdout, &stderr)
	if !errors.Is(err, exitError(1)) || !strings.Contains(stderr.String(), "--help") {
		t.Errorf("validate -- --help: %v, stderr %q", err, stderr.String())
	}
}

func TestTaskIDsMayStartWithADash(t *testing.T) {
	cmd := newCommand("task", "", io.Discard, io.Discard)
	cmd.idArgs = true
	url := cmd.fs.String("url", "", "")
	verbose := cmd.fs.Bool("v", false, "")
	got, err := cmd.parse([]string{"get", "-Xy_9", "--url", "http://h/mcp", "-v"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"get", "-Xy_9"}, got); diff != "" || *url != "http://h/mcp" || !*verbose {
		t.Errorf("positional (-want +got):\n%s url %q verbose %v", diff, *url, *verbose)
	}
}

// startDemo runs the demo with args until the test ends and returns what
// it printed once it serves, and a function that stops it and waits.
func startDemo(t *testing.T, args ...string) (stdout string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	if !slices.Contains(args, "--config") {
		args = append(args, "--config", "../../configs/demo.yaml")
	}
	go func() {
		done <- run(ctx, append([]string{"demo", "--listen", "127.0.0.1:0", "--log-level", "error"}, args...), nil, out, errOut)
	}()
	var (
		once sync.Once
		err  error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "Press Ctrl-C to stop") {
		if time.Now().After(deadline) {
			t.Fatalf("demo never served; stdout:\n%s\nstderr:\n%s", out, errOut)
		}
		select {
		case err := <-done:
			t.Fatalf("demo exited: %v; stdout:\n%s\nstderr:\n%s", err, out, errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return out.String(), stop
}

// demoTry is the try-it block the demo prints: its exported variables and
// its commands, each split into words as a shell would (the program's name
// dropped).
type demoTry struct {
	env      map[string]string
	commands [][]string
}

func parseDemoTry(t *testing.T, stdout string) demoTry {
	t.Helper()
	_, block, ok := strings.Cut(stdout, "Try it from another terminal:\n\n")
	if !ok {
		t.Fatalf("no try-it block in:\n%s", stdout)
	}
	block, _, _ = strings.Cut(block, "\n\n")
	try := demoTry{env: map[string]string{}}
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			try.env[k] = v
			continue
		}
		// Under go test the binary is a test binary built by go, which the
		// demo takes for go run.
		words := shellWords(t, strings.Replace(line, "go run ./cmd/jobbridge", "jobbridge", 1))
		if len(words) < 2 || filepath.Base(words[0]) != "jobbridge" {
			t.Fatalf("try-it line %q does not run jobbridge", line)
		}
		try.commands = append(try.commands, words[1:])
	}
	return try
}

// shellWords splits a line into words as a POSIX shell does for the
// printed commands: blanks separate, single quotes quote.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote bool
	)
	for _, r := range line {
		switch {
		case quote && r == '\'':
			quote = false
		case quote:
			cur.WriteRune(r)
		case r == '\'':
			quote, in = true, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// runDemoTry runs the printed commands as printed, with the printed
// variables set, and returns the output of each; extra flags are added to
// the calls.
func runDemoTry(t *testing.T, try demoTry, extra ...string) []string {
	t.Helper()
	for k, v := range try.env {
		t.Setenv(k, v)
	}
	var outs []string
	for _, c := range try.commands {
		args := c
		if c[0] == "call" {
			args = append(append(slices.Clone(c[:1]), extra...), c[1:]...)
		}
		out, stderr, err := runCommand(t, t.Context(), "", args...)
		if err != nil {
			t.Errorf("the printed command %q: %v\n%s%s", c, err, out, stderr)
		}
		outs = append(outs, out)
	}
	return outs
}

func TestDemoSuggestsAToolOfItsCatalog(t *testing.T) {
	for _, config := range []string{"../../configs/aws-batch.yaml", "../../configs/github-actions.yaml"} {
		t.Run(filepath.Base(config), func(t *testing.T) {
			stdout, _ := startDemo(t, "--config", config)
			cat, err := loadCatalog(config, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			try := parseDemoTry(t, stdout)
			if len(try.commands) != 2 || try.commands[0][0] != "call" || findTool(cat, try.commands[0][1]) == nil {
				t.Fatalf("the demo does not suggest a call of a tool of %s:\n%s", config, stdout)
			}
			// The suggested arguments are valid: the call starts a task.
			outs := runDemoTry(t, demoTry{env: try.env, commands: try.commands[:1]}, "--no-wait")
			if !strings.Contains(outs[0], `"taskId"`) {
				t.Errorf("the suggested call printed %q, want a task", outs[0])
			}
		})
	}
}

// TestDemoAuthPrintsCommandsThatWork runs the commands demo --auth prints,
// as printed: the token travels in $JOBBRIDGE_TOKEN.
func TestDemoAuthPrintsCommandsThatWork(t *testing.T) {
	stdout, _ := startDemo(t, "--auth")
	try := parseDemoTry(t, stdout)
	if try.env["JOBBRIDGE_TOKEN"] == "" || try.env["JOBBRIDGE_URL"] == "" {
		t.Fatalf("no JOBBRIDGE_URL and JOBBRIDGE_TOKEN in the try-it block:\n%s", stdout)
	}
	outs := runDemoTry(t, try, "--no-wait")
	if !strings.Contains(outs[0], `"taskId"`) || !strings.Contains(outs[1], "build_report") {
		t.Errorf("the printed commands printed %q", outs)
	}
	anon := &taskclient.Client{URL: try.env["JOBBRIDGE_URL"], Tasks: true}
	if _, err := anon.ListTools(t.Context()); err == nil {
		t.Error("the demo answered without a token")
	}
}

func TestDemoRemovesItsDirectory(t *testing.T) {
	stdout, stop := startDemo(t)
	_, rest, ok := strings.Cut(stdout, "the task store in ")
	dir := strings.Fields(rest)
	if !ok || len(dir) == 0 {
		t.Fatalf("no directory in:\n%s", stdout)
	}
	if _, err := os.Stat(dir[0]); err != nil {
		t.Fatalf("the store directory does not exist while serving: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("demo: %v", err)
	}
	if _, err := os.Stat(dir[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there after the demo ended (%v)", dir[0], err)
	}
}
