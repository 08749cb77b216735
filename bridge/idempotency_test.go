package bridge_test

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/postgres"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// startCounter counts the jobs a bridge submits.
type startCounter struct {
	adapters.Adapter
	starts *atomic.Int64
}

func (a startCounter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	a.starts.Add(1)
	return a.Adapter.Start(ctx, req)
}

// replica is one bridge process over HTTP, for tests that restart it or
// run several on one store.
type replica struct {
	bridge *bridge.Bridge
	srv    *httptest.Server
	tasks  *taskclient.Client
	plain  *taskclient.Client
}

// idemSetup is a job API fake, its catalog and a count of the jobs
// submitted to it, shared by the replicas a test starts.
type idemSetup struct {
	cat      *catalog.Catalog
	stateKey []byte
	starts   atomic.Int64
	// skew moves the bridges' clock ahead of the real one.
	skew atomic.Int64
}

func newIdemSetup(t *testing.T, tune func(*catalog.Catalog)) *idemSetup {
	t.Helper()
	fake := jobapi.New(nil)
	url, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	s := &idemSetup{cat: loadCatalog(t, url), stateKey: make([]byte, 32)}
	rand.Read(s.stateKey)
	if tune != nil {
		tune(s.cat)
	}
	return s
}

// start runs a bridge on store (which it closes when stopped).
func (s *idemSetup) start(t *testing.T, store mapping.Store) *replica {
	t.Helper()
	jobs := map[string]rest.JobConfig{}
	for _, tl := range s.cat.Tools {
		jobs[tl.Name] = *tl.Job.(*rest.JobConfig)
	}
	a, err := rest.New("jobs", *restBackend(s.cat, "jobs"), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Options{
		Catalog:  s.cat,
		Store:    store,
		Adapters: map[string]adapters.Adapter{"jobs": startCounter{a, &s.starts}},
		Build:    "test",
		StateKey: s.stateKey,
		Now:      func() time.Time { return time.Now().Add(time.Duration(s.skew.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{bridge: b, srv: httptest.NewServer(b.Handler())}
	r.tasks = &taskclient.Client{URL: r.srv.URL, Tasks: true, Elicitation: true}
	r.plain = &taskclient.Client{URL: r.srv.URL}
	t.Cleanup(func() { r.stop(store) })
	return r
}

func (r *replica) stop(store mapping.Store) {
	if r.srv == nil {
		return
	}
	r.srv.Close()
	r.bridge.Close()
	store.Close()
	r.srv = nil
}

func openSQLite(t *testing.T, path string) mapping.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func withKey(key string) *taskclient.CallOptions {
	return &taskclient.CallOptions{Meta: map[string]any{bridge.IdempotencyKeyMeta: key}}
}

// taskOf returns a function that takes a tools/call's answer and returns
// its task, failing the test when it is not one.
func taskOf(t *testing.T) func(*taskclient.CallResult, error) *taskclient.Task {
	return func(res *taskclient.CallResult, err error) *taskclient.Task {
		t.Helper()
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		if res.Task == nil {
			t.Fatalf("tools/call: want a task, got %+v", res)
		}
		return res.Task
	}
}

func TestIdempotencyKeyReturnsTheSameTask(t *testing.T) {
	s := newIdemSetup(t, nil)
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	ctx := t.Context()
	args := map[string]any{"seconds": 5, "label": "deploy"}

	first := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("deploy-42")))
	again := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("deploy-42")))
	if again.TaskID != first.TaskID {
		t.Errorf("the retry got task %s, want the first call's %s", again.TaskID, first.TaskID)
	}
	other := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("deploy-43")))
	if other.TaskID == first.TaskID {
		t.Error("another key got the first call's task")
	}
	if n := s.starts.Load(); n != 2 {
		t.Errorf("%d jobs were submitted for two keys, want 2", n)
	}

	_, err := r.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 6, "label": "deploy"}, withKey("deploy-42"))
	if code := rpcCode(t, err); code != -32602 {
		t.Errorf("reuse with other arguments: code %d, want -32602", code)
	}
	if msg := err.Error(); !strings.Contains(msg, `"deploy-42"`) || !strings.Contains(msg, "arguments differ") {
		t.Errorf("reuse with other arguments says %q; want it to name the key and say the arguments differ", msg)
	}
	if n := s.starts.Load(); n != 2 {
		t.Errorf("a refused reuse submitted a job (%d in all, want 2)", n)
	}

	_, err = r.tasks.CallTool(ctx, "slow_compute", args, &taskclient.CallOptions{Meta: map[string]any{bridge.IdempotencyKeyMeta: 42}})
	if code := rpcCode(t, err); code != -32602 {
		t.Errorf("a key that is not a string: code %d, want -32602", code)
	}
}

