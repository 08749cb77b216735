package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/taskclient"
)

// testServer is a real in-process jobbridge serving the conformance
// catalog against the REST job API fake, on a SQLite store that outlives
// restarts of the server. Clients reach it through a front (url) that
// counts their requests and drops every connection when the server stops,
// as the exit of a server process does.
type testServer struct {
	t       *testing.T
	catalog string
	store   string
	addr    string // the server's own host:port, kept across restarts
	url     string // the front's endpoint, kept across restarts
	fake    *jobapi.Server
	front   *front
	// tune, if set, changes the loaded catalog before each start.
	tune func(*catalog.Catalog)
	stop func()
}

func newTestServer(t *testing.T) *testServer {
	return newTunedTestServer(t, nil)
}

// newTunedTestServer is newTestServer with tune applied to the catalog.
func newTunedTestServer(t *testing.T, tune func(*catalog.Catalog)) *testServer {
	t.Helper()
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	s := &testServer{
		t:       t,
		catalog: writeReplicaCatalog(t, fakeURL),
		store:   "sqlite:" + filepath.Join(t.TempDir(), "tasks.db"),
		addr:    "127.0.0.1:0",
		fake:    fake,
		front:   &front{addr: "127.0.0.1:0", counts: map[string]int{}},
		tune:    tune,
	}
	s.start()
	t.Cleanup(func() {
		if s.stop != nil {
			s.stop()
		}
	})
	return s
}

