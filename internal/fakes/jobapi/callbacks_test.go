package jobapi

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// specSecret and the values below are the Standard Webhooks specification's
// test vector (its reference libraries' signing test).
const specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestCallbackSignatureMatchesStandardWebhooksVector(t *testing.T) {
	c := newCallbacker(Callbacks{Secret: specSecret})
	h, err := c.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"jobapi-fake-callbacks"},
		"Webhook-Id":        {"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
}

// callbackSink records the callbacks it receives and answers them with
// status.
type callbackSink struct {
	status int

	mu   sync.Mutex
	got  []received
	seen chan struct{}
}

type received struct {
	Path   string
	Header http.Header
	Body   string
}

func newSink(t *testing.T, status int) (*callbackSink, string) {
	t.Helper()
	s := &callbackSink{status: status, seen: make(chan struct{}, 100)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/events/jobs"
}

func (s *callbackSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, received{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	s.mu.Unlock()
	s.seen <- struct{}{}
	w.WriteHeader(s.status)
}

func (s *callbackSink) take() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

// verifyStandardWebhooks checks a delivery as the specification's receiver
// does and returns its timestamp.
func verifyStandardWebhooks(t *testing.T, secret string, r received) time.Time {
	t.Helper()
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	if id == "" || strings.Contains(id, ".") {
		t.Errorf("webhook-id %q: want a non-empty ID without '.'", id)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Errorf("webhook-timestamp %q is not integer Unix seconds", ts)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + r.Body))
	if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); sig != want {
		t.Errorf("webhook-signature %q, want %q", sig, want)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return time.Unix(sec, 0)
}

// Each change of a job's state is called back once, with the job document
// a GET would have answered at that moment, signed; nothing is sent while
// nothing changes.
func TestCallbacksOnEachStateChange(t *testing.T) {
	sink, url := newSink(t, http.StatusNoContent)
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now, Callbacks: &Callbacks{URL: url, Secret: specSecret, Interval: -1}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f := &fixture{t: t, clock: clock, api: api, http: srv}

	call(f, "POST", "/jobs", `{"correlation_id":"c-1","queue_seconds":1,"ask_after_seconds":1,"duration_seconds":2,"output":"ok",
		"questions":[{"key":"a","message":"A?"},{"key":"b","message":"B?"}]}`)
	step := func(advance time.Duration, wantStatus ...string) []received {
		t.Helper()
		clock.Advance(advance)
		sent, err := api.SendCallbacks(t.Context())
		if err != nil {
			t.Fatalf("SendCallbacks: %v", err)
		}
		got := sink.take()
		var statuses []string
		for i, r := range got {
			var doc jobDocument
			if err := json.Unmarshal([]byte(r.Body), &doc); err != nil {
				t.Fatalf("callback body %q: %v", r.Body, err)
			}
			statuses = append(statuses, doc.Status)
			if ts := verifyStandardWebhooks(t, specSecret, r); !ts.Equal(clock.Now().Truncate(time.Second)) {
				t.Errorf("timestamp %v, want the clock's %v", ts, clock.Now())
			}
			// The body is what GET /jobs/<id> answers now.
			_, current := call(f, "GET", "/jobs/"+doc.ID, "")
			if r.Body+"\n" != current {
				t.Errorf("callback body %s, want the job document %s", r.Body, current)
			}
			if r.Path != "/events/jobs" || sent[i].ID != r.Header.Get("webhook-id") || sent[i].Answer != http.StatusNoContent {
				t.Errorf("delivery %+v of request %+v", sent[i], r)
			}
		}
		if diff := cmp.Diff(wantStatus, statuses); diff != "" {
			t.Errorf("statuses called back (-want +got):\n%s", diff)
		}
		return got
	}
	step(0, statusQueued)
	step(0)
	step(time.Second, statusRunning)
	step(500 * time.Millisecond)
	step(time.Second, statusWaitingInput)
	call(f, "POST", "/jobs/job-000001/answers", `{"answers":{"a":{"action":"accept"}}}`)
	step(0, statusWaitingInput) // one question fewer
	call(f, "POST", "/jobs/job-000001/answers", `{"answers":{"b":{"action":"accept"}}}`)
	step(0, statusRunning)
	step(2*time.Second, statusSucceeded)
	step(time.Hour)

	call(f, "POST", "/jobs", `{"duration_seconds":60}`)
	step(0, statusRunning)
	call(f, "POST", "/jobs/job-000002/cancel", ``)
	step(0, statusCancelled)

	ids := map[string]bool{}
	for _, d := range api.Deliveries() {
		if ids[d.ID] {
			t.Errorf("delivery ID %s repeated", d.ID)
		}
		ids[d.ID] = true
	}
	if len(ids) != 8 {
		t.Errorf("%d deliveries, want 8", len(ids))
	}
}

// A redelivery has the same ID and body and a new signature for its own
// timestamp, which a test may set in the past.
func TestRedeliver(t *testing.T) {
	sink, url := newSink(t, http.StatusAccepted)
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now, Callbacks: &Callbacks{URL: url, Secret: specSecret, Interval: -1}})
	f := &fixture{t: t, clock: clock, api: api, http: httptest.NewServer(api)}
	t.Cleanup(f.http.Close)
	call(f, "POST", "/jobs", `{"duration_seconds":0}`)
	sent, err := api.SendCallbacks(t.Context())
	if err != nil || len(sent) != 1 {
		t.Fatalf("SendCallbacks = %v, %v", sent, err)
	}
	first := sink.take()[0]

	clock.Advance(time.Minute)
	d, err := api.Redeliver(t.Context(), sent[0].ID, time.Time{})
	if err != nil || d.Answer != http.StatusAccepted {
		t.Fatalf("Redeliver = %+v, %v", d, err)
	}
	again := sink.take()[0]
	if again.Header.Get("webhook-id") != first.Header.Get("webhook-id") || again.Body != first.Body {
		t.Errorf("redelivery %+v differs from the delivery %+v", again, first)
	}
	if ts := verifyStandardWebhooks(t, specSecret, again); !ts.Equal(t0.Add(time.Minute)) {
		t.Errorf("redelivery timestamp %v, want now, %v", ts, t0.Add(time.Minute))
	}

	old := t0.Add(-time.Hour)
	if _, err := api.Redeliver(t.Context(), sent[0].ID, old); err != nil {
		t.Fatal(err)
	}
	if ts := verifyStandardWebhooks(t, specSecret, sink.take()[0]); !ts.Equal(old) {
		t.Errorf("old redelivery timestamp %v, want %v", ts, old)
	}
	if _, err := api.Redeliver(t.Context(), "msg_none", time.Time{}); err == nil {
		t.Error("Redeliver of an unknown ID: no error")
	}
}

