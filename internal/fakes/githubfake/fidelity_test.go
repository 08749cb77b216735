package githubfake

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// getJSON sends an authorised GET for path (under the base URL) and decodes
// the answer.
func (f *fixture) getJSON(t *testing.T, path string, v any) *http.Response {
	t.Helper()
	req, err := f.gh.NewRequest(t.Context(), http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.gh.Do(req, v)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.Response
}

// requiredMembers is testdata/required-members.json: the members GitHub's
// OpenAPI description marks required in each answer this fake gives.
func requiredMembers(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("testdata/required-members.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for k, v := range raw {
		if strings.HasPrefix(k, "_") {
			continue
		}
		var names []string
		if err := json.Unmarshal(v, &names); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = names
	}
	return out
}

func missing(doc map[string]any, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := doc[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func obj(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", what, v)
	}
	return m
}

// TestAnswersCarryRequiredMembers checks every answer the adapter reads
// against the members GitHub's description marks required, and that
// queued jobs carry started_at as a string (the description does not allow
// null).
func TestAnswersCarryRequiredMembers(t *testing.T) {
	req := requiredMembers(t)
	f := newFixture(t, func(o *Options) {
		o.Workflows = []Workflow{workflows[0], {File: "deploy.yml", Script: Script{
			Jobs:     []JobScript{{Name: "deploy", Duration: time.Minute}},
			Approval: &Approval{Environment: "prod", EnvironmentID: 9, Reviewers: []string{"octocat", "team:release"}},
		}}}
	})
	ci := f.dispatch(t, "ci.yml", map[string]any{"id": "x"}) // queued for a minute
	deploy := f.dispatch(t, "deploy.yml", nil)

	var run map[string]any
	f.getJSON(t, fmt.Sprintf("repos/o/r/actions/runs/%d", ci), &run)
	var jobs map[string]any
	f.getJSON(t, fmt.Sprintf("repos/o/r/actions/runs/%d/jobs", ci), &jobs)
	job := obj(t, jobs["jobs"].([]any)[0], "jobs[0]")
	var pending []map[string]any
	f.getJSON(t, fmt.Sprintf("repos/o/r/actions/runs/%d/pending_deployments", deploy), &pending)
	if len(pending) != 1 {
		t.Fatalf("pending deployments: %v", pending)
	}
	reviewers := pending[0]["reviewers"].([]any)
	f.clock.Advance(10 * time.Minute)
	f.getJSON(t, fmt.Sprintf("repos/o/r/actions/runs/%d/jobs", ci), &jobs)
	started := obj(t, jobs["jobs"].([]any)[0], "jobs[0]")
	var arts map[string]any
	f.getJSON(t, fmt.Sprintf("repos/o/r/actions/runs/%d/artifacts", ci), &arts)
	art := obj(t, arts["artifacts"].([]any)[0], "artifacts[0]")
	var list map[string]any
	f.getJSON(t, "repos/o/r/actions/workflows/ci.yml/runs", &list)

	tests := []struct {
		name string
		doc  map[string]any
		key  string
	}{
		{"run", run, "run"},
		{"run.head_commit", obj(t, run["head_commit"], "head_commit"), "run.head_commit"},
		{"run.head_commit.author", obj(t, obj(t, run["head_commit"], "head_commit")["author"], "author"), "run.head_commit.author"},
		{"run.repository", obj(t, run["repository"], "repository"), "run.repository"},
		{"run.repository.owner", obj(t, obj(t, run["repository"], "repository")["owner"], "owner"), "run.repository.owner"},
		{"run.head_repository", obj(t, run["head_repository"], "head_repository"), "run.head_repository"},
		{"runs", list, "runs"},
		{"jobs", jobs, "jobs"},
		{"queued job", job, "job"},
		{"started job", started, "job"},
		{"step", obj(t, started["steps"].([]any)[0], "step"), "job.step"},
		{"artifacts", arts, "artifacts"},
		{"artifact", art, "artifact"},
		{"pending deployment", pending[0], "pending_deployment"},
		{"user reviewer", obj(t, obj(t, reviewers[0], "reviewer")["reviewer"], "user"), "reviewer.user"},
		{"team reviewer", obj(t, obj(t, reviewers[1], "reviewer")["reviewer"], "team"), "reviewer.team"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(req[tt.key]) == 0 {
				t.Fatalf("testdata has no required members for %s", tt.key)
			}
			if m := missing(tt.doc, req[tt.key]); len(m) > 0 {
				t.Errorf("%s lacks required members %v", tt.name, m)
			}
		})
	}
	if s, ok := job["started_at"].(string); !ok || s == "" {
		t.Errorf("queued job started_at = %#v, want a date-time string", job["started_at"])
	}
	if job["runner_id"] != nil || started["runner_id"] == nil {
		t.Errorf("runner_id: queued %v, started %v; want null until the job has a runner", job["runner_id"], started["runner_id"])
	}
}

// TestReviewAnswerCarriesRequiredMembers checks the deployments a review
// answers with.
func TestReviewAnswerCarriesRequiredMembers(t *testing.T) {
	req := requiredMembers(t)
	f := newFixture(t, nil)
	id := f.dispatch(t, "deploy.yml", nil)
	deps, _, err := f.gh.Actions.PendingDeployments(t.Context(), "o", "r", id, github.PendingDeploymentsRequest{EnvironmentIDs: []int64{9}, State: "approved", Comment: "ok"})
	if err != nil || len(deps) != 1 {
		t.Fatalf("review: %v %v", err, deps)
	}
	b, _ := json.Marshal(deps[0])
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	// go-github drops nulls it reads (description): check the raw answer.
	var raw []map[string]any
	body, _ := json.Marshal(map[string]any{"environment_ids": []int64{9}, "state": "approved", "comment": "again"})
	f.srv.mu.Lock()
	f.srv.runs[id].review = nil
	f.srv.mu.Unlock()
	resp := f.raw(t, http.MethodPost, fmt.Sprintf("repos/o/r/actions/runs/%d/pending_deployments", id), string(body))
	if err := json.Unmarshal([]byte(resp.body), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("raw review answer %d: %s", resp.status, resp.body)
	}
	if m := missing(raw[0], req["deployment"]); len(m) > 0 {
		t.Errorf("deployment lacks required members %v", m)
	}
	if m := missing(obj(t, raw[0]["creator"], "creator"), req["deployment.creator"]); len(m) > 0 {
		t.Errorf("deployment creator lacks required members %v", m)
	}
}

type rawAnswer struct {
	status int
	header http.Header
	body   string
}

// raw sends a request with the fixture's token and returns the answer as
// it came.
func (f *fixture) raw(t *testing.T, method, path, body string) rawAnswer {
	t.Helper()
	return rawWith(t, method, f.gh.BaseURL()+path, body, "Bearer "+token)
}

func rawWith(t *testing.T, method, url, body, auth string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestListingLags checks that a new run appears in the run listing only
// after the list delay, as on GitHub, by default.
func TestListingLags(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
		// listed at 0s, after 1s, after DefaultListDelay
		want []int
	}{
		{"default", 0, []int{0, 0, 1}},
		{"longer", 5 * time.Second, []int{0, 0, 0}},
		{"none", NoListDelay, []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.ListDelay = tt.delay })
			id := f.dispatch(t, "ci.yml", nil)
			var got []int
			for _, step := range []time.Duration{0, time.Second, DefaultListDelay - time.Second} {
				f.clock.Advance(step)
				runs, _, err := f.gh.Actions.ListWorkflowRunsByFileName(t.Context(), "o", "r", "ci.yml", nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, len(runs.WorkflowRuns))
				if len(runs.WorkflowRuns) == 1 && runs.WorkflowRuns[0].GetID() != id {
					t.Errorf("listed run %d, want %d", runs.WorkflowRuns[0].GetID(), id)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("runs listed over time (-want +got):\n%s", diff)
			}
			// The run itself is readable at once.
			statusOf(t, f, id)
		})
	}
}