// start serves on s.addr (the same port again after a restart), behind
// the front on its same port.
func (s *testServer) start() {
	t := s.t
	t.Helper()
	cat, err := loadCatalog(s.catalog, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.tune != nil {
		s.tune(cat)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	urls := make(chan string, 1)
	done := make(chan error, 1)
	stderr := &syncBuffer{}
	go func() {
		done <- serve(ctx, serveConfig{
			catalog:  cat,
			listen:   s.addr,
			store:    s.store,
			logLevel: slog.LevelError + 4, // quiet
			sweep:    200 * time.Millisecond,
			ready:    func(u string) { urls <- u },
		}, func(string) (string, bool) { return "", false }, io.Discard, stderr)
	}()
	var serverURL string
	select {
	case serverURL = <-urls:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	s.addr = strings.TrimSuffix(strings.TrimPrefix(serverURL, "http://"), "/mcp")
	s.url = s.front.open(t, serverURL)
	s.stop = func() {
		s.front.close()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v\n%s", err, stderr)
		}
		s.stop = nil
	}
}

// front is a reverse proxy in front of the test server. It counts the
// requests by their Mcp-Method header, may answer some itself (refuse),
// and closes every connection, its listener included, when the server
// stops.
type front struct {
	addr string // host:port, kept across restarts

	mu     sync.Mutex
	srv    *http.Server
	counts map[string]int
	// refuse, if set, answers a request itself when it returns true.
	refuse func(w http.ResponseWriter, r *http.Request) bool
}

// open serves the front on its address, forwarding to serverURL, and
// returns the front's endpoint.
func (f *front) open(t *testing.T, serverURL string) string {
	t.Helper()
	target, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	transport := &http.Transport{}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: transport,
		// Requests cut by close are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.counts[r.Header.Get("Mcp-Method")]++
		refuse := f.refuse
		f.mu.Unlock()
		if refuse != nil && refuse(w, r) {
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	srv.RegisterOnShutdown(transport.CloseIdleConnections)
	go srv.Serve(ln)
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	return "http://" + f.addr + "/mcp"
}

// close drops the front's listener and connections.
func (f *front) close() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// count is how many requests of method reached the front.
func (f *front) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

func (s *testServer) client() *taskclient.Client {
	return &taskclient.Client{URL: s.url, Tasks: true, Elicitation: true}
}

// startTask calls tool and returns its task ID.
func (s *testServer) startTask(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	res, err := s.client().CallTool(t.Context(), tool, args, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	return res.Task.TaskID
}

func runCommand(t *testing.T, ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut syncBuffer
	err = run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestTaskCommands(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		name       string
		tool       string
		args       map[string]any
		action     string
		stdin      string
		wantErr    error // nil: success
		wantStdout string
		wantStderr []string
		wantFinal  string // the task's status afterwards ("": not checked)
	}{
		{
			name: "get prints the task and a summary", tool: "slow_compute", args: map[string]any{"seconds": 30},
			action: "get", wantStdout: `"status": "working"`,
			wantStderr: []string{"[working]", "created", "expires in", "poll every 200ms"},
		},
		{
			name: "watch follows to the result", tool: "slow_compute", args: map[string]any{"seconds": 0.5, "label": "pi"},
			action: "watch", wantStdout: "Computed pi in 0.5s.\n",
			wantStderr: []string{"[working]", "[completed]"}, wantFinal: "completed",
		},
		{
			name: "watch exits 1 on a tool error", tool: "failing_job", args: map[string]any{},
			action: "watch", wantErr: errors.New("tool reported an error"), wantFinal: "completed",
		},
		{
			name: "answer asks the open request once", tool: "confirm_delete", args: map[string]any{"filename": "a.txt"},
			action: "answer", stdin: "y\n",
			wantStderr: []string{"[input_required]", "Delete a.txt?", "answers sent"},
		},
		{
			name: "answer refuses a task that asks nothing", tool: "slow_compute", args: map[string]any{"seconds": 30},
			action: "answer", wantErr: errors.New("task is working: it asks for nothing"),
		},
		{
			name: "cancel waits for the cancelled task", tool: "slow_compute", args: map[string]any{"seconds": 30},
			action: "cancel", wantStderr: []string{"cancel requested", "[cancelled]"}, wantFinal: "cancelled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := s.startTask(t, tt.tool, tt.args)
			stdout, stderr, err := runCommand(t, t.Context(), tt.stdin, "task", tt.action, "--url", s.url, id)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("task %s: %v\nstderr:\n%s", tt.action, err, stderr)
			}
			if tt.wantErr != nil && (err == nil || err.Error() != tt.wantErr.Error()) {
				t.Fatalf("task %s: error %v, want %v\nstderr:\n%s", tt.action, err, tt.wantErr, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.wantStdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
			if tt.action == "get" {
				var task map[string]any
				if err := json.Unmarshal([]byte(stdout), &task); err != nil || task["taskId"] != id {
					t.Errorf("get printed %q, want the task as JSON (%v)", stdout, err)
				}
			}
			if tt.wantFinal != "" {
				got, err := s.client().GetTask(t.Context(), id)
				if err != nil || got.Status != tt.wantFinal {
					t.Errorf("task afterwards: %v %+v, want %s", err, got, tt.wantFinal)
				}
			}
		})
	}
}

func TestTaskAnswerConfirmationStartsTheJob(t *testing.T) {
	s := newTestServer(t)
	id := s.startTask(t, "confirm_delete", map[string]any{"filename": "a.txt"})
	if _, stderr, err := runCommand(t, t.Context(), "y\n", "task", "answer", "--url", s.url, id); err != nil {
		t.Fatalf("task answer: %v\n%s", err, stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	final, err := taskclient.Wait(ctx, s.client(), id, nil)
	if err != nil || final.Status != "completed" {
		t.Fatalf("after the answer: %v %+v", err, final)
	}
}

func TestTaskUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the error or stderr
	}{
		{name: "no ID", args: []string{"task", "get"}, want: "usage: jobbridge task"},
		{name: "unknown action", args: []string{"task", "poke", "x"}, want: `unknown action "poke"`},
		{name: "refused connection", args: []string{"task", "get", "--url", "http://127.0.0.1:1/mcp", "x"}, want: "is the server running at http://127.0.0.1:1/mcp?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := runCommand(t, t.Context(), "", tt.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error()+stderr, tt.want) {
				t.Errorf("error %v, stderr %q: want %q", err, stderr, tt.want)
			}
		})
	}
}

// TestCallSurvivesServerRestart stops the server while call follows a
// task and starts it again on the same store and port: call keeps
// retrying, says so, and prints the job's result.
func TestCallSurvivesServerRestart(t *testing.T) {
	s := newTestServer(t)
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"call", "--url", s.url, "slow_compute", `{"seconds": 3, "label": "e"}`}, strings.NewReader(""), &stdout, &stderr)
	}()
	waitForText(t, &stderr, "task ID: ")
	waitForCount(t, s.front, "subscriptions/listen", 1) // on the stream when the server goes
	s.stop()
	waitForText(t, &stderr, "server unreachable, retrying (2)")
	s.start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("call never ended:\n%s", stderr.String())
	}
	if got := stdout.String(); got != "Computed e in 3s.\n" {
		t.Errorf("stdout = %q", got)
	}
	t.Logf("stderr:\n%s", stderr.String())
	if !strings.Contains(stderr.String(), "[completed]") {
		t.Errorf("stderr has no final status:\n%s", stderr.String())
	}
	// Back on the stream once the server answered again.
	if n := s.front.count("subscriptions/listen"); n < 2 {
		t.Errorf("%d listens; want the stream opened again after the restart", n)
	}
}

// TestCallGivesUpAfterTimeout: a server that stays away ends the call
// after --timeout, naming the task so that it can be followed later.
func TestCallGivesUpAfterTimeout(t *testing.T) {
	s := newTestServer(t)
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"call", "--url", s.url, "--timeout", "2s", "slow_compute", `{"seconds": 30}`}, strings.NewReader(""), &stdout, &stderr)
	}()
	waitForText(t, &stderr, "task ID: ")
	s.stop()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "server unreachable for") || !strings.Contains(err.Error(), "jobbridge task watch") ||
			!strings.Contains(err.Error(), "is the server running at") {
			t.Errorf("call: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("call never gave up:\n%s", stderr.String())
	}
}

func TestBackoffGrowsToItsCeiling(t *testing.T) {
	c := &caller{}
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 3: 2 * time.Second, 10: 30 * time.Second} {
		for range 20 {
			if got := c.backoff(n); got < want/2 || got > want {
				t.Errorf("backoff(%d) = %s, want within [%s, %s]", n, got, want/2, want)
			}
		}
	}
}

// waitForCount waits until at least n requests of method reached f.
func waitForCount(t *testing.T, f *front, method string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for f.count(method) < n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d %s requests (%d)", n, method, f.count(method))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitForText(t *testing.T, b *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q in:\n%s", text, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
