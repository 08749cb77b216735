package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/jobbridge/jobbridge/catalog"
)

const (
	stdioInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"pipe","version":"1"},"capabilities":{}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`
)

// serveIO runs the bridge's stdio session over in, collecting what it
// writes, and returns ServeIO's error once it ends.
func serveIO(ctx context.Context, h *harness, in io.ReadCloser) (<-chan error, *syncBuffer) {
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- h.bridge.ServeIO(ctx, in, out) }()
	return done, out
}

func awaitEnd(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeIO: %v, want nil", err)
		}
	case <-time.After(within):
		t.Fatalf("ServeIO still running after %s", within)
	}
}

// wireResponse is a response as written on the wire.
type wireResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// responses decodes the responses among the lines written, by ID.
func responses(t *testing.T, out string) map[string]*wireResponse {
	t.Helper()
	got := map[string]*wireResponse{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r struct {
			wireResponse
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Method == "" && r.ID != nil {
			got[string(r.ID)] = &r.wireResponse
		}
	}
	return got
}

// A client that writes its requests and closes stdin at once (a shell
// pipe, a probe) gets every answer, the slow ones included, and the
// session ends normally.
func TestStdioAnswersWhatWasReadBeforeEOF(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	in := strings.Join([]string{
		stdioInitialize,
		stdioInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.5,"label":"piped"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n"
	start := time.Now()
	done, out := serveIO(t.Context(), h, io.NopCloser(strings.NewReader(in)))
	awaitEnd(t, done, 20*time.Second)
	got := responses(t, out.String())
	for _, id := range []string{"1", "2", "3", "4"} {
		r := got[id]
		if r == nil {
			t.Errorf("no answer to request %s; output:\n%s", id, out)
			continue
		}
		if r.Error != nil {
			t.Errorf("request %s: error %v", id, r.Error)
		}
	}
	if r := got["2"]; r != nil && !strings.Contains(string(r.Result), `"slow_compute"`) {
		t.Errorf("tools/list: %s, want the catalog's tools", r.Result)
	}
	if r := got["3"]; r != nil && !strings.Contains(string(r.Result), "Computed piped in 0.5s.") {
		t.Errorf("tools/call: %s, want the job's result", r.Result)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("ended after %s, before the half-second job could finish", d)
	}
}

// A line that is not JSON ends the session, as the SDK does, but the
// requests read before it are answered and the error names the session.
func TestStdioUnreadableInputEndsAfterTheAnswers(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	done, out := serveIO(t.Context(), h, io.NopCloser(strings.NewReader(stdioInitialize+"\nnot json\n")))
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stdio session") {
			t.Errorf("ServeIO: %v, want the read error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeIO still running")
	}
	if responses(t, out.String())["1"] == nil {
		t.Errorf("initialize unanswered: %s", out)
	}
}

// A client that stops the server (its context ends: SIGTERM, SIGINT) while
// it is idle ends the session at once and without error.
func TestStdioStopWhileIdle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done, out := serveIO(ctx, h, pr)
	if _, err := io.WriteString(pw, stdioInitialize+"\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for responses(t, out.String())["1"] == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no answer to initialize: %s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	awaitEnd(t, done, 5*time.Second)
}

// Stopping the server during a synchronous call cancels the call's job
// downstream: nobody could follow it.
func TestStdioStopDuringSyncCallCancelsTheJob(t *testing.T) {
	mem := newMemBackend(nil)
	h := newHarness(t, harnessOptions{adapters: withMem(mem), tune: func(c *catalog.Catalog) {
		c.Tool("long_job").SyncBudget = time.Minute
	}})
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done, out := serveIO(ctx, h, pr)
	go io.WriteString(pw, stdioInitialize+"\n"+stdioInitialized+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"long_job","arguments":{}}}`+"\n")
	deadline := time.Now().Add(10 * time.Second)
	for _, polls, _ := mem.counts(); polls == 0; _, polls, _ = mem.counts() {
		if time.Now().After(deadline) {
			t.Fatal("the synchronous call never polled its job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	awaitEnd(t, done, 10*time.Second)
	if r := responses(t, out.String())["2"]; r != nil && r.Error == nil {
		t.Errorf("tools/call answered %s, want no result for a call whose job was cancelled", r.Result)
	}
	h.bridge.Close() // waits for the downstream cancel
	if _, _, n := mem.counts(); n != 1 {
		t.Errorf("%d cancels downstream, want 1", n)
	}
}

// A synchronous call with a progress token hears of its job while it waits,
// even when the backend reports no progress and a poll takes a while, with
// values that increase; the budget's end tells the client how to get the
// job as a task.
func TestSyncCallReportsProgressWhileWaiting(t *testing.T) {
	mem := newMemBackend(nil)
	mem.pollHook = func(ctx context.Context, n int) (error, bool) {
		if n > 1 {
			select { // a slow backend: no news for a while
			case <-time.After(400 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		return nil, false
	}
	h := newHarness(t, harnessOptions{adapters: withMem(mem), tune: func(c *catalog.Catalog) {
		tl := c.Tool("long_job")
		tl.SyncBudget, tl.PollInterval, tl.RefreshInterval = 1200*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}})
	c := dialRaw(t, h)
	c.call(1, "initialize", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"ts","version":"1"},"capabilities":{}}`)
	c.notify("notifications/initialized", `{}`)
	c.send(2, "tools/call", `{"name":"long_job","arguments":{},"_meta":{"progressToken":"p-1"}}`)
	type progress struct {
		ProgressToken any     `json:"progressToken"`
		Progress      float64 `json:"progress"`
		Total         float64 `json:"total"`
		Message       string  `json:"message"`
	}
	var notes []progress
	var res *jsonrpc.Response
	for res == nil {
		msg, err := c.conn.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			res = m
		case *jsonrpc.Request:
			if m.Method == "notifications/progress" {
				var p progress
				if err := json.Unmarshal(m.Params, &p); err != nil {
					t.Fatal(err)
				}
				notes = append(notes, p)
			}
		}
	}
	if len(notes) < 4 {
		t.Errorf("%d progress notifications in 1.2s with a 100ms poll interval, want at least 4 (one every 200ms without news): %+v", len(notes), notes)
	}
	for i, p := range notes {
		if p.ProgressToken != "p-1" || p.Message == "" {
			t.Errorf("notification %d: %+v, want token p-1 and the job's status", i, p)
		}
		if i > 0 && p.Progress <= notes[i-1].Progress {
			t.Errorf("notification %d: progress %v after %v, want it to increase", i, p.Progress, notes[i-1].Progress)
		}
	}
	if len(notes) > 1 && notes[len(notes)-1].Message != "RUNNING" {
		t.Errorf("last notification says %q, want the backend's status RUNNING", notes[len(notes)-1].Message)
	}
	var out struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if res.Error != nil || json.Unmarshal(res.Result, &out) != nil || !out.IsError || len(out.Content) == 0 {
		t.Fatalf("got %s %v, want an isError result", res.Result, res.Error)
	}
	for _, want := range []string{"still running after 1.2s", "was cancelled", "call long_job with tasks: the 2026-07-28 tasks extension, or params.task under 2025-11-25"} {
		if !strings.Contains(out.Content[0].Text, want) {
			t.Errorf("budget message %q does not say %q", out.Content[0].Text, want)
		}
	}
}

// The backend's own progress is what the notifications report, and still
// increases when the backend repeats itself.
func TestSyncProgressFollowsTheBackend(t *testing.T) {
	h := newHarness(t, harnessOptions{tune: func(c *catalog.Catalog) {
		tl := c.Tool("slow_compute")
		tl.PollInterval, tl.RefreshInterval = 100*time.Millisecond, 100*time.Millisecond
	}})
	c := dialRaw(t, h)
	c.call(1, "initialize", `{"protocolVersion":"2025-11-25","clientInfo":{"name":"ts","version":"1"},"capabilities":{}}`)
	c.notify("notifications/initialized", `{}`)
	c.send(2, "tools/call", `{"name":"slow_compute","arguments":{"seconds":1,"label":"p"},"_meta":{"progressToken":7}}`)
	var values, totals []float64
	for {
		msg, err := c.conn.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			if r.Error != nil || !strings.Contains(string(r.Result), "Computed p in 1s.") {
				t.Fatalf("got %s %v, want the job's result", r.Result, r.Error)
			}
			break
		}
		if m, ok := msg.(*jsonrpc.Request); ok && m.Method == "notifications/progress" {
			var p struct{ Progress, Total float64 }
			json.Unmarshal(m.Params, &p)
			values, totals = append(values, p.Progress), append(totals, p.Total)
		}
	}
	if len(values) < 2 {
		t.Fatalf("progress %v, want at least two notifications", values)
	}
	for i := range values {
		if i > 0 && values[i] <= values[i-1] {
			t.Errorf("progress %v does not increase at %d", values, i)
		}
		if totals[i] != 1 || values[i] > 1 {
			t.Errorf("notification %d: %v of %v, want the backend's done of total 1", i, values[i], totals[i])
		}
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
