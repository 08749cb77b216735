package batchfake

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/google/go-cmp/cmp"
)

const (
	testKeyHeader = "X-Jobbridge-Key"
	testKey       = "k3y-0f-the-connection-not-a-real-one"
)

// receiver is an API destination endpoint that keeps every request and
// answers with the statuses queued in answers (then 202).
type receiver struct {
	mu      sync.Mutex
	reqs    []received
	answers []int
}

type received struct {
	header http.Header
	body   []byte
	host   string
	close  bool
	length int64
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, received{header: req.Header.Clone(), body: body, host: req.Host, close: req.Close, length: req.ContentLength})
	status := http.StatusAccepted
	if len(r.answers) > 0 {
		status, r.answers = r.answers[0], r.answers[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

// envelopeOf decodes a delivery's body.
func envelopeOf(t *testing.T, body []byte) (env struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("the body %s is not an event envelope: %v", body, err)
	}
	return env
}

// eventFixture is a fixture whose fake sends events to a receiver.
func eventFixture(t *testing.T, opts *Options) (*fixture, *receiver) {
	t.Helper()
	rcv := &receiver{}
	hs := httptest.NewServer(rcv)
	t.Cleanup(hs.Close)
	if opts == nil {
		opts = &Options{}
	}
	opts.Events = &EventsOptions{URL: hs.URL + "/events/batch", KeyHeader: testKeyHeader, Key: testKey}
	return newFixture(t, opts), rcv
}

// statuses lists "STATUS@offset" of the events delivered, offset from t0.
func statuses(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s@%v", e.Status, e.Time.Sub(t0)))
	}
	return out
}

