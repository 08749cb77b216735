package bridge_test

import (
	"encoding/hex"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// tracedBridge serves the test catalog over HTTP against the job API fake,
// with its spans recorded in memory.
func tracedBridge(t *testing.T) (*taskclient.Client, *tracetest.InMemoryExporter) {
	t.Helper()
	fake := jobapi.New(nil)
	url, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	cat := loadCatalog(t, url)
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	jobs := map[string]rest.JobConfig{}
	for _, tl := range cat.Tools {
		jobs[tl.Name] = *tl.Job.(*rest.JobConfig)
	}
	a, err := rest.New("jobs", *restBackend(cat, "jobs"), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	b, err := bridge.New(bridge.Options{
		Catalog:        cat,
		Store:          store,
		Adapters:       map[string]adapters.Adapter{"jobs": a},
		Build:          "test",
		TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	return &taskclient.Client{URL: srv.URL, Tasks: true}, exp
}

// attrs returns a span's attributes by key.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestTraces checks the spans of a task's life: a tools/call request span
// with the tool, the caller's kind, the protocol revision and the
// task.created event; tasks/get request spans naming the task by its hash;
// backend spans for the start and the polls; the task.submitted and
// state-change events. No attribute carries the task ID, the principal or
// the correlation ID.
func TestTraces(t *testing.T) {
	client, exp := tracedBridge(t)
	ctx := t.Context()

	res, err := client.CallTool(ctx, "slow_compute", map[string]any{"seconds": 0.05, "label": "traced"}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v, want a task", err, res)
	}
	id := res.Task.TaskID
	key := mapping.KeyOf(id)
	hash := hex.EncodeToString(key[:4])
	for {
		tk, err := client.GetTask(ctx, id)
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if tk.Terminal() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A tasks/get of an unknown task is a JSON-RPC error.
	if _, err := client.GetTask(ctx, "no-such-task"); err == nil {
		t.Fatal("tasks/get of an unknown task succeeded")
	}

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	events := map[string][]map[string]string{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		for _, e := range s.Events {
			events[e.Name] = append(events[e.Name], attrs(e.Attributes))
		}
		// Nothing recorded names the task, the caller or the job.
		all := append([]attribute.KeyValue{}, s.Attributes...)
		for _, e := range s.Events {
			all = append(all, e.Attributes...)
		}
		for _, kv := range all {
			if v := kv.Value.Emit(); strings.Contains(v, id) || v == "anonymous" || strings.HasPrefix(v, "jb-") || strings.Contains(v, "traced") {
				t.Errorf("span %q records %s=%q", s.Name, kv.Key, v)
			}
		}
	}

	call := byName["tools/call"]
	if len(call) != 1 {
		t.Fatalf("%d tools/call spans, want 1 (spans: %v)", len(call), names(spans))
	}
	want := map[string]string{
		"jobbridge.tool":           "slow_compute",
		"jobbridge.principal.kind": "http",
		"mcp.protocol.version":     "2026-07-28",
		"jobbridge.task.hash":      hash,
	}
	got := attrs(call[0].Attributes)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tools/call span: %s = %q, want %q", k, got[k], v)
		}
	}
	if call[0].SpanKind != trace.SpanKindServer {
		t.Errorf("tools/call span kind %v, want server", call[0].SpanKind)
	}
	if !hasEvent(call[0], "task.created") {
		t.Error("tools/call span has no task.created event")
	}

	var gets, failed int
	for _, s := range byName["tasks/get"] {
		a := attrs(s.Attributes)
		if s.Status.Code == codes.Error {
			failed++
			if a["rpc.jsonrpc.error_code"] != "-32602" {
				t.Errorf("failed tasks/get span: error code %q, want -32602", a["rpc.jsonrpc.error_code"])
			}
			continue
		}
		gets++
		if a["jobbridge.task.hash"] != hash {
			t.Errorf("tasks/get span: task hash %q, want %q", a["jobbridge.task.hash"], hash)
		}
	}
	if gets == 0 || failed != 1 {
		t.Errorf("%d tasks/get spans and %d failed, want some and 1", gets, failed)
	}

	for _, op := range []string{"start", "poll"} {
		bs := byName["backend "+op]
		if len(bs) == 0 {
			t.Errorf("no backend %s span (spans: %v)", op, names(spans))
			continue
		}
		a := attrs(bs[0].Attributes)
		if a["jobbridge.backend"] != "jobs" || a["jobbridge.backend.operation"] != op || a["jobbridge.backend.outcome"] != "ok" {
			t.Errorf("backend %s span attributes %v", op, a)
		}
		if bs[0].SpanKind != trace.SpanKindClient {
			t.Errorf("backend %s span kind %v, want client", op, bs[0].SpanKind)
		}
	}

	if !eventFor(events["task.submitted"], hash) {
		t.Errorf("no task.submitted event for task %s", hash)
	}
	var completed bool
	for _, e := range events["task.state_changed"] {
		if e["jobbridge.task.hash"] == hash && e["jobbridge.task.from_state"] == "working" && e["jobbridge.task.state"] == "completed" {
			completed = true
		}
	}
	if !completed {
		t.Errorf("no working→completed state change event; got %v", events["task.state_changed"])
	}
}

func names(spans tracetest.SpanStubs) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

func eventFor(events []map[string]string, hash string) bool {
	for _, e := range events {
		if e["jobbridge.task.hash"] == hash {
			return true
		}
	}
	return false
}
