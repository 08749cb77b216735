package rest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
)

// The callback secrets of the tests: a Standard Webhooks one (whsec_ and
// base64 of the key) and a plain HMAC key.
const (
	testWhsec   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testHMACKey = "callback-hmac-key-0123456789"
)

// tReceived is when the tests' deliveries arrive.
var tReceived = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func eventsEnv(name string) (string, bool) {
	switch name {
	case "JOBS_TOKEN":
		return testSecret, true
	case "CALLBACK_SECRET":
		return testWhsec, true
	case "CALLBACK_KEY":
		return testHMACKey, true
	}
	return "", false
}

// newEventsAdapter returns an adapter of backend "jobs" with the events
// block and the tools given (default: deploy, testJob), its logs in logs.
func newEventsAdapter(t *testing.T, ev EventsConfig, tools map[string]JobConfig) (*Adapter, *syncBuffer) {
	t.Helper()
	if tools == nil {
		tools = map[string]JobConfig{"deploy": testJob()}
	}
	b := testBackend()
	b.Events = &ev
	logs := &syncBuffer{}
	a, err := New("jobs", b, tools, &Options{Getenv: eventsEnv, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, logs
}

// swEvents is an events block with Standard Webhooks signatures.
func swEvents() EventsConfig {
	return EventsConfig{Secret: "${CALLBACK_SECRET}", JobID: "id"}
}

// swSign returns the headers of a Standard Webhooks delivery of body,
// signed with the test secret.
func swSign(id string, ts time.Time, body string) http.Header {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(testWhsec, "whsec_"))
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac(key, id+"."+strconv.FormatInt(ts.Unix(), 10)+"."+body)))
	return h
}

func mac(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func delivery(h http.Header, body string) adapters.Delivery {
	return adapters.Delivery{Header: h, Body: []byte(body), ReceivedAt: tReceived}
}

// wantKind checks that err wraps want (nil: no error).
func wantKind(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("ReadEvents: %v, want no error", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("ReadEvents error %v, want one wrapping %q", err, want)
	}
}

const runningBody = `{"id":"job-1","status":"running","message":"step 2"}`

// The Standard Webhooks specification's own test vector (its reference
// libraries' signing test) verifies.
func TestStandardWebhooksSpecVector(t *testing.T) {
	ev := swEvents()
	ev.When = "has(body.status)" // the vector's body is not a job event
	a, _ := newEventsAdapter(t, ev, nil)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	d := adapters.Delivery{Header: h, Body: []byte(`{"test": 2432232314}`), ReceivedAt: time.Unix(1614265330, 0)}
	evs, err := a.ReadEvents(t.Context(), d)
	if err != nil || len(evs) != 0 {
		t.Fatalf("ReadEvents(spec vector) = %v, %v; want no events, no error", evs, err)
	}
	d.Body = []byte(`{"test": 2432232315}`)
	_, err = a.ReadEvents(t.Context(), d)
	wantKind(t, err, adapters.ErrForgedEvent)
}

func TestReadEventsStandardWebhooks(t *testing.T) {
	signed := func(ts time.Time) http.Header { return swSign("msg_1", ts, runningBody) }
	edit := func(h http.Header, f func(http.Header)) http.Header { f(h); return h }
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   error
	}{
		{"valid", signed(tReceived), runningBody, nil},
		{"within the window, late", signed(tReceived.Add(-5 * time.Minute)), runningBody, nil},
		{"within the window, early", signed(tReceived.Add(5 * time.Minute)), runningBody, nil},
		{"one of several signatures", edit(signed(tReceived), func(h http.Header) {
			h.Set("webhook-signature", "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg== v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,x "+h.Get("webhook-signature"))
		}), runningBody, nil},
		{"body changed", signed(tReceived), strings.Replace(runningBody, "running", "succeeded", 1), adapters.ErrForgedEvent},
		{"id changed", edit(signed(tReceived), func(h http.Header) { h.Set("webhook-id", "msg_2") }), runningBody, adapters.ErrForgedEvent},
		{"timestamp changed", edit(signed(tReceived), func(h http.Header) {
			h.Set("webhook-timestamp", strconv.FormatInt(tReceived.Unix()+1, 10))
		}), runningBody, adapters.ErrForgedEvent},
		{"wrong secret", edit(signed(tReceived), func(h http.Header) {
			h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac([]byte("another key"), "msg_1."+h.Get("webhook-timestamp")+"."+runningBody)))
		}), runningBody, adapters.ErrForgedEvent},
		{"only an asymmetric signature", edit(signed(tReceived), func(h http.Header) {
			h.Set("webhook-signature", "v1a,"+strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
		}), runningBody, adapters.ErrForgedEvent},
		{"signature not base64", edit(signed(tReceived), func(h http.Header) { h.Set("webhook-signature", "v1,!!!") }), runningBody, adapters.ErrForgedEvent},
		{"no signature", edit(signed(tReceived), func(h http.Header) { h.Del("webhook-signature") }), runningBody, adapters.ErrForgedEvent},
		{"no id", edit(signed(tReceived), func(h http.Header) { h.Del("webhook-id") }), runningBody, adapters.ErrForgedEvent},
		{"no timestamp", edit(signed(tReceived), func(h http.Header) { h.Del("webhook-timestamp") }), runningBody, adapters.ErrForgedEvent},
		{"too old", signed(tReceived.Add(-5*time.Minute - time.Second)), runningBody, adapters.ErrReplayedEvent},
		{"from the future", signed(tReceived.Add(5*time.Minute + time.Second)), runningBody, adapters.ErrReplayedEvent},
		{"old and forged: forged", edit(signed(tReceived.Add(-time.Hour)), func(h http.Header) { h.Set("webhook-id", "msg_2") }), runningBody, adapters.ErrForgedEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newEventsAdapter(t, swEvents(), nil)
			evs, err := a.ReadEvents(t.Context(), delivery(tt.header, tt.body))
			wantKind(t, err, tt.want)
			if tt.want != nil {
				if evs != nil {
					t.Errorf("events %v with an error", evs)
				}
				if strings.Contains(err.Error(), testWhsec[6:]) {
					t.Errorf("error %q contains the secret", err)
				}
				return
			}
			if len(evs) != 1 || evs[0].ID != "msg_1" || evs[0].JobID != "job-1" || evs[0].Observation.State != adapters.StateWorking {
				t.Errorf("events %+v, want one working event msg_1 about job-1", evs)
			}
		})
	}
}