func TestCallbackHMACSchemes(t *testing.T) {
	const key = "hmac-key-for-tests"
	body := func(r received) []byte { return []byte(r.Body) }
	sum := func(s ...[]byte) []byte {
		m := hmac.New(sha256.New, []byte(key))
		for _, b := range s {
			m.Write(b)
		}
		return m.Sum(nil)
	}
	tests := []struct {
		name string
		cb   Callbacks
		want func(r received) http.Header
	}{
		{"hex with prefix", Callbacks{Scheme: SchemeHexHMAC, Prefix: "sha256="}, func(r received) http.Header {
			return http.Header{"X-Signature": {"sha256=" + hex.EncodeToString(sum(body(r)))}}
		}},
		{"base64 with a timestamp", Callbacks{Scheme: SchemeBase64HMAC, SignatureHeader: "X-Sig", TimestampHeader: "X-Timestamp", IDHeader: "X-Delivery"}, func(r received) http.Header {
			ts := strconv.FormatInt(t0.Unix(), 10)
			return http.Header{"X-Sig": {base64.StdEncoding.EncodeToString(sum([]byte(ts+"."), body(r)))}, "X-Timestamp": {ts}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink, url := newSink(t, http.StatusOK)
			cb := tt.cb
			cb.URL, cb.Secret, cb.Interval = url, key, -1
			clock := &fakeClock{now: t0}
			api := New(&Options{Now: clock.Now, Callbacks: &cb})
			f := &fixture{t: t, clock: clock, api: api, http: httptest.NewServer(api)}
			t.Cleanup(f.http.Close)
			call(f, "POST", "/jobs", `{"duration_seconds":5}`)
			if _, err := api.SendCallbacks(t.Context()); err != nil {
				t.Fatal(err)
			}
			r := sink.take()[0]
			for k, v := range tt.want(r) {
				if got := r.Header.Values(k); !cmp.Equal(got, v) {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			idHeader := cb.IDHeader
			if idHeader == "" {
				idHeader = "webhook-id"
			}
			if r.Header.Get(idHeader) == "" {
				t.Errorf("no %s header in %v", idHeader, r.Header)
			}
		})
	}
}

// A receiver that refuses a callback, and a secret that cannot sign, are
// reported by SendCallbacks and kept in Deliveries.
func TestCallbackFailures(t *testing.T) {
	_, url := newSink(t, http.StatusUnauthorized)
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now, Callbacks: &Callbacks{URL: url, Secret: specSecret, Interval: -1}})
	f := &fixture{t: t, clock: clock, api: api, http: httptest.NewServer(api)}
	t.Cleanup(f.http.Close)
	call(f, "POST", "/jobs", `{"duration_seconds":5}`)
	_, err := api.SendCallbacks(t.Context())
	if err == nil || !strings.Contains(err.Error(), "answered HTTP 401") {
		t.Errorf("SendCallbacks error %v, want one saying HTTP 401", err)
	}
	if d := api.Deliveries(); len(d) != 1 || d[0].Answer != http.StatusUnauthorized {
		t.Errorf("Deliveries() = %+v", d)
	}

	bad := New(&Options{Now: clock.Now, Callbacks: &Callbacks{URL: url, Secret: "not base64!", Interval: -1}})
	g := &fixture{t: t, clock: clock, api: bad, http: httptest.NewServer(bad)}
	t.Cleanup(g.http.Close)
	call(g, "POST", "/jobs", `{"duration_seconds":5}`)
	if _, err := bad.SendCallbacks(t.Context()); err == nil || !strings.Contains(err.Error(), "not whsec_ followed by base64") {
		t.Errorf("SendCallbacks with a bad secret: %v", err)
	}
}

// Without a negative interval the server sends on its own: after the
// request that changed a job, and as time passes.
func TestCallbacksInTheBackground(t *testing.T) {
	sink, url := newSink(t, http.StatusAccepted)
	api := New(&Options{Callbacks: &Callbacks{URL: url, Secret: specSecret, Interval: 10 * time.Millisecond}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { api.Close() })
	f := &fixture{t: t, api: api, http: srv}
	call(f, "POST", "/jobs", `{"duration_seconds":0.3,"output":"done"}`)
	var statuses []string
	deadline := time.After(10 * time.Second)
	for !slices.Contains(statuses, statusSucceeded) {
		select {
		case <-sink.seen:
		case <-deadline:
			t.Fatalf("callbacks so far %q, want the job's end", statuses)
		}
		for _, r := range sink.take() {
			var doc jobDocument
			_ = json.Unmarshal([]byte(r.Body), &doc)
			statuses = append(statuses, doc.Status)
		}
	}
	// The job's end arrives without any request; its start is seen unless
	// the machine was too slow to look within 0.3 s.
	if diff := cmp.Diff([]string{statusRunning, statusSucceeded}, statuses); diff != "" && !cmp.Equal(statuses, []string{statusSucceeded}) {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

// With JOBBRIDGE_EXCHANGES set, every attempt is recorded for the spec
// checks.
func TestCallbacksAreRecorded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(exchanges.Env, dir)
	_, url := newSink(t, http.StatusAccepted)
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now, Callbacks: &Callbacks{URL: url, Secret: specSecret, Interval: -1}})
	f := &fixture{t: t, clock: clock, api: api, http: httptest.NewServer(api)}
	t.Cleanup(f.http.Close)
	call(f, "POST", "/jobs", `{"duration_seconds":5}`)
	sent, err := api.SendCallbacks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(filepath.Join(dir, "jobapi-callbacks-"+strconv.Itoa(os.Getpid())+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var xs []exchanges.Exchange
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var x exchanges.Exchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	if len(xs) != 1 {
		t.Fatalf("%d exchanges recorded, want 1", len(xs))
	}
	x := xs[0]
	if x.Backend != "jobapi-callbacks" || x.Operation != SchemeStandardWebhooks || x.Method != "POST" || x.Path != "/events/jobs" ||
		x.Status != http.StatusAccepted || x.RequestBody != string(sent[0].Body) || x.RequestHeaders.Get("webhook-id") != sent[0].ID {
		t.Errorf("recorded %+v, want the delivery %+v", x, sent[0])
	}
}

// call sends a request and returns its status and body.
func call(f *fixture, method, path, body string) (int, string) {
	f.t.Helper()
	code, _, b := f.do(request{method: method, path: path, body: body})
	return code, string(b)
}
