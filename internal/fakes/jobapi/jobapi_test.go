package jobapi

import (
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

	"github.com/google/go-cmp/cmp"
)

// t0 is when every test's fake clock starts.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at formats t0+d as the job document does.
func at(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a fake server behind a real loopback HTTP server, with a fake
// clock.
type fixture struct {
	t     *testing.T
	clock *fakeClock
	api   *Server
	http  *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &fixture{t: t, clock: clock, api: api, http: srv}
}

// request is one HTTP request to the fake.
type request struct {
	method, path, body string
	header             map[string]string
}

func post(path, body string) request { return request{method: http.MethodPost, path: path, body: body} }
func get(path string) request        { return request{method: http.MethodGet, path: path} }

// do sends req and returns the status, headers and body.
func (f *fixture) do(req request) (int, http.Header, []byte) {
	f.t.Helper()
	code, h, body, err := f.try(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	return code, h, body
}

// try is do without failing the test on a transport error.
func (f *fixture) try(req request) (int, http.Header, []byte, error) {
	f.t.Helper()
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r, err := http.NewRequestWithContext(f.t.Context(), req.method, f.http.URL+req.path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if req.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	resp, err := f.http.Client().Do(r)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// step is one request in a scripted exchange, after advancing the clock.
type step struct {
	advance  time.Duration
	req      request
	wantCode int
	// wantDoc, when set, is the expected job document.
	wantDoc *jobDocument
	// wantJSON, when set, is the expected body, compared as JSON values.
	wantJSON string
}

func (f *fixture) run(steps []step) {
	f.t.Helper()
	for i, st := range steps {
		f.clock.Advance(st.advance)
		code, _, body := f.do(st.req)
		if code != st.wantCode {
			f.t.Fatalf("step %d: %s %s: status %d, want %d (body %s)", i, st.req.method, st.req.path, code, st.wantCode, body)
		}
		if st.wantDoc != nil {
			var got jobDocument
			if err := json.Unmarshal(body, &got); err != nil {
				f.t.Fatalf("step %d: decoding %s: %v", i, body, err)
			}
			if diff := cmp.Diff(*st.wantDoc, got); diff != "" {
				f.t.Fatalf("step %d: %s %s: job document mismatch (-want +got):\n%s", i, st.req.method, st.req.path, diff)
			}
		}
		if st.wantJSON != "" {
			if diff := cmp.Diff(decodeAny(f.t, st.wantJSON), decodeAny(f.t, string(body))); diff != "" {
				f.t.Fatalf("step %d: %s %s: body mismatch (-want +got):\n%s", i, st.req.method, st.req.path, diff)
			}
		}
	}
}

func decodeAny(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// doc is a job-000001 document created at t0.
func doc(status, message string) *jobDocument {
	return &jobDocument{ID: "job-000001", Status: status, Message: message, CreatedAt: at(0)}
}

func (d *jobDocument) with(edit func(*jobDocument)) *jobDocument {
	c := *d
	edit(&c)
	return &c
}

func TestLifecycle(t *testing.T) {
	build := doc("", "").with(func(d *jobDocument) { d.CorrelationID = "c-build" })
	buildResult := &result{Text: "build ok", Data: map[string]any{"artifact": "app.tar.gz", "size": 1024.0}}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "defaults finish at once",
			steps: []step{{
				req:      post("/jobs", `{}`),
				wantCode: http.StatusCreated,
				wantDoc: doc("succeeded", "finished").with(func(d *jobDocument) {
					d.Result = &result{Text: "job job-000001 finished"}
					d.FinishedAt = at(0)
				}),
			}},
		},
		{
			name: "success runs through queued and running",
			steps: []step{
				{
					req:      post("/jobs", readFixture(t, "build.json")),
					wantCode: http.StatusCreated,
					wantDoc:  build.with(func(d *jobDocument) { d.Status, d.Message = "queued", "queued" }),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: build.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 0, Total: 2}
					}),
				},
				{
					advance:  1500 * time.Millisecond,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: build.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 1.5, Total: 2}
					}),
				},
				{
					advance:  time.Hour,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: build.with(func(d *jobDocument) {
						d.Status, d.Message, d.Result, d.FinishedAt = "succeeded", "finished", buildResult, at(3*time.Second)
					}),
				},
			},
		},
		{
			name: "tool error ends failed with a result",
			steps: []step{
				{
					req:      post("/jobs", `{"duration_seconds": 1, "outcome": "tool_error", "output": "3 tests failed", "error_message": "tests failed"}`),
					wantCode: http.StatusCreated,
					wantDoc: doc("running", "running").with(func(d *jobDocument) {
						d.Progress = &progress{Done: 0, Total: 1}
					}),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: doc("failed", "tests failed").with(func(d *jobDocument) {
						d.Result, d.FinishedAt = &result{Text: "3 tests failed"}, at(time.Second)
					}),
				},
			},
		},
		{
			name: "protocol error ends in error",
			steps: []step{
				{
					req:      post("/jobs", `{"queue_seconds": 0.5, "outcome": "protocol_error", "error_message": "worker lost"}`),
					wantCode: http.StatusCreated,
					wantDoc:  doc("queued", "queued"),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: doc("error", "worker lost").with(func(d *jobDocument) {
						d.Error, d.FinishedAt = &jobError{Code: -32603, Message: "worker lost"}, at(500*time.Millisecond)
					}),
				},
			},
		},
		{
			name: "correlation ID from header",
			steps: []step{{
				req:      request{method: http.MethodPost, path: "/jobs", body: `{"duration_seconds": 5}`, header: map[string]string{"X-Correlation-ID": "c-hdr"}},
				wantCode: http.StatusCreated,
				wantDoc: doc("running", "running").with(func(d *jobDocument) {
					d.CorrelationID, d.Progress = "c-hdr", &progress{Done: 0, Total: 5}
				}),
			}},
		},
		{
			name: "unknown job",
			steps: []step{{
				req:      get("/jobs/job-000042"),
				wantCode: http.StatusNotFound,
				wantJSON: `{"error": "job not found"}`,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newFixture(t).run(tt.steps)
		})
	}
}