// TestJobsAndArtifactsPaginate checks GitHub's pagination of jobs and
// artifacts: per_page up to 100, total_count of all pages, a Link header
// naming the next and last pages.
func TestJobsAndArtifactsPaginate(t *testing.T) {
	var jobs []JobScript
	for i := range 150 {
		jobs = append(jobs, JobScript{Name: fmt.Sprintf("shard-%03d", i)})
	}
	var arts []ArtifactScript
	for i := range 120 {
		arts = append(arts, ArtifactScript{Name: fmt.Sprintf("a%d", i), Size: 1})
	}
	f := newFixture(t, func(o *Options) {
		o.Workflows = []Workflow{{File: "matrix.yml", Script: Script{Jobs: jobs, Artifacts: arts}}}
	})
	id := f.dispatch(t, "matrix.yml", nil)

	tests := []struct {
		name     string
		path     string
		key      string
		perPage  string
		page     string
		want     int
		total    int
		wantNext string // page number in the next link; "" for none
	}{
		{"jobs default page", "jobs", "jobs", "", "", 30, 150, "2"},
		{"jobs page 1 of 100", "jobs", "jobs", "100", "1", 100, 150, "2"},
		{"jobs page 2 of 100", "jobs", "jobs", "100", "2", 50, 150, ""},
		{"jobs per_page capped at 100", "jobs", "jobs", "500", "1", 100, 150, "2"},
		{"artifacts page 1", "artifacts", "artifacts", "100", "1", 100, 120, "2"},
		{"artifacts page 2", "artifacts", "artifacts", "100", "2", 20, 120, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := []string{}
			if tt.perPage != "" {
				q = append(q, "per_page="+tt.perPage)
			}
			if tt.page != "" {
				q = append(q, "page="+tt.page)
			}
			a := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d/%s?%s", id, tt.path, strings.Join(q, "&")), "")
			var doc map[string]any
			if err := json.Unmarshal([]byte(a.body), &doc); err != nil {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if got := len(doc[tt.key].([]any)); got != tt.want {
				t.Errorf("%d %s on the page, want %d", got, tt.key, tt.want)
			}
			if got := doc["total_count"]; got != float64(tt.total) {
				t.Errorf("total_count %v, want %d", got, tt.total)
			}
			link := a.header.Get("Link")
			hasNext := strings.Contains(link, `rel="next"`)
			if hasNext != (tt.wantNext != "") || (hasNext && !strings.Contains(link, "page="+tt.wantNext+"&") && !strings.Contains(link, "page="+tt.wantNext+">")) {
				t.Errorf("Link %q, want next page %q", link, tt.wantNext)
			}
		})
	}

	// go-github follows the Link header.
	got := 0
	opts := &github.ListWorkflowJobsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		js, resp, err := f.gh.Actions.ListWorkflowJobs(t.Context(), "o", "r", id, opts)
		if err != nil {
			t.Fatal(err)
		}
		got += len(js.Jobs)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if got != 150 {
		t.Errorf("following the pages gave %d jobs, want 150", got)
	}
}

