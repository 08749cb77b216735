package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jarcoal/httpmock"

	"github.com/jobbridge/jobbridge/adapters"
)

const (
	testBase   = "http://127.0.0.1:8080/api/v1"
	testSecret = "s3cr3t-t0ken-value"
)

// testJob is a job block for an API shaped like the jobapi fake, under
// testBase.
func testJob() JobConfig {
	return JobConfig{
		Start: Call{
			Path: "/projects/{args.project}/jobs",
			Body: map[string]any{
				"correlation_id": "{correlation_id}",
				"count":          "{args.count}",
				"note":           "count={args.count}",
				"flags":          []any{"{args.verbose}", "fixed"},
				"optional":       "{args.optional}",
			},
		},
		JobID: JobIDConfig{Field: "id"},
		Status: StatusConfig{
			Call:  Call{Path: "/projects/{args.project}/jobs/{job.id}"},
			Field: "status",
			States: map[string]string{
				"queued":        "working",
				"running":       "working",
				"waiting_input": "input_required",
				"succeeded":     "succeeded",
				"failed":        "tool_error",
				"error":         "failed",
				"cancelled":     "cancelled",
			},
			Message:       "message",
			Progress:      &ProgressConfig{Done: "progress.done", Total: "progress.total"},
			Result:        &ResultConfig{Text: "result.text", Structured: "result.data"},
			Error:         &ErrorConfig{Code: "error.code", Message: "error.message"},
			InputRequests: "questions",
			Links:         map[string]string{"Logs": "{base_url}/jobs/{job.id}/logs"},
		},
		Cancel:  &Call{Path: "/jobs/{job.id}/cancel"},
		Respond: &Call{Path: "/jobs/{job.id}/answers", Body: map[string]any{"answers": "{answers}"}},
		Find: &FindConfig{
			Call:  Call{Path: "/jobs", Query: map[string]string{"correlation_id": "{correlation_id}"}},
			Field: "jobs.0.id",
		},
	}
}

// testBackend is a backend under testBase. Its loopback address is allowed
// explicitly, as the adapter refuses loopback by default.
func testBackend() BackendConfig {
	return BackendConfig{
		BaseURL:       testBase,
		Headers:       map[string]string{"Authorization": "Bearer ${JOBS_TOKEN}"},
		AllowNetworks: []string{"127.0.0.0/8"},
	}
}

func testEnv(name string) (string, bool) {
	if name == "JOBS_TOKEN" {
		return testSecret, true
	}
	return "", false
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is an adapter wired to a mock transport that records requests.
type fixture struct {
	a    *Adapter
	mock *httpmock.MockTransport
	logs *syncBuffer

	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	Method string
	Path   string // escaped
	Query  string
	Header http.Header
	Body   string
}

func newFixture(t *testing.T, backend BackendConfig, job JobConfig) *fixture {
	t.Helper()
	f := &fixture{mock: httpmock.NewMockTransport(), logs: &syncBuffer{}}
	f.mock.RegisterNoResponder(f.record(httpmock.NewStringResponder(http.StatusTeapot, "no responder")))
	a, err := New("jobs", backend, map[string]JobConfig{"deploy": job}, &Options{
		HTTPClient:   &http.Client{Transport: f.mock},
		Logger:       slog.New(slog.NewTextHandler(f.logs, nil)),
		Getenv:       testEnv,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.a = a
	return f
}

// on answers method and path (under testBase) with the responder, recording
// each request.
func (f *fixture) on(method, path string, r httpmock.Responder) {
	f.mock.RegisterResponder(method, testBase+path, f.record(r))
}

func (f *fixture) record(r httpmock.Responder) httpmock.Responder {
	return func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{
			Method: req.Method,
			Path:   req.URL.EscapedPath(),
			Query:  req.URL.RawQuery,
			Header: req.Header.Clone(),
			Body:   string(body),
		})
		f.mu.Unlock()
		return r(req)
	}
}

func (f *fixture) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func jsonResponder(status int, body string) httpmock.Responder {
	return func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(status, body)
		resp.Header.Set("Content-Type", "application/json")
		return resp, nil
	}
}

