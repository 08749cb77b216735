package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// pushing is an adapter whose backend pushes events: the REST adapter of
// the harness, with a test event format. The adapters' own formats (GitHub
// webhooks, EventBridge, signed callbacks) are tested with their packages;
// this tests what the bridge does with the events they read.
type pushing struct {
	adapters.Adapter
	polling adapters.EventPolling
}

// testEvent is the body pushing reads: one event, authenticated by the
// X-Key header.
type testEvent struct {
	ID      string    `json:"id"`
	Job     string    `json:"job"`
	State   string    `json:"state"`
	Message string    `json:"message"`
	Result  string    `json:"result"`
	At      time.Time `json:"at"`
}

func (p *pushing) Events() (adapters.EventPolling, bool) { return p.polling, true }

func (p *pushing) ReadEvents(_ context.Context, d adapters.Delivery) ([]adapters.Event, error) {
	if d.Header.Get("X-Key") != "sesame" {
		return nil, fmt.Errorf("X-Key: %w", adapters.ErrForgedEvent)
	}
	var e testEvent
	if err := json.Unmarshal(d.Body, &e); err != nil {
		return nil, fmt.Errorf("not a test event: %w", err)
	}
	if e.State == "" {
		return nil, nil // a ping
	}
	s, ok := adapters.ParseState(e.State)
	if !ok {
		return nil, fmt.Errorf("unknown state %q", e.State)
	}
	o := adapters.Observation{State: s, Message: e.Message}
	if e.Result != "" {
		o.Result = &adapters.Result{Text: e.Result}
	}
	return []adapters.Event{{ID: e.ID, JobID: e.Job, At: e.At, Observation: o}}, nil
}

// eventHarness is a harness whose backend pushes events to an endpoint.
type eventHarness struct {
	*harness
	events *httptest.Server
}

func newEventHarness(t *testing.T, polling adapters.EventPolling, o harnessOptions) *eventHarness {
	o.adapters = func(set map[string]adapters.Adapter) map[string]adapters.Adapter {
		set["jobs"] = &pushing{Adapter: set["jobs"], polling: polling}
		return set
	}
	h := &eventHarness{harness: newHarness(t, o)}
	h.events = httptest.NewServer(h.bridge.EventsHandler("/events/"))
	t.Cleanup(h.events.Close)
	return h
}

