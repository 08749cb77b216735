package rest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/jobbridge/jobbridge/adapters"
)

// echoSecret answers status with body, in which every "SECRET" is replaced
// by the Authorization header the request carried, as a careless backend
// that echoes requests does.
func echoSecret(status int, body string) httpmock.Responder {
	return func(req *http.Request) (*http.Response, error) {
		b := strings.ReplaceAll(body, "SECRET", req.Header.Get("Authorization"))
		resp := httpmock.NewStringResponse(status, b)
		resp.Header.Set("Content-Type", "application/json")
		return resp, nil
	}
}

// wantText checks that err's text contains every string in want and none of
// the configured secret.
func wantText(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
	if strings.Contains(msg, testSecret) {
		t.Errorf("error %q contains the secret header value", msg)
	}
}

func TestPollUnreadableStatus(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{name: "field missing", body: `{"state":"running","token":"SECRET"}`, want: []string{`the status answer has no field "status"`, "answered 200", `"state":"running"`, "[redacted]"}},
		{name: "object", body: `{"status":{"phase":"running"}}`, want: []string{`the status field "status" is an object, not a string or number`, "answered 200"}},
		{name: "array", body: `{"status":["running"]}`, want: []string{`the status field "status" is an array, not a string or number`}},
		{name: "boolean", body: `{"status":true}`, want: []string{`the status field "status" is a boolean, not a string or number`}},
		{name: "null", body: `{"status":null}`, want: []string{`the status field "status" is null, not a string or number`}},
		{name: "not JSON", body: `<html>maintenance</html>`, want: []string{"the status answer is not JSON", "answered 200", `an HTML page reading "maintenance"`}},
		{name: "long answer is cut", body: `{"state":"` + strings.Repeat("x", 5000) + `"}`, want: []string{`has no field "status"`, "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("GET", "/projects/p/jobs/job-1", echoSecret(200, tt.body))
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if !errors.Is(obs[0].Err, adapters.ErrUnreadableStatus) {
				t.Fatalf("observation error = %v, want one wrapping ErrUnreadableStatus", obs[0].Err)
			}
			wantText(t, obs[0].Err, tt.want...)
			if n := len(obs[0].Err.Error()); n > 600 {
				t.Errorf("error is %d bytes long, want the answer cut to an excerpt", n)
			}
		})
	}
}

