package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/taskclient"
)

// reloadServer is an in-process serve of a catalog file that reloads it on
// a receive from reload (as on SIGHUP) or, when watched, by itself.
type reloadServer struct {
	url, file string
	log       *syncBuffer
	reload    chan struct{}
}

func startReloadServer(t *testing.T, watch time.Duration) *reloadServer {
	t.Helper()
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	return startReloadReplica(t, writeReplicaCatalog(t, fakeURL), "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"), watch)
}

// startReloadReplica serves the catalog file on the store given.
func startReloadReplica(t *testing.T, file, store string, watch time.Duration) *reloadServer {
	t.Helper()
	s := &reloadServer{file: file, log: &syncBuffer{}, reload: make(chan struct{})}
	cat, err := loadCatalog(s.file, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{
			catalog:    cat,
			configPath: s.file,
			watch:      watch,
			reloadNow:  s.reload,
			listen:     "127.0.0.1:0",
			store:      store,
			logLevel:   slog.LevelInfo,
			sweep:      200 * time.Millisecond,
			ready:      func(u string) { urls <- u },
		}, func(string) (string, bool) { return "", false }, io.Discard, s.log)
	}()
	select {
	case s.url = <-urls:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, s.log)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v\n%s", err, s.log)
		}
	})
	return s
}