// push delivers an event and returns the HTTP status and the bridge's
// answer.
func (h *eventHarness) push(key string, e testEvent) (int, string) {
	h.t.Helper()
	body, _ := json.Marshal(e)
	req, _ := http.NewRequest(http.MethodPost, h.events.URL+"/events/jobs", bytes.NewReader(body))
	req.Header.Set("X-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// jobOf returns the backend job ID of a task, once it is submitted, from
// the store.
func (h *eventHarness) jobOf(id string) string {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := h.store.Get(h.t.Context(), mapping.KeyOf(id), "anonymous", time.Now())
		if err != nil {
			h.t.Fatal(err)
		}
		if row.JobID != "" {
			return row.JobID
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task never submitted: %q", row.StatusMessage)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventsAreObservations(t *testing.T) {
	h := newEventHarness(t, adapters.EventPolling{Interval: time.Hour, Quiet: time.Hour}, harnessOptions{})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	job := h.jobOf(task.TaskID)
	s, err := h.tasks.Listen(t.Context(), []string{task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nextTask(t, s) // its current state

	for _, tc := range []struct {
		name       string
		key        string
		event      testEvent
		wantStatus int
		wantIn     string
	}{
		{"forged", "wrong", testEvent{ID: "d0", Job: job, State: "succeeded"}, http.StatusUnauthorized, "not valid"},
		{"unknown job", "sesame", testEvent{ID: "d1", Job: "no-such-job", State: "succeeded"}, http.StatusAccepted, `"unknown_job"`},
		{"a ping", "sesame", testEvent{ID: "d2"}, http.StatusAccepted, `"events":[]`},
		{"stale", "sesame", testEvent{ID: "d3", Job: job, State: "working", Message: "old news", At: time.Now().Add(-time.Hour)}, http.StatusAccepted, `"stale"`},
		{"working", "sesame", testEvent{ID: "d4", Job: job, State: "working", Message: "step 2 of 3"}, http.StatusAccepted, `"applied"`},
		{"again", "sesame", testEvent{ID: "d4", Job: job, State: "succeeded", Result: "replayed"}, http.StatusAccepted, `"duplicate"`},
		{"unreadable", "sesame", testEvent{ID: "d5", Job: job, State: "exploded"}, http.StatusBadRequest, "unknown state"},
		{"finished", "sesame", testEvent{ID: "d6", Job: job, State: "succeeded", Result: "pushed result"}, http.StatusAccepted, `"applied"`},
		{"after the end", "sesame", testEvent{ID: "d7", Job: job, State: "tool_error", Result: "too late"}, http.StatusAccepted, `"stale"`},
	} {
		status, body := h.push(tc.key, tc.event)
		if status != tc.wantStatus || !strings.Contains(body, tc.wantIn) {
			t.Errorf("%s: HTTP %d %s; want %d with %s", tc.name, status, body, tc.wantStatus, tc.wantIn)
		}
	}
	// The stream saw the applied events, in order: the working one (after
	// any change the polls before it saw), then the final one.
	for {
		got := nextTask(t, s)
		if got.Status != "working" {
			t.Fatalf("pushed %s %q before the working event", got.Status, got.StatusMessage)
		}
		if got.StatusMessage == "step 2 of 3" {
			break
		}
	}
	final := nextTask(t, s)
	if final.Status != "completed" || final.Result == nil || final.Result.Text() != "pushed result" || final.Result.IsError {
		t.Fatalf("pushed %+v; want completed with the event's result", final)
	}
	got, err := h.tasks.GetTask(t.Context(), task.TaskID)
	if err != nil || got.Result.Text() != "pushed result" {
		t.Fatalf("tasks/get after the events: %v %+v", err, got)
	}
}

func TestEventsReplacePolling(t *testing.T) {
	// The tool's refresh interval is 100ms; once its job has had an event,
	// and while events flow, the bridge polls it only at the safety
	// interval, and falls back when they stop.
	quiet := 400 * time.Millisecond
	h := newEventHarness(t, adapters.EventPolling{Interval: time.Hour, Quiet: quiet}, harnessOptions{sweep: time.Hour})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	job := h.jobOf(task.TaskID)

	polls := func(d time.Duration) int {
		before := h.fake.Requests()
		for end := time.Now().Add(d); time.Now().Before(end); {
			if _, err := h.tasks.GetTask(t.Context(), task.TaskID); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return h.fake.Requests() - before
	}
	if n := polls(300 * time.Millisecond); n == 0 {
		t.Fatalf("no backend polls before any event")
	}
	if status, body := h.push("sesame", testEvent{ID: "e1", Job: job, State: "working", Message: "running"}); status != http.StatusAccepted || !strings.Contains(body, "applied") {
		t.Fatalf("event: %d %s", status, body)
	}
	if n := polls(300 * time.Millisecond); n != 0 {
		t.Errorf("%d backend requests while events flow; want none (the safety interval is an hour)", n)
	}
	time.Sleep(quiet)
	if n := polls(300 * time.Millisecond); n == 0 {
		t.Errorf("no backend polls after the events stopped for longer than quiet")
	}
}

func TestStaleEventsLookAgainOnlyWhenTheStateDiffers(t *testing.T) {
	h := newEventHarness(t, adapters.EventPolling{Interval: time.Hour, Quiet: time.Hour}, harnessOptions{sweep: time.Hour})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	job := h.jobOf(task.TaskID)
	if status, body := h.push("sesame", testEvent{ID: "s1", Job: job, State: "working", Message: "running"}); !strings.Contains(body, "applied") {
		t.Fatalf("event: %d %s", status, body)
	}
	before := h.fake.Requests()
	old := time.Now().Add(-time.Hour)
	if _, body := h.push("sesame", testEvent{ID: "s2", Job: job, State: "working", Message: "step 1", At: old}); !strings.Contains(body, "stale") {
		t.Fatalf("old event: %s; want stale", body)
	}
	time.Sleep(100 * time.Millisecond)
	if n := h.fake.Requests() - before; n != 0 {
		t.Errorf("a stale event saying the same state made %d backend calls; want none", n)
	}
	if _, body := h.push("sesame", testEvent{ID: "s3", Job: job, State: "input_required", Message: "approve?", At: old}); !strings.Contains(body, "stale") {
		t.Fatalf("old event: %s; want stale", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.fake.Requests() == before {
		if time.Now().After(deadline) {
			t.Fatal("a stale event saying another state did not make the bridge look at the job")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAStaleEventStillShowsThatEventsFlow(t *testing.T) {
	// The job's first event comes just after a poll saw its state, but its
	// time, in whole seconds, reads before the poll: the bridge looks once
	// more, and the job is polled as one whose events flow from then on.
	h := newEventHarness(t, adapters.EventPolling{Interval: time.Hour, Quiet: time.Hour}, harnessOptions{sweep: time.Hour})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	job := h.jobOf(task.TaskID)
	h.waitFor(task.TaskID, "observed", func(t *taskclient.Task) bool { return strings.HasPrefix(t.StatusMessage, "running") })
	before := h.fake.Requests()
	at := observedAt(t, h.harness, task.TaskID).Add(-time.Millisecond).Truncate(time.Second)
	if _, body := h.push("sesame", testEvent{ID: "o1", Job: job, State: "working", Message: "running", At: at}); !strings.Contains(body, "stale") {
		t.Fatalf("event of the poll's second: %s; want stale", body)
	}
	waitUntil(t, "the bridge looks again", func() bool { return h.fake.Requests() > before })
	before = h.fake.Requests()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if _, err := h.tasks.GetTask(t.Context(), task.TaskID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.fake.Requests() - before; n != 0 {
		t.Errorf("%d backend requests after the job's first event; want none (the safety interval is an hour)", n)
	}
}

// A stale event clearly older than the task's last observation, saying
// the same state, changes nothing: the job stays on its refresh cadence
// (an event never delays the observation of its job).
func TestAnOldEventLeavesTheJobOnItsCadence(t *testing.T) {
	h := newEventHarness(t, adapters.EventPolling{Interval: time.Hour, Quiet: time.Hour}, harnessOptions{sweep: time.Hour})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	job := h.jobOf(task.TaskID)
	h.waitFor(task.TaskID, "observed", func(t *taskclient.Task) bool { return strings.HasPrefix(t.StatusMessage, "running") })
	if _, body := h.push("sesame", testEvent{ID: "o1", Job: job, State: "working", Message: "running", At: time.Now().Add(-time.Hour)}); !strings.Contains(body, "stale") {
		t.Fatalf("old event: %s; want stale", body)
	}
	before := h.fake.Requests()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if _, err := h.tasks.GetTask(t.Context(), task.TaskID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.fake.Requests() - before; n == 0 {
		t.Errorf("no backend requests after an old event; want the job polled at its refresh interval (100ms)")
	}
}

// Item 7: an event stamped in whole seconds that reads before the last
// poll, though the job has moved since, must not delay the observation:
// the question the job asks appears at once, not after the events' safety
// interval (an hour here; ten minutes in the demo).
func TestASecondGranularEventDoesNotDelayTheQuestion(t *testing.T) {
	mem := newMemBackend(nil)
	h := newHarness(t, harnessOptions{sweep: time.Hour, adapters: func(map[string]adapters.Adapter) map[string]adapters.Adapter {
		return map[string]adapters.Adapter{"jobs": &pushing{Adapter: mem, polling: adapters.EventPolling{Interval: time.Hour, Quiet: time.Hour}}}
	}})
	events := httptest.NewServer(h.bridge.EventsHandler("/events/"))
	t.Cleanup(events.Close)
	eh := &eventHarness{harness: h, events: events}
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "running", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })
	// The job starts waiting for an approval just after the poll; the
	// backend's event about the run (GitHub: workflow_run in_progress
	// before workflow_job waiting) says the same second as the poll.
	mem.set(func(m *memBackend) {
		j := m.jobs["mem-1"]
		j.state, j.message = adapters.StateInputRequired, "waiting for approval"
		j.inputs = map[string]adapters.InputRequest{"approve": {Message: "Approve the deployment to production?"}}
	})
	at := observedAt(t, h, task.TaskID).Add(-time.Millisecond).Truncate(time.Second)
	if _, body := eh.push("sesame", testEvent{ID: "w1", Job: "mem-1", State: "working", Message: "in_progress: job build concluded success", At: at}); !strings.Contains(body, "stale") {
		t.Fatalf("event: %s; want stale", body)
	}
	got := h.waitFor(task.TaskID, "the approval asked", func(tk *taskclient.Task) bool { return tk.Status == "input_required" })
	if len(got.InputRequests) != 1 {
		t.Errorf("input requests %v; want the approval", got.InputRequests)
	}
}

// observedAt is when the task's job was last observed, from the store.
func observedAt(t *testing.T, h *harness, id string) time.Time {
	t.Helper()
	row, err := h.store.Get(t.Context(), mapping.KeyOf(id), "anonymous", time.Now())
	if err != nil || row.ObservedAt == nil {
		t.Fatalf("row %+v, %v; want an observed task", row, err)
	}
	return *row.ObservedAt
}
