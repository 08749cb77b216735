package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testScript = `
name: test
auth: {accept: ["Bearer good"]}
secret_headers: [X-Api-Key]
lifecycles:
  run:
    every: 1
    cancel: stopped
    phases:
      - {name: queued, fields: {state: QUEUED, done: 0}}
      - {name: running, fields: {state: RUNNING, done: 1, ref: {number: "{job.seq}"}}}
      - {name: stopped, fields: {state: STOPPED}}
      - {name: done, fields: {state: DONE, done: 2}}
  slow:
    every: 2
    phases: [{name: a, fields: {state: A}}, {name: b, fields: {state: B}}]
routes:
  - name: token
    method: POST
    path: /token
    public: true
    match: {form: {grant_type: client_credentials}}
    respond: {body: {access_token: good}}
  - name: refuse
    method: POST
    path: /ns/{ns}/jobs
    match: {body: {spec.queue: nope}, body_contains: ['"nope"']}
    respond: {status: 500, body: {errors: ["queue {body.spec.queue} does not exist"]}}
  - name: exists
    method: POST
    path: /ns/{ns}/jobs
    job: "{body.name}"
    if_job: true
    respond: {status: 409, body: {message: "{job.id} exists"}}
  - name: start
    method: POST
    path: /ns/{ns}/jobs
    match: {query: {mode: fast}}
    create: {id: "job-{job.seq}", lifecycle: run, vars: {ns: "{path.ns}", label: "{body.labels.corr}", count: "{body.count}"}}
    respond:
      status: 201
      headers: {Location: "/ns/{path.ns}/jobs/{job.id}"}
      body: {id: "{job.id}", count: "{job.count}", note: "{job.count} in {job.ns}"}
  - name: start_slow
    method: POST
    path: /ns/{ns}/jobs
    create: {id: "{body.name}", lifecycle: slow}
    respond: {body: {id: "{job.id}"}}
  - name: status
    method: GET
    path: /ns/{ns}/jobs/{id}
    job: "{path.id}"
    advance: true
    missing: {status: 404, body: {kind: Status, reason: NotFound}}
    respond: {body: {id: "{job.id}", state: "{job.state}", phase: "{job.phase}", done: "{job.done}", ref: "{job.ref}", number: "{job.ref.number}", absent: "{job.nothing}"}}
  - name: by_label
    method: GET
    path: /by-label/{label}
    job: "{path.label}"
    job_by: label
    respond: {body: {id: "{job.id}"}}
  - name: cancel
    method: DELETE
    path: /ns/{ns}/jobs/{id}
    job: "{path.id}"
    cancel: true
    respond: {body: {state: "{job.state}"}}
  - name: purge
    method: POST
    path: /ns/{ns}/jobs/{id}/purge
    job: "{path.id}"
    delete: true
    respond: {status: 204}
  - name: list
    method: GET
    path: /ns/{ns}/jobs
    list:
      where: {"{query.label}": "{job.label}"}
      item: {id: "{job.id}", state: "{job.state}"}
    respond: {body: {items: "{items}", literal: "{not a placeholder}"}}
faults:
  - {route: status, at: 5, status: 503, headers: {Retry-After: "7"}, body: {message: busy}}
`

type step struct {
	method, path, body string
	header             map[string]string
	wantStatus         int
	wantBody           string // JSON; empty: no body
	wantHeader         map[string]string
}

func run(t *testing.T, f *Fake, steps []step) {
	t.Helper()
	for i, s := range steps {
		req := httptest.NewRequest(s.method, s.path, strings.NewReader(s.body))
		req.Header.Set("Authorization", "Bearer good")
		for k, v := range s.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		if rec.Code != s.wantStatus {
			t.Fatalf("step %d (%s %s): status %d, want %d; body %s", i, s.method, s.path, rec.Code, s.wantStatus, rec.Body)
		}
		got, _ := io.ReadAll(rec.Body)
		if s.wantBody == "" {
			if len(got) != 0 {
				t.Errorf("step %d: body %s, want none", i, got)
			}
		} else {
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("step %d: body %q is not JSON: %v", i, got, err)
			}
			if err := json.Unmarshal([]byte(s.wantBody), &w); err != nil {
				t.Fatalf("step %d: bad wantBody: %v", i, err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("step %d (%s %s): body (-want +got):\n%s", i, s.method, s.path, d)
			}
		}
		for k, v := range s.wantHeader {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("step %d: header %s = %q, want %q", i, k, got, v)
			}
		}
	}
}

func newTestFake(t *testing.T) *Fake {
	t.Helper()
	s, err := Parse([]byte(testScript))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return New(s)
}

