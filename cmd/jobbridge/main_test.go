package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
