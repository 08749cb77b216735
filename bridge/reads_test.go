package bridge_test

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

// countedServer is a bridge over HTTP with a counting SQLite store, the
// memBackend and a virtual clock; long_job refreshes every ten minutes.
type countedServer struct {
	clk    *clock
	mem    *memBackend
	store  *countingStore
	client *taskclient.Client
}

func newCountedServer(t *testing.T, logger *slog.Logger) *countedServer {
	t.Helper()
	s := &countedServer{clk: &clock{now: time.Now()}}
	s.mem = newMemBackend(s.clk.Now)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.store = &countingStore{Store: db}
	cat := loadCatalog(t, "http://127.0.0.1:9/")
	cat.Tool("long_job").RefreshInterval = 10 * time.Minute
	b, err := bridge.New(bridge.Options{
		Catalog:       cat,
		Store:         s.store,
		Adapters:      map[string]adapters.Adapter{"jobs": s.mem},
		Now:           s.clk.Now,
		SweepInterval: time.Hour,
		Logger:        logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	s.client = &taskclient.Client{URL: srv.URL, Tasks: true}
	return s
}

// runningTask creates a long_job task and polls it until it has been
// observed running.
func (s *countedServer) runningTask(t *testing.T) string {
	t.Helper()
	res, err := s.client.CallTool(t.Context(), "long_job", nil, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("calling long_job: %v %+v", err, res)
	}
	id := res.Task.TaskID
	waitUntil(t, "the job is observed running", func() bool {
		task, err := s.client.GetTask(t.Context(), id)
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		return strings.HasPrefix(task.StatusMessage, "RUNNING")
	})
	return id
}

// TestTasksGetReadsOneRow checks that a tasks/get answered from the store
// reads the task's row once, and one that observes the backend at most once
// more.
func TestTasksGetReadsOneRow(t *testing.T) {
	s := newCountedServer(t, nil)
	id := s.runningTask(t)
	_, polls, _ := s.mem.counts()

	before := s.store.gets.Load()
	const gets = 5
	for range gets {
		if _, err := s.client.GetTask(t.Context(), id); err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
	}
	if n := s.store.gets.Load() - before; n != gets {
		t.Errorf("%d tasks/get served from the store read %d rows, want %d", gets, n, gets)
	}
	if _, p, _ := s.mem.counts(); p != polls {
		t.Fatalf("tasks/get within the refresh interval asked the backend %d times", p-polls)
	}

	s.clk.Advance(11 * time.Minute) // past the refresh interval
	before = s.store.gets.Load()
	task, err := s.client.GetTask(t.Context(), id)
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	if _, p, _ := s.mem.counts(); p != polls+1 {
		t.Errorf("a stale tasks/get asked the backend %d times, want once", p-polls)
	}
	if !strings.HasPrefix(task.StatusMessage, "RUNNING") {
		t.Errorf("statusMessage = %q, want the new observation", task.StatusMessage)
	}
	if n := s.store.gets.Load() - before; n > 2 {
		t.Errorf("a tasks/get that observed the backend read %d rows, want at most 2", n)
	}
}

// TestRequestsLogNothingAtTheDefaultLevel checks that serving requests
// writes no log line at INFO, the default level: the go-sdk's lines about
// each connection and session are DEBUG.
func TestRequestsLogNothingAtTheDefaultLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			var logs lockedBuffer
			s := newCountedServer(t, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level})))
			id := s.runningTask(t)
			logs.take() // the task's creation and submission are logged
			for range 3 {
				if _, err := s.client.GetTask(t.Context(), id); err != nil {
					t.Fatalf("tasks/get: %v", err)
				}
			}
			if _, err := s.client.ListTools(t.Context()); err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			got := logs.take()
			switch level {
			case slog.LevelInfo:
				if got != "" {
					t.Errorf("requests logged at the default level:\n%s", got)
				}
			case slog.LevelDebug:
				// The SDK's lines are kept, one level down.
				if !strings.Contains(got, "level=DEBUG") || strings.Contains(got, "level=INFO") {
					t.Errorf("at DEBUG, want the SDK's lines as DEBUG and none as INFO:\n%s", got)
				}
			}
		})
	}
}