// TestEventsFollowLifecycles checks which events a job sends: one per
// change of status (or of finished attempts), at the moment of the change,
// none for the submission, whether the clock moves in small steps or
// jumps past every change at once.
func TestEventsFollowLifecycles(t *testing.T) {
	tests := []struct {
		name   string
		in     *batch.SubmitJobInput
		act    func(f *fixture, id string)
		until  time.Duration
		want   []string
		jobIDs int // distinct jobs sending (array children included); default 1
	}{
		{name: "succeeds", in: scripted("ok", "submitted=1s,runnable=2s,starting=1s,running=5s,exit=0"), until: time.Minute,
			want: []string{"RUNNABLE@1s", "STARTING@3s", "RUNNING@4s", "SUCCEEDED@9s"}},
		{name: "pending on purpose", in: scripted("pending", "submitted=1s,pending=2s,runnable=1s,starting=1s,running=1s"), until: time.Minute,
			want: []string{"PENDING@1s", "RUNNABLE@3s", "STARTING@4s", "RUNNING@5s", "SUCCEEDED@6s"}},
		{name: "retried, then fails", in: func() *batch.SubmitJobInput {
			in := scripted("retry", "submitted=0s,runnable=1s,starting=1s,running=2s,exit=3")
			in.RetryStrategy = &types.RetryStrategy{Attempts: aws.Int32(2)}
			return in
		}(), until: time.Minute,
			want: []string{"RUNNABLE@0s", "STARTING@1s", "RUNNING@2s", "RUNNABLE@4s", "STARTING@5s", "RUNNING@6s", "FAILED@8s"}},
		{name: "phases of no length send nothing", in: scripted("quick", "submitted=0s,runnable=0s,starting=0s,running=3s,exit=0"), until: time.Minute,
			want: []string{"RUNNING@0s", "SUCCEEDED@3s"}},
		{name: "terminated while running", in: scripted("stopped", "submitted=0s,runnable=0s,starting=0s,running=1h,terminate_delay=5s"), until: 2 * time.Minute,
			act: func(f *fixture, id string) {
				f.clock.Advance(10 * time.Second)
				if _, err := f.client.TerminateJob(f.t.Context(), &batch.TerminateJobInput{JobId: &id, Reason: aws.String("operator")}); err != nil {
					f.t.Fatalf("TerminateJob: %v", err)
				}
			},
			want: []string{"RUNNING@0s", "FAILED@15s"}},
		{name: "array", in: func() *batch.SubmitJobInput {
			in := scripted("array", "submitted=1s,runnable=0s,starting=0s,running=2s,stagger=1s")
			in.ArrayProperties = &types.ArrayProperties{Size: aws.Int32(2)}
			return in
		}(), until: time.Minute, jobIDs: 3,
			// The children's, then the parent's, which ends once they have.
			want: []string{"RUNNING@1s", "RUNNABLE@1s", "PENDING@1s", "RUNNING@2s", "SUCCEEDED@3s", "SUCCEEDED@4s", "SUCCEEDED@4s"}},
	}
	for _, tc := range tests {
		for _, step := range []time.Duration{500 * time.Millisecond, 0} {
			name := tc.name + ", one jump"
			if step > 0 {
				name = tc.name + ", small steps"
			}
			t.Run(name, func(t *testing.T) {
				f, rcv := eventFixture(t, nil)
				id := f.submit(tc.in)
				if tc.act != nil {
					tc.act(f, id)
				}
				for step > 0 && f.clock.Now().Sub(t0) < tc.until {
					if _, err := f.srv.SendEvents(t.Context()); err != nil {
						t.Fatalf("SendEvents: %v", err)
					}
					f.clock.Advance(step)
				}
				f.clock.Advance(tc.until - f.clock.Now().Sub(t0))
				if _, err := f.srv.SendEvents(t.Context()); err != nil {
					t.Fatalf("SendEvents: %v", err)
				}
				evs := f.srv.Events()
				if diff := cmp.Diff(tc.want, statuses(evs)); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				jobs := map[string]bool{}
				for _, e := range evs {
					jobs[e.JobID] = true
					if !strings.HasPrefix(e.JobID, id) {
						t.Errorf("event of job %s, want %s or a child of it", e.JobID, id)
					}
				}
				if want := max(tc.jobIDs, 1); len(jobs) != want {
					t.Errorf("events of %d jobs, want %d", len(jobs), want)
				}
				if got := len(rcv.got()); got != len(evs) {
					t.Errorf("%d deliveries for %d events", got, len(evs))
				}
				if n, err := f.srv.SendEvents(t.Context()); n != 0 || err != nil {
					t.Errorf("SendEvents with nothing new = %d, %v; want 0, nil", n, err)
				}
			})
		}
	}
}

// TestEventDeliveryWire checks one delivery as an API destination sends
// it: the method, the headers (EventBridge's own and the connection's API
// key), and the envelope, whose detail is the JobDetail DescribeJobs gives
// at the moment of the change.
func TestEventDeliveryWire(t *testing.T) {
	f, rcv := eventFixture(t, &Options{Region: "eu-west-1", AccountID: "210987654321"})
	id := f.submit(scripted("wire", "submitted=0s,runnable=1500ms,starting=1s,running=1h"))
	f.clock.Advance(1500 * time.Millisecond) // STARTING at 1.5s
	if n, err := f.srv.SendEvents(t.Context()); n != 2 || err != nil {
		t.Fatalf("SendEvents = %d, %v; want the RUNNABLE and STARTING events", n, err)
	}
	describe := rawDescribe(t, f, id)
	got := rcv.got()
	r := got[1]
	for k, want := range map[string]string{
		"Content-Type":    "application/json; charset=utf-8",
		"User-Agent":      "Amazon/EventBridge/ApiDestinations",
		"Range":           "bytes=0-1048575",
		"Accept-Encoding": "gzip,deflate",
		testKeyHeader:     testKey,
	} {
		if v := r.header.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if !r.close || r.length != int64(len(r.body)) {
		t.Errorf("Connection close %v, Content-Length %d for %d bytes; want close and the length", r.close, r.length, len(r.body))
	}
	env := envelopeOf(t, r.body)
	wantEnv := envelopeOf(t, r.body)
	wantEnv.Version, wantEnv.DetailType, wantEnv.Source = "0", "Batch Job State Change", "aws.batch"
	wantEnv.Account, wantEnv.Region, wantEnv.Time = "210987654321", "eu-west-1", "2026-01-02T03:04:06Z" // 03:04:06.5, in whole seconds
	wantEnv.Resources = []string{"arn:aws:batch:eu-west-1:210987654321:job/" + id}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("envelope (-want +got):\n%s", diff)
	}
	if !uuidRE.MatchString(env.ID) || env.ID == envelopeOf(t, got[0].body).ID {
		t.Errorf("id %q: want a fresh UUID", env.ID)
	}
	var detail, described any
	_ = json.Unmarshal(env.Detail, &detail)
	_ = json.Unmarshal(describe, &described)
	if diff := cmp.Diff(described, detail); diff != "" {
		t.Errorf("detail differs from DescribeJobs' JobDetail at the same moment (-describe +detail):\n%s", diff)
	}
	if detail.(map[string]any)["status"] != "STARTING" {
		t.Errorf("detail status %v, want STARTING", detail.(map[string]any)["status"])
	}
}