func TestCreateAnswersLocation(t *testing.T) {
	f := newFixture(t)
	for _, want := range []string{"/jobs/job-000001", "/jobs/job-000002"} {
		code, h, _ := f.do(post("/jobs", `{}`))
		if code != http.StatusCreated || h.Get("Location") != want || h.Get("Content-Type") != "application/json" {
			t.Errorf("POST /jobs: status %d, Location %q, Content-Type %q; want 201, %q, application/json",
				code, h.Get("Location"), h.Get("Content-Type"), want)
		}
	}
}

func TestQuestions(t *testing.T) {
	approval := doc("", "").with(func(d *jobDocument) { d.CorrelationID = "c-approve" })
	var script struct{ Questions []question }
	if err := json.Unmarshal([]byte(readFixture(t, "approval.json")), &script); err != nil {
		t.Fatal(err)
	}
	approve, reason := script.Questions[0], script.Questions[1]
	waiting := func(qs ...question) *jobDocument {
		return approval.with(func(d *jobDocument) {
			d.Status, d.Message, d.Progress, d.Questions = "waiting_input", "waiting for input", &progress{Done: 1, Total: 3}, qs
		})
	}
	declined := approval.with(func(d *jobDocument) {
		d.Status, d.Message, d.FinishedAt = "cancelled", "declined by user", at(2*time.Second)
	})
	create := step{req: post("/jobs", readFixture(t, "approval.json")), wantCode: http.StatusCreated}
	wait := step{advance: 2 * time.Second, req: get("/jobs/job-000001"), wantCode: http.StatusOK, wantDoc: waiting(approve, reason)}
	answer := func(body string) request { return post("/jobs/job-000001/answers", body) }

	tests := []struct {
		name        string
		steps       []step
		wantAnswers map[string]int
	}{
		{
			name: "partial answers keep waiting for the rest; replays are ignored",
			steps: []step{
				create,
				{
					req:      answer(`{"answers": {"approve": {"action": "accept", "content": {"confirm": true}}}}`),
					wantCode: http.StatusOK,
					wantDoc:  approval.with(func(d *jobDocument) { d.Status, d.Message = "queued", "queued" }),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: approval.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 0, Total: 3}
					}),
				},
				{advance: time.Second, req: get("/jobs/job-000001"), wantCode: http.StatusOK, wantDoc: waiting(approve, reason)},
				{
					req:      answer(`{"answers": {"approve": {"action": "accept", "content": {"confirm": true}}}}`),
					wantCode: http.StatusOK,
					wantDoc:  waiting(reason),
				},
				{
					advance:  5 * time.Second,
					req:      answer(`{"answers": {"approve": {"action": "decline"}, "unknown": {"action": "accept"}}}`),
					wantCode: http.StatusOK,
					wantDoc:  waiting(reason),
				},
				{
					req:      answer(`{"answers": {"reason": {"action": "accept", "content": {"text": "hotfix"}}}}`),
					wantCode: http.StatusOK,
					wantDoc: approval.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 1, Total: 3}
					}),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: approval.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 2, Total: 3}
					}),
				},
				{
					advance:  time.Second,
					req:      get("/jobs/job-000001"),
					wantCode: http.StatusOK,
					wantDoc: approval.with(func(d *jobDocument) {
						d.Status, d.Message, d.Result, d.FinishedAt = "succeeded", "finished", &result{Text: "deployed"}, at(9*time.Second)
					}),
				},
				{
					req:      answer(`{"answers": {"reason": {"action": "accept"}}}`),
					wantCode: http.StatusConflict,
					wantJSON: `{"error": "job already finished"}`,
				},
			},
			wantAnswers: map[string]int{"approve": 3, "reason": 1, "unknown": 1},
		},
		{
			name: "all answers at once",
			steps: []step{
				create, wait,
				{
					req:      answer(`{"answers": {"approve": {"action": "accept", "content": {"confirm": true}}, "reason": {"action": "accept"}}}`),
					wantCode: http.StatusOK,
					wantDoc: approval.with(func(d *jobDocument) {
						d.Status, d.Message, d.Progress = "running", "running", &progress{Done: 1, Total: 3}
					}),
				},
			},
			wantAnswers: map[string]int{"approve": 1, "reason": 1},
		},
		{
			name: "decline cancels the job",
			steps: []step{
				create, wait,
				{req: answer(`{"answers": {"reason": {"action": "decline"}}}`), wantCode: http.StatusOK, wantDoc: declined},
				{advance: time.Hour, req: get("/jobs/job-000001"), wantCode: http.StatusOK, wantDoc: declined},
			},
			wantAnswers: map[string]int{"reason": 1},
		},
		{
			name: "cancel action cancels the job",
			steps: []step{
				create, wait,
				{req: answer(`{"answers": {"approve": {"action": "cancel"}}}`), wantCode: http.StatusOK, wantDoc: declined},
			},
			wantAnswers: map[string]int{"approve": 1},
		},
		{
			name: "a bad action changes nothing",
			steps: []step{
				create, wait,
				{req: answer(`{"answers": {"approve": {"action": "maybe"}}}`), wantCode: http.StatusUnprocessableEntity},
				{req: get("/jobs/job-000001"), wantCode: http.StatusOK, wantDoc: waiting(approve, reason)},
			},
		},
		{
			name: "unknown job",
			steps: []step{
				{req: post("/jobs/job-000009/answers", `{"answers": {}}`), wantCode: http.StatusNotFound, wantJSON: `{"error": "job not found"}`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.run(tt.steps)
			if diff := cmp.Diff(tt.wantAnswers, f.api.Answers("job-000001")); diff != "" {
				t.Errorf("Answers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	cancel := post("/jobs/job-000001/cancel", "")
	status := get("/jobs/job-000001")
	running := func(done, total float64) *jobDocument {
		return doc("running", "running").with(func(d *jobDocument) { d.Progress = &progress{Done: done, Total: total} })
	}
	cancelledAt := func(d time.Duration) *jobDocument {
		return doc("cancelled", "cancelled").with(func(doc *jobDocument) { doc.FinishedAt = at(d) })
	}
	tests := []struct {
		name        string
		steps       []step
		wantCancels int
	}{
		{
			name: "cancel ends a running job cancelled, then 409",
			steps: []step{
				{req: post("/jobs", `{"duration_seconds": 10}`), wantCode: http.StatusCreated},
				{advance: time.Second, req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{advance: time.Hour, req: status, wantCode: http.StatusOK, wantDoc: cancelledAt(time.Second)},
				{req: cancel, wantCode: http.StatusConflict, wantJSON: `{"error": "job already finished"}`},
			},
			wantCancels: 2,
		},
		{
			name: "cancel a queued job",
			steps: []step{
				{req: post("/jobs", `{"queue_seconds": 10}`), wantCode: http.StatusCreated},
				{req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{req: status, wantCode: http.StatusOK, wantDoc: cancelledAt(0)},
			},
			wantCancels: 1,
		},
		{
			name: "cancel a job waiting for input",
			steps: []step{
				{req: post("/jobs", `{"questions": [{"key": "k", "message": "ok?"}]}`), wantCode: http.StatusCreated},
				{advance: time.Second, req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{req: status, wantCode: http.StatusOK, wantDoc: cancelledAt(time.Second)},
			},
			wantCancels: 1,
		},
		{
			name: "ignore acknowledges and runs on",
			steps: []step{
				{req: post("/jobs", `{"duration_seconds": 2, "on_cancel": "ignore"}`), wantCode: http.StatusCreated},
				{advance: time.Second, req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{req: status, wantCode: http.StatusOK, wantDoc: running(1, 2)},
				{req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{
					advance:  time.Second,
					req:      status,
					wantCode: http.StatusOK,
					wantDoc: doc("succeeded", "finished").with(func(d *jobDocument) {
						d.Result, d.FinishedAt = &result{Text: "job job-000001 finished"}, at(2*time.Second)
					}),
				},
			},
			wantCancels: 2,
		},
		{
			name: "finish ends the job succeeded",
			steps: []step{
				{req: post("/jobs", `{"duration_seconds": 5, "on_cancel": "finish", "outcome": "tool_error", "output": "partial"}`), wantCode: http.StatusCreated},
				{advance: 2 * time.Second, req: cancel, wantCode: http.StatusAccepted, wantJSON: `{}`},
				{
					advance:  time.Hour,
					req:      status,
					wantCode: http.StatusOK,
					wantDoc: doc("succeeded", "finished early on cancel").with(func(d *jobDocument) {
						d.Result, d.FinishedAt = &result{Text: "partial"}, at(2*time.Second)
					}),
				},
			},
			wantCancels: 1,
		},
		{
			name: "refuse answers 409 while the job runs, and it runs on",
			steps: []step{
				{req: post("/jobs", `{"duration_seconds": 2, "on_cancel": "refuse"}`), wantCode: http.StatusCreated},
				{advance: time.Second, req: cancel, wantCode: http.StatusConflict, wantJSON: `{"error": "job job-000001 cannot be cancelled while it runs"}`},
				{req: status, wantCode: http.StatusOK, wantDoc: running(1, 2)},
				{advance: time.Second, req: cancel, wantCode: http.StatusConflict, wantJSON: `{"error": "job already finished"}`},
			},
			wantCancels: 2,
		},
		{
			name: "finished job answers 409",
			steps: []step{
				{req: post("/jobs", `{}`), wantCode: http.StatusCreated},
				{req: cancel, wantCode: http.StatusConflict, wantJSON: `{"error": "job already finished"}`},
			},
			wantCancels: 1,
		},
		{
			name: "unknown job answers 404",
			steps: []step{
				{req: cancel, wantCode: http.StatusNotFound, wantJSON: `{"error": "job not found"}`},
			},
			wantCancels: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.run(tt.steps)
			if got := f.api.Cancels("job-000001"); got != tt.wantCancels {
				t.Errorf("Cancels = %d, want %d", got, tt.wantCancels)
			}
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	f := newFixture(t)
	keyed := func(key string) request {
		return request{method: http.MethodPost, path: "/jobs", body: `{"correlation_id": "c-1", "duration_seconds": 60}`,
			header: map[string]string{"Idempotency-Key": key}}
	}
	steps := []struct {
		req          request
		wantCode     int
		wantLocation string
	}{
		{keyed("k1"), http.StatusCreated, "/jobs/job-000001"},
		{keyed("k1"), http.StatusOK, "/jobs/job-000001"},
		{keyed("k2"), http.StatusCreated, "/jobs/job-000002"},
		{keyed("k1"), http.StatusOK, "/jobs/job-000001"},
	}
	for i, st := range steps {
		code, h, body := f.do(st.req)
		var d jobDocument
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(code, " ", h.Get("Location"), " ", d.ID)
		want := fmt.Sprint(st.wantCode, " ", st.wantLocation, " ", strings.TrimPrefix(st.wantLocation, "/jobs/"))
		if got != want {
			t.Errorf("request %d: got %q, want %q", i, got, want)
		}
	}
	if got := f.api.Submissions("c-1"); got != 2 {
		t.Errorf("Submissions = %d, want 2", got)
	}

	// Purging a job frees its key.
	f.api.Purge("job-000001")
	if code, h, _ := f.do(keyed("k1")); code != http.StatusCreated || h.Get("Location") != "/jobs/job-000003" {
		t.Errorf("after purge: status %d, Location %q; want 201, /jobs/job-000003", code, h.Get("Location"))
	}
}

func TestFindAndPurge(t *testing.T) {
	f := newFixture(t)
	f.do(post("/jobs", `{"correlation_id": "c-1", "duration_seconds": 60}`))
	f.do(post("/jobs", `{"correlation_id": "c-2"}`))
	f.do(request{method: http.MethodPost, path: "/jobs", body: `{}`, header: map[string]string{"X-Correlation-ID": "c-1"}})
	f.clock.Advance(time.Second)

	c1Doc := func(id string) string {
		return `{"id": "` + id + `", "status": "%s", "message": "%s", "correlation_id": "c-1", "created_at": "` + at(0) + `"`
	}
	job1 := fmt.Sprintf(c1Doc("job-000001"), "running", "running") + `, "progress": {"done": 1, "total": 60}}`
	job3 := fmt.Sprintf(c1Doc("job-000003"), "succeeded", "finished") +
		`, "result": {"text": "job job-000003 finished"}, "finished_at": "` + at(0) + `"}`

	f.run([]step{
		{req: get("/jobs?correlation_id=c-1"), wantCode: http.StatusOK, wantJSON: `{"jobs": [` + job3 + `, ` + job1 + `]}`},
		{req: get("/jobs?correlation_id=c-none"), wantCode: http.StatusOK, wantJSON: `{"jobs": []}`},
	})

	f.api.Purge("job-000003")
	f.api.Purge("job-000099") // unknown: no effect
	f.run([]step{
		{req: get("/jobs/job-000003"), wantCode: http.StatusNotFound, wantJSON: `{"error": "job not found"}`},
		{req: post("/jobs/job-000003/cancel", ""), wantCode: http.StatusNotFound, wantJSON: `{"error": "job not found"}`},
		{req: post("/jobs/job-000003/answers", `{"answers": {}}`), wantCode: http.StatusNotFound, wantJSON: `{"error": "job not found"}`},
		{req: get("/jobs?correlation_id=c-1"), wantCode: http.StatusOK, wantJSON: `{"jobs": [` + job1 + `]}`},
	})
	for _, c := range []struct {
		correlationID string
		want          int
	}{{"c-1", 2}, {"c-2", 1}, {"c-none", 0}} {
		if got := f.api.Submissions(c.correlationID); got != c.want {
			t.Errorf("Submissions(%q) = %d, want %d", c.correlationID, got, c.want)
		}
	}
}

func TestFaults(t *testing.T) {
	type outcome struct {
		Code       int
		RetryAfter string
		Error      string // the error body, or "dropped" for a transport error
	}
	tests := []struct {
		name   string
		faults []Fault
		reqs   []request
		want   []outcome
		// wantJobs is how many jobs exist with correlation ID "c" at the end.
		wantJobs int
	}{
		{
			name:   "status with Retry-After for a number of matching requests",
			faults: []Fault{{Method: http.MethodPost, Path: "/jobs", Times: 2, Status: http.StatusServiceUnavailable, RetryAfter: 1500 * time.Millisecond}},
			reqs: []request{
				post("/jobs", `{"correlation_id": "c"}`),
				get("/jobs/job-000001"),
				post("/jobs", `{"correlation_id": "c"}`),
				post("/jobs", `{"correlation_id": "c"}`),
			},
			want: []outcome{
				{Code: 503, RetryAfter: "2", Error: "injected fault"},
				{Code: 404, Error: "job not found"},
				{Code: 503, RetryAfter: "2", Error: "injected fault"},
				{Code: 201},
			},
			wantJobs: 1,
		},
		{
			name: "faults are consumed in order, first match wins",
			faults: []Fault{
				{Method: http.MethodGet, Status: http.StatusTooManyRequests, RetryAfter: time.Second},
				{Status: http.StatusInternalServerError},
			},
			reqs: []request{post("/jobs", `{"correlation_id": "c"}`), get("/jobs/job-000001"), get("/jobs/job-000001")},
			want: []outcome{
				{Code: 500, Error: "injected fault"},
				{Code: 429, RetryAfter: "1", Error: "injected fault"},
				{Code: 404, Error: "job not found"},
			},
		},
		{
			name:     "after handling the job exists",
			faults:   []Fault{{Path: "/jobs", Status: http.StatusBadGateway, AfterHandling: true}},
			reqs:     []request{post("/jobs", `{"correlation_id": "c"}`)},
			want:     []outcome{{Code: 502, Error: "injected fault"}},
			wantJobs: 1,
		},
		{
			name:   "drop closes the connection",
			faults: []Fault{{Method: http.MethodPost, Drop: true}},
			reqs:   []request{post("/jobs", `{"correlation_id": "c"}`)},
			want:   []outcome{{Error: "dropped"}},
		},
		{
			name:     "drop after handling creates the job",
			faults:   []Fault{{Method: http.MethodPost, Drop: true, AfterHandling: true}},
			reqs:     []request{post("/jobs", `{"correlation_id": "c"}`)},
			want:     []outcome{{Error: "dropped"}},
			wantJobs: 1,
		},
		{
			name:   "a fault on cancel leaves the job running",
			faults: []Fault{{Path: "/jobs/job-000001/cancel"}},
			reqs: []request{
				post("/jobs", `{"correlation_id": "c", "duration_seconds": 9}`),
				post("/jobs/job-000001/cancel", ""),
				post("/jobs/job-000001/cancel", ""),
				post("/jobs/job-000001/cancel", ""),
			},
			want:     []outcome{{Code: 201}, {Code: 503, Error: "injected fault"}, {Code: 202}, {Code: 409, Error: "job already finished"}},
			wantJobs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for _, fault := range tt.faults {
				f.api.Inject(fault)
			}
			var got []outcome
			for _, req := range tt.reqs {
				code, h, body, err := f.try(req)
				if err != nil {
					got = append(got, outcome{Error: "dropped"})
					continue
				}
				var e errorBody
				_ = json.Unmarshal(body, &e) // not every body is an error
				got = append(got, outcome{Code: code, RetryAfter: h.Get("Retry-After"), Error: e.Error})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("responses mismatch (-want +got):\n%s", diff)
			}
			if got := f.api.Submissions("c"); got != tt.wantJobs {
				t.Errorf("Submissions = %d, want %d", got, tt.wantJobs)
			}
			_, _, body := f.do(get("/jobs?correlation_id=c"))
			var list jobList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Jobs) != tt.wantJobs {
				t.Errorf("GET /jobs?correlation_id=c lists %d jobs, want %d", len(list.Jobs), tt.wantJobs)
			}
			if got, want := f.api.Requests(), len(tt.reqs)+1; got != want {
				t.Errorf("Requests = %d, want %d", got, want)
			}
		})
	}
}

// TestFaultAnswers checks the scripted bodies and Location headers that let
// a client's tests meet unusual answers: a 2xx start without a job ID, a
// Location on another origin, a status answer without the status field, a
// refusal with a JSON message.
func TestFaultAnswers(t *testing.T) {
	tests := []struct {
		name         string
		fault        Fault
		req          request
		wantCode     int
		wantLocation string
		wantBody     string // exact
		wantJobs     int    // jobs with correlation ID "c" afterwards
	}{
		{
			name:     "201 without a job ID",
			fault:    Fault{Method: http.MethodPost, Path: "/jobs", Status: http.StatusCreated, AfterHandling: true, Body: `{"accepted":true}`},
			req:      post("/jobs", `{"correlation_id": "c"}`),
			wantCode: http.StatusCreated, wantBody: `{"accepted":true}`, wantJobs: 1,
		},
		{
			name: "Location on another origin",
			fault: Fault{
				Method: http.MethodPost, Path: "/jobs", Status: http.StatusCreated, AfterHandling: true,
				Location: "http://elsewhere.example/jobs/{id}", Body: `{"id":"{id}"}`,
			},
			req:      post("/jobs", `{"correlation_id": "c"}`),
			wantCode: http.StatusCreated, wantLocation: "http://elsewhere.example/jobs/job-000001", wantBody: `{"id":"job-000001"}`, wantJobs: 1,
		},
		{
			name:     "refusal with a JSON message creates nothing",
			fault:    Fault{Method: http.MethodPost, Path: "/jobs", Status: http.StatusUnprocessableEntity, Body: `{"message":"quota exceeded for team a"}`},
			req:      post("/jobs", `{"correlation_id": "c"}`),
			wantCode: http.StatusUnprocessableEntity, wantBody: `{"message":"quota exceeded for team a"}`,
		},
		{
			name:     "status answer without the status field",
			fault:    Fault{Method: http.MethodGet, Path: "/jobs/", Status: http.StatusOK, Body: `{"id":"{id}","state":"running"}`},
			req:      get("/jobs/job-000042"),
			wantCode: http.StatusOK, wantBody: `{"id":"job-000042","state":"running"}`,
		},
		{
			name:     "a body that is not JSON",
			fault:    Fault{Status: http.StatusBadGateway, Body: `<html>bad gateway</html>`},
			req:      get("/jobs/job-000001"),
			wantCode: http.StatusBadGateway, wantBody: `<html>bad gateway</html>`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.api.Inject(tt.fault)
			code, h, body := f.do(tt.req)
			got := []any{code, h.Get("Location"), string(body), f.api.Submissions("c")}
			want := []any{tt.wantCode, tt.wantLocation, tt.wantBody, tt.wantJobs}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[status, Location, body, jobs] mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInjectUntil(t *testing.T) {
	f := newFixture(t)
	remove := f.api.InjectUntil(Fault{Status: http.StatusTooManyRequests, RetryAfter: 7 * time.Second})
	for range 3 {
		code, h, _ := f.do(post("/jobs", `{"correlation_id": "c"}`))
		if code != http.StatusTooManyRequests || h.Get("Retry-After") != "7" {
			t.Fatalf("while throttled: status %d, Retry-After %q; want 429 and 7", code, h.Get("Retry-After"))
		}
	}
	remove()
	remove() // a second call is harmless
	if code, _, _ := f.do(post("/jobs", `{"correlation_id": "c"}`)); code != http.StatusCreated {
		t.Errorf("after remove: status %d, want 201", code)
	}
	if got := f.api.Submissions("c"); got != 1 {
		t.Errorf("Submissions = %d, want 1", got)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name     string
		req      request
		wantCode int
		wantErr  string // the error body; "*" accepts any non-empty message
	}{
		{"malformed JSON", post("/jobs", `{"duration_seconds": `), 400, "*"},
		{"not an object", post("/jobs", `[{}]`), 400, "*"},
		{"null", post("/jobs", `null`), 400, "*"},
		{"empty body", request{method: http.MethodPost, path: "/jobs"}, 400, "*"},
		{"trailing data", post("/jobs", `{} {}`), 400, "*"},
		{"negative duration", post("/jobs", `{"duration_seconds": -1}`), 422, "*"},
		{"huge queue", post("/jobs", `{"queue_seconds": 1e12}`), 422, "*"},
		{"duration as a string", post("/jobs", `{"duration_seconds": "2"}`), 422, "*"},
		{"unknown outcome", post("/jobs", `{"outcome": "maybe"}`), 422, "*"},
		{"unknown on_cancel", post("/jobs", `{"on_cancel": "explode"}`), 422, "*"},
		{"question without key", post("/jobs", `{"questions": [{"message": "?"}]}`), 422, "*"},
		{"repeated question key", post("/jobs", `{"questions": [{"key": "a"}, {"key": "a"}]}`), 422, "*"},
		{"schema not an object", post("/jobs", `{"questions": [{"key": "a", "schema": "string"}]}`), 422, "*"},
		{"data not an object", post("/jobs", `{"data": [1]}`), 422, "*"},
		{"body too large", post("/jobs", `{"output": "`+strings.Repeat("x", maxBodyBytes)+`"}`), 413, "*"},
		{
			"not JSON content",
			request{method: http.MethodPost, path: "/jobs", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}},
			415, "*",
		},
		{"answers malformed", post("/jobs/job-000001/answers", `{`), 400, "*"},
		{"answers missing", post("/jobs/job-000001/answers", `{}`), 422, "*"},
		{"wrong method on /jobs", request{method: http.MethodDelete, path: "/jobs"}, 405, "method not allowed"},
		{"wrong method on a job", request{method: http.MethodDelete, path: "/jobs/job-000001"}, 405, "method not allowed"},
		{"unknown path", get("/queues"), 404, "not found"},
		{"unknown job action", post("/jobs/job-000001/retry", ""), 404, "not found"},
		{"too deep", get("/jobs/job-000001/cancel/x"), 404, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.do(post("/jobs", `{"duration_seconds": 60}`))
			code, _, body := f.do(tt.req)
			var e errorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %q: %v", body, err)
			}
			if tt.wantErr == "*" && e.Error != "" {
				e.Error = "*"
			}
			if diff := cmp.Diff(fmt.Sprint(tt.wantCode, " ", tt.wantErr), fmt.Sprint(code, " ", e.Error)); diff != "" {
				t.Errorf("status and error mismatch (-want +got):\n%s", diff)
			}
			if got := f.api.Submissions(""); got != 1 {
				t.Errorf("Submissions = %d, want only the setup job", got)
			}
		})
	}
}

func TestMethodNotAllowedNamesAllowedMethods(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/jobs":                   "GET, POST",
		"/jobs/job-000001":        "GET",
		"/jobs/job-000001/cancel": "POST",
	} {
		_, h, _ := f.do(request{method: http.MethodPut, path: path})
		if got := h.Get("Allow"); got != want {
			t.Errorf("PUT %s: Allow %q, want %q", path, got, want)
		}
	}
}

func TestStartAndClose(t *testing.T) {
	api := New(nil)
	if err := api.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	base, err := api.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(base+"/jobs", "application/json", strings.NewReader(`{"duration_seconds": 30}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /jobs: status %d, want 201", resp.StatusCode)
	}
	if err := api.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if resp, err := client.Get(base + "/jobs/job-000001"); err == nil {
		resp.Body.Close()
		t.Error("GET after Close succeeded, want a connection error")
	}
}

func TestConcurrentSubmissionsGetDistinctIDs(t *testing.T) {
	api := New(nil)
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w := httptest.NewRecorder()
			api.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/jobs", strings.NewReader(`{"correlation_id": "c"}`)))
			ids[i] = w.Header().Get("Location")
			w = httptest.NewRecorder()
			api.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/jobs?correlation_id=c", nil))
		})
	}
	wg.Wait()
	seen := make(map[string]bool)
	for _, id := range ids {
		seen[id] = true
	}
	if len(seen) != n || api.Submissions("c") != n || api.Requests() != 2*n {
		t.Errorf("%d distinct Locations, %d submissions, %d requests; want %d, %d, %d",
			len(seen), api.Submissions("c"), api.Requests(), n, n, 2*n)
	}
}

// With a listing lag, a new job is left out of GET /jobs until it is that
// old, while GET /jobs/{id} answers at once.
func TestListingLags(t *testing.T) {
	clock := &fakeClock{now: t0}
	api := New(&Options{Now: clock.Now, ListingLag: 2 * time.Second})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f := &fixture{t: t, clock: clock, api: api, http: srv}
	f.do(post("/jobs", `{"correlation_id": "c-1", "duration_seconds": 60}`))
	listed := func() int {
		resp, err := http.Get(srv.URL + "/jobs?correlation_id=c-1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out jobList
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return len(out.Jobs)
	}
	if n := listed(); n != 0 {
		t.Errorf("right after the submission: %d jobs listed, want 0", n)
	}
	if resp, err := http.Get(srv.URL + "/jobs/job-000001"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /jobs/job-000001 right after the submission: %v %v, want 200", resp, err)
	}
	clock.Advance(2 * time.Second)
	if n := listed(); n != 1 {
		t.Errorf("after the lag: %d jobs listed, want 1", n)
	}
}