// edit rewrites the catalog file with old replaced by new.
func (s *reloadServer) edit(t *testing.T, old, new string) {
	t.Helper()
	data, err := os.ReadFile(s.file)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), old, new, 1)
	if text == string(data) {
		t.Fatalf("the catalog has no %q", old)
	}
	if err := os.WriteFile(s.file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// metric returns the line of the metrics that starts with prefix.
func (s *reloadServer) metric(t *testing.T, prefix string) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(s.url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

func toolNames(t *testing.T, c *taskclient.Client) []string {
	t.Helper()
	tools, err := c.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

// A greeting tool added to the conformance catalog by the reload tests.
const addedTool = `  - name: slow_compute
`
const addedToolText = `  - name: greet_again
    description: Greets once more.
    backend: jobs
    task: optional
    input_schema: {type: object}
    job:
      start:
        path: /jobs
        body: {duration_seconds: 0, output: "Hello again.", correlation_id: "{correlation_id}"}
      job_id: {field: id}
      status: *fake_status
      cancel: *fake_cancel

  - name: slow_compute
`

func TestReloadAddsAToolAndTellsSessions(t *testing.T) {
	s := startReloadServer(t, 0)
	// A 2025-11-25 session hears it on its session stream; a 2026-07-28
	// client on the subscriptions/listen stream it opens for tool changes.
	versions := []string{"2025-11-25", "2026-07-28"}
	changed := map[string]chan struct{}{}
	sessions := map[string]*mcp.ClientSession{}
	for _, v := range versions {
		ch := make(chan struct{}, 4)
		changed[v] = ch
		client := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
		})
		session, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		defer session.Close()
		sessions[v] = session
	}
	s.edit(t, addedTool, addedToolText)
	s.reload <- struct{}{}
	select {
	case <-changed["2025-11-25"]:
	case <-time.After(10 * time.Second):
		t.Errorf("the 2025-11-25 session got no notifications/tools/list_changed\n%s", s.log)
	}
	// The 2026-07-28 client opens its listen stream in the background after
	// connecting: a reload before it is open is not heard on it, so the
	// catalog changes again (a new description) until one is.
	for i := 0; ; i++ {
		select {
		case <-changed["2026-07-28"]:
		case <-time.After(time.Second):
			if i == 10 {
				t.Fatalf("the 2026-07-28 client got no notifications/tools/list_changed\n%s", s.log)
			}
			s.edit(t, "description: Greets once more", "description: Greets once more!")
			s.reload <- struct{}{}
			continue
		}
		break
	}
	list, err := sessions["2025-11-25"].ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range list.Tools {
		found = found || tl.Name == "greet_again"
	}
	if !found {
		t.Errorf("tools/list after the reload has no greet_again")
	}
	// New calls use it at once, from a client without a session too.
	c := &taskclient.Client{URL: s.url, Tasks: true}
	res, err := c.CallTool(t.Context(), "greet_again", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Task != nil {
		task, err := taskclient.Wait(t.Context(), c, res.Task.TaskID, nil)
		if err != nil || !strings.Contains(task.Result.Text(), "Hello again.") {
			t.Errorf("greet_again: %v %+v", err, task)
		}
	} else if !strings.Contains(res.Result.Text(), "Hello again.") {
		t.Errorf("greet_again answered %q", res.Result.Text())
	}
	if got := s.metric(t, `jobbridge_catalog_reloads_total{outcome="applied"}`); !strings.HasSuffix(got, " 1") {
		t.Errorf("reload metric %q, want 1 applied", got)
	}
}

func TestReloadRefusesABadCatalogAndKeepsServing(t *testing.T) {
	s := startReloadServer(t, 20*time.Millisecond)
	c := &taskclient.Client{URL: s.url, Tasks: true}
	before := toolNames(t, c)
	// A typo in a key, on a line the error must point at.
	s.edit(t, "    backend: jobs\n    task: optional\n    input_schema:\n      type: object\n      properties:\n        seconds:", "    backend: jobs\n    tsak: optional\n    input_schema:\n      type: object\n      properties:\n        seconds:")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log.String(), "catalog reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the watched change was not reloaded:\n%s", s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(s.log.String(), "at="+s.file+":") || !strings.Contains(s.log.String(), "tsak") {
		t.Errorf("the log does not say where the problem is (file:line:col):\n%s", s.log)
	}
	if got := toolNames(t, c); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Errorf("tools after a refused reload %v, want %v", got, before)
	}
	if got := s.metric(t, `jobbridge_catalog_reloads_total{outcome="failed"}`); !strings.HasSuffix(got, " 1") {
		t.Errorf("reload metric %q, want 1 failed", got)
	}
	// The same bad file is not refused again on every look; a fixed one
	// is applied.
	time.Sleep(100 * time.Millisecond)
	if got := s.metric(t, `jobbridge_catalog_reloads_total{outcome="failed"}`); !strings.HasSuffix(got, " 1") {
		t.Errorf("reload metric %q after more looks at the same file, want still 1 failed", got)
	}
	s.edit(t, "tsak: optional", "task: optional")
	s.edit(t, addedTool, addedToolText)
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(toolNames(t, c), ","), "greet_again") {
		if time.Now().After(deadline) {
			t.Fatalf("the fixed catalog was not applied:\n%s", s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLiveTaskOfARemovedToolEnds removes a tool while its task runs: the
// task is still observed and cancelled with the tool it started under.
func TestLiveTaskOfARemovedToolEnds(t *testing.T) {
	s := startReloadServer(t, 0)
	c := &taskclient.Client{URL: s.url, Tasks: true}
	done, err := c.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 0.5, "label": "before"}, nil)
	if err != nil || done.Task == nil {
		t.Fatalf("slow_compute: %v %+v", err, done)
	}
	cancelled, err := c.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 60, "label": "long"}, nil)
	if err != nil || cancelled.Task == nil {
		t.Fatalf("slow_compute: %v %+v", err, cancelled)
	}
	s.edit(t, "  - name: slow_compute\n", "  - name: slow_compute_v2\n")
	s.reload <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(strings.Join(toolNames(t, c), ","), "slow_compute,") {
		if time.Now().After(deadline) {
			t.Fatalf("slow_compute is still listed after the reload:\n%s", s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	task, err := taskclient.Wait(t.Context(), c, done.Task.TaskID, nil)
	if err != nil || task.Status != "completed" || !strings.Contains(task.Result.Text(), "Computed before") {
		t.Errorf("the task of the removed tool: %v %+v", err, task)
	}
	if err := c.CancelTask(t.Context(), cancelled.Task.TaskID); err != nil {
		t.Fatalf("cancelling the task of the removed tool: %v", err)
	}
	task, err = taskclient.Wait(t.Context(), c, cancelled.Task.TaskID, nil)
	if err != nil || task.Status != "cancelled" {
		t.Errorf("the cancelled task of the removed tool: %v %+v", err, task)
	}
}

// TestSIGHUPReloadsTheBinary sends SIGHUP to a real jobbridge serve: a
// catalog with an error leaves the process and its tools as they were, a
// valid one adds its tool.
func TestSIGHUPReloadsTheBinary(t *testing.T) {
	bin := buildBinary(t)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	s := &reloadServer{file: writeReplicaCatalog(t, fakeURL), log: &syncBuffer{}}
	cmd := exec.Command(bin, "serve", "--config", s.file, "--store", "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"), "--listen", "127.0.0.1:0")
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	urlRE := regexp.MustCompile(`url=(http://\S+/mcp)`)
	deadline := time.Now().Add(20 * time.Second)
	for s.url == "" {
		if m := urlRE.FindStringSubmatch(s.log.String()); m != nil {
			s.url = m[1]
		}
		select {
		case err := <-exited:
			t.Fatalf("jobbridge serve exited: %v\n%s", err, s.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobbridge serve never listened:\n%s", s.log)
		}
	}
	c := &taskclient.Client{URL: s.url, Tasks: true}
	before := strings.Join(toolNames(t, c), ",")
	s.edit(t, "version: 1", "version: 1\nbogus_key: true")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, s.log, "catalog reload failed", exited)
	if got := strings.Join(toolNames(t, c), ","); got != before {
		t.Errorf("tools after a refused reload: %s, want %s", got, before)
	}
	s.edit(t, "\nbogus_key: true", "")
	s.edit(t, addedTool, addedToolText)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, s.log, "catalog reloaded", exited)
	if got := strings.Join(toolNames(t, c), ","); !strings.Contains(got, "greet_again") {
		t.Errorf("tools after the reload: %s, want greet_again among them", got)
	}
}

func waitLog(t *testing.T, log *syncBuffer, want string, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), want) {
		select {
		case err := <-exited:
			t.Fatalf("jobbridge serve exited: %v\n%s", err, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, log)
		}
	}
}

