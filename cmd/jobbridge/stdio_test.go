package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// stdioServe starts `jobbridge serve --stdio` on the conformance catalog
// against the REST job API fake.
func stdioServe(t *testing.T, bin string, stdin io.Reader) (cmd *exec.Cmd, stdout, stderr *syncBuffer) {
	t.Helper()
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	cmd = exec.Command(bin, "serve", "--stdio", "--config", writeReplicaCatalog(t, fakeURL),
		"--store", "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"), "--log-level", "info")
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// waitExit waits for the process and checks that it exited 0 with nothing
// logged at ERROR level.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer, within time.Duration) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Errorf("exit status %d, want 0; stderr:\n%s", exit.ExitCode(), stderr)
		} else if err != nil {
			t.Error(err)
		}
	case <-time.After(within):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("still running after %s; stderr:\n%s", within, stderr)
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", stderr)
	}
}

// A client that writes its requests to the binary's stdin and closes it
// (printf ... | jobbridge serve --stdio) gets every answer, and the process
// exits 0 with no error logged.
func TestServeStdioAnswersPipedRequests(t *testing.T) {
	bin := buildBinary(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"printf","version":"1"},"capabilities":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"pipe"}}}`,
	}, "\n") + "\n"
	cmd, stdout, stderr := stdioServe(t, bin, strings.NewReader(in))
	waitExit(t, cmd, stderr, 30*time.Second)
	answers := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(stdout.String()), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON-RPC: %v", line, err)
		}
		if m.Error != nil {
			t.Errorf("request %s: error %s", m.ID, m.Error)
		}
		answers[string(m.ID)] = string(m.Result)
	}
	for id, want := range map[string]string{"1": `"serverInfo"`, "2": `"greet"`, "3": "Hello, pipe!"} {
		if !strings.Contains(answers[id], want) {
			t.Errorf("answer to request %s: %q, want it to contain %q; stdout:\n%s", id, answers[id], want, stdout)
		}
	}
}

// Clients stop a stdio server they spawned (often only to probe it) with a
// signal: that is a normal end.
func TestServeStdioStopsCleanlyOnSignal(t *testing.T) {
	bin := buildBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			cmd, _, stderr := stdioServe(t, bin, pr)
			pr.Close()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(stderr.String(), "serving MCP on stdio") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("never started; stderr:\n%s", stderr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd, stderr, 10*time.Second)
		})
	}
}