// rawDescribe returns the JobDetail JSON DescribeJobs answers for id.
func rawDescribe(t *testing.T, f *fixture, id string) json.RawMessage {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url+"/v1/describejobs", strings.NewReader(`{"jobs":["`+id+`"]}`))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDTEST/20260102/us-east-1/batch/aws4_request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("DescribeJobs: %v", err)
	}
	defer resp.Body.Close()
	var out struct{ Jobs []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Jobs) != 1 {
		t.Fatalf("DescribeJobs answer: %v, %d jobs", err, len(out.Jobs))
	}
	return out.Jobs[0]
}

// TestEventRetries checks EventBridge's retry rule: an answer 429 or 5xx
// keeps the event (and those after it) for the next round, which sends it
// with the same id; any other answer, a 400 included, ends its delivery.
func TestEventRetries(t *testing.T) {
	f, rcv := eventFixture(t, nil)
	f.submit(scripted("retried", "submitted=0s,runnable=1s,starting=1s,running=1s"))
	f.clock.Advance(time.Minute)
	rcv.answers = []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusAccepted, http.StatusBadRequest}
	n, err := f.srv.SendEvents(t.Context())
	if n != 0 || err == nil || !strings.Contains(err.Error(), "answered 503") || !strings.Contains(err.Error(), "4 events wait") {
		t.Fatalf("SendEvents against a 503 = %d, %v; want 0 and an error saying 4 events wait", n, err)
	}
	if n, err = f.srv.SendEvents(t.Context()); n != 0 || err == nil || !strings.Contains(err.Error(), "answered 429") {
		t.Fatalf("SendEvents against a 429 = %d, %v", n, err)
	}
	if n, err = f.srv.SendEvents(t.Context()); n != 4 || err != nil {
		t.Fatalf("SendEvents = %d, %v; want the 4 events delivered (a 400 is not retried)", n, err)
	}
	got := rcv.got()
	if len(got) != 6 {
		t.Fatalf("%d requests, want 6 (3 of the first event, then 3)", len(got))
	}
	first := envelopeOf(t, got[0].body).ID
	for i := 1; i < 3; i++ {
		if id := envelopeOf(t, got[i].body).ID; id != first {
			t.Errorf("retry %d has id %s, want the first's %s", i, id, first)
		}
	}
	evs := f.srv.Events()
	if evs[0].Deliveries != 3 || evs[0].Answer != http.StatusAccepted || evs[1].Answer != http.StatusBadRequest {
		t.Errorf("events %+v: want 3 deliveries of the first (202), the second answered 400", evs[:2])
	}
}