// TestReplicasReloadAtDifferentMoments runs two replicas on one PostgreSQL
// store and reloads only one: a task of the tool it added is created there
// and read through the replica that has not reloaded (which serves it from
// the store, as it does a task of a tool it does not know), and both agree
// on its end.
func TestReplicasReloadAtDifferentMoments(t *testing.T) {
	pg := pgtest.Shared(t)
	dsn := pg.NewDatabase(t)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	fileA := writeReplicaCatalog(t, fakeURL)
	a := startReloadReplica(t, fileA, dsn, 0)
	b := startReloadReplica(t, writeReplicaCatalog(t, fakeURL), dsn, 0)

	a.edit(t, addedTool, addedToolText)
	a.reload <- struct{}{}
	ca := &taskclient.Client{URL: a.url, Tasks: true}
	cb := &taskclient.Client{URL: b.url, Tasks: true}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(toolNames(t, ca), ","), "greet_again") {
		if time.Now().After(deadline) {
			t.Fatalf("replica A did not reload:\n%s", a.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(strings.Join(toolNames(t, cb), ","), "greet_again") {
		t.Fatal("replica B reloaded too")
	}
	res, err := ca.CallTool(t.Context(), "greet_again", map[string]any{}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("greet_again on A: %v %+v", err, res)
	}
	if task, err := cb.GetTask(t.Context(), res.Task.TaskID); err != nil || task.Status == "failed" {
		t.Fatalf("replica B reading the task of a tool it does not know yet: %v %+v", err, task)
	}
	done, err := taskclient.Wait(t.Context(), ca, res.Task.TaskID, nil)
	if err != nil || done.Status != "completed" {
		t.Fatalf("the task on A: %v %+v", err, done)
	}
	onB, err := cb.GetTask(t.Context(), res.Task.TaskID)
	if err != nil || onB.Status != "completed" || !strings.Contains(onB.Result.Text(), "Hello again.") {
		t.Errorf("replica B sees %v %+v, want the completed task", err, onB)
	}
}