func TestReadEventsHMAC(t *testing.T) {
	key := []byte(testHMACKey)
	hexSig := hex.EncodeToString(mac(key, runningBody))
	b64Sig := base64.StdEncoding.EncodeToString(mac(key, runningBody))
	ts := strconv.FormatInt(tReceived.Unix(), 10)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	hexEvents := EventsConfig{Secret: "${CALLBACK_KEY}", JobID: "id", Signature: SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_hex", Prefix: "sha256="}}
	b64Events := EventsConfig{Secret: "${CALLBACK_KEY}", JobID: "id", Signature: SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_base64"}}
	tsEvents := hexEvents
	tsEvents.TimestampHeader = "X-Timestamp"
	tsEvents.IDHeader = "X-Delivery"
	tsSig := func(at time.Time) string {
		return "sha256=" + hex.EncodeToString(mac(key, strconv.FormatInt(at.Unix(), 10)+"."+runningBody))
	}
	tests := []struct {
		name   string
		ev     EventsConfig
		header http.Header
		body   string
		want   error
		wantID string
	}{
		{"hex", hexEvents, hdr("X-Signature", "sha256="+hexSig, "webhook-id", "d-1"), runningBody, nil, "d-1"},
		{"hex upper case, no id", hexEvents, hdr("X-Signature", "sha256="+strings.ToUpper(hexSig)), runningBody, nil, ""},
		{"hex without the prefix", hexEvents, hdr("X-Signature", hexSig), runningBody, adapters.ErrForgedEvent, ""},
		{"hex wrong", hexEvents, hdr("X-Signature", "sha256="+hex.EncodeToString(mac([]byte("other"), runningBody))), runningBody, adapters.ErrForgedEvent, ""},
		{"hex body changed", hexEvents, hdr("X-Signature", "sha256="+hexSig), runningBody + " ", adapters.ErrForgedEvent, ""},
		{"hex not hex", hexEvents, hdr("X-Signature", "sha256=zz"), runningBody, adapters.ErrForgedEvent, ""},
		{"hex missing", hexEvents, hdr(), runningBody, adapters.ErrForgedEvent, ""},
		{"base64", b64Events, hdr("X-Signature", b64Sig), runningBody, nil, ""},
		{"base64 unpadded", b64Events, hdr("X-Signature", strings.TrimRight(b64Sig, "=")), runningBody, nil, ""},
		{"base64 given hex", b64Events, hdr("X-Signature", hexSig), runningBody, adapters.ErrForgedEvent, ""},
		{"base64 wrong", b64Events, hdr("X-Signature", base64.StdEncoding.EncodeToString(mac([]byte("other"), runningBody))), runningBody, adapters.ErrForgedEvent, ""},
		{"timestamped", tsEvents, hdr("X-Signature", tsSig(tReceived), "X-Timestamp", ts, "X-Delivery", "d-2"), runningBody, nil, "d-2"},
		{"timestamp missing", tsEvents, hdr("X-Signature", tsSig(tReceived)), runningBody, adapters.ErrForgedEvent, ""},
		{"timestamp changed", tsEvents, hdr("X-Signature", tsSig(tReceived), "X-Timestamp", strconv.FormatInt(tReceived.Unix()-1, 10)), runningBody, adapters.ErrForgedEvent, ""},
		{"signature of the body only", tsEvents, hdr("X-Signature", "sha256="+hexSig, "X-Timestamp", ts), runningBody, adapters.ErrForgedEvent, ""},
		{"too old", tsEvents, hdr("X-Signature", tsSig(tReceived.Add(-6*time.Minute)), "X-Timestamp", strconv.FormatInt(tReceived.Add(-6*time.Minute).Unix(), 10)), runningBody, adapters.ErrReplayedEvent, ""},
		{"from the future", tsEvents, hdr("X-Signature", tsSig(tReceived.Add(6*time.Minute)), "X-Timestamp", strconv.FormatInt(tReceived.Add(6*time.Minute).Unix(), 10)), runningBody, adapters.ErrReplayedEvent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newEventsAdapter(t, tt.ev, nil)
			evs, err := a.ReadEvents(t.Context(), delivery(tt.header, tt.body))
			wantKind(t, err, tt.want)
			if tt.want != nil {
				if strings.Contains(err.Error(), testHMACKey) {
					t.Errorf("error %q contains the secret", err)
				}
				return
			}
			if len(evs) != 1 || evs[0].ID != tt.wantID || evs[0].JobID != "job-1" {
				t.Errorf("events %+v, want one about job-1 with ID %q", evs, tt.wantID)
			}
		})
	}
}

// A longer tolerance widens the window.
func TestReadEventsTolerance(t *testing.T) {
	ev := swEvents()
	ev.Tolerance = time.Hour
	a, _ := newEventsAdapter(t, ev, nil)
	for _, skew := range []time.Duration{-59 * time.Minute, 59 * time.Minute} {
		if _, err := a.ReadEvents(t.Context(), delivery(swSign("m", tReceived.Add(skew), runningBody), runningBody)); err != nil {
			t.Errorf("skew %s: %v", skew, err)
		}
	}
	for _, skew := range []time.Duration{-61 * time.Minute, 61 * time.Minute} {
		_, err := a.ReadEvents(t.Context(), delivery(swSign("m", tReceived.Add(skew), runningBody), runningBody))
		if !errors.Is(err, adapters.ErrReplayedEvent) {
			t.Errorf("skew %s: %v, want a replayed event", skew, err)
		}
	}
}

// A callback is read with the same rules as a status answer: for each body
// the event's observation is the one a poll answered with that body gives.
func TestReadEventsMapsStatusLikePoll(t *testing.T) {
	logsLink := []adapters.Link{{Title: "Logs", URL: testBase + "/jobs/job-1/logs"}}
	finished := time.Date(2026, 12, 1, 9, 59, 30, 0, time.UTC)
	tests := []struct {
		name   string
		body   string
		want   adapters.Observation
		wantAt time.Time
	}{
		{"queued", `{"id":"job-1","status":"queued"}`,
			adapters.Observation{State: adapters.StateWorking, Message: "queued", Links: logsLink}, time.Time{}},
		{"running with progress", `{"id":"job-1","status":"running","message":"step 2","progress":{"done":2,"total":5}}`,
			adapters.Observation{State: adapters.StateWorking, Message: "step 2", Progress: &adapters.Progress{Done: 2, Total: 5}, Links: logsLink}, time.Time{}},
		{"waiting for input", `{"id":"job-1","status":"waiting_input","message":"approve?","questions":[{"key":"ok","message":"Deploy?","schema":{"type":"object","properties":{"sure":{"type":"boolean"}}}}]}`,
			adapters.Observation{State: adapters.StateInputRequired, Message: "approve?", Links: logsLink, InputRequests: map[string]adapters.InputRequest{
				"ok": {Message: "Deploy?", Schema: json.RawMessage(`{"type":"object","properties":{"sure":{"type":"boolean"}}}`)},
			}}, time.Time{}},
		{"succeeded", `{"id":"job-1","status":"succeeded","message":"done","result":{"text":"deployed v2","data":{"version":2}},"finished_at":"2026-12-01T09:59:30Z"}`,
			adapters.Observation{State: adapters.StateSucceeded, Message: "done", Links: logsLink, FinishedAt: finished,
				Result: &adapters.Result{Text: "deployed v2", Structured: map[string]any{"version": int64(2)}}}, finished},
		{"tool error", `{"id":"job-1","status":"failed","message":"tests failed","result":{"text":"3 failures"},"finished_at":"2026-12-01T09:59:30Z"}`,
			adapters.Observation{State: adapters.StateToolError, Message: "tests failed", Links: logsLink, FinishedAt: finished, Result: &adapters.Result{Text: "3 failures"}}, finished},
		{"protocol error", `{"id":"job-1","status":"error","message":"crashed","error":{"code":-32000,"message":"worker lost"}}`,
			adapters.Observation{State: adapters.StateFailed, Message: "crashed", Links: logsLink, Error: &adapters.JobError{Code: -32000, Message: "worker lost"}}, time.Time{}},
		{"cancelled", `{"id":"job-1","status":"cancelled"}`,
			adapters.Observation{State: adapters.StateCancelled, Message: "cancelled", Links: logsLink}, time.Time{}},
	}
	job := testJob()
	job.Status.FinishedAt = "finished_at"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newEventsAdapter(t, swEvents(), map[string]JobConfig{"deploy": job})
			evs, err := a.ReadEvents(t.Context(), delivery(swSign("msg_7", tReceived, tt.body), tt.body))
			if err != nil {
				t.Fatalf("ReadEvents: %v", err)
			}
			want := []adapters.Event{{ID: "msg_7", JobID: "job-1", At: tt.wantAt, Observation: tt.want}}
			if diff := cmp.Diff(want, evs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}

			f := newFixture(t, testBackend(), job)
			f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, tt.body))
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if diff := cmp.Diff(obs[0], evs[0].Observation, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the event reads the body unlike a poll (-poll +event):\n%s", diff)
			}
		})
	}
}