// TestRedeliver checks that a delivered event can be sent again with the
// same id and body, and that an unknown id is an error.
func TestRedeliver(t *testing.T) {
	f, rcv := eventFixture(t, nil)
	f.submit(scripted("again", "submitted=0s,runnable=1s,starting=1s,running=1s"))
	f.clock.Advance(time.Minute)
	if _, err := f.srv.SendEvents(t.Context()); err != nil {
		t.Fatalf("SendEvents: %v", err)
	}
	last := f.srv.Events()[3]
	status, err := f.srv.Redeliver(t.Context(), last.ID)
	if status != http.StatusAccepted || err != nil {
		t.Fatalf("Redeliver = %d, %v", status, err)
	}
	got := rcv.got()
	if len(got) != 5 || !bytes.Equal(got[4].body, last.Body) || got[4].header.Get(testKeyHeader) != testKey {
		t.Errorf("redelivery %d: body %s, want the %s event's body again with the key", len(got), got[len(got)-1].body, last.Status)
	}
	if _, err := f.srv.Redeliver(t.Context(), "no-such-event"); err == nil {
		t.Errorf("Redeliver of an unknown id succeeded")
	}
}

// TestEventRecording checks that deliveries are recorded for the spec
// checks, with the API key's value redacted.
func TestEventRecording(t *testing.T) {
	dir := t.TempDir()
	f, _ := eventFixture(t, &Options{ExchangeDir: dir})
	f.submit(scripted("recorded", "submitted=0s,runnable=0s,starting=0s,running=1s"))
	f.clock.Advance(time.Minute)
	if n, err := f.srv.SendEvents(t.Context()); n != 2 || err != nil {
		t.Fatalf("SendEvents = %d, %v", n, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("batch-%d.jsonl", os.Getpid())))
	if err != nil {
		t.Fatalf("reading the exchanges: %v", err)
	}
	if bytes.Contains(raw, []byte(testKey)) {
		t.Errorf("the recording holds the API key")
	}
	var deliveries int
	for l := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var x struct {
			Backend, Method, Path, Operation string
			Status                           int
			RequestHeaders                   http.Header `json:"request_headers"`
			RequestBody                      string      `json:"request_body"`
		}
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if x.Operation != OpEventDelivery {
			continue
		}
		deliveries++
		if x.Backend != "batch" || x.Method != "POST" || x.Path != "/events/batch" || x.Status != http.StatusAccepted {
			t.Errorf("delivery recorded as %s %s %s %d", x.Backend, x.Method, x.Path, x.Status)
		}
		h := x.RequestHeaders
		if h.Get(testKeyHeader) != "[redacted]" || h.Get("User-Agent") != eventUserAgent || h.Get("Host") == "" || h.Get("Content-Length") != fmt.Sprint(len(x.RequestBody)) {
			t.Errorf("delivery headers %v", h)
		}
		envelopeOf(t, []byte(x.RequestBody))
	}
	if deliveries != 2 {
		t.Errorf("%d deliveries recorded, want 2", deliveries)
	}
}

// TestStartSendsEvents checks that a started server with Options.Events
// sends its jobs' events by itself, in real time, until Close.
func TestStartSendsEvents(t *testing.T) {
	rcv := &receiver{}
	hs := httptest.NewServer(rcv)
	defer hs.Close()
	srv := New(&Options{Events: &EventsOptions{URL: hs.URL, KeyHeader: testKeyHeader, Key: testKey, Interval: 10 * time.Millisecond}})
	url, err := srv.Start("")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer srv.Close()
	client := batch.New(batch.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", "")})
	in := scripted("live", "submitted=0s,runnable=0s,starting=0s,running=50ms")
	in.JobQueue, in.JobDefinition = aws.String("default"), aws.String("sleeper")
	if _, err := client.SubmitJob(t.Context(), in); err != nil {
		t.Fatalf("SubmitJob: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rcv.got()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := statusesOf(t, rcv.got()); !cmp.Equal(got, []string{"RUNNING", "SUCCEEDED"}) {
		t.Fatalf("events received %v, want RUNNING and SUCCEEDED", got)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func statusesOf(t *testing.T, rs []received) []string {
	var out []string
	for _, r := range rs {
		var d struct{ Status string }
		_ = json.Unmarshal(envelopeOf(t, r.body).Detail, &d)
		out = append(out, d.Status)
	}
	return out
}