func withHeader(r httpmock.Responder, key, value string) httpmock.Responder {
	return r.HeaderSet(http.Header{key: {value}})
}

func startReq(args map[string]any) adapters.StartRequest {
	return adapters.StartRequest{Tool: "deploy", Arguments: args, CorrelationID: "corr-1"}
}

// testRef is what Start returns for job 42 of project p.
func testRef(id string) adapters.JobRef {
	return adapters.JobRef{ID: id, Data: json.RawMessage(`{"tool":"deploy","args":{"project":"p"}}`)}
}

func TestStartSendsRenderedRequest(t *testing.T) {
	tests := []struct {
		name     string
		args     map[string]any
		wantBody map[string]any
	}{
		{
			name: "typed values",
			args: map[string]any{"project": "p", "count": 3.0, "verbose": true, "optional": map[string]any{"a": "b"}},
			wantBody: map[string]any{
				"correlation_id": "corr-1", "count": 3.0, "note": "count=3",
				"flags": []any{true, "fixed"}, "optional": map[string]any{"a": "b"},
			},
		},
		{
			name: "absent arguments",
			args: map[string]any{"project": "p"},
			wantBody: map[string]any{
				"correlation_id": "corr-1", "note": "count=", "flags": []any{nil, "fixed"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("POST", "/projects/p/jobs", jsonResponder(201, `{"id":"job-7"}`))
			ref, err := f.a.Start(t.Context(), startReq(tt.args))
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if diff := cmp.Diff(adapters.JobRef{ID: "job-7", Data: json.RawMessage(`{"tool":"deploy","args":{"project":"p"}}`)}, ref); diff != "" {
				t.Errorf("ref mismatch (-want +got):\n%s", diff)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(reqs[0].Body), &body); err != nil {
				t.Fatalf("body %q: %v", reqs[0].Body, err)
			}
			if diff := cmp.Diff(tt.wantBody, body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			wantHeader := map[string]string{
				"Authorization": "Bearer " + testSecret,
				"Content-Type":  "application/json",
				"Accept":        "application/json",
			}
			gotHeader := map[string]string{}
			for k := range wantHeader {
				gotHeader[k] = reqs[0].Header.Get(k)
			}
			if diff := cmp.Diff(wantHeader, gotHeader); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArgumentsStayInOneSegment checks that an argument is escaped as one
// path segment, and that a rendered path that would climb out of base_url is
// refused before anything is sent. A backslash is read as a lenient server
// reads it (as a "/").
func TestArgumentsStayInOneSegment(t *testing.T) {
	tests := []struct {
		project  string
		wantPath string // empty: refused before any request
	}{
		{"plain", "/api/v1/projects/plain/jobs"},
		{"a b", "/api/v1/projects/a%20b/jobs"},
		{"../x", "/api/v1/projects/..%2Fx/jobs"},
		{"%2F", "/api/v1/projects/%252F/jobs"},
		{"a?b#c", "/api/v1/projects/a%3Fb%23c/jobs"},
		{"team/app", "/api/v1/projects/team%2Fapp/jobs"},
		{"../../../admin", ""},
		{"..", ""},
		{".", ""},
		{"", ""},
		// Backslashes, alone and mixed with slashes.
		{`a\b`, "/api/v1/projects/a%5Cb/jobs"},
		{`..\x`, "/api/v1/projects/..%5Cx/jobs"},
		{`%5C`, "/api/v1/projects/%255C/jobs"},
		{`..%5C..%5Cadmin`, "/api/v1/projects/..%255C..%255Cadmin/jobs"},
		{`..\..\admin`, ""},
		{`..\..\..\admin`, ""},
		{`\..\..\admin`, ""},
		{`..\../admin`, ""},
		{`../..\admin`, ""},
		{`.\..\..\admin`, ""},
		{`..\..`, ""},
		{`..\..\..`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.project, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.mock.RegisterNoResponder(f.record(jsonResponder(201, `{"id":"job-1"}`)))
			_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": tt.project}))
			var got []string
			for _, r := range f.requests() {
				got = append(got, r.Path)
			}
			if tt.wantPath == "" {
				if err == nil || errors.Is(err, adapters.ErrOutcomeUnknown) {
					t.Errorf("Start error = %v, want a refusal", err)
				}
				if len(got) != 0 {
					t.Errorf("sent requests to %q, want none", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if diff := cmp.Diff([]string{tt.wantPath}, got); diff != "" {
				t.Errorf("request paths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueryAndHeaderTemplates(t *testing.T) {
	job := testJob()
	job.Start.Query = map[string]string{"env": "{args.env}", "skip": "{args.absent}", "tag": "v-{args.env}"}
	job.Start.Headers = map[string]string{"X-Env": "{args.env}", "X-Static": "${JOBS_TOKEN}"}
	f := newFixture(t, testBackend(), job)
	f.on("POST", "/projects/p/jobs", jsonResponder(201, `{"id":"1"}`))
	if _, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p", "env": "a&b=c"})); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r := f.requests()[0]
	got := map[string]string{"query": r.Query, "X-Env": r.Header.Get("X-Env"), "X-Static": r.Header.Get("X-Static")}
	want := map[string]string{"query": "env=a%26b%3Dc&tag=v-a%26b%3Dc", "X-Env": "a&b=c", "X-Static": testSecret}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}

	// A header argument with a line break is refused before sending.
	_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p", "env": "x\r\nEvil: 1"}))
	if err == nil || len(f.requests()) != 1 {
		t.Errorf("Start with CRLF header value: err %v, %d requests; want an error and no new request", err, len(f.requests()))
	}
}

func TestStartClassification(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name        string
		idempotency string
		responder   httpmock.Responder
		timeout     time.Duration
		wantUnknown bool
		wantText    string // in the error
		wantPosts   int
	}{
		{name: "503", responder: jsonResponder(503, `{}`), wantUnknown: true, wantPosts: 1},
		{name: "500", responder: jsonResponder(500, `oops`), wantUnknown: true, wantPosts: 1},
		{name: "429", responder: withHeader(jsonResponder(429, `{}`), "Retry-After", "0"), wantText: "throttling", wantPosts: 1},
		{name: "redirect", responder: withHeader(jsonResponder(303, ``), "Location", "/elsewhere"), wantUnknown: true, wantPosts: 1},
		{name: "422", responder: jsonResponder(422, `{"error":{"message":"count must be positive"}}`), wantText: "answered 422: count must be positive", wantPosts: 1},
		{name: "400 plain text", responder: jsonResponder(400, "bad\x00 request\nbody"), wantText: "answered 400: bad request body", wantPosts: 1},
		{name: "dial error", responder: httpmock.NewErrorResponder(dialErr), wantText: "POST /api/v1/projects/p/jobs got no answer: dial tcp: connection refused", wantPosts: 1},
		{name: "reset after write", responder: httpmock.NewErrorResponder(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), wantUnknown: true, wantPosts: 1},
		{name: "EOF", responder: httpmock.NewErrorResponder(io.ErrUnexpectedEOF), wantUnknown: true, wantPosts: 1},
		{name: "timeout", responder: jsonResponder(201, `{"id":"1"}`).Delay(time.Minute), timeout: 20 * time.Millisecond, wantUnknown: true, wantPosts: 1},
		{name: "201 without ID", responder: jsonResponder(201, `{"name":"x"}`), wantText: `no job ID at "id"`, wantPosts: 1},
		{name: "201 not JSON", responder: jsonResponder(201, `<html>`), wantText: "not JSON", wantPosts: 1},
		{
			name: "idempotent 503 then 201", idempotency: "Idempotency-Key",
			responder: jsonResponder(503, `{}`).Then(jsonResponder(503, `{}`)).Then(jsonResponder(201, `{"id":"1"}`)), wantPosts: 3,
		},
		{
			name: "idempotent 503 throughout", idempotency: "Idempotency-Key",
			responder: jsonResponder(503, `{}`), wantUnknown: true, wantPosts: 4,
		},
		{
			name: "idempotent 422", idempotency: "Idempotency-Key",
			responder: jsonResponder(422, `{"message":"nope"}`), wantText: "answered 422: nope", wantPosts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := testBackend()
			backend.IdempotencyHeader = tt.idempotency
			backend.Timeout = tt.timeout
			f := newFixture(t, backend, testJob())
			f.on("POST", "/projects/p/jobs", tt.responder)
			_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			wantErr := tt.wantUnknown || tt.wantText != ""
			if (err != nil) != wantErr {
				t.Fatalf("Start error = %v, want error %v", err, wantErr)
			}
			if got := errors.Is(err, adapters.ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Errorf("errors.Is(%v, ErrOutcomeUnknown) = %v, want %v", err, got, tt.wantUnknown)
			}
			if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Start error %q does not contain %q", err, tt.wantText)
			}
			reqs := f.requests()
			if len(reqs) != tt.wantPosts {
				t.Errorf("sent %d POSTs, want %d", len(reqs), tt.wantPosts)
			}
			for _, r := range reqs {
				if got := r.Header.Get("Idempotency-Key"); tt.idempotency != "" && got != "corr-1" {
					t.Errorf("Idempotency-Key = %q, want the correlation ID", got)
				}
			}
		})
	}
}

// TestStartClassificationOverTCP checks the classification against real
// loopback connections, where the transport reports connection events.
func TestStartClassificationOverTCP(t *testing.T) {
	tests := []struct {
		name        string
		serve       func(net.Listener) // nil: nothing listens
		wantUnknown bool
	}{
		{name: "connection refused"},
		{
			name: "connection closed after the request",
			serve: func(ln net.Listener) {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				c.Close()
			},
			wantUnknown: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			done := make(chan struct{})
			if tt.serve == nil {
				ln.Close()
				close(done)
			} else {
				go func() { defer close(done); tt.serve(ln) }()
				t.Cleanup(func() { ln.Close(); <-done })
			}
			backend := BackendConfig{BaseURL: "http://" + addr, AllowNetworks: []string{"127.0.0.0/8"}}
			job := testJob()
			job.Start.Path = "/jobs"
			a, err := New("jobs", backend, map[string]JobConfig{"deploy": job}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Start(t.Context(), startReq(nil))
			if err == nil {
				t.Fatal("Start succeeded, want an error")
			}
			if got := errors.Is(err, adapters.ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Errorf("errors.Is(%v, ErrOutcomeUnknown) = %v, want %v", err, got, tt.wantUnknown)
			}
		})
	}
}

func TestStartFromLocation(t *testing.T) {
	job := testJob()
	job.JobID = JobIDConfig{FromLocation: true}
	job.Status.Path = "{job.location}"
	job.Cancel.Path = "{job.location}/cancel"
	job.Find = nil
	tests := []struct {
		name       string
		location   string
		wantID     string
		wantStatus string // escaped path of the status request; empty: Start refuses the reference
	}{
		{"absolute path", "/api/v1/jobs/j%201", "j 1", "/api/v1/jobs/j%201"},
		{"relative path", "jobs/j2", "j2", "/api/v1/projects/p/jobs/j2"},
		{"same origin URL", "http://127.0.0.1:8080/api/v1/jobs/j3", "j3", "/api/v1/jobs/j3"},
		{"other host", "http://127.0.0.2:8080/api/v1/jobs/j4", "j4", ""},
		{"outside base path", "/admin/jobs/j5", "j5", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), job)
			f.on("POST", "/projects/p/jobs", withHeader(jsonResponder(201, `{}`), "Location", tt.location))
			f.mock.RegisterNoResponder(f.record(jsonResponder(200, `{"status":"running"}`)))
			ref, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			if tt.wantStatus == "" {
				if !errors.Is(err, adapters.ErrJobUnaddressable) || len(f.requests()) != 1 {
					t.Errorf("Start = %v after %d requests, want an ErrJobUnaddressable refusal and no status request", err, len(f.requests()))
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if ref.ID != tt.wantID {
				t.Errorf("ref.ID = %q, want %q", ref.ID, tt.wantID)
			}
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{ref})
			if err != nil {
				t.Fatal(err)
			}
			reqs := f.requests()
			if obs[0].Err != nil {
				t.Fatalf("Poll: %v", obs[0].Err)
			}
			if got := reqs[1].Path; got != tt.wantStatus {
				t.Errorf("status request path = %q, want %q", got, tt.wantStatus)
			}
		})
	}
}

func TestPollMapsStatus(t *testing.T) {
	logsLink := []adapters.Link{{Title: "Logs", URL: testBase + "/jobs/job-1/logs"}}
	tests := []struct {
		name    string
		body    string
		want    adapters.Observation
		wantLog string
	}{
		{
			name: "running",
			body: `{"status":"running","message":"step 2","progress":{"done":2,"total":5}}`,
			want: adapters.Observation{State: adapters.StateWorking, Message: "step 2", Progress: &adapters.Progress{Done: 2, Total: 5}, Links: logsLink},
		},
		{
			name: "queued without message",
			body: `{"status":"queued"}`,
			want: adapters.Observation{State: adapters.StateWorking, Message: "queued", Links: logsLink},
		},
		{
			name: "waiting for input",
			body: `{"status":"waiting_input","message":"approve?","questions":[{"key":"ok","message":"Deploy?","schema":{"type":"object","properties":{"sure":{"type":"boolean"}}}},{"key":"bare","message":"Go?"}]}`,
			want: adapters.Observation{State: adapters.StateInputRequired, Message: "approve?", Links: logsLink, InputRequests: map[string]adapters.InputRequest{
				"ok":   {Message: "Deploy?", Schema: json.RawMessage(`{"type":"object","properties":{"sure":{"type":"boolean"}}}`)},
				"bare": {Message: "Go?", Schema: json.RawMessage(`{"type":"object","properties":{}}`)},
			}},
		},
		{
			name: "succeeded with result",
			body: `{"status":"succeeded","message":"done","result":{"text":"deployed v2","data":{"version":2}}}`,
			want: adapters.Observation{State: adapters.StateSucceeded, Message: "done", Links: logsLink, Result: &adapters.Result{Text: "deployed v2", Structured: map[string]any{"version": int64(2)}}},
		},
		{
			name: "succeeded without result",
			body: `{"status":"succeeded"}`,
			want: adapters.Observation{State: adapters.StateSucceeded, Message: "succeeded", Links: logsLink, Result: &adapters.Result{Text: "Job job-1 succeeded."}},
		},
		{
			name: "tool error uses the message",
			body: `{"status":"failed","message":"tests failed"}`,
			want: adapters.Observation{State: adapters.StateToolError, Message: "tests failed", Links: logsLink, Result: &adapters.Result{Text: "tests failed"}},
		},
		{
			name: "protocol error",
			body: `{"status":"error","message":"crashed","error":{"code":-32000,"message":"worker lost"}}`,
			want: adapters.Observation{State: adapters.StateFailed, Message: "crashed", Links: logsLink, Error: &adapters.JobError{Code: -32000, Message: "worker lost"}},
		},
		{
			name: "protocol error without code",
			body: `{"status":"error"}`,
			want: adapters.Observation{State: adapters.StateFailed, Message: "error", Links: logsLink, Error: &adapters.JobError{Code: -32603, Message: "error"}},
		},
		{
			name: "cancelled",
			body: `{"status":"cancelled"}`,
			want: adapters.Observation{State: adapters.StateCancelled, Message: "cancelled", Links: logsLink},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, tt.body))
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if diff := cmp.Diff([]adapters.Observation{tt.want}, obs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("observation mismatch (-want +got):\n%s", diff)
			}
			if !strings.Contains(f.logs.String(), tt.wantLog) {
				t.Errorf("logs %q do not contain %q", f.logs.String(), tt.wantLog)
			}
		})
	}
}

func TestPollErrors(t *testing.T) {
	tests := []struct {
		name         string
		responder    httpmock.Responder
		wantNotFound bool
		wantCalls    int
	}{
		{name: "404", responder: jsonResponder(404, `{"error":"job not found"}`), wantNotFound: true, wantCalls: 1},
		{name: "410", responder: jsonResponder(410, ``), wantNotFound: true, wantCalls: 1},
		{name: "500 throughout", responder: jsonResponder(500, ``), wantCalls: 4},
		{name: "403", responder: jsonResponder(403, `{"message":"forbidden"}`), wantCalls: 1},
		{name: "redirect not followed", responder: withHeader(jsonResponder(302, ``), "Location", "http://127.0.0.1:1/"), wantCalls: 1},
		{name: "not JSON", responder: jsonResponder(200, `<html>`), wantCalls: 1},
		{name: "no status field", responder: jsonResponder(200, `{"state":"running"}`), wantCalls: 1},
		{name: "larger than 1 MiB", responder: jsonResponder(200, `{"status":"running","pad":"`+strings.Repeat("x", maxBody)+`"}`), wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("GET", "/projects/p/jobs/job-1", tt.responder)
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if obs[0].Err == nil {
				t.Fatalf("observation %+v has no error", obs[0])
			}
			if got := errors.Is(obs[0].Err, adapters.ErrJobNotFound); got != tt.wantNotFound {
				t.Errorf("errors.Is(%v, ErrJobNotFound) = %v, want %v", obs[0].Err, got, tt.wantNotFound)
			}
			if diff := cmp.Diff(adapters.Observation{Err: obs[0].Err}, obs[0], cmpopts.EquateErrors()); diff != "" {
				t.Errorf("an observation with an error has other fields set (-want +got):\n%s", diff)
			}
			if got := len(f.requests()); got != tt.wantCalls {
				t.Errorf("sent %d requests, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestPollRetriesAndRetryAfter(t *testing.T) {
	tests := []struct {
		name      string
		responder httpmock.Responder
		want      time.Duration
		wantCalls int
	}{
		{name: "no hint", responder: jsonResponder(200, `{"status":"running"}`), wantCalls: 1},
		{name: "seconds", responder: withHeader(jsonResponder(200, `{"status":"running"}`), "Retry-After", "7"), want: 7 * time.Second, wantCalls: 1},
		{
			name:      "retried after 503 and 502",
			responder: jsonResponder(503, ``).Then(jsonResponder(502, ``)).Then(jsonResponder(200, `{"status":"running"}`)),
			wantCalls: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.on("GET", "/projects/p/jobs/job-1", tt.responder)
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if obs[0].Err != nil {
				t.Fatalf("Poll: %v", obs[0].Err)
			}
			if obs[0].RetryAfter != tt.want {
				t.Errorf("RetryAfter = %v, want %v", obs[0].RetryAfter, tt.want)
			}
			if got := len(f.requests()); got != tt.wantCalls {
				t.Errorf("sent %d requests, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"Tue, 28 Jul 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 28 Jul 2026 11:00:00 GMT", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPollBatchKeepsOrder(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	statuses := []string{"running", "succeeded", "failed", "cancelled"}
	var refs []adapters.JobRef
	var want []adapters.State
	for i := range 20 {
		id := "job-" + string(rune('a'+i))
		st := statuses[i%len(statuses)]
		f.on("GET", "/projects/p/jobs/"+id, jsonResponder(200, `{"status":"`+st+`"}`))
		refs = append(refs, testRef(id))
		s, _ := adapters.ParseState(testJob().Status.States[st])
		want = append(want, s)
	}
	refs = append(refs, adapters.JobRef{ID: "bad", Data: json.RawMessage(`{"tool":"nope"}`)})
	obs, err := f.a.Poll(t.Context(), refs)
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	var got []adapters.State
	for _, o := range obs[:len(obs)-1] {
		got = append(got, o.State)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("states mismatch (-want +got):\n%s", diff)
	}
	if obs[len(obs)-1].Err == nil {
		t.Errorf("a ref of an unknown tool was observed without error")
	}
}

func TestRespond(t *testing.T) {
	f := newFixture(t, testBackend(), testJob())
	f.on("POST", "/jobs/job-1/answers", jsonResponder(200, `{}`).Then(jsonResponder(409, `{}`)))
	answers := map[string]adapters.Answer{
		"ok":   {Action: "accept", Content: map[string]any{"sure": true}},
		"skip": {Action: "decline"},
	}
	for range 2 { // the second answer is 409: the job no longer waits
		if err := f.a.Respond(t.Context(), testRef("job-1"), answers); err != nil {
			t.Fatalf("Respond: %v", err)
		}
	}
	var body any
	if err := json.Unmarshal([]byte(f.requests()[0].Body), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"answers": map[string]any{
		"ok":   map[string]any{"action": "accept", "content": map[string]any{"sure": true}},
		"skip": map[string]any{"action": "decline"},
	}}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("answers body mismatch (-want +got):\n%s", diff)
	}

	job := testJob()
	job.Respond = nil
	f = newFixture(t, testBackend(), job)
	if err := f.a.Respond(t.Context(), testRef("job-1"), answers); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Respond without a respond block = %v, want ErrUnsupported", err)
	}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name          string
		responder     httpmock.Responder
		submitted     time.Duration // relative to now; 0: unknown
		wantFound     bool
		wantErr       bool
		wantNotListed bool
	}{
		{name: "found", responder: jsonResponder(200, `{"jobs":[{"id":"job-9"}]}`), wantFound: true},
		{name: "none, long after the submission", responder: jsonResponder(200, `{"jobs":[]}`), submitted: -2 * time.Minute},
		{name: "none, within the listing lag", responder: jsonResponder(200, `{"jobs":[]}`), submitted: -30 * time.Second, wantErr: true, wantNotListed: true},
		{name: "none, submission time unknown", responder: jsonResponder(200, `{"jobs":[]}`), wantErr: true, wantNotListed: true},
		{name: "server error", responder: jsonResponder(500, `{}`), wantErr: true},
		{name: "not JSON", responder: jsonResponder(200, `nope`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testBackend(), testJob())
			f.mock.RegisterResponderWithQuery("GET", testBase+"/jobs", "correlation_id=corr-1", f.record(tt.responder))
			req := startReq(map[string]any{"project": "p"})
			if tt.submitted != 0 {
				req.SubmittedAt = time.Now().Add(tt.submitted)
			}
			ref, found, err := f.a.Find(t.Context(), req)
			if (err != nil) != tt.wantErr || found != tt.wantFound {
				t.Fatalf("Find = found %v, err %v; want found %v, error %v", found, err, tt.wantFound, tt.wantErr)
			}
			if got := errors.Is(err, adapters.ErrNotListedYet); got != tt.wantNotListed {
				t.Errorf("Find error %v: not listed yet %v, want %v", err, got, tt.wantNotListed)
			}
			if found {
				want := adapters.JobRef{ID: "job-9", Data: json.RawMessage(`{"tool":"deploy","args":{"project":"p"}}`)}
				if diff := cmp.Diff(want, ref); diff != "" {
					t.Errorf("ref mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}

	job := testJob()
	job.Find = nil
	f := newFixture(t, testBackend(), job)
	if _, _, err := f.a.Find(t.Context(), startReq(nil)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Find without a find block = %v, want ErrUnsupported", err)
	}
}

// TestSecretsStayOut drives every path that quotes backend text into an
// error, a log line or an observation with a backend that echoes the secret
// header value back.
func TestSecretsStayOut(t *testing.T) {
	echo := func(status int) httpmock.Responder {
		return func(req *http.Request) (*http.Response, error) {
			auth := req.Header.Get("Authorization")
			return httpmock.NewStringResponse(status, `{"status":"`+auth+`","message":"you sent `+auth+`","error":{"message":"bad token `+auth+`"}}`), nil
		}
	}
	f := newFixture(t, testBackend(), testJob())
	var texts []string
	check := func(err error) {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}

	f.on("POST", "/projects/p/jobs", echo(401))
	_, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
	check(err)
	f.on("POST", "/projects/p/jobs", echo(500))
	_, err = f.a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
	check(err)

	f.on("GET", "/projects/p/jobs/job-1", echo(500))
	obs, _ := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
	check(obs[0].Err)
	f.on("GET", "/projects/p/jobs/job-1", echo(200))
	obs, _ = f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
	texts = append(texts, obs[0].Message)

	f.on("POST", "/jobs/job-1/cancel", echo(500))
	check(f.a.Cancel(t.Context(), testRef("job-1")))
	f.on("POST", "/jobs/job-1/answers", echo(400))
	check(f.a.Respond(t.Context(), testRef("job-1"), nil))
	f.mock.RegisterResponderWithQuery("GET", testBase+"/jobs", "correlation_id=corr-1", echo(403))
	_, _, err = f.a.Find(t.Context(), startReq(nil))
	check(err)

	// Configuration errors never quote header values either.
	bad := testBackend()
	bad.Headers["X-Bad"] = testSecret + "\r\n"
	check(bad.Validate())
	_, err = New("jobs", testBackend(), map[string]JobConfig{"deploy": testJob()}, &Options{Getenv: func(string) (string, bool) { return "", false }})
	check(err)
	_, err = New("jobs", testBackend(), map[string]JobConfig{"deploy": testJob()}, &Options{Getenv: func(string) (string, bool) { return testSecret + "\n", true }})
	check(err)

	texts = append(texts, f.logs.String())
	if len(texts) < 10 {
		t.Fatalf("collected %d texts, want at least 10: %q", len(texts), texts)
	}
	for _, s := range texts {
		if strings.Contains(s, testSecret) {
			t.Errorf("text contains the secret: %q", s)
		}
	}
}

func TestNewExpandsEnvironment(t *testing.T) {
	_, err := New("jobs", testBackend(), nil, &Options{Getenv: func(string) (string, bool) { return "", false }})
	if err == nil || !strings.Contains(err.Error(), "JOBS_TOKEN") {
		t.Errorf("New with an unset variable = %v, want an error naming JOBS_TOKEN", err)
	}
}

// A finished job's finish time is read from status.finished_at, and only
// for a finished job.
func TestPollFinishedAt(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       time.Time
	}{
		{"failed with a finish time", `{"status":"failed","finished_at":"2026-12-01T10:00:05.250Z"}`, time.Date(2026, 12, 1, 10, 0, 5, 250e6, time.UTC)},
		{"running: no finish time yet", `{"status":"running","finished_at":"2026-12-01T10:00:05Z"}`, time.Time{}},
		{"finished without one", `{"status":"succeeded"}`, time.Time{}},
		{"not a time", `{"status":"failed","finished_at":"yesterday"}`, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := testJob()
			job.Status.FinishedAt = "finished_at"
			f := newFixture(t, testBackend(), job)
			f.on("GET", "/projects/p/jobs/job-1", jsonResponder(200, tt.body))
			obs, err := f.a.Poll(t.Context(), []adapters.JobRef{testRef("job-1")})
			if err != nil || obs[0].Err != nil {
				t.Fatalf("Poll: %v %v", err, obs)
			}
			if !obs[0].FinishedAt.Equal(tt.want) {
				t.Errorf("FinishedAt %v, want %v", obs[0].FinishedAt, tt.want)
			}
		})
	}
}