// TestDispatchRefusals checks the 422s GitHub answers for a dispatch it
// will not run, with GitHub's messages, and that none creates a run.
func TestDispatchRefusals(t *testing.T) {
	tests := []struct {
		name   string
		wf     string
		ref    string
		inputs map[string]any
		want   string
	}{
		{"unknown ref", "ci.yml", "no-such-branch", nil, "No ref found for: no-such-branch"},
		{"unexpected inputs", "ci.yml", "main", map[string]any{"id": "1", "colour": "red", "size": "L"}, `Unexpected inputs provided: ["colour","size"]`},
		{"no workflow_dispatch trigger", "push-only.yml", "main", nil, "Workflow does not have 'workflow_dispatch' trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) {
				o.Refs = []string{"main", "v1.0"}
				o.Workflows = []Workflow{
					{File: "ci.yml", Inputs: []string{"id"}},
					{File: "push-only.yml", NoDispatchTrigger: true},
				}
			})
			_, resp, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", tt.wf, github.CreateWorkflowDispatchEventRequest{
				Ref: tt.ref, Inputs: tt.inputs, ReturnRunDetails: github.Ptr(true),
			})
			er, ok := err.(*github.ErrorResponse)
			if !ok || resp.StatusCode != http.StatusUnprocessableEntity || er.Message != tt.want {
				t.Errorf("dispatch: %v (%T); want 422 %q", err, err, tt.want)
			}
			if f.srv.Dispatched() != 0 {
				t.Errorf("a refused dispatch created %d runs", f.srv.Dispatched())
			}
			// Known refs and declared inputs are accepted.
			for _, ref := range []string{"main", "refs/heads/main", "refs/tags/v1.0"} {
				if _, _, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", "ci.yml", github.CreateWorkflowDispatchEventRequest{
					Ref: ref, Inputs: map[string]any{"id": "1"},
				}); err != nil {
					t.Errorf("dispatch to %s: %v", ref, err)
				}
			}
		})
	}
}

