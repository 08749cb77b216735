package main

import (
	"errors"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/taskclient"
)

// TestPushAcrossReplicas runs two real `jobbridge serve` processes on one
// PostgreSQL: a stream held by one replica is told of changes that the
// other writes (PostgreSQL LISTEN/NOTIFY), and a client whose replica dies
// listens on the other and misses nothing, since each task's current state
// comes first.
func TestPushAcrossReplicas(t *testing.T) {
	bin := buildBinary(t)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	cl := &cluster{t: t, bin: bin, catalog: writeReplicaCatalog(t, fakeURL), dsn: pgtest.Shared(t).NewDatabase(t)}
	cl.start(0)
	cl.start(1)
	defer cl.stopAll()
	a := &taskclient.Client{URL: "http://" + cl.replicas[0].addr + "/mcp", Tasks: true}
	b := &taskclient.Client{URL: "http://" + cl.replicas[1].addr + "/mcp", Tasks: true}

	// A task created and cancelled through replica A, listened to on B.
	res, err := a.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 600}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	id := res.Task.TaskID
	s, err := b.Listen(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.TaskIDs) != 1 {
		t.Fatalf("replica B acknowledged %q", s.TaskIDs)
	}
	first := next(t, s)
	if first.Status != "working" {
		t.Fatalf("first notification %s; want working", first.Status)
	}
	if err := a.CancelTask(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for last := first; !last.Terminal(); {
		last = next(t, s)
		if last.Terminal() && last.Status != "cancelled" {
			t.Fatalf("final %s %q; want cancelled", last.Status, last.StatusMessage)
		}
	}
	s.Close()

	// Another task, listened to on B; B dies; the client listens on A and
	// gets the task's current state first, then its end.
	res, err = a.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 1.5, "label": "survivor"}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	id = res.Task.TaskID
	s, err = b.Listen(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	next(t, s)
	cl.kill(1)
	var err2 error
	for err2 == nil {
		_, err2 = s.Next() // what was sent before the kill comes first
	}
	if errors.Is(err2, taskclient.ErrStreamEnded) {
		t.Fatalf("stream of a killed replica: %v; want a broken connection", err2)
	}
	time.Sleep(2 * time.Second) // the job ends while nobody listens
	s, err = a.Listen(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := next(t, s)
	if got.Status != "completed" || got.Result == nil || got.Result.Text() != "Computed survivor in 1.5s." {
		t.Fatalf("first notification after reconnecting: %s %+v; want the completed result", got.Status, got.Result)
	}
}

// next reads a stream's next task, failing after 15 s.
func next(t *testing.T, s *taskclient.Stream) *taskclient.Task {
	t.Helper()
	type got struct {
		task *taskclient.Task
		err  error
	}
	ch := make(chan got, 1)
	go func() {
		task, err := s.Next()
		ch <- got{task, err}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			t.Fatalf("stream: %v", g.err)
		}
		return g.task
	case <-time.After(15 * time.Second):
		t.Fatal("no notification within 15s")
	}
	return nil
}