// Callbacks the adapter cannot read are errors that say why; those it does
// not handle are acknowledged with no event.
func TestReadEventsUnreadableAndIgnored(t *testing.T) {
	tests := []struct {
		name    string
		ev      func(*EventsConfig)
		body    string
		wantErr string // empty: no error and no event
		wantIs  error
		wantLog string
	}{
		{name: "no job ID", body: `{"status":"running"}`, wantErr: `the callback has no job ID at "id" (events.job_id)`},
		{name: "null job ID", body: `{"id":null,"status":"running"}`, wantErr: `the job ID at "id" (events.job_id) is null`},
		{name: "object job ID", body: `{"id":{"n":1},"status":"running"}`, wantErr: "is an object, not a string or number"},
		{name: "job ID expression without a value", ev: func(e *EventsConfig) { e.JobID = "= body.job.id" }, body: `{"status":"running"}`,
			wantErr: "events.job_id = body.job.id gives no job ID for this callback"},
		{name: "not JSON", body: `status=running`, wantErr: "the body is not JSON"},
		{name: "no status field", body: `{"id":"job-1"}`, wantErr: `reading the callback about job job-1: the status answer has no field "status"`, wantIs: adapters.ErrUnreadableStatus},
		{name: "unknown status", body: `{"id":"job-1","status":"PAUSED"}`,
			wantLog: `msg="callback with a status the states table does not list; ignoring it (the next poll reads it)" job=job-1 status=PAUSED`},
		{name: "not a job event", ev: func(e *EventsConfig) { e.When = `body.type == "job.status"` }, body: `{"type":"ping"}`},
		{name: "when reads an absent field", ev: func(e *EventsConfig) { e.When = `body.type == "job.status"` }, body: `{"id":"job-1","status":"running"}`},
		{name: "bad at", ev: func(e *EventsConfig) { e.At = "updated" }, body: `{"id":"job-1","status":"running","updated":"yesterday"}`,
			wantErr: `events.at updated is "yesterday", not an RFC 3339 time or Unix seconds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := swEvents()
			if tt.ev != nil {
				tt.ev(&ev)
			}
			a, logs := newEventsAdapter(t, ev, nil)
			evs, err := a.ReadEvents(t.Context(), delivery(swSign("m", tReceived, tt.body), tt.body))
			if tt.wantErr == "" {
				if err != nil || len(evs) != 0 {
					t.Fatalf("ReadEvents = %v, %v; want no events and no error", evs, err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadEvents error %v, want one containing %q", err, tt.wantErr)
				}
				if errors.Is(err, adapters.ErrForgedEvent) || errors.Is(err, adapters.ErrReplayedEvent) {
					t.Errorf("an authentic callback's error %v says it is not authentic", err)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("error %v does not wrap %v", err, tt.wantIs)
				}
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("logs %q do not contain %q", logs.String(), tt.wantLog)
			}
		})
	}
}

// events.status reads a callback whose body is shaped unlike the status
// answer, with CEL expressions over body and headers.
func TestReadEventsOwnRulesWithExpressions(t *testing.T) {
	ev := EventsConfig{
		Secret: "${CALLBACK_SECRET}",
		JobID:  `= body.job.id`,
		When:   `body.type.startsWith("job.") && headers["x-source"] == "ci"`,
		At:     "= body.occurred_at",
		Status: &StatusConfig{
			Field:   `= body.job.phase == "done" ? (body.job.ok ? "OK" : "BAD") : "RUNNING"`,
			States:  map[string]string{"RUNNING": "working", "OK": "succeeded", "BAD": "tool_error"},
			Message: `= "phase " + body.job.phase`,
			Result:  &ResultConfig{Text: `= body.job.ok ? "built " + string(body.job.artifacts) + " artifacts" : "build broke"`},
			Links:   map[string]string{"Build": "{base_url}/builds/{job.id}"},
		},
	}
	// Tools whose status rules differ: events.status decides.
	other := testJob()
	other.Status.Field = "state"
	a, _ := newEventsAdapter(t, ev, map[string]JobConfig{"deploy": testJob(), "build": other})
	tests := []struct {
		name string
		body string
		want []adapters.Event
	}{
		{"running", `{"type":"job.updated","occurred_at":"2026-12-01T09:59:00Z","job":{"id":"b-9","phase":"compile"}}`,
			[]adapters.Event{{ID: "m", JobID: "b-9", At: time.Date(2026, 12, 1, 9, 59, 0, 0, time.UTC), Observation: adapters.Observation{
				State: adapters.StateWorking, Message: "phase compile", Links: []adapters.Link{{Title: "Build", URL: testBase + "/builds/b-9"}}}}}},
		{"done", `{"type":"job.finished","occurred_at":1796119200,"job":{"id":42,"phase":"done","ok":true,"artifacts":3}}`,
			[]adapters.Event{{ID: "m", JobID: "42", At: time.Unix(1796119200, 0).UTC(), Observation: adapters.Observation{
				State: adapters.StateSucceeded, Message: "phase done", Result: &adapters.Result{Text: "built 3 artifacts"},
				Links: []adapters.Link{{Title: "Build", URL: testBase + "/builds/42"}}}}}},
		{"broke", `{"type":"job.finished","job":{"id":"b-9","phase":"done","ok":false}}`,
			[]adapters.Event{{ID: "m", JobID: "b-9", Observation: adapters.Observation{
				State: adapters.StateToolError, Message: "phase done", Result: &adapters.Result{Text: "build broke"},
				Links: []adapters.Link{{Title: "Build", URL: testBase + "/builds/b-9"}}}}}},
		{"another event type", `{"type":"ping"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := swSign("m", tReceived, tt.body)
			h.Set("X-Source", "ci")
			evs, err := a.ReadEvents(t.Context(), delivery(h, tt.body))
			if err != nil {
				t.Fatalf("ReadEvents: %v", err)
			}
			if diff := cmp.Diff(tt.want, evs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventsPolling(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	if _, ok := f.a.Events(); ok {
		t.Error("Events() ok without an events block")
	}
	a, _ := newEventsAdapter(t, swEvents(), nil)
	if p, ok := a.Events(); !ok || p != (adapters.EventPolling{Interval: 10 * time.Minute, Quiet: 30 * time.Minute}) {
		t.Errorf("Events() = %+v, %v; want the defaults 10m and 30m", p, ok)
	}
	ev := swEvents()
	ev.PollInterval, ev.Quiet = time.Minute, time.Hour
	a, _ = newEventsAdapter(t, ev, nil)
	if p, _ := a.Events(); p != (adapters.EventPolling{Interval: time.Minute, Quiet: time.Hour}) {
		t.Errorf("Events() = %+v, want 1m and 1h", p)
	}
}

func TestEventsValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*EventsConfig)
		want   []string
	}{
		{"valid", func(*EventsConfig) {}, nil},
		{"hmac", func(e *EventsConfig) {
			e.Signature = SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_hex", Prefix: "sha256="}
			e.TimestampHeader, e.IDHeader = "X-Timestamp", "X-Delivery"
		}, nil},
		{"no secret", func(e *EventsConfig) { e.Secret = "" }, []string{"events.secret"}},
		{"bad secret reference", func(e *EventsConfig) { e.Secret = "${SECRET" }, []string{"events.secret"}},
		{"unknown scheme", func(e *EventsConfig) { e.Signature.Scheme = "md5" }, []string{"events.signature.scheme"}},
		{"hmac without header", func(e *EventsConfig) { e.Signature.Scheme = "hmac_sha256_base64" }, []string{"events.signature.header"}},
		{"prefix on standard webhooks", func(e *EventsConfig) { e.Signature.Prefix = "sha256=" }, []string{"events.signature.prefix"}},
		{"bad header names", func(e *EventsConfig) {
			e.Signature.Header, e.TimestampHeader, e.IDHeader = "X Sig", "X:TS", "a b"
		}, []string{"events.signature.header", "events.timestamp_header", "events.id_header"}},
		{"negative tolerance", func(e *EventsConfig) { e.Tolerance = -time.Second }, []string{"events.tolerance"}},
		{"huge tolerance", func(e *EventsConfig) { e.Tolerance = 48 * time.Hour }, []string{"events.tolerance"}},
		{"short intervals", func(e *EventsConfig) { e.PollInterval, e.Quiet = time.Millisecond, -time.Second }, []string{"events.poll_interval", "events.quiet"}},
		{"no job_id", func(e *EventsConfig) { e.JobID = "" }, []string{"events.job_id"}},
		{"job_id reads args", func(e *EventsConfig) { e.JobID = "= args.id" }, []string{"events.job_id"}},
		{"job_id placeholder", func(e *EventsConfig) { e.JobID = "{job.id}" }, []string{"events.job_id"}},
		{"when not boolean", func(e *EventsConfig) { e.When = `body.type + "x"` }, []string{"events.when"}},
		{"at reads status", func(e *EventsConfig) { e.At = "= status" }, []string{"events.at"}},
		{"tool and status", func(e *EventsConfig) {
			e.Tool = "deploy"
			e.Status = &StatusConfig{Field: "s", States: map[string]string{"x": "succeeded"}}
		},
			[]string{"events.tool"}},
		{"status with a call", func(e *EventsConfig) {
			e.Status = &StatusConfig{Call: Call{Path: "/jobs/{job.id}"}, Field: "s", States: map[string]string{"x": "succeeded"}}
		}, []string{"events.status.path"}},
		{"status rules wrong", func(e *EventsConfig) {
			e.Status = &StatusConfig{Field: "= args.x", States: map[string]string{"x": "done", "y": "succeeded"}, Links: map[string]string{"Job": "{base_url}{job.location}"}}
		}, []string{"events.status.field", "events.status.states.x", "events.status.links.Job"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBackend()
			ev := swEvents()
			tt.mutate(&ev)
			b.Events = &ev
			if diff := cmp.Diff(tt.want, fieldPaths(t, b.Validate()), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("error paths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Which status rules read a callback, and the problems New finds.
func TestNewChoosesCallbackRules(t *testing.T) {
	sameReading := testJob()
	sameReading.Status.Path = "/jobs/{job.id}" // another call, the same readings
	differs := testJob()
	differs.Status.Message = "detail"
	readsArgs := testJob()
	readsArgs.Status.Message = "= args.project + ': ' + body.message"
	tests := []struct {
		name    string
		ev      func(*EventsConfig)
		tools   map[string]JobConfig
		wantErr string // empty: New succeeds
	}{
		{name: "one tool", tools: map[string]JobConfig{"deploy": testJob()}},
		{name: "tools reading alike", tools: map[string]JobConfig{"deploy": testJob(), "redeploy": sameReading}},
		{name: "tools reading differently", tools: map[string]JobConfig{"deploy": testJob(), "report": differs},
			wantErr: "events: the backend's tools read their status differently (deploy, report), and a callback does not say which tool its job belongs to: say which status rules read a callback with events.tool or events.status"},
		{name: "events.tool picks", ev: func(e *EventsConfig) { e.Tool = "report" }, tools: map[string]JobConfig{"deploy": testJob(), "report": differs}},
		{name: "events.tool unknown", ev: func(e *EventsConfig) { e.Tool = "nope" }, tools: map[string]JobConfig{"deploy": testJob()},
			wantErr: `events.tool: the backend has no tool "nope" (it has deploy)`},
		{name: "tool rules read args", tools: map[string]JobConfig{"deploy": readsArgs},
			wantErr: `events: the status rules of tool "deploy" read callbacks (events.status is not set), but: status.message: args is not available here: a callback does not carry the tool call's arguments; write events.status for callbacks`},
		{name: "no tools", tools: map[string]JobConfig{}, wantErr: "events: the backend has no tools"},
		{name: "no tools, own rules", ev: func(e *EventsConfig) {
			e.Status = &StatusConfig{Field: "s", States: map[string]string{"done": "succeeded"}}
		}, tools: map[string]JobConfig{}},
		{name: "unset secret", ev: func(e *EventsConfig) { e.Secret = "${NO_SUCH_SECRET}" }, tools: map[string]JobConfig{"deploy": testJob()},
			wantErr: "events.secret: environment variable NO_SUCH_SECRET is not set"},
		{name: "not a Standard Webhooks secret", ev: func(e *EventsConfig) { e.Secret = "${CALLBACK_KEY}" }, tools: map[string]JobConfig{"deploy": testJob()},
			wantErr: "events.secret: is not a Standard Webhooks secret: write it as the job API shows it, whsec_ followed by base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBackend()
			ev := swEvents()
			if tt.ev != nil {
				tt.ev(&ev)
			}
			b.Events = &ev
			a, err := New("jobs", b, tt.tools, &Options{Getenv: eventsEnv})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if _, ok := a.Events(); !ok {
					t.Error("Events() not ok")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), testHMACKey) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

// A ${file:} secret is re-read when the file changes: a rotated secret
// takes effect without a restart.
func TestReadEventsSecretFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callback-secret")
	if err := os.WriteFile(path, []byte("first-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := EventsConfig{Secret: "${file:" + path + "}", JobID: "id", Signature: SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_hex"}}
	a, _ := newEventsAdapter(t, ev, nil)
	read := func(key string) error {
		h := http.Header{}
		h.Set("X-Signature", hex.EncodeToString(mac([]byte(key), runningBody)))
		_, err := a.ReadEvents(t.Context(), delivery(h, runningBody))
		return err
	}
	if err := read("first-key-0123456789"); err != nil {
		t.Fatalf("first key: %v", err)
	}
	if err := os.WriteFile(path, []byte("second-key-0123456789-longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := read("second-key-0123456789-longer"); err != nil {
		t.Errorf("rotated key: %v", err)
	}
	if err := read("first-key-0123456789"); !errors.Is(err, adapters.ErrForgedEvent) {
		t.Errorf("old key after rotation: %v, want a forged event", err)
	}
}

// receiver is an HTTP endpoint for callbacks that reads each with the
// adapter, as the bridge's /events/{backend} does.
type receiver struct {
	a   *Adapter
	now func() time.Time

	mu     sync.Mutex
	events []adapters.Event
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	evs, err := rc.a.ReadEvents(r.Context(), adapters.Delivery{Header: r.Header, Body: body, ReceivedAt: rc.now()})
	switch {
	case errors.Is(err, adapters.ErrForgedEvent), errors.Is(err, adapters.ErrReplayedEvent):
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.events = append(rc.events, evs...)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (rc *receiver) take() []adapters.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	evs := rc.events
	rc.events = nil
	return evs
}

// The job API fake's callbacks, in each scheme, are read by the adapter
// configured as the package documentation says: every state change of a
// job arrives as an event with the state a poll would report, a
// redelivery keeps its ID, and an old one is refused.
func TestFakeCallbacksEndToEnd(t *testing.T) {
	tests := []struct {
		name string
		cb   jobapi.Callbacks
		ev   EventsConfig
	}{
		{"standard webhooks",
			jobapi.Callbacks{Secret: testWhsec},
			EventsConfig{Secret: "${CALLBACK_SECRET}", JobID: "id"}},
		{"hex with timestamp",
			jobapi.Callbacks{Secret: testHMACKey, Scheme: jobapi.SchemeHexHMAC, Prefix: "sha256=", TimestampHeader: "X-Timestamp", IDHeader: "X-Delivery"},
			EventsConfig{Secret: "${CALLBACK_KEY}", JobID: "id", TimestampHeader: "X-Timestamp", IDHeader: "X-Delivery",
				Signature: SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_hex", Prefix: "sha256="}}},
		{"base64",
			jobapi.Callbacks{Secret: testHMACKey, Scheme: jobapi.SchemeBase64HMAC, SignatureHeader: "X-Hub-Signature"},
			EventsConfig{Secret: "${CALLBACK_KEY}", JobID: "id", Signature: SignatureConfig{Header: "X-Hub-Signature", Scheme: "hmac_sha256_base64"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &testClock{now: tReceived}
			rc := &receiver{now: clock.Now}
			endpoint := httptest.NewServer(rc)
			t.Cleanup(endpoint.Close)

			cb := tt.cb
			cb.URL, cb.Interval = endpoint.URL+"/events/jobapi", -1 // sent when the test says
			fake := jobapi.New(&jobapi.Options{Now: clock.Now, Callbacks: &cb})
			base, err := fake.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fake.Close() })

			b := BackendConfig{BaseURL: base, AllowNetworks: []string{"127.0.0.0/8"}, Events: &tt.ev}
			a, err := New("jobapi", b, map[string]JobConfig{"job": loadJob(t)}, &Options{Getenv: eventsEnv, Now: clock.Now})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			rc.a = a

			ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "c-1", Arguments: map[string]any{
				"duration": 10, "outcome": "success", "output": "all good", "data": map[string]any{"n": 1},
			}})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			send := func() []adapters.Event {
				t.Helper()
				if _, err := fake.SendCallbacks(t.Context()); err != nil {
					t.Fatalf("SendCallbacks: %v", err)
				}
				return rc.take()
			}
			// Each event reads as a poll of the job at that moment.
			check := func(evs []adapters.Event, state adapters.State) {
				t.Helper()
				if len(evs) != 1 || evs[0].JobID != ref.ID || evs[0].Observation.State != state || evs[0].ID == "" {
					t.Fatalf("events %+v, want one %s event with an ID about %s", evs, state, ref.ID)
				}
				obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
				if err != nil {
					t.Fatalf("Poll: %v", err)
				}
				if diff := cmp.Diff(obs[0], evs[0].Observation, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("the event differs from a poll (-poll +event):\n%s", diff)
				}
			}
			running := send()
			check(running, adapters.StateWorking)
			if evs := send(); len(evs) != 0 {
				t.Errorf("no change, yet events %+v", evs)
			}
			clock.Advance(11 * time.Second)
			done := send()
			check(done, adapters.StateSucceeded)
			if r := done[0].Observation.Result; r == nil || r.Text != "all good" || r.Structured["n"] != int64(1) {
				t.Errorf("result %+v, want all good with n=1", r)
			}
			if want := tReceived.Add(10 * time.Second); !done[0].At.Equal(want) {
				t.Errorf("At %v, want the finish time %v", done[0].At, want)
			}

			// A redelivery keeps the ID, so that the bridge applies it once.
			d, err := fake.Redeliver(t.Context(), done[0].ID, time.Time{})
			if err != nil || d.Answer != http.StatusAccepted {
				t.Fatalf("Redeliver: %+v, %v", d, err)
			}
			if again := rc.take(); len(again) != 1 || again[0].ID != done[0].ID {
				t.Errorf("redelivered events %+v, want the ID %s again", again, done[0].ID)
			}
			// One signed long ago is refused where the scheme signs a time,
			// and is otherwise only the same ID again.
			d, err = fake.Redeliver(t.Context(), done[0].ID, clock.Now().Add(-time.Hour))
			if tt.ev.TimestampHeader != "" || tt.ev.Signature.Scheme == "" {
				if d.Answer != http.StatusUnauthorized || err == nil {
					t.Errorf("an hour-old redelivery answered %d (%v), want 401", d.Answer, err)
				}
			} else if d.Answer != http.StatusAccepted {
				t.Errorf("an unsigned-time redelivery answered %d (%v), want 202", d.Answer, err)
			}
		})
	}
}

// testClock is a manually advanced clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