func TestFakeScenarios(t *testing.T) {
	start := step{method: "POST", path: "/ns/prod/jobs?mode=fast", body: `{"labels":{"corr":"c-1"},"count":3}`,
		wantStatus: 201, wantBody: `{"id":"job-1","count":3,"note":"3 in prod"}`,
		wantHeader: map[string]string{"Location": "/ns/prod/jobs/job-1", "Content-Type": "application/json"}}
	status := func(state, phase string, done any, ref string) step {
		b, _ := json.Marshal(map[string]any{"id": "job-1", "state": state, "phase": phase, "done": done, "ref": json.RawMessage(ref), "number": nil, "absent": nil})
		if ref != "null" {
			b, _ = json.Marshal(map[string]any{"id": "job-1", "state": state, "phase": phase, "done": done, "ref": json.RawMessage(ref), "number": 1, "absent": nil})
		}
		return step{method: "GET", path: "/ns/prod/jobs/job-1", wantStatus: 200, wantBody: string(b)}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"each status answer moves the job on, the last phase sticks, and the cancel phase is skipped", []step{
			start,
			status("QUEUED", "queued", 0, "null"),
			status("RUNNING", "running", 1, `{"number":1}`),
			status("DONE", "done", 2, `{"number":1}`),
			status("DONE", "done", 2, `{"number":1}`),
		}},
		{"a scripted fault answers the fifth status request, without moving the job on", []step{
			start,
			status("QUEUED", "queued", 0, "null"),
			status("RUNNING", "running", 1, `{"number":1}`),
			status("DONE", "done", 2, `{"number":1}`),
			status("DONE", "done", 2, `{"number":1}`),
			{method: "GET", path: "/ns/prod/jobs/job-1", wantStatus: 503, wantBody: `{"message":"busy"}`, wantHeader: map[string]string{"Retry-After": "7"}},
			status("DONE", "done", 2, `{"number":1}`),
		}},
		{"a cancel moves an unfinished job to the cancel phase, keeping earlier fields", []step{
			start,
			status("QUEUED", "queued", 0, "null"),
			{method: "DELETE", path: "/ns/prod/jobs/job-1", wantStatus: 200, wantBody: `{"state":"STOPPED"}`},
			status("STOPPED", "stopped", 1, `{"number":1}`),
			status("STOPPED", "stopped", 1, `{"number":1}`),
		}},
		{"a cancel leaves a finished job as it is", []step{
			start,
			status("QUEUED", "queued", 0, "null"),
			status("RUNNING", "running", 1, `{"number":1}`),
			status("DONE", "done", 2, `{"number":1}`),
			{method: "DELETE", path: "/ns/prod/jobs/job-1", wantStatus: 200, wantBody: `{"state":"DONE"}`},
		}},
		{"an unknown job gets the route's missing answer; a deleted job is gone", []step{
			{method: "GET", path: "/ns/prod/jobs/job-9", wantStatus: 404, wantBody: `{"kind":"Status","reason":"NotFound"}`},
			start,
			{method: "POST", path: "/ns/prod/jobs/job-1/purge", wantStatus: 204},
			{method: "GET", path: "/ns/prod/jobs/job-1", wantStatus: 404, wantBody: `{"kind":"Status","reason":"NotFound"}`},
		}},
		{"body matches pick a route that refuses with the request's words", []step{
			{method: "POST", path: "/ns/prod/jobs?mode=fast", body: `{"spec":{"queue":"nope"}}`, wantStatus: 500, wantBody: `{"errors":["queue nope does not exist"]}`},
			{method: "GET", path: "/ns/prod/jobs?label=", wantStatus: 200, wantBody: `{"items":[],"literal":"{not a placeholder}"}`},
		}},
		{"the route order decides; an ID from the request body; every 2 answers a phase", []step{
			{method: "POST", path: "/ns/prod/jobs", body: `{"name":"nightly"}`, wantStatus: 200, wantBody: `{"id":"nightly"}`},
			{method: "GET", path: "/ns/prod/jobs/nightly", wantStatus: 200, wantBody: `{"id":"nightly","state":"A","phase":"a","done":null,"ref":null,"number":null,"absent":null}`},
			{method: "GET", path: "/ns/prod/jobs/nightly", wantStatus: 200, wantBody: `{"id":"nightly","state":"A","phase":"a","done":null,"ref":null,"number":null,"absent":null}`},
			{method: "GET", path: "/ns/prod/jobs/nightly", wantStatus: 200, wantBody: `{"id":"nightly","state":"B","phase":"b","done":null,"ref":null,"number":null,"absent":null}`},
			{method: "POST", path: "/ns/prod/jobs", body: `{"name":"nightly"}`, wantStatus: 409, wantBody: `{"message":"nightly exists"}`},
		}},
		{"a list route filters jobs with its where templates; job_by finds a job by a var", []step{
			start,
			{method: "POST", path: "/ns/prod/jobs?mode=fast", body: `{"labels":{"corr":"c-2"}}`, wantStatus: 201, wantBody: `{"id":"job-2","count":null,"note":" in prod"}`},
			{method: "GET", path: "/ns/prod/jobs?label=c-2", wantStatus: 200, wantBody: `{"items":[{"id":"job-2","state":"QUEUED"}],"literal":"{not a placeholder}"}`},
			{method: "GET", path: "/by-label/c-1", wantStatus: 200, wantBody: `{"id":"job-1"}`},
		}},
		{"auth: a wrong credential is answered 401, a public route needs none", []step{
			{method: "GET", path: "/ns/prod/jobs/job-1", header: map[string]string{"Authorization": "Bearer bad"}, wantStatus: 401, wantBody: `{"message":"unauthorized"}`},
			{method: "POST", path: "/token", body: "grant_type=client_credentials", header: map[string]string{"Authorization": "", "Content-Type": "application/x-www-form-urlencoded"}, wantStatus: 200, wantBody: `{"access_token":"good"}`},
			{method: "GET", path: "/nowhere", wantStatus: 404, wantBody: `{"message":"no route for GET /nowhere"}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run(t, newTestFake(t), tt.steps)
		})
	}
}

func TestInjectAndRotateCredentials(t *testing.T) {
	f := newTestFake(t)
	f.Inject(Fault{Route: "start", At: 1, Response: Response{Status: 429, Headers: map[string]string{"Retry-After": "3"}}})
	run(t, f, []step{
		{method: "POST", path: "/ns/prod/jobs?mode=fast", body: `{}`, wantStatus: 429, wantHeader: map[string]string{"Retry-After": "3"}},
		{method: "POST", path: "/ns/prod/jobs?mode=fast", body: `{}`, wantStatus: 201, wantBody: `{"id":"job-1","count":null,"note":" in prod"}`},
	})
	f.SetAccepted("Bearer rotated")
	run(t, f, []step{
		{method: "GET", path: "/ns/prod/jobs/job-1", wantStatus: 401, wantBody: `{"message":"unauthorized"}`},
		{method: "GET", path: "/ns/prod/jobs/job-1", header: map[string]string{"Authorization": "Bearer rotated"}, wantStatus: 200,
			wantBody: `{"id":"job-1","state":"QUEUED","phase":"queued","done":0,"ref":null,"number":null,"absent":null}`},
	})
	if phase, ok := f.Phase("job-1"); !ok || phase != "running" {
		t.Errorf("Phase(job-1) = %q, %v; want running, true", phase, ok)
	}
}

// The records say what a test needs to assert on, with secrets redacted.
func TestRequestsAreRecordedRedacted(t *testing.T) {
	f := newTestFake(t)
	base, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	req, _ := http.NewRequest("POST", base+"/ns/prod/jobs?mode=fast", strings.NewReader(`{"count":1}`))
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("X-Api-Key", "k3y")
	req.Header.Set("X-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got := f.Requests()
	if len(got) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(got))
	}
	r := got[0]
	want := Request{Route: "start", Method: "POST", Path: "/ns/prod/jobs", Body: `{"count":1}`, Status: 201}
	if r.Route != want.Route || r.Method != want.Method || r.Path != want.Path || r.Body != want.Body || r.Status != want.Status || r.Query.Get("mode") != "fast" {
		t.Errorf("recorded %+v, want %+v with mode=fast", r, want)
	}
	for k, v := range map[string]string{"Authorization": "Bearer [redacted]", "X-Api-Key": "[redacted]", "X-User": "alice"} {
		if r.Header.Get(k) != v {
			t.Errorf("recorded %s = %q, want %q", k, r.Header.Get(k), v)
		}
	}
}

func TestParseReportsMistakes(t *testing.T) {
	tests := []struct {
		name, script string
		want         []string
	}{
		{"unknown key", "routes: [{path: /x, respnd: {}}]", []string{"respnd"}},
		{"dangling names", `
lifecycles: {l: {cancel: gone, phases: [{name: a}]}, e: {}}
routes:
  - {name: a, path: /a, create: {lifecycle: nope}}
  - {name: a, path: b, advance: true}
faults: [{route: z, at: 0}]`, []string{
			`cancel phase "gone" is not among its phases`, "lifecycle e: no phases", `lifecycle "nope"`,
			"name given twice", "path must start with /", "advance, cancel, delete and if_job need job", `no route named "z"`, "at counts from 1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.script))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
