package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/taskclient"
)

// TestServeEventsListener runs `serve` with a REST backend that pushes
// signed callbacks, its event endpoint on a listener of its own: an event
// moves the task as a poll would, a forged one is refused, the MCP
// listener does not serve the endpoint, and a server stopping with a
// stream open ends it and returns at once.
func TestServeEventsListener(t *testing.T) {
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, pushCatalog, fakeURL), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := loadCatalog(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eventsAddr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	urls := make(chan string, 1)
	done := make(chan error, 1)
	stderr := &syncBuffer{}
	go func() {
		done <- serve(ctx, serveConfig{
			catalog:      cat,
			listen:       "127.0.0.1:0",
			eventsListen: eventsAddr,
			store:        "sqlite:" + filepath.Join(t.TempDir(), "tasks.db"),
			logLevel:     slog.LevelWarn,
			ready:        func(u string) { urls <- u },
		}, func(name string) (string, bool) {
			if name == "JOBS_CALLBACK_SECRET" {
				return pushSecret, true
			}
			return "", false
		}, io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	c := &taskclient.Client{URL: url, Tasks: true}
	res, err := c.CallTool(ctx, "long", map[string]any{}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	var job string
	for deadline := time.Now().Add(10 * time.Second); job == ""; {
		if jobs := fakeJobs(t, fakeURL); len(jobs) == 1 {
			job = jobs[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("the job was never submitted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The stream outlives the server's context.
	stream, err := c.Listen(t.Context(), []string{res.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	events := "http://" + eventsAddr + "/events/jobs"
	body := fmt.Appendf(nil, `{"id":%q,"status":"running","message":"halfway"}`, job)
	if status, answer := sendCallback(t, events, "d-1", body, "whsec_"+base64.StdEncoding.EncodeToString([]byte("not the secret, not at all!!"))); status != http.StatusUnauthorized {
		t.Errorf("forged callback: HTTP %d %s; want 401", status, answer)
	}
	if status, _ := sendCallback(t, strings.TrimSuffix(url, "/mcp")+"/events/jobs", "d-2", body, pushSecret); status != http.StatusNotFound {
		t.Errorf("callback to the MCP listener: HTTP %d; want 404 (events have their own listener)", status)
	}
	if status, answer := sendCallback(t, events, "d-3", body, pushSecret); status != http.StatusAccepted || !strings.Contains(string(answer), "applied") {
		t.Fatalf("callback: HTTP %d %s", status, answer)
	}
	for {
		task, err := stream.Next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if task.StatusMessage == "halfway" {
			break
		}
	}
	// Shutdown waits for open requests for 10 s, then fails: the stream
	// must have ended before.
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("serve: %v\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve never returned")
	}
	if _, err := stream.Next(); !errors.Is(err, taskclient.ErrStreamEnded) {
		t.Errorf("stream after shutdown: %v; want the listen's result", err)
	}
}