// TestUnauthorizedCarriesRateLimitHeaders checks that a 401 carries the
// unauthenticated window's x-ratelimit headers, as GitHub's do.
func TestUnauthorizedCarriesRateLimitHeaders(t *testing.T) {
	f := newFixture(t, nil)
	a := rawWith(t, http.MethodGet, f.gh.BaseURL()+"repos/o/r/actions/runs/1", "", "Bearer wrong")
	if a.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", a.status)
	}
	want := map[string]string{"X-Ratelimit-Limit": "60", "X-Ratelimit-Remaining": "59", "X-Ratelimit-Used": "1", "X-Ratelimit-Resource": "core"}
	for k, v := range want {
		if got := a.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if a.header.Get("X-Ratelimit-Reset") == "" {
		t.Error("no X-Ratelimit-Reset")
	}
}

// TestSecondaryLimits checks the opt-in secondary limits: points per
// endpoint and minute (GET 1, POST 5), and concurrent requests.
func TestSecondaryLimits(t *testing.T) {
	t.Run("points per endpoint and minute", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.SecondaryLimits = &SecondaryLimits{PointsPerMinute: 12} })
		id := f.dispatch(t, "ci.yml", nil) // 5 points on the dispatch endpoint
		for i := range 12 {
			if a := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id), ""); a.status != http.StatusOK {
				t.Fatalf("GET %d: %d", i+1, a.status)
			}
		}
		a := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id+0), "")
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "secondary rate limit") || a.header.Get("Retry-After") == "" {
			t.Errorf("13th GET in a minute: %d %s (retry-after %q); want 403 secondary limit with retry-after", a.status, a.body, a.header.Get("Retry-After"))
		}
		if a.header.Get("X-Ratelimit-Remaining") == "0" || a.header.Get("X-Ratelimit-Limit") == "" {
			t.Errorf("secondary limit headers %v; want the primary window's, remaining not 0", a.header)
		}
		// Another endpoint has its own points: 5 + 5 <= 12, the third is refused.
		f.dispatch(t, "ci.yml", nil)
		if _, _, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", "ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main"}); err == nil {
			t.Error("a third dispatch (15 points) in a minute was accepted")
		}
		if got := f.srv.Dispatched(); got != 2 {
			t.Errorf("dispatched %d, want 2: a refused request takes no effect", got)
		}
		f.clock.Advance(time.Minute)
		if a := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id), ""); a.status != http.StatusOK {
			t.Errorf("GET a minute later: %d", a.status)
		}
	})
	t.Run("concurrent requests", func(t *testing.T) {
		notRecorded(t) // it holds a request open with a streaming body no GitHub call has
		f := newFixture(t, func(o *Options) { o.SecondaryLimits = &SecondaryLimits{Concurrent: 1} })
		id := f.dispatch(t, "ci.yml", nil)
		// A request whose body is still arriving is in flight.
		pr, pw := io.Pipe()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.gh.BaseURL()+fmt.Sprintf("repos/o/r/actions/runs/%d/cancel", id), pr)
		req.Header.Set("Authorization", "Bearer "+token)
		done := make(chan int)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		_, _ = pw.Write([]byte("{"))
		for f.srv.inFlightNow() == 0 {
			time.Sleep(time.Millisecond)
		}
		a := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id), "")
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "secondary rate limit") {
			t.Errorf("a second concurrent request: %d %s; want 403 secondary limit", a.status, a.body)
		}
		_, _ = pw.Write([]byte("}"))
		pw.Close()
		if got := <-done; got != http.StatusAccepted {
			t.Errorf("the first request: %d, want 202", got)
		}
	})
}

