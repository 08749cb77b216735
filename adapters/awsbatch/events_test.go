package awsbatch

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

const (
	eventsHeader = "X-Jobbridge-Key"
	eventsKey    = "Zm9yIHRlc3RzIG9ubHksIG5vdCBhIHJlYWwga2V5"
)

// eventsEnv is the environment the events tests' adapters read their key
// from.
func eventsEnv(name string) (string, bool) {
	if name == "BATCH_EVENTS_KEY" {
		return eventsKey, true
	}
	return "", false
}

func eventsBlock() *EventsConfig {
	return &EventsConfig{APIKeyHeader: eventsHeader, APIKey: "${BATCH_EVENTS_KEY}"}
}

// eventsAdapter builds an adapter with an events block, on the fixture's
// client and clock.
func (f *fixture) eventsAdapter(backend BackendConfig, tools map[string]JobConfig) *Adapter {
	f.t.Helper()
	if backend.Region == "" {
		backend.Region = "eu-west-1"
	}
	if backend.Events == nil {
		backend.Events = eventsBlock()
	}
	a, err := New("batch", backend, tools, &Options{Client: f.ops, Now: f.clock.Now, Getenv: eventsEnv})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return a
}

// endpoint is the bridge's event endpoint in miniature: it hands each
// delivery to the adapter's ReadEvents and answers as the bridge does, 401
// for a forged or replayed delivery, 400 for another error, 202 otherwise.
type endpoint struct {
	a   *Adapter
	now func() time.Time

	mu     sync.Mutex
	events []adapters.Event
	errs   []error
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	evs, err := e.a.ReadEvents(r.Context(), adapters.Delivery{Header: r.Header, Body: body, ReceivedAt: e.now()})
	e.mu.Lock()
	e.events = append(e.events, evs...)
	if err != nil {
		e.errs = append(e.errs, err)
	}
	e.mu.Unlock()
	switch {
	case errors.Is(err, adapters.ErrForgedEvent), errors.Is(err, adapters.ErrReplayedEvent):
		w.WriteHeader(http.StatusUnauthorized)
	case err != nil:
		w.WriteHeader(http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// take returns the events read since the last call, and fails the test on
// any ReadEvents error.
func (e *endpoint) take(t *testing.T) []adapters.Event {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		t.Errorf("ReadEvents: %v", err)
	}
	evs := e.events
	e.events, e.errs = nil, nil
	return evs
}

// eventsFixture is a fake that sends its events to an endpoint whose
// adapter is f.a.
func eventsFixture(t *testing.T, backend BackendConfig, tools map[string]JobConfig, key string) (*fixture, *endpoint) {
	t.Helper()
	c := &clock{base: t0}
	ep := &endpoint{now: c.Now}
	hs := httptest.NewServer(ep)
	t.Cleanup(hs.Close)
	f := newFixture(t, c, BackendConfig{}, &batchfake.Options{
		Events: &batchfake.EventsOptions{URL: hs.URL + "/events/batch", KeyHeader: eventsHeader, Key: key},
	})
	f.a = f.eventsAdapter(backend, tools)
	ep.a = f.a
	return f, ep
}

// TestEventsMatchPolls follows jobs through every state Batch reports with
// the fake sending their events to an endpoint that reads them: each change
// gives one event for the job, at the moment of the change to the
// millisecond, whose observation is exactly what a poll of the job at that
// moment gives (state, message, result, FinishedAt, link).
func TestEventsMatchPolls(t *testing.T) {
	tools := map[string]JobConfig{"job": testTool()}
	retry := testTool()
	retry.RetryAttempts = 2
	tools["retry"] = retry
	timeout := testTool()
	timeout.TimeoutSeconds = 60
	tools["timeout"] = timeout
	after := testTool()
	after.DependsOn = []Dependency{{JobID: "{args.after}"}}
	tools["after"] = after
	array := testTool()
	array.ArraySize = "2"
	tools["array"] = array

	type step struct {
		at    time.Duration // from t0
		state adapters.State
	}
	tests := []struct {
		name   string
		tool   string
		script string
		act    func(f *fixture, id string) // before the steps
		steps  []step
	}{
		{name: "succeeds", script: "submitted=1s,runnable=2s,starting=1250ms,running=5s,exit=0", steps: []step{
			{time.Second, adapters.StateWorking},             // RUNNABLE
			{3 * time.Second, adapters.StateWorking},         // STARTING
			{4250 * time.Millisecond, adapters.StateWorking}, // RUNNING, startedAt to the millisecond
			{9250 * time.Millisecond, adapters.StateSucceeded},
		}},
		{name: "fails with an exit code", script: "submitted=0s,runnable=1s,starting=1s,running=2500ms,exit=3", steps: []step{
			{0, adapters.StateWorking},
			{time.Second, adapters.StateWorking},
			{2 * time.Second, adapters.StateWorking},
			{4500 * time.Millisecond, adapters.StateToolError},
		}},
		{name: "retried, then fails", tool: "retry", script: "submitted=0s,runnable=1s,starting=1s,running=2s,exit=1", steps: []step{
			{0, adapters.StateWorking},
			{time.Second, adapters.StateWorking},
			{2 * time.Second, adapters.StateWorking},
			{4 * time.Second, adapters.StateWorking}, // RUNNABLE again, attempt 1 failed
			{5 * time.Second, adapters.StateWorking},
			{6 * time.Second, adapters.StateWorking},
			{8 * time.Second, adapters.StateToolError},
		}},
		{name: "times out", tool: "timeout", script: "submitted=0s,runnable=0s,starting=0s,running=1h", steps: []step{
			{0, adapters.StateWorking},
			{time.Minute, adapters.StateToolError},
		}},
		{name: "pending on a dependency", tool: "after", script: "submitted=1s,runnable=0s,starting=0s,running=1s", steps: []step{
			{time.Second, adapters.StateWorking}, // PENDING until the dependency ends at 10s
			{10 * time.Second, adapters.StateWorking},
			{11 * time.Second, adapters.StateSucceeded},
		}},
		{name: "an array job (its children's events give none)", tool: "array", script: "submitted=1s,runnable=0s,starting=0s,running=2s,stagger=1s", steps: []step{
			{time.Second, adapters.StateWorking}, // PENDING, with child counts and progress
			{4 * time.Second, adapters.StateSucceeded},
		}},
		{name: "terminated by an operator", script: "submitted=0s,runnable=0s,starting=0s,running=1h,terminate_delay=2s",
			act: func(f *fixture, id string) {
				f.clock.Advance(3 * time.Second)
				if _, err := f.client.TerminateJob(f.t.Context(), &batch.TerminateJobInput{JobId: &id, Reason: aws.String("operator: wrong input")}); err != nil {
					f.t.Fatalf("TerminateJob: %v", err)
				}
			},
			steps: []step{
				{3 * time.Second, adapters.StateWorking}, // the RUNNING of 0s, sent late
				{5 * time.Second, adapters.StateCancelled},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ep := eventsFixture(t, BackendConfig{ConsoleURL: "https://console.invalid/batch/{region}/{job_id}"}, tools, eventsKey)
			tool := tc.tool
			if tool == "" {
				tool = "job"
			}
			req := job(tc.script)
			req.Tool = tool
			if tool == "after" {
				dep := f.start(job(quick(10*time.Second, 0)))
				req.Arguments["after"] = dep.ID
			}
			ref := f.start(req)
			if tc.act != nil {
				tc.act(f, ref.ID)
			}
			for _, s := range tc.steps {
				if now := f.clock.Now().Sub(t0); s.at > now {
					f.clock.Advance(s.at - now)
				}
				if _, err := f.fake.SendEvents(t.Context()); err != nil {
					t.Fatalf("at %v: SendEvents: %v", s.at, err)
				}
				var mine []adapters.Event
				for _, e := range ep.take(t) {
					if strings.Contains(e.JobID, ":") {
						t.Errorf("at %v: an event of array child %s", s.at, e.JobID)
					}
					if e.JobID == ref.ID {
						mine = append(mine, e)
					}
				}
				if len(mine) != 1 {
					t.Fatalf("at %v: %d events of the job, want 1: %+v", s.at, len(mine), mine)
				}
				e := mine[0]
				f.a.poller.invalidate(ref.ID)
				polled := f.poll(ref)[0]
				if diff := cmp.Diff(polled, e.Observation); diff != "" {
					t.Errorf("at %v: the event's observation differs from a poll's (-poll +event):\n%s", s.at, diff)
				}
				wantAt := t0.Add(s.at)
				if tc.act != nil && s.state == adapters.StateWorking {
					wantAt = t0 // the RUNNING of 0s
				}
				if e.Observation.State != s.state || !e.At.Equal(wantAt) || e.ID == "" {
					t.Errorf("at %v: event %s state %v at %v, want %v at %v", s.at, e.ID, e.Observation.State, e.At, s.state, wantAt)
				}
			}
		})
	}
}

// TestEventRedelivered checks that a redelivery of an event reads as the
// same event (same ID), so that the bridge applies it once.
func TestEventRedelivered(t *testing.T) {
	f, ep := eventsFixture(t, BackendConfig{}, map[string]JobConfig{"job": testTool()}, eventsKey)
	f.start(job(quick(time.Second, 0)))
	f.clock.Advance(time.Minute)
	if _, err := f.fake.SendEvents(t.Context()); err != nil {
		t.Fatalf("SendEvents: %v", err)
	}
	first := ep.take(t)
	last := first[len(first)-1]
	sent := f.fake.Events()
	if status, err := f.fake.Redeliver(t.Context(), sent[len(sent)-1].ID); status != http.StatusAccepted || err != nil {
		t.Fatalf("Redeliver = %d, %v", status, err)
	}
	again := ep.take(t)
	if len(again) != 1 || again[0].ID != last.ID || !cmp.Equal(again[0], last) {
		t.Errorf("redelivery read as %+v, want the same event %+v", again, last)
	}
}

// TestEventsWithWrongKey checks that a connection with another API key
// gets every delivery refused (401, ErrForgedEvent), and that the fake then
// does not retry them, as EventBridge retries no 4xx.
func TestEventsWithWrongKey(t *testing.T) {
	f, ep := eventsFixture(t, BackendConfig{}, map[string]JobConfig{"job": testTool()}, "another-key-of-the-same-length-00000")
	f.start(job(quick(time.Second, 0)))
	f.clock.Advance(time.Minute)
	if n, err := f.fake.SendEvents(t.Context()); n != 2 || err != nil {
		t.Fatalf("SendEvents = %d, %v; want both events sent (and refused)", n, err)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.events) != 0 || len(ep.errs) != 2 {
		t.Fatalf("read %d events and %d errors, want none and 2", len(ep.events), len(ep.errs))
	}
	for _, err := range ep.errs {
		if !errors.Is(err, adapters.ErrForgedEvent) {
			t.Errorf("ReadEvents = %v, want ErrForgedEvent", err)
		}
	}
	for _, e := range f.fake.Events() {
		if e.Answer != http.StatusUnauthorized {
			t.Errorf("event %s answered %d, want 401", e.ID, e.Answer)
		}
	}
}

// stateChange returns an event envelope, as Batch sends it, of a job
// RUNNING since t0, edited by edit.
func stateChange(t *testing.T, edit func(env, detail map[string]any)) []byte {
	t.Helper()
	const id = "00000000-0000-4000-8000-000000000001"
	arn := "arn:aws:batch:eu-west-1:123456789012:job/" + id
	detail := map[string]any{
		"jobArn": arn, "jobName": "jb-abc-report", "jobId": id,
		"jobQueue": "arn:aws:batch:eu-west-1:123456789012:job-queue/default",
		"status":   "RUNNING", "attempts": []any{}, "createdAt": t0.Add(-time.Minute).UnixMilli(), "startedAt": t0.UnixMilli(),
		"retryStrategy": map[string]any{"attempts": 1, "evaluateOnExit": []any{}}, "dependsOn": []any{},
		"jobDefinition": "arn:aws:batch:eu-west-1:123456789012:job-definition/report:3", "parameters": map[string]any{},
		"container": map[string]any{"image": "busybox", "command": []any{"true"}, "logStreamName": "report/default/abc"},
		"tags":      map[string]any{"resourceArn": arn}, "propagateTags": false, "platformCapabilities": []any{},
		"newMemberAWSMightAdd": map[string]any{"x": 1},
	}
	env := map[string]any{
		"version": "0", "id": "c8f9c4b5-76e5-d76a-f980-7011e206042b", "detail-type": "Batch Job State Change",
		"source": "aws.batch", "account": "123456789012", "time": t0.Format(time.RFC3339), "region": "eu-west-1",
		"resources": []any{arn}, "detail": detail,
	}
	if edit != nil {
		edit(env, detail)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// delivery is a delivery of body with the API key header set to key (none
// when empty), received a minute after t0.
func delivery(body []byte, keys ...string) adapters.Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("User-Agent", "Amazon/EventBridge/ApiDestinations")
	for _, k := range keys {
		h.Add(eventsHeader, k)
	}
	return adapters.Delivery{Header: h, Body: body, ReceivedAt: t0.Add(time.Minute)}
}

// unitAdapter is an adapter with an events block and no backend behind
// it (ReadEvents calls none).
func unitAdapter(t *testing.T, events *EventsConfig) *Adapter {
	t.Helper()
	f := &fixture{t: t, clock: &clock{base: t0}, ops: &countingAPI{Client: testClient("http://127.0.0.1:9")}}
	return f.eventsAdapter(BackendConfig{Events: events}, map[string]JobConfig{"job": testTool()})
}

// TestReadEventsAuthenticates checks that the API key is checked before
// anything else, and that no error quotes a key.
func TestReadEventsAuthenticates(t *testing.T) {
	a := unitAdapter(t, nil)
	body := stateChange(t, nil)
	tests := []struct {
		name   string
		d      adapters.Delivery
		forged bool
	}{
		{"the configured key", delivery(body, eventsKey), false},
		{"no key", delivery(body), true},
		{"an empty key", delivery(body, ""), true},
		{"another key", delivery(body, "Zm9yIHRlc3RzIG9ubHksIG5vdCBhIHJlYWwga2VZ"), true},
		{"the key and more", delivery(body, eventsKey+"x"), true},
		{"a prefix of the key", delivery(body, eventsKey[:20]), true},
		{"the key twice", delivery(body, eventsKey, eventsKey), true},
		{"a wrong key on a body that is not JSON", delivery([]byte("{not json"), "wrong-key-wrong-key"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := a.ReadEvents(t.Context(), tc.d)
			if !tc.forged {
				if err != nil || len(evs) != 1 {
					t.Fatalf("ReadEvents = %d events, %v; want 1", len(evs), err)
				}
				return
			}
			if !errors.Is(err, adapters.ErrForgedEvent) || len(evs) != 0 {
				t.Fatalf("ReadEvents = %d events, %v; want ErrForgedEvent", len(evs), err)
			}
			if strings.Contains(err.Error(), eventsKey[:16]) || strings.Contains(err.Error(), "wrong-key") {
				t.Errorf("the error %q quotes a key", err)
			}
			if !strings.Contains(err.Error(), eventsHeader) {
				t.Errorf("the error %q does not name the header", err)
			}
		})
	}
}

// TestReadEventsReplayWindow checks max_age: an envelope whose time is
// longer than max_age before the delivery arrived is refused as replayed.
func TestReadEventsReplayWindow(t *testing.T) {
	tests := []struct {
		name     string
		maxAge   time.Duration
		received time.Duration // after the envelope's time; -1: ReceivedAt unset
		replayed bool
	}{
		{"a minute old", 0, time.Minute, false},
		{"just within the default 24h", 0, 24 * time.Hour, false},
		{"older than the default 24h", 0, 24*time.Hour + time.Second, true},
		{"older than max_age 1h", time.Hour, 61 * time.Minute, true},
		{"from the future (clock skew)", 0, -time.Minute, false},
		{"no ReceivedAt: the adapter's clock", time.Hour, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := eventsBlock()
			ev.MaxAge = tc.maxAge
			a := unitAdapter(t, ev)
			d := delivery(stateChange(t, nil), eventsKey)
			if tc.received == -1 {
				d.ReceivedAt = time.Time{}
			} else {
				d.ReceivedAt = t0.Add(tc.received)
			}
			evs, err := a.ReadEvents(t.Context(), d)
			switch {
			case tc.replayed && (!errors.Is(err, adapters.ErrReplayedEvent) || len(evs) != 0):
				t.Errorf("ReadEvents = %d events, %v; want ErrReplayedEvent", len(evs), err)
			case !tc.replayed && (err != nil || len(evs) != 1):
				t.Errorf("ReadEvents = %d events, %v; want the event", len(evs), err)
			}
		})
	}
}

// TestReadEventsIgnores checks that authentic events the adapter does not
// handle give no event and no error: other detail-types and sources, and
// the jobs no task holds (array children, multi-node nodes).
func TestReadEventsIgnores(t *testing.T) {
	a := unitAdapter(t, nil)
	for name, edit := range map[string]func(env, detail map[string]any){
		"job queue blocked": func(env, _ map[string]any) { env["detail-type"] = "Batch Job Queue Blocked" },
		"service job":       func(env, _ map[string]any) { env["detail-type"] = "Batch Service Job State Change" },
		"another source":    func(env, _ map[string]any) { env["source"] = "aws.ecs" },
		"a custom event":    func(env, _ map[string]any) { env["source"] = "com.example.batch" },
		"an array child": func(_, d map[string]any) {
			d["jobId"] = d["jobId"].(string) + ":7"
			d["arrayProperties"] = map[string]any{"index": 7}
		},
		"a node of a multinode": func(_, d map[string]any) {
			d["jobId"] = d["jobId"].(string) + "#1"
			d["nodeDetails"] = map[string]any{"nodeIndex": 1}
		},
	} {
		t.Run(name, func(t *testing.T) {
			evs, err := a.ReadEvents(t.Context(), delivery(stateChange(t, edit), eventsKey))
			if err != nil || len(evs) != 0 {
				t.Errorf("ReadEvents = %+v, %v; want no event and no error", evs, err)
			}
		})
	}
}

// TestReadEventsMalformed checks that an authentic body that is not a
// readable Batch event is an error that says why, neither forged nor
// replayed.
func TestReadEventsMalformed(t *testing.T) {
	a := unitAdapter(t, nil)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte("{"), "not an EventBridge event"},
		{"an input transformer's output", []byte(`["RUNNING"]`), "input transformer"},
		{"no id", stateChange(t, func(env, _ map[string]any) { delete(env, "id") }), "no id"},
		{"no time", stateChange(t, func(env, _ map[string]any) { delete(env, "time") }), "not an RFC 3339 time"},
		{"a time in epoch seconds", stateChange(t, func(env, _ map[string]any) { env["time"] = "1641944200" }), "not an RFC 3339 time"},
		{"no detail", stateChange(t, func(env, _ map[string]any) { delete(env, "detail") }), "no detail"},
		{"a detail without jobId", stateChange(t, func(_, d map[string]any) { delete(d, "jobId") }), "no jobId"},
		{"a detail without status", stateChange(t, func(_, d map[string]any) { delete(d, "status") }), "no status"},
		{"a status that is not a string", stateChange(t, func(_, d map[string]any) { d["status"] = 3 }), "not a Batch job description"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := a.ReadEvents(t.Context(), delivery(tc.body, eventsKey))
			if err == nil || errors.Is(err, adapters.ErrForgedEvent) || errors.Is(err, adapters.ErrReplayedEvent) || len(evs) != 0 {
				t.Fatalf("ReadEvents = %d events, %v; want an error that is neither forged nor replayed", len(evs), err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestEventAt checks Event.At: the envelope's time, in whole seconds,
// unless the detail dates the change to the millisecond within that
// second; always stoppedAt for a finished job.
func TestEventAt(t *testing.T) {
	sent := t0.Add(10 * time.Second)
	ms := func(d time.Duration) *int64 { return aws.Int64(t0.Add(d).UnixMilli()) }
	tests := []struct {
		name string
		j    types.JobDetail
		want time.Time
	}{
		{"running, started within the second", types.JobDetail{Status: types.JobStatusRunning, StartedAt: ms(10250 * time.Millisecond)}, t0.Add(10250 * time.Millisecond)},
		{"running, started in the second before", types.JobDetail{Status: types.JobStatusRunning, StartedAt: ms(9900 * time.Millisecond)}, t0.Add(9900 * time.Millisecond)},
		{"running a retry (startedAt of the first attempt)", types.JobDetail{Status: types.JobStatusRunning, StartedAt: ms(time.Second)}, sent},
		{"runnable again after a failed attempt", types.JobDetail{Status: types.JobStatusRunnable, Attempts: []types.AttemptDetail{{StoppedAt: ms(10500 * time.Millisecond)}}}, t0.Add(10500 * time.Millisecond)},
		{"runnable for the first time", types.JobDetail{Status: types.JobStatusRunnable}, sent},
		{"starting", types.JobDetail{Status: types.JobStatusStarting, StartedAt: ms(10100 * time.Millisecond)}, sent},
		{"succeeded", types.JobDetail{Status: types.JobStatusSucceeded, StoppedAt: ms(8 * time.Second)}, t0.Add(8 * time.Second)},
		{"failed without stoppedAt", types.JobDetail{Status: types.JobStatusFailed}, sent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventAt(sent, &tc.j); !got.Equal(tc.want) {
				t.Errorf("eventAt = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEventRefreshesPollCache checks that an event newer than the poller's
// cached description makes the next poll describe the job afresh, so that
// a poll right after an event does not report the state the event replaced.
func TestEventRefreshesPollCache(t *testing.T) {
	f, ep := eventsFixture(t, BackendConfig{DescribeInterval: 10 * time.Minute}, map[string]JobConfig{"job": testTool()}, eventsKey)
	ref := f.start(job(quick(5*time.Second, 0)))
	if o := f.poll(ref)[0]; o.State != adapters.StateWorking {
		t.Fatalf("first poll: %+v", o)
	}
	calls := f.describeCalls()
	f.clock.Advance(time.Minute)
	if o := f.poll(ref)[0]; o.State != adapters.StateWorking || f.describeCalls() != calls {
		t.Fatalf("a poll within describe_interval: %v after %d calls, want the cached working", o.State, f.describeCalls()-calls)
	}
	if _, err := f.fake.SendEvents(t.Context()); err != nil {
		t.Fatalf("SendEvents: %v", err)
	}
	ep.take(t)
	if o := f.poll(ref)[0]; o.State != adapters.StateSucceeded || f.describeCalls() != calls+1 {
		t.Errorf("the poll after the SUCCEEDED event: %v after %d calls, want succeeded after 1", o.State, f.describeCalls()-calls)
	}
}

// TestEventsPolling checks Events: no block, no events; a block gives its
// poll_interval and quiet, with their defaults.
func TestEventsPolling(t *testing.T) {
	f := &fixture{t: t, clock: &clock{base: t0}, ops: &countingAPI{Client: testClient("http://127.0.0.1:9")}}
	plain, err := New("batch", BackendConfig{Region: "eu-west-1"}, map[string]JobConfig{"job": testTool()}, &Options{Client: f.ops})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := plain.Events(); ok || p != (adapters.EventPolling{}) {
		t.Errorf("Events without a block = %+v, %v; want none", p, ok)
	}
	if _, err := plain.ReadEvents(t.Context(), delivery(stateChange(t, nil), eventsKey)); !errors.Is(err, adapters.ErrForgedEvent) {
		t.Errorf("ReadEvents without a block = %v, want ErrForgedEvent", err)
	}
	if p, ok := f.eventsAdapter(BackendConfig{}, map[string]JobConfig{"job": testTool()}).Events(); !ok || p != (adapters.EventPolling{Interval: 10 * time.Minute, Quiet: 30 * time.Minute}) {
		t.Errorf("Events with defaults = %+v, %v", p, ok)
	}
	ev := eventsBlock()
	ev.PollInterval, ev.Quiet = 5*time.Minute, time.Hour
	if p, ok := f.eventsAdapter(BackendConfig{Events: ev}, map[string]JobConfig{"job": testTool()}).Events(); !ok || p != (adapters.EventPolling{Interval: 5 * time.Minute, Quiet: time.Hour}) {
		t.Errorf("Events = %+v, %v", p, ok)
	}
}

// TestEventsKey checks how New reads the key: an unset variable, an
// unreadable file and a weak key stop the backend with a positioned error
// that quotes no key; a key file is read again when it changes, so that a
// rotated key takes effect, and a rotation to an unreadable file keeps the
// last key.
func TestEventsKey(t *testing.T) {
	dir := t.TempDir()
	build := func(apiKey string, env map[string]string) (*Adapter, error) {
		ev := eventsBlock()
		ev.APIKey = apiKey
		return New("batch", BackendConfig{Region: "eu-west-1", Events: ev}, map[string]JobConfig{"job": testTool()}, &Options{
			Client: &countingAPI{Client: testClient("http://127.0.0.1:9")},
			Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		})
	}
	for _, tc := range []struct {
		name, apiKey string
		env          map[string]string
		want         string
	}{
		{"unset variable", "${BATCH_EVENTS_KEY}", nil, "events.api_key: environment variable BATCH_EVENTS_KEY is not set"},
		{"short key", "${BATCH_EVENTS_KEY}", map[string]string{"BATCH_EVENTS_KEY": "hunter2"}, "events.api_key: environment variable BATCH_EVENTS_KEY holds a key shorter than 16 characters"},
		{"key with a line break", "${BATCH_EVENTS_KEY}", map[string]string{"BATCH_EVENTS_KEY": eventsKey + "\n"}, "contains a line break or NUL"},
		{"missing file", "${file:" + filepath.Join(dir, "none") + "}", nil, "events.api_key: secret file " + filepath.Join(dir, "none") + ": no such file"},
		{"literal key", eventsKey, nil, "events.api_key: must be a single ${NAME}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(tc.apiKey, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), eventsKey) {
				t.Errorf("the error %q quotes the key", err)
			}
		})
	}

	t.Run("a key file, rotated", func(t *testing.T) {
		path := filepath.Join(dir, "key")
		if err := os.WriteFile(path, []byte(eventsKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := build("${file:"+path+"}", nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		read := func(key string) error {
			_, err := a.ReadEvents(t.Context(), delivery(stateChange(t, nil), key))
			return err
		}
		if err := read(eventsKey); err != nil {
			t.Fatalf("ReadEvents with the file's key: %v", err)
		}
		rotated := "cm90YXRlZCBrZXksIGxvbmdlciB0aGFuIHRoZSBmaXJzdA"
		if err := os.WriteFile(path, []byte(rotated), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := read(rotated); err != nil {
			t.Errorf("ReadEvents with the rotated key: %v", err)
		}
		if err := read(eventsKey); !errors.Is(err, adapters.ErrForgedEvent) {
			t.Errorf("ReadEvents with the old key after the rotation = %v, want ErrForgedEvent", err)
		}
		if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := read(rotated); err != nil {
			t.Errorf("ReadEvents after a rotation to a weak key = %v, want the last good key kept", err)
		}
	})
}