func TestIdempotencyKeyFromCatalogTemplate(t *testing.T) {
	s := newIdemSetup(t, func(cat *catalog.Catalog) {
		tmpl := expr.MustParseTemplate("compute-{args.label}", expr.Scope{Vars: []string{expr.Args}})
		cat.Tool("slow_compute").Calls.IdempotencyKey = &tmpl
	})
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	ctx := t.Context()
	first := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 5, "label": "a"}, nil))
	again := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 5, "label": "a"}, nil))
	if again.TaskID != first.TaskID || s.starts.Load() != 1 {
		t.Errorf("two calls with one derived key: tasks %s and %s, %d jobs; want one task, one job", first.TaskID, again.TaskID, s.starts.Load())
	}
	// The same label with another duration derives the same key: refused.
	_, err := r.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 9, "label": "a"}, nil)
	if code := rpcCode(t, err); code != -32602 {
		t.Errorf("derived key with other arguments: code %d, want -32602", code)
	}
}

func TestIdempotencyKeySurvivesRestart(t *testing.T) {
	s := newIdemSetup(t, nil)
	path := filepath.Join(t.TempDir(), "tasks.db")
	store := openSQLite(t, path)
	r := s.start(t, store)
	args := map[string]any{"seconds": 5, "label": "x"}
	first := taskOf(t)(r.tasks.CallTool(t.Context(), "slow_compute", args, withKey("k")))
	r.stop(store)

	r = s.start(t, openSQLite(t, path))
	again := taskOf(t)(r.tasks.CallTool(t.Context(), "slow_compute", args, withKey("k")))
	if again.TaskID != first.TaskID || s.starts.Load() != 1 {
		t.Errorf("after a restart: task %s (first %s), %d jobs; want the first task and one job", again.TaskID, first.TaskID, s.starts.Load())
	}
}

func TestIdempotentSyncCallGetsTheStoredResult(t *testing.T) {
	s := newIdemSetup(t, nil)
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	ctx := t.Context()
	args := map[string]any{"seconds": 0.1, "label": "once"}
	for i := range 2 {
		res, err := r.plain.CallTool(ctx, "slow_compute", args, withKey("sync-1"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if res.Result == nil || !strings.Contains(res.Result.Text(), "Computed once") {
			t.Fatalf("call %d: got %+v, want the job's result", i, res)
		}
	}
	if n := s.starts.Load(); n != 1 {
		t.Errorf("two synchronous calls with one key submitted %d jobs, want 1", n)
	}
}

// TestIdempotencyAcrossReplicas races calls with one key through two
// bridges sharing a PostgreSQL store: one job, one task for all.
func TestIdempotencyAcrossReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	s := newIdemSetup(t, nil)
	var rs []*replica
	for range 2 {
		store, err := postgres.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, s.start(t, store))
	}
	args := map[string]any{"seconds": 5, "label": "race"}
	const calls = 12
	ids := make([]string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			res, err := rs[i%2].tasks.CallTool(t.Context(), "slow_compute", args, withKey("race-1"))
			if err != nil || res.Task == nil {
				t.Errorf("call %d: %+v, %v", i, res, err)
				return
			}
			ids[i] = res.Task.TaskID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("call %d got task %s, call 0 %s: want one task", i, id, ids[0])
		}
	}
	if n := s.starts.Load(); n != 1 {
		t.Errorf("%d concurrent calls with one key through two replicas submitted %d jobs, want 1", calls, n)
	}
	// The task is the same on either replica.
	if _, err := rs[1].tasks.GetTask(t.Context(), ids[0]); err != nil {
		t.Errorf("tasks/get on the other replica: %v", err)
	}
}

func TestIdempotencyKeyUnder2025(t *testing.T) {
	s := newIdemSetup(t, nil)
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	c, _ := newLegacyClient(t, r.srv.URL, `{}`)
	call := func() string {
		var res struct {
			Task legacyTask `json:"task"`
		}
		c.mustCall("tools/call", map[string]any{
			"name": "slow_compute", "arguments": map[string]any{"seconds": 5}, "task": map[string]any{},
			"_meta": map[string]any{bridge.IdempotencyKeyMeta: "legacy-1"},
		}, &res)
		return res.Task.TaskID
	}
	first, again := call(), call()
	if first == "" || again != first || s.starts.Load() != 1 {
		t.Errorf("two 2025-11-25 calls with one key: tasks %q and %q, %d jobs; want one task, one job", first, again, s.starts.Load())
	}
	// A 2026-07-28 call with the same key gets the same task.
	modern := taskOf(t)(r.tasks.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 5}, withKey("legacy-1")))
	if modern.TaskID != first {
		t.Errorf("a 2026-07-28 call with the key got %s, want %s", modern.TaskID, first)
	}
}

