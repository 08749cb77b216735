package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

// The benchmarks below run side by side in one `go test -bench` run, so that
// their ratios mean something on a shared, noisy machine:
//
//	go test -run '^$' -bench . -benchtime 2000x -count 5 ./bridge/
//
// BenchmarkBaselineToolCall is a bare go-sdk server answering a constant
// tools/call over the same transport and client: the floor a tasks/get is
// measured against.

func BenchmarkBaselineToolCall(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "baseline", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{Name: "constant", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	c := &taskclient.Client{URL: srv.URL}
	ctx := b.Context()
	for b.Loop() {
		if _, err := c.CallTool(ctx, "constant", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTasksGet polls a working task whose last observation is fresh:
// the answer comes from the store, with no backend call.
func BenchmarkTasksGet(b *testing.B) {
	h := newHarness(b, harnessOptions{tune: func(c *catalog.Catalog) {
		c.Tool("long_job").RefreshInterval = time.Hour
	}})
	task := h.createTask("long_job", nil)
	ctx := b.Context()
	for {
		got, err := h.tasks.GetTask(ctx, task.TaskID)
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(got.StatusMessage, "running") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := h.fake.Requests()
	for b.Loop() {
		if _, err := h.tasks.GetTask(ctx, task.TaskID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(h.fake.Requests()-before)/float64(b.N), "backend-calls/op")
}

// BenchmarkCreateTask measures tools/call → CreateTaskResult: argument
// validation, one durable SQLite commit, and the background submission to the
// in-process REST job API fake.
func BenchmarkCreateTask(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	ctx := b.Context()
	args := map[string]any{"seconds": 0}
	for b.Loop() {
		res, err := h.tasks.CallTool(ctx, "slow_compute", args, nil)
		if err != nil || res.Task == nil {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
