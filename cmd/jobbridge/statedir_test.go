package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

func TestStdioStorePath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		goos string
		want string // "" for an error
	}{
		{"XDG_STATE_HOME", map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "linux", "/s/jobbridge/tasks.db"},
		{"XDG_STATE_HOME relative is ignored", map[string]string{"XDG_STATE_HOME": "s", "HOME": "/h"}, "linux", "/h/.local/state/jobbridge/tasks.db"},
		{"linux", map[string]string{"HOME": "/h"}, "linux", "/h/.local/state/jobbridge/tasks.db"},
		{"macOS", map[string]string{"HOME": "/Users/a"}, "darwin", "/Users/a/Library/Application Support/jobbridge/tasks.db"},
		{"windows", map[string]string{"LocalAppData": `/C/Users/a/AppData/Local`}, "windows", "/C/Users/a/AppData/Local/jobbridge/tasks.db"},
		{"no HOME", map[string]string{}, "linux", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stdioStorePath(func(k string) string { return tt.env[k] }, tt.goos)
			if tt.want == "" {
				if err == nil {
					t.Errorf("got %q, want an error", got)
				}
				return
			}
			if err != nil || filepath.ToSlash(got) != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestStdioKeepsTasksInTheStateDirectory runs `serve --stdio` twice as a
// desktop client would (from a directory of its own, no --store, no
// JOBBRIDGE_STATE_KEY): the store is in the user's state directory, said on
// stderr, and the second run lists the task the first one created.
func TestStdioKeepsTasksInTheStateDirectory(t *testing.T) {
	bin := buildBinary(t)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	catalogPath := writeReplicaCatalog(t, fakeURL)
	home, cwd := t.TempDir(), t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "XDG_STATE_HOME", "JOBBRIDGE_STATE_KEY", "JOBBRIDGE_STORE":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home)
	session := func(requests ...string) (answers map[string]json.RawMessage, stderr string) {
		t.Helper()
		in := strings.Join(append([]string{
			`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"desktop","version":"1"},"capabilities":{}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		}, requests...), "\n") + "\n"
		cmd := exec.Command(bin, "serve", "--stdio", "--config", catalogPath)
		cmd.Dir, cmd.Env, cmd.Stdin = cwd, env, strings.NewReader(in)
		var errOut syncBuffer
		cmd.Stderr = &errOut
		done := make(chan struct{})
		var out []byte
		go func() { out, err = cmd.Output(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("serve --stdio did not end; stderr:\n%s", errOut.String())
		}
		if err != nil {
			t.Fatalf("serve --stdio: %v; stderr:\n%s", err, errOut.String())
		}
		answers = map[string]json.RawMessage{}
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("stdout line %q: %v", line, err)
			}
			if m.Error != nil {
				t.Fatalf("request %s: %s", m.ID, m.Error)
			}
			answers[string(m.ID)] = m.Result
		}
		return answers, errOut.String()
	}
	answers, stderr := session(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0},"task":{}}}`)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(answers[`"call"`], &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("tools/call created no task: %s (%v)", answers[`"call"`], err)
	}
	want := filepath.Join(home, ".local", "state", "jobbridge", "tasks.db")
	if !strings.Contains(stderr, "task store "+want+" (the user's state directory") {
		t.Errorf("stderr does not say where the store is (%s):\n%s", want, stderr)
	}
	if _, err := os.Stat(want); err != nil {
		t.Errorf("no store in the state directory: %v", err)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
		t.Errorf("serve --stdio wrote %d files into the client's working directory", len(entries))
	}
	answers, _ = session(`{"jsonrpc":"2.0","id":"list","method":"tasks/list","params":{}}`)
	if !strings.Contains(string(answers[`"list"`]), created.Task.TaskID) {
		t.Errorf("tasks/list after a restart does not name the task %s: %s", created.Task.TaskID, answers[`"list"`])
	}
}