func TestIdempotencyWindow(t *testing.T) {
	s := newIdemSetup(t, func(cat *catalog.Catalog) {
		cat.Tool("slow_compute").Calls.IdempotencyWindow = time.Minute
	})
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	ctx := t.Context()
	args := map[string]any{"seconds": 0.1, "label": "w"}
	first := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("w-1")))
	if _, err := taskclient.Wait(ctx, r.tasks, first.TaskID, nil); err != nil {
		t.Fatal(err)
	}
	// Within the window after it ended: the same, ended task.
	again := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("w-1")))
	if again.TaskID != first.TaskID || again.Status != "completed" {
		t.Errorf("within the window: task %s (%s), want the first, completed", again.TaskID, again.Status)
	}
	// Past the window: the key is free again, and a new job starts.
	s.skew.Store(int64(2 * time.Minute))
	later := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("w-1")))
	if later.TaskID == first.TaskID {
		t.Error("past the window the key still named the first task")
	}
	if n := s.starts.Load(); n != 2 {
		t.Errorf("%d jobs, want 2 (one per window)", n)
	}
	// And it names the new task now.
	last := taskOf(t)(r.tasks.CallTool(ctx, "slow_compute", args, withKey("w-1")))
	if last.TaskID != later.TaskID {
		t.Errorf("after the takeover the key named %s, want %s", last.TaskID, later.TaskID)
	}
}

// TestIdempotentSyncRetryAfterTimeout is the story keys exist for: a
// client gives up on a synchronous call and calls again with the same key;
// the job it started goes on, and the retry gets its result.
func TestIdempotentSyncRetryAfterTimeout(t *testing.T) {
	s := newIdemSetup(t, nil)
	r := s.start(t, openSQLite(t, filepath.Join(t.TempDir(), "tasks.db")))
	args := map[string]any{"seconds": 0.6, "label": "retried"}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	_, err := r.plain.CallTool(ctx, "slow_compute", args, withKey("retry-1"))
	cancel()
	if err == nil {
		t.Fatal("the first call ended before its client gave up; the job is too quick for this test")
	}
	res, err := r.plain.CallTool(t.Context(), "slow_compute", args, withKey("retry-1"))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if res.Result == nil || !strings.Contains(res.Result.Text(), "Computed retried") {
		t.Fatalf("retry got %+v, want the first job's result", res)
	}
	if n := s.starts.Load(); n != 1 {
		t.Errorf("a call and its retry submitted %d jobs, want 1", n)
	}
}

// TestIdempotencyKeyOfAStoppedCreator: a key claimed by a call that
// stopped before it created its task (a crash between the two writes) is
// taken over once the claim is older than the call timeout.
func TestIdempotencyKeyOfAStoppedCreator(t *testing.T) {
	s := newIdemSetup(t, nil)
	store := openSQLite(t, filepath.Join(t.TempDir(), "tasks.db"))
	r := s.start(t, store)
	now := time.Now()
	orphan := &mapping.IdempotencyRecord{
		Principal:  "anonymous",
		KeyHash:    mapping.IdempotencyKeyOf("orphan-1"),
		ArgsDigest: "whatever the stopped call had",
		TaskKey:    mapping.KeyOf("never-created"),
		SealedID:   []byte("not openable"),
		CreatedAt:  now.Add(-time.Minute),
		ExpiresAt:  now.Add(time.Hour),
		Window:     time.Hour,
	}
	if held, err := store.(mapping.IdempotencyStore).ClaimIdempotencyKey(t.Context(), orphan, nil, now); err != nil || held != nil {
		t.Fatalf("claiming the orphan: %v, %v", held, err)
	}
	// The stopped call's digest differs, but its task never existed: the
	// key is taken over, not refused.
	task := taskOf(t)(r.tasks.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 5}, withKey("orphan-1")))
	if n := s.starts.Load(); n != 1 || task.Status != "working" {
		t.Errorf("a call with an orphaned key: %d jobs, task %s; want one job and its task", n, task.Status)
	}
	again := taskOf(t)(r.tasks.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 5}, withKey("orphan-1")))
	if again.TaskID != task.TaskID {
		t.Errorf("after the takeover the key named %s, want %s", again.TaskID, task.TaskID)
	}
}

// TestIdempotentSyncCallReportsProgress: a synchronous call with a key and
// a progress token hears from the call while it waits, as one without a
// key does, so that the client's request time-out is reset.
func TestIdempotentSyncCallReportsProgress(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		tl := c.Tool("slow_compute")
		tl.PollInterval, tl.RefreshInterval = 100*time.Millisecond, 100*time.Millisecond
	}})
	c := dialRaw(t, h)
	c.call(1, "initialize", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"ts","version":"1"},"capabilities":{}}`)
	c.notify("notifications/initialized", `{}`)
	c.send(2, "tools/call", `{"name":"slow_compute","arguments":{"seconds":1,"label":"k"},"_meta":{"progressToken":"p-2","jobbridge/idempotencyKey":"progress-1"}}`)
	notes := 0
	for {
		msg, err := c.conn.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			if r.Error != nil || !strings.Contains(string(r.Result), "Computed k in 1s.") {
				t.Fatalf("got %s %v, want the job's result", r.Result, r.Error)
			}
			break
		}
		if m, ok := msg.(*jsonrpc.Request); ok && m.Method == "notifications/progress" && strings.Contains(string(m.Params), `"p-2"`) {
			notes++
		}
	}
	if notes < 2 {
		t.Errorf("%d progress notifications while a 1s job ran with a 100ms poll interval, want several", notes)
	}
}