func (s *Server) inFlightNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// TestJobsLeaveRunUnchanged checks the option under which a job finishing
// does not change the run document: the run's ETag holds while the jobs'
// changes.
func TestJobsLeaveRunUnchanged(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprint("quiet=", quiet), func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.JobsLeaveRunUnchanged = quiet })
			id := f.dispatch(t, "ci.yml", nil)
			f.clock.Advance(90 * time.Second) // job build runs
			runTag := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id), "").header.Get("ETag")
			jobsTag := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d/jobs", id), "").header.Get("ETag")
			f.clock.Advance(time.Minute) // build done, test runs
			runTag2 := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d", id), "").header.Get("ETag")
			jobsTag2 := f.raw(t, http.MethodGet, fmt.Sprintf("repos/o/r/actions/runs/%d/jobs", id), "").header.Get("ETag")
			if (runTag == runTag2) != quiet {
				t.Errorf("run ETag unchanged across a job finishing: %v, want %v", runTag == runTag2, quiet)
			}
			if jobsTag == jobsTag2 {
				t.Error("jobs ETag unchanged across a job finishing")
			}
		})
	}
}

// TestExchangesRecorded checks the exchange records written when
// JOBBRIDGE_EXCHANGES names a directory: one JSON object a line, with
// the request and the answer, injected faults marked, credentials
// redacted, pre-signed downloads left out.
func TestExchangesRecorded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ExchangesEnv, dir)
	f := newFixture(t, nil)
	id := f.dispatch(t, "ci.yml", map[string]any{"id": "rec"})
	statusOf(t, f, id)
	f.srv.Inject(Fault{Status: 502, Message: "made up"})
	_, _, _ = f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	f.clock.Advance(5 * time.Minute)
	_, _, _ = f.gh.Actions.GetWorkflowJobLogs(t.Context(), "o", "r", f.srv.runs[id].jobIDs[0], 1) // 302, then the blob is not fetched by go-github

	file, err := os.Open(filepath.Join(dir, fmt.Sprintf("github-%d.jsonl", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var got []exchanges.Exchange
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e exchanges.Exchange
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, e)
	}
	type summary struct {
		Method, Path string
		Status       int
		Injected     bool
	}
	var sums []summary
	for _, e := range got {
		sums = append(sums, summary{e.Method, e.Path, e.Status, e.Injected})
		if e.Backend != "github" || e.ResponseHeaders == nil || e.RequestHeaders == nil {
			t.Errorf("record %+v lacks backend or headers", e)
		}
		if strings.Contains(e.RequestHeaders.Get("Authorization"), token) {
			t.Errorf("record carries the token: %v", e.RequestHeaders)
		}
	}
	runPath := fmt.Sprintf("/repos/o/r/actions/runs/%d", id)
	want := []summary{
		{"POST", "/repos/o/r/actions/workflows/ci.yml/dispatches", 200, false},
		{"GET", runPath, 200, false},
		{"GET", runPath, 502, true},
		{"GET", fmt.Sprintf("/repos/o/r/actions/jobs/%d/logs", f.srv.runs[id].jobIDs[0]), 302, false},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Fatalf("recorded exchanges (-want +got):\n%s", diff)
	}
	if !strings.Contains(got[0].RequestBody, `"return_run_details":true`) || !strings.Contains(got[0].ResponseBody, `"workflow_run_id"`) {
		t.Errorf("dispatch record bodies: %q → %q", got[0].RequestBody, got[0].ResponseBody)
	}
	if got[1].ResponseHeaders.Get("Content-Type") != "application/json; charset=utf-8" || got[1].ResponseHeaders.Get("ETag") == "" {
		t.Errorf("run record headers %v; want the Content-Type and ETag sent", got[1].ResponseHeaders)
	}
}