func TestStartAnswerWithoutJobID(t *testing.T) {
	location := testJob()
	location.JobID = JobIDConfig{FromLocation: true}
	location.Find = nil
	tests := []struct {
		name string
		job  JobConfig
		code int
		body string
		want []string
	}{
		{name: "field missing", job: testJob(), code: 201, body: `{"name":"x","auth":"SECRET"}`, want: []string{`no job ID at "id"`, "HTTP 201", `"name":"x"`, "[redacted]"}},
		{name: "field empty", job: testJob(), code: 200, body: `{"id":""}`, want: []string{`the job ID at "id" is empty`, "HTTP 200"}},
		{name: "field is an object", job: testJob(), code: 201, body: `{"id":{"value":7}}`, want: []string{`the job ID at "id" is an object, not a string or number`}},
		{name: "field is null", job: testJob(), code: 201, body: `{"id":null}`, want: []string{`the job ID at "id" is null, not a string or number`}},
		{name: "field is a boolean", job: testJob(), code: 202, body: `{"id":true}`, want: []string{`is a boolean`, "HTTP 202"}},
		{name: "answer not JSON", job: testJob(), code: 201, body: `<html>created</html>`, want: []string{`not JSON`, `"id"`, `an HTML page reading "created"`}},
		{name: "long answer is cut", job: testJob(), code: 201, body: `{"job":"` + strings.Repeat("y", 5000) + `"}`, want: []string{`no job ID at "id"`, "…"}},
		{name: "no Location", job: location, code: 201, body: `{"id":"j1"}`, want: []string{"no Location header", "HTTP 201", `"id":"j1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), tt.job)
			f.on("POST", "/projects/p/jobs", echoSecret(tt.code, tt.body))
			_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			if !errors.Is(err, adapters.ErrJobUnaddressable) || errors.Is(err, adapters.ErrOutcomeUnknown) {
				t.Fatalf("Start error = %v, want one wrapping ErrJobUnaddressable and not ErrOutcomeUnknown", err)
			}
			wantText(t, err, tt.want...)
			if n := len(err.Error()); n > 600 {
				t.Errorf("error is %d bytes long, want the answer cut to an excerpt", n)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("sent %d requests, want the one start", n)
			}
		})
	}
}

func TestStartNumericJobID(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	f.on("POST", "/projects/p/jobs", jsonResponder(201, `{"id":12345678901234567890}`))
	ref, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if ref.ID != "12345678901234567890" {
		t.Errorf("ref.ID = %q, want the number as written", ref.ID)
	}
}

// TestStartRefusesJobReference checks that a job reference later calls
// would refuse is refused when the start answer is read, instead of leaving
// a task that can never be observed.
func TestStartRefusesJobReference(t *testing.T) {
	byLocation := testJob()
	byLocation.JobID = JobIDConfig{FromLocation: true}
	byLocation.Status.Path = "{job.location}"
	byLocation.Cancel.Path = "{job.location}/cancel"
	byLocation.Find = nil
	byLocationID := byLocation
	byLocationID.Status.Path = "/jobs/{job.id}"
	byLocationID.Cancel.Path = "/jobs/{job.id}/cancel"

	tests := []struct {
		name     string
		job      JobConfig
		id       string // job_id.field answer
		location string
		want     []string // empty: accepted
	}{
		{name: "id dot-dot", job: testJob(), id: "..", want: []string{`job ID ".."`}},
		{name: "id dot", job: testJob(), id: ".", want: []string{`job ID "."`}},
		{name: "id with slash", job: testJob(), id: "../../admin", want: []string{`job ID "../../admin"`}},
		{name: "id with backslash", job: testJob(), id: `..\..\admin`, want: []string{`job ID "..\\..\\admin"`}},
		{name: "id with a line break", job: testJob(), id: "a\nb", want: []string{`job ID "a\nb"`}},
		{name: "id with NUL", job: testJob(), id: "a\x00b", want: []string{`job ID "a\x00b"`}},
		{name: "plain id", job: testJob(), id: "job-7"},
		{name: "id with a space", job: testJob(), id: "job 7"},
		{name: "other host", job: byLocation, location: "http://127.0.0.2:8080/api/v1/jobs/j4", want: []string{"Location", "127.0.0.2", "outside base_url"}},
		{name: "other scheme", job: byLocation, location: "https://127.0.0.1:8080/api/v1/jobs/j4", want: []string{"outside base_url"}},
		{name: "other port", job: byLocation, location: "http://127.0.0.1:9090/api/v1/jobs/j4", want: []string{"outside base_url"}},
		{name: "outside base path", job: byLocation, location: "/admin/jobs/j5", want: []string{`"/admin/jobs/j5"`, "outside base_url"}},
		{name: "escaped traversal", job: byLocation, location: "/api/v1/jobs/..%2F..%2Fadmin", want: []string{"outside base_url"}},
		{name: "credentials", job: byLocation, location: "http://u:p@127.0.0.1:8080/api/v1/jobs/j6", want: []string{"outside base_url"}},
		{name: "other host even when only the id is used", job: byLocationID, location: "http://127.0.0.2:8080/api/v1/jobs/j4", want: []string{"outside base_url"}},
		{name: "location id with backslash", job: byLocationID, location: "/api/v1/jobs/a%5Cb", want: []string{`job ID "a\\b"`}},
		{name: "location under base", job: byLocation, location: "/api/v1/jobs/j7"},
		{name: "relative location", job: byLocation, location: "jobs/j8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), tt.job)
			body := `{"id":` + jsonString(tt.id) + `}`
			r := jsonResponder(201, body)
			if tt.location != "" {
				r = withHeader(r, "Location", tt.location)
			}
			f.on("POST", "/projects/p/jobs", r)
			f.mock.RegisterNoResponder(f.record(jsonResponder(200, `{"status":"running"}`)))
			ref, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
				if err != nil || obs[0].Err != nil {
					t.Fatalf("Poll of an accepted reference: %v, %v", err, obs[0].Err)
				}
				return
			}
			if !errors.Is(err, adapters.ErrJobUnaddressable) || errors.Is(err, adapters.ErrOutcomeUnknown) {
				t.Fatalf("Start error = %v, want one wrapping ErrJobUnaddressable and not ErrOutcomeUnknown", err)
			}
			wantText(t, err, append(tt.want, "HTTP 201")...)
		})
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestStartRefusalCarriesBackendMessage(t *testing.T) {
	long := strings.Repeat("quota ", 70) // 420 bytes
	tests := []struct {
		name string
		code int
		body string
		want []string
	}{
		{name: "message field", code: 422, body: `{"message":"count must be positive","code":"E_COUNT"}`, want: []string{"answered 422", "count must be positive"}},
		{name: "error field", code: 403, body: `{"error":"project p is read-only"}`, want: []string{"answered 403", "project p is read-only"}},
		{name: "nested error message", code: 400, body: `{"error":{"message":"bad image","type":"invalid"}}`, want: []string{"answered 400", "bad image"}},
		{name: "detail field", code: 409, body: `{"detail":"a job with this name is running"}`, want: []string{"answered 409", "a job with this name is running"}},
		{name: "validation list", code: 422, body: `{"detail":[{"loc":["body","count"],"msg":"value is not a valid integer"}]}`, want: []string{"answered 422", "value is not a valid integer"}},
		{name: "JSON:API errors", code: 400, body: `{"errors":[{"status":"400","detail":"image must be set"}]}`, want: []string{"answered 400", "image must be set"}},
		{name: "plain text", code: 400, body: "image\tmust be set\n", want: []string{"answered 400: image must be set"}},
		{name: "long message kept to 500 bytes", code: 400, body: `{"message":"` + long + `"}`, want: []string{strings.TrimSpace(long)}},
		{name: "secret redacted", code: 401, body: `{"message":"token SECRET is expired"}`, want: []string{"answered 401", "token Bearer [redacted] is expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("POST", "/projects/p/jobs", echoSecret(tt.code, tt.body))
			_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			if err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) || errors.Is(err, adapters.ErrThrottled) || errors.Is(err, adapters.ErrJobUnaddressable) {
				t.Fatalf("Start error = %v, want a plain refusal", err)
			}
			wantText(t, err, tt.want...)
		})
	}
	t.Run("cut at 500 bytes", func(t *testing.T) {
		f := newFixture(t, testBackend(), testJob())
		f.on("POST", "/projects/p/jobs", jsonResponder(400, `{"message":"`+strings.Repeat("z", 5000)+`"}`))
		_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
		wantText(t, err, strings.Repeat("z", 400), "…")
		if n := len(err.Error()); n > 600 {
			t.Errorf("error is %d bytes long, want the message cut to about 500", n)
		}
	})
}

// TestThrottling checks that a 429 (or a 503 with Retry-After where the
// request is safe) on any call is reported as throttling with the pause the
// backend asked for, and is not repeated inside the adapter.
func TestThrottling(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	throttle := func(code int, retryAfter string) httpmock.Responder {
		r := jsonResponder(code, `{"message":"slow down"}`)
		if retryAfter != "" {
			r = withHeader(r, "Retry-After", retryAfter)
		}
		return r
	}
	calls := map[string]func(ctx context.Context, f *fixture) error{
		"start": func(ctx context.Context, f *fixture) error {
			_, err := f.a.Start(ctx, startReq(map[string]any{"project": "p"}))
			return err
		},
		"cancel":  func(ctx context.Context, f *fixture) error { return f.a.Cancel(ctx, testRef("job-1")) },
		"respond": func(ctx context.Context, f *fixture) error { return f.a.Respond(ctx, testRef("job-1"), nil) },
		"find": func(ctx context.Context, f *fixture) error {
			_, _, err := f.a.Find(ctx, startReq(nil))
			return err
		},
	}
	routes := map[string][2]string{
		"start":   {"POST", "/projects/p/jobs"},
		"poll":    {"GET", "/projects/p/jobs/job-1"},
		"cancel":  {"POST", "/jobs/job-1/cancel"},
		"respond": {"POST", "/jobs/job-1/answers"},
		"find":    {"GET", "/jobs?correlation_id=corr-1"},
	}
	tests := []struct {
		name        string
		call        string
		idempotency string
		responder   httpmock.Responder
		want        time.Duration // RetryAfter, rounded to seconds
		pollLevel   bool          // Poll returns the error itself
	}{
		{name: "start 429 with seconds", call: "start", responder: throttle(429, "7"), want: 7 * time.Second},
		{name: "start 429 with a date", call: "start", responder: throttle(429, date), want: 90 * time.Second},
		{name: "start 429 without Retry-After", call: "start", responder: throttle(429, "")},
		{name: "idempotent start 429", call: "start", idempotency: "Idempotency-Key", responder: throttle(429, "0")},
		{name: "poll 429 with a long pause", call: "poll", responder: throttle(429, "120"), want: 120 * time.Second, pollLevel: true},
		{name: "poll 429 without Retry-After", call: "poll", responder: throttle(429, ""), pollLevel: true},
		{name: "poll 503 with Retry-After", call: "poll", responder: throttle(503, "30"), want: 30 * time.Second, pollLevel: true},
		{name: "cancel 429", call: "cancel", responder: throttle(429, "3"), want: 3 * time.Second},
		{name: "cancel 503 with Retry-After", call: "cancel", responder: throttle(503, "4"), want: 4 * time.Second},
		{name: "respond 429", call: "respond", responder: throttle(429, "5"), want: 5 * time.Second},
		{name: "find 429", call: "find", responder: throttle(429, "6"), want: 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := testBackend()
			backend.IdempotencyHeader = tt.idempotency
			f := newFixture(t, backend, testJob())
			ctx := t.Context()
			route := routes[tt.call]
			if tt.call == "find" {
				f.mock.RegisterResponderWithQuery("GET", testBase+"/jobs", "correlation_id=corr-1", f.record(tt.responder))
			} else {
				f.on(route[0], route[1], tt.responder)
			}
			var err error
			if tt.call == "poll" {
				var obs []adapters.Observation
				obs, err = f.a.Poll(ctx, []adapters.JobRef{testRef("job-1")})
				if (err != nil) != tt.pollLevel {
					t.Errorf("Poll = %v, %+v; want the throttling reported for the whole Poll: %v", err, obs, tt.pollLevel)
				}
				if err == nil {
					err = obs[0].Err
				}
			} else {
				err = calls[tt.call](ctx, f)
			}
			d, ok := adapters.RetryAfter(err)
			if !ok {
				t.Fatalf("error = %v, want one wrapping ErrThrottled", err)
			}
			if got := d.Round(time.Second); got < tt.want-time.Second || got > tt.want+time.Second {
				t.Errorf("RetryAfter = %v, want %v", d, tt.want)
			}
			if errors.Is(err, adapters.ErrOutcomeUnknown) {
				t.Errorf("error %v wraps ErrOutcomeUnknown; a throttled request created nothing", err)
			}
			wantText(t, err, "slow down")
			if n := len(f.requests()); n != 1 {
				t.Errorf("sent %d requests, want 1: a throttled request is not repeated inside the adapter", n)
			}
		})
	}
}

// TestPollThrottledStopsThePoll checks that a 429 for one job ends the whole
// Poll with the throttling error, as the bridge then pauses every call.
func TestPollThrottledStopsThePoll(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	var refs []adapters.JobRef
	for _, id := range []string{"a", "b", "c"} {
		f.on("GET", "/projects/p/jobs/"+id, jsonResponder(200, `{"status":"running"}`))
		refs = append(refs, testRef(id))
	}
	f.on("GET", "/projects/p/jobs/t", withHeader(jsonResponder(429, `{}`), "Retry-After", "9"))
	refs = append(refs, testRef("t"))
	obs, err := f.a.Poll(t.Context(), refs)
	if d, ok := adapters.RetryAfter(err); !ok || d != 9*time.Second {
		t.Fatalf("Poll = %v, %v; want a throttling error asking for 9s", obs, err)
	}
	if obs != nil {
		t.Errorf("Poll returned observations %+v with its error", obs)
	}
}

// TestPollStormIsBounded checks that under a storm of 5xx answers a Poll of
// N jobs sends at most N × (1 + max_retries) requests.
func TestPollStormIsBounded(t *testing.T) {
	tests := []struct {
		name      string
		responder httpmock.Responder
	}{
		{name: "500", responder: jsonResponder(500, `{"message":"down"}`)},
		{name: "502", responder: jsonResponder(502, ``)},
		{name: "503 without Retry-After", responder: jsonResponder(503, ``)},
		{name: "connection reset", responder: httpmock.NewErrorResponder(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})},
	}
	const jobs, retries = 20, 3
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := testBackend()
			backend.MaxRetries = new(retries)
			f := newFixture(t, backend, testJob())
			f.mock.RegisterNoResponder(f.record(tt.responder))
			var refs []adapters.JobRef
			for i := range jobs {
				refs = append(refs, testRef("job-"+string(rune('a'+i))))
			}
			obs, err := f.a.Poll(t.Context(), refs)
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			for i, o := range obs {
				if o.Err == nil || errors.Is(o.Err, adapters.ErrThrottled) {
					t.Errorf("observation %d = %+v, want an error that is not throttling", i, o)
				}
			}
			if n := len(f.requests()); n > jobs*(1+retries) || n < jobs {
				t.Errorf("sent %d requests for %d jobs, want between %d and %d", n, jobs, jobs, jobs*(1+retries))
			}
		})
	}
}

// TestPollBackoffFitsTheDeadline checks that the adapter does not start a
// backoff it cannot finish before ctx's deadline: it reports the answer it
// has instead of sleeping into the deadline.
func TestPollBackoffFitsTheDeadline(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	a, err := New("jobs", testBackend(), map[string]JobConfig{"deploy": testJob()}, &Options{
		HTTPClient:   &http.Client{Transport: f.mock},
		Getenv:       testEnv,
		RetryWaitMin: time.Hour,
		RetryWaitMax: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.on("GET", "/projects/p/jobs/job-1", jsonResponder(500, `{"message":"down"}`))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	obs, err := a.Poll(ctx, []adapters.JobRef{testRef("job-1")})
	if err != nil {
		t.Fatalf("Poll = %v, want the 500 reported for the job, not the deadline", err)
	}
	wantText(t, obs[0].Err, "answered 500", "down")
	if n := len(f.requests()); n != 1 {
		t.Errorf("sent %d requests, want 1", n)
	}
}

// TestPollBackoffEndsWithCtx checks that a Poll waiting between retries
// returns once ctx is cancelled.
func TestPollBackoffEndsWithCtx(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	a, err := New("jobs", testBackend(), map[string]JobConfig{"deploy": testJob()}, &Options{
		HTTPClient:   &http.Client{Transport: f.mock},
		Getenv:       testEnv,
		RetryWaitMin: time.Hour,
		RetryWaitMax: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var answered atomic.Bool
	f.on("GET", "/projects/p/jobs/job-1", func(*http.Request) (*http.Response, error) {
		answered.Store(true)
		go cancel() // cancelled while the adapter backs off
		return httpmock.NewStringResponse(500, ``), nil
	})
	_, err = a.Poll(ctx, []adapters.JobRef{testRef("job-1")})
	if !errors.Is(err, context.Canceled) || !answered.Load() {
		t.Errorf("Poll = %v, want context.Canceled after the first answer", err)
	}
}

func TestCancelOutcomes(t *testing.T) {
	running := jsonResponder(200, `{"status":"running"}`)
	tests := []struct {
		name      string
		cancel    httpmock.Responder
		status    httpmock.Responder // nil: the status call is not expected
		want      error              // nil: success; errSomething: a plain error
		wantText  []string
		wantCalls int
	}{
		{name: "202", cancel: jsonResponder(202, `{}`), wantCalls: 1},
		{name: "204", cancel: jsonResponder(204, ``), wantCalls: 1},
		{
			name: "409 and the job has succeeded", cancel: jsonResponder(409, `{"error":"job already finished"}`),
			status: jsonResponder(200, `{"status":"succeeded"}`), want: adapters.ErrAlreadyFinished,
			wantText: []string{"already finished", "answered 409", "succeeded"}, wantCalls: 2,
		},
		{
			name: "409 and the job has failed", cancel: jsonResponder(409, `{}`),
			status: jsonResponder(200, `{"status":"failed"}`), want: adapters.ErrAlreadyFinished, wantCalls: 2,
		},
		{
			name: "404 and the job is gone", cancel: jsonResponder(404, `{}`),
			status: jsonResponder(404, `{"error":"job not found"}`), want: adapters.ErrAlreadyFinished,
			wantText: []string{"already finished", "answered 404"}, wantCalls: 2,
		},
		{
			name: "409 while the job still runs", cancel: jsonResponder(409, `{"error":"job is in a protected phase"}`),
			status: running, want: adapters.ErrCancelRefused,
			wantText: []string{"answered 409", "job is in a protected phase", "still working"}, wantCalls: 2,
		},
		{
			name: "404 while the job waits for input", cancel: jsonResponder(404, `{"message":"no such route"}`),
			status: jsonResponder(200, `{"status":"waiting_input"}`), want: adapters.ErrCancelRefused,
			wantText: []string{"no such route", "input_required"}, wantCalls: 2,
		},
		{
			name: "409 and the status call fails", cancel: jsonResponder(409, `{}`),
			status: jsonResponder(500, `{}`), want: errPlain, wantText: []string{"answered 409", "answered 500"}, wantCalls: 2,
		},
		{
			name: "409 and the status call is throttled", cancel: jsonResponder(409, `{}`),
			status: withHeader(jsonResponder(429, `{}`), "Retry-After", "2"), want: adapters.ErrThrottled, wantCalls: 2,
		},
		{
			name: "409 and the status is unreadable", cancel: jsonResponder(409, `{}`),
			status: jsonResponder(200, `{"state":"x"}`), want: errPlain, wantText: []string{`no field "status"`}, wantCalls: 2,
		},
		{
			name: "403", cancel: jsonResponder(403, `{"message":"cancelling production jobs is not allowed"}`),
			want: adapters.ErrCancelRefused, wantText: []string{"answered 403", "cancelling production jobs is not allowed"}, wantCalls: 1,
		},
		{name: "500", cancel: jsonResponder(500, `{"message":"db down"}`), want: errPlain, wantText: []string{"answered 500", "db down"}, wantCalls: 1},
		{name: "connection refused", cancel: httpmock.NewErrorResponder(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), want: errPlain, wantCalls: 1},
		{name: "no cancel block", wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := testJob()
			if tt.cancel == nil {
				job.Cancel = nil
			}
			f := newFixture(t, testBackend(), job)
			if tt.cancel != nil {
				f.on("POST", "/jobs/job-1/cancel", tt.cancel)
			}
			if tt.status != nil {
				f.on("GET", "/projects/p/jobs/job-1", tt.status)
			}
			err := f.a.Cancel(t.Context(), testRef("job-1"))
			kinds := []error{adapters.ErrAlreadyFinished, adapters.ErrCancelRefused, adapters.ErrThrottled, adapters.ErrOutcomeUnknown}
			switch tt.want {
			case nil:
				if err != nil {
					t.Errorf("Cancel = %v, want nil", err)
				}
			case errPlain:
				if err == nil {
					t.Fatal("Cancel = nil, want an error")
				}
				for _, k := range kinds {
					if errors.Is(err, k) {
						t.Errorf("Cancel = %v, which wraps %v; want a plain error (ask again later)", err, k)
					}
				}
			default:
				for _, k := range kinds {
					if got := errors.Is(err, k); got != (k == tt.want) {
						t.Errorf("errors.Is(%v, %v) = %v, want %v", err, k, got, k == tt.want)
					}
				}
			}
			if len(tt.wantText) > 0 {
				wantText(t, err, tt.wantText...)
			}
			reqs := f.requests()
			if len(reqs) != tt.wantCalls {
				t.Errorf("sent %d requests, want %d", len(reqs), tt.wantCalls)
			}
			if len(reqs) > 0 && reqs[0].Method != http.MethodPost {
				t.Errorf("cancel method = %s, want the default POST", reqs[0].Method)
			}
		})
	}
}

// errPlain in a table means an error that wraps none of the adapter
// sentinels.
var errPlain = errors.New("a plain error")
