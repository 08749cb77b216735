package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/configs"
	"github.com/jobbridge/jobbridge/taskclient"
)

// TestDemoCheck validates the catalog demo would serve without serving it:
// the built-in one from any directory, with validate's summary and no
// warnings about the environment (demo fills it in), or a --config file,
// whose problems exit 1 with their file:line:col.
func TestDemoCheck(t *testing.T) {
	t.Chdir(t.TempDir()) // no checkout around: the built-in catalog only
	stdout, stderr, err := runCommand(t, t.Context(), "", "demo", "--check")
	if err != nil {
		t.Fatalf("demo --check: %v\n%s", err, stderr)
	}
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(configs.DemoName) + `: ok \(3 backends, \d+ tools, revision [0-9a-f]+\)\n$`)
	if !want.MatchString(stdout) {
		t.Errorf("stdout %q, want the summary line of the built-in catalog", stdout)
	}
	if stderr != "" {
		t.Errorf("stderr %q, want nothing (demo needs no environment)", stderr)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nbogus_key: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = runCommand(t, t.Context(), "", "demo", "--check", "--config", bad)
	if !errors.Is(err, exitError(1)) {
		t.Errorf("demo --check of a bad catalog: %v, want exit status 1", err)
	}
	if !strings.Contains(stderr, bad+":2:1") || stdout != "" {
		t.Errorf("stdout %q, stderr %q; want the problem at %s:2:1 and no summary", stdout, stderr, bad)
	}
}

// TestDemoSIGHUP sends SIGHUP to a real jobbridge demo. With the built-in
// catalog it logs that there is nothing to reload and keeps serving; with
// --config it reloads the file as serve does: a catalog with an error is
// refused, a valid one adds its tool, whose backend points at the demo's
// fakes like the first catalog's (the file's base_url answers nothing).
func TestDemoSIGHUP(t *testing.T) {
	bin := buildBinary(t)
	t.Run("built-in catalog", func(t *testing.T) {
		d := startDemoBinary(t, bin)
		c := &taskclient.Client{URL: d.url, Tasks: true}
		before := strings.Join(toolNames(t, c), ",")
		d.cmd.Process.Signal(syscall.SIGHUP)
		waitLog(t, d.log, "nothing to reload: the catalog is built into the binary", d.exited)
		if got := strings.Join(toolNames(t, c), ","); got != before {
			t.Errorf("tools after SIGHUP: %s, want %s", got, before)
		}
	})
	t.Run("catalog file", func(t *testing.T) {
		// The conformance catalog, its backend at a port nothing answers:
		// only the demo's fakes make its tools work.
		s := &reloadServer{file: writeReplicaCatalog(t, "http://127.0.0.1:9")}
		d := startDemoBinary(t, bin, "--config", s.file)
		s.url, s.log = d.url, d.log
		c := &taskclient.Client{URL: s.url, Tasks: true}
		before := strings.Join(toolNames(t, c), ",")
		s.edit(t, "version: 1", "version: 1\nbogus_key: true")
		d.cmd.Process.Signal(syscall.SIGHUP)
		waitLog(t, s.log, "catalog reload failed", d.exited)
		if got := strings.Join(toolNames(t, c), ","); got != before {
			t.Errorf("tools after a refused reload: %s, want %s", got, before)
		}
		s.edit(t, "\nbogus_key: true", "")
		s.edit(t, addedTool, addedToolText)
		d.cmd.Process.Signal(syscall.SIGHUP)
		waitLog(t, s.log, "catalog reloaded", d.exited)
		res, err := c.CallTool(t.Context(), "greet_again", map[string]any{}, nil)
		if err != nil || res.Task == nil {
			t.Fatalf("greet_again after the reload: %v %+v\n%s", err, res, s.log)
		}
		task, err := taskclient.Wait(t.Context(), c, res.Task.TaskID, nil)
		if err != nil || task.Status != "completed" || !strings.Contains(task.Result.Text(), "Hello again.") {
			t.Errorf("the task of the added tool: %v %+v, want completed by the fake\n%s", err, task, s.log)
		}
	})
}

// demoProcess is a jobbridge demo binary serving on a loopback port.
type demoProcess struct {
	cmd    *exec.Cmd
	url    string
	log    *syncBuffer // stderr
	exited chan error
}

// startDemoBinary starts `bin demo` with args from an empty directory and
// waits until it serves; it is killed at the end of the test.
func startDemoBinary(t *testing.T, bin string, args ...string) *demoProcess {
	t.Helper()
	d := &demoProcess{log: &syncBuffer{}, exited: make(chan error, 1)}
	d.cmd = exec.Command(bin, append([]string{"demo", "--listen", "127.0.0.1:0"}, args...)...)
	d.cmd.Dir = t.TempDir()
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		d.exited <- d.cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-done // exited may have been read by the test already
	})
	urlRE := regexp.MustCompile(`url=(http://\S+/mcp)`)
	deadline := time.Now().Add(30 * time.Second)
	for d.url == "" {
		if m := urlRE.FindStringSubmatch(d.log.String()); m != nil {
			d.url = m[1]
			break
		}
		select {
		case err := <-d.exited:
			t.Fatalf("jobbridge demo exited: %v\n%s", err, d.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobbridge demo never listened:\n%s", d.log)
		}
	}
	return d
}
