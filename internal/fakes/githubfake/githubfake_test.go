package githubfake

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v93/github"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

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

const token = "test-token"

var workflows = []Workflow{
	{File: "ci.yml", Name: "CI", Script: Script{
		RunName: "CI [{inputs.id}]", Queued: time.Minute,
		Jobs:       []JobScript{{Name: "build", Duration: time.Minute}, {Name: "test", Duration: time.Minute, LogLines: 5}},
		Conclusion: "failure",
		Artifacts:  []ArtifactScript{{Name: "report", Size: 123}},
	}},
	{File: "deploy.yml", Script: Script{
		Jobs:     []JobScript{{Name: "deploy", Duration: time.Minute}},
		Approval: &Approval{Environment: "prod", EnvironmentID: 9, Reviewers: []string{"octocat"}, CanApprove: true},
	}},
	{File: "stubborn.yml", Script: Script{Jobs: []JobScript{{Name: "soak", Duration: time.Hour}}, OnCancel: OnCancelIgnore}},
}

type fixture struct {
	clock *fakeClock
	srv   *Server
	gh    *github.Client
}

func newFixture(t *testing.T, edit func(*Options)) *fixture {
	t.Helper()
	clk := &fakeClock{now: t0}
	opts := &Options{Now: clk.Now, Workflows: workflows, Tokens: []string{token}}
	if edit != nil {
		edit(opts)
	}
	srv := New(opts)
	base, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	gh, err := github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken(token), github.WithDisableRateLimitCheck())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{clock: clk, srv: srv, gh: gh}
}

func (f *fixture) dispatch(t *testing.T, wf string, inputs map[string]any) int64 {
	t.Helper()
	d, _, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", wf, github.CreateWorkflowDispatchEventRequest{
		Ref: "main", Inputs: inputs, ReturnRunDetails: github.Ptr(true),
	})
	if err != nil || d.GetWorkflowRunID() == 0 {
		t.Fatalf("dispatch: %v %+v", err, d)
	}
	return d.GetWorkflowRunID()
}

func statusOf(t *testing.T, f *fixture, id int64) (string, string) {
	t.Helper()
	run, _, err := f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	if err != nil {
		t.Fatal(err)
	}
	return run.GetStatus(), run.GetConclusion()
}

func TestDispatch(t *testing.T) {
	notRecorded(t) // it sends dispatches GitHub's description forbids, to see them refused
	f := newFixture(t, nil)
	id := f.dispatch(t, "ci.yml", map[string]any{"id": "abc"})
	run, _, err := f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	if err != nil || run.GetDisplayTitle() != "CI [abc]" || run.GetStatus() != "queued" || run.GetEvent() != "workflow_dispatch" {
		t.Fatalf("run: %v %+v", err, run)
	}
	d, resp, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", "ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main"})
	if err != nil || d != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("plain dispatch: %v %v %d, want 204", err, d, resp.StatusCode)
	}
	if f.srv.Dispatches("abc") != 1 || f.srv.Dispatched() != 2 {
		t.Errorf("counters: %d %d", f.srv.Dispatches("abc"), f.srv.Dispatched())
	}

	for _, c := range []struct {
		wf   string
		body github.CreateWorkflowDispatchEventRequest
		want int
	}{
		{"nope.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main"}, 404},
		{"ci.yml", github.CreateWorkflowDispatchEventRequest{}, 422},
		{"ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main", Inputs: manyInputs(26)}, 422},
		{"ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main", Inputs: map[string]any{"x": []int{1}}}, 422},
	} {
		_, resp, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", c.wf, c.body)
		if err == nil || resp.StatusCode != c.want {
			t.Errorf("dispatch %s %+v: %v, want %d", c.wf, c.body, err, c.want)
		}
	}
}

func manyInputs(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[strings.Repeat("k", i+1)] = "v"
	}
	return m
}

func TestEnterpriseRejectsRunDetails(t *testing.T) {
	for _, status := range []int{400, 422} {
		f := newFixture(t, func(o *Options) { o.RejectRunDetails = status })
		_, resp, err := f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", "ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main", ReturnRunDetails: github.Ptr(true)})
		if err == nil || resp.StatusCode != status || f.srv.Dispatched() != 0 {
			t.Errorf("return_run_details on a %d server: %v, created %d", status, err, f.srv.Dispatched())
		}
		_, resp, err = f.gh.Actions.CreateWorkflowDispatchEventByFileName(t.Context(), "o", "r", "ci.yml", github.CreateWorkflowDispatchEventRequest{Ref: "main"})
		if err != nil || resp.StatusCode != 204 {
			t.Errorf("plain dispatch: %v", err)
		}
	}
}

// TestTimelineJobsLogsArtifacts follows a run through its scripted states.
func TestTimelineJobsLogsArtifacts(t *testing.T) {
	f := newFixture(t, nil)
	id := f.dispatch(t, "ci.yml", nil)
	var got []string
	for range 4 {
		st, c := statusOf(t, f, id)
		got = append(got, st+"/"+c)
		f.clock.Advance(time.Minute)
	}
	if diff := cmp.Diff([]string{"queued/", "in_progress/", "in_progress/", "completed/failure"}, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	jobs, _, err := f.gh.Actions.ListWorkflowJobs(t.Context(), "o", "r", id, nil)
	if err != nil || len(jobs.Jobs) != 2 || jobs.Jobs[0].GetConclusion() != "success" || jobs.Jobs[1].GetConclusion() != "failure" {
		t.Fatalf("jobs: %v %+v", err, jobs)
	}
	u, _, err := f.gh.Actions.GetWorkflowJobLogs(t.Context(), "o", "r", jobs.Jobs[1].GetID(), 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if lines := strings.Count(string(body), "\n"); lines != 6 || !strings.Contains(string(body), "##[error]") {
		t.Errorf("log: %d lines:\n%s", lines, body)
	}
	arts, _, err := f.gh.Actions.ListWorkflowRunArtifacts(t.Context(), "o", "r", id, nil)
	if err != nil || len(arts.Artifacts) != 1 || arts.Artifacts[0].GetSizeInBytes() != 123 {
		t.Errorf("artifacts: %v %+v", err, arts)
	}
	runs, _, err := f.gh.Actions.ListWorkflowRunsByFileName(t.Context(), "o", "r", "ci.yml", &github.ListWorkflowRunsOptions{Event: "workflow_dispatch", Created: ">=" + t0.Format(time.RFC3339)})
	if err != nil || runs.GetTotalCount() != 1 || runs.WorkflowRuns[0].GetID() != id {
		t.Errorf("list: %v %+v", err, runs)
	}
	runs, _, _ = f.gh.Actions.ListWorkflowRunsByFileName(t.Context(), "o", "r", "ci.yml", &github.ListWorkflowRunsOptions{Created: ">=" + t0.Add(time.Hour).Format(time.RFC3339)})
	if runs.GetTotalCount() != 0 {
		t.Errorf("created filter: %d runs", runs.GetTotalCount())
	}
}

// TestCompletionTimes checks the times a completed run and its jobs carry,
// as GitHub's do: the run's updated_at is when its last job completed (and
// stays so), run_started_at when the attempt started, and each job's
// completed_at when it ended. A cancel of the completed run is refused 409
// with GitHub's message, and changes nothing.
func TestCompletionTimes(t *testing.T) {
	f := newFixture(t, nil)
	id := f.dispatch(t, "ci.yml", nil) // queued 1m, then two jobs of 1m
	f.clock.Advance(10 * time.Minute)
	_, err := f.gh.Actions.CancelWorkflowRunByID(t.Context(), "o", "r", id)
	er, ok := errors.AsType[*github.ErrorResponse](err)
	if !ok || er.Response.StatusCode != http.StatusConflict || er.Message != "Cannot cancel a workflow run that is completed." {
		t.Errorf("cancel of a completed run: %v, want 409 \"Cannot cancel a workflow run that is completed.\"", err)
	}
	run, _, err := f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	if err != nil {
		t.Fatal(err)
	}
	got := []time.Time{run.GetRunStartedAt().Time, run.GetUpdatedAt().Time}
	if diff := cmp.Diff([]time.Time{t0, t0.Add(3 * time.Minute)}, got); diff != "" {
		t.Errorf("[run_started_at, updated_at] of the completed run (-want +got):\n%s", diff)
	}
	jobs, _, err := f.gh.Actions.ListWorkflowJobs(t.Context(), "o", "r", id, nil)
	if err != nil || len(jobs.Jobs) != 2 {
		t.Fatalf("jobs: %v %+v", err, jobs)
	}
	got = []time.Time{jobs.Jobs[0].GetCompletedAt().Time, jobs.Jobs[1].GetCompletedAt().Time}
	if diff := cmp.Diff([]time.Time{t0.Add(2 * time.Minute), t0.Add(3 * time.Minute)}, got); diff != "" {
		t.Errorf("jobs' completed_at (-want +got):\n%s", diff)
	}
}

func TestConditionalRequests(t *testing.T) {
	f := newFixture(t, nil)
	id := f.dispatch(t, "ci.yml", nil)
	req, _ := f.gh.NewRequest(t.Context(), "GET", "repos/o/r/actions/runs/"+itoa(id), nil)
	resp, err := f.gh.BareDo(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	counted := f.srv.Counted()
	req.Header.Set("If-None-Match", etag)
	_, err = f.gh.BareDo(req)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusNotModified || f.srv.NotModified() != 1 || f.srv.Counted() != counted {
		t.Errorf("conditional GET of an unchanged run: %v, 304s %d, counted +%d", err, f.srv.NotModified(), f.srv.Counted()-counted)
	}
	f.clock.Advance(time.Minute)
	resp, err = f.gh.BareDo(req)
	if err != nil || resp.Header.Get("ETag") == etag {
		t.Errorf("conditional GET of a changed run: %v, etag %q", err, resp.Header.Get("ETag"))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestPendingDeployments(t *testing.T) {
	notRecorded(t) // it sends a review without its required comment, to see it refused
	for _, state := range []string{"approved", "rejected"} {
		f := newFixture(t, nil)
		id := f.dispatch(t, "deploy.yml", nil)
		if st, _ := statusOf(t, f, id); st != "waiting" {
			t.Fatalf("status %s, want waiting", st)
		}
		pending, _, err := f.gh.Actions.GetPendingDeployments(t.Context(), "o", "r", id)
		if err != nil || len(pending) != 1 || !pending[0].GetCurrentUserCanApprove() || pending[0].GetEnvironment().GetID() != 9 {
			t.Fatalf("pending: %v %+v", err, pending)
		}
		if u, ok := pending[0].Reviewers[0].Reviewer.(*github.User); !ok || u.GetLogin() != "octocat" {
			t.Errorf("reviewer: %+v", pending[0].Reviewers[0])
		}
		req, _ := f.gh.NewRequest(t.Context(), "POST", "repos/o/r/actions/runs/"+itoa(id)+"/pending_deployments", map[string]any{"environment_ids": []int64{9}, "state": state})
		if _, err := f.gh.Do(req, nil); err == nil {
			t.Errorf("a review without a comment was accepted")
		}
		if _, _, err := f.gh.Actions.PendingDeployments(t.Context(), "o", "r", id, github.PendingDeploymentsRequest{EnvironmentIDs: []int64{9}, State: state, Comment: "ok"}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		want := map[string]string{"approved": "success", "rejected": "failure"}[state]
		if st, c := statusOf(t, f, id); st != "completed" || c != want {
			t.Errorf("%s: %s/%s, want completed/%s", state, st, c, want)
		}
		if _, _, err := f.gh.Actions.PendingDeployments(t.Context(), "o", "r", id, github.PendingDeploymentsRequest{EnvironmentIDs: []int64{9}, State: state, Comment: "again"}); err == nil {
			t.Errorf("a review of a run no longer waiting was accepted")
		}
		if n := len(f.srv.Reviews(id)); n != 1 {
			t.Errorf("reviews recorded: %d", n)
		}
	}
}

func TestCancelAndForceCancel(t *testing.T) {
	f := newFixture(t, nil)
	id := f.dispatch(t, "stubborn.yml", nil)
	_, err := f.gh.Actions.CancelWorkflowRunByID(t.Context(), "o", "r", id)
	if _, ok := errors.AsType[*github.AcceptedError](err); !ok {
		t.Fatalf("cancel: %v, want 202", err)
	}
	if st, _ := statusOf(t, f, id); st != "in_progress" {
		t.Errorf("a run ignoring cancel: %s", st)
	}
	req, _ := f.gh.NewRequest(t.Context(), "POST", "repos/o/r/actions/runs/"+itoa(id)+"/force-cancel", nil)
	if _, err := f.gh.Do(req, nil); err == nil {
		t.Fatal("force-cancel: no 202")
	}
	if st, c := statusOf(t, f, id); st != "completed" || c != "cancelled" {
		t.Errorf("after force-cancel: %s/%s", st, c)
	}
	_, err = f.gh.Actions.CancelWorkflowRunByID(t.Context(), "o", "r", id)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusConflict {
		t.Errorf("cancel of a completed run: %v, want 409", err)
	}
	if f.srv.Cancels(id) != 2 || f.srv.ForceCancels(id) != 1 {
		t.Errorf("counters: %d cancels, %d force-cancels", f.srv.Cancels(id), f.srv.ForceCancels(id))
	}
}

func TestRateLimits(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.RateLimit = 3 })
	id := f.dispatch(t, "ci.yml", nil) // 1
	statusOf(t, f, id)                 // 2
	statusOf(t, f, id)                 // 3
	_, _, err := f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	if _, ok := errors.AsType[*github.RateLimitError](err); !ok {
		t.Fatalf("past the primary limit: %v, want a RateLimitError", err)
	}
	f.clock.Advance(time.Hour)
	statusOf(t, f, id)

	f.srv.Inject(Fault{Kind: FaultSecondaryRateLimit, RetryAfter: 30 * time.Second})
	_, _, err = f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	ae, ok := errors.AsType[*github.AbuseRateLimitError](err)
	if !ok || ae.GetRetryAfter() != 30*time.Second {
		t.Errorf("secondary limit: %v, want an AbuseRateLimitError with retry-after 30s", err)
	}
	f.srv.Inject(Fault{Status: 502})
	if _, _, err = f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("injected 502: %v", err)
	}
	f.srv.Inject(Fault{Status: 403, Message: "You have exceeded a secondary rate limit."})
	_, _, err = f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
	if er, ok := errors.AsType[*github.ErrorResponse](err); !ok || er.Response.StatusCode != 403 || er.Message != "You have exceeded a secondary rate limit." {
		t.Errorf("injected 403 with a message: %v, want an ErrorResponse with that message", err)
	}
}

func TestAuthAndVersion(t *testing.T) {
	f := newFixture(t, nil)
	base := f.gh.BaseURL()
	other, _ := github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken("wrong"))
	if _, _, err := other.Actions.GetWorkflowRunByID(t.Context(), "o", "r", 1); err == nil || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("wrong token: %v", err)
	}
	req, _ := f.gh.NewRequest(t.Context(), "GET", "repos/o/r/actions/runs/1", nil, github.WithVersion("2023-01-01"))
	req.Header.Set("X-GitHub-Api-Version", "2023-01-01")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unsupported API version: %v %v", err, resp.Status)
	}
	if got := f.srv.APIVersions(); got["2022-11-28"] != 1 || got["2023-01-01"] != 1 {
		t.Errorf("versions seen: %v", got)
	}
}

// notRecorded keeps a test's exchanges out of the spec checks'
// recordings: the test sends requests that GitHub's description forbids, on
// purpose, to check that the fake refuses them as GitHub does.
func notRecorded(t *testing.T) {
	t.Setenv(ExchangesEnv, "")
}

// TestEveryAnswerCarriesRateLimitHeaders: GitHub sends the x-ratelimit-*
// headers on every REST answer, so the fake does too: on a dispatch it
// refuses with 422, on injected faults, on a 401 and on a 400 for an
// unknown API version.
func TestEveryAnswerCarriesRateLimitHeaders(t *testing.T) {
	tests := []struct {
		name       string
		fault      *Fault
		path, auth string
		version    string
		body       string
		wantStatus int
	}{
		{name: "dispatch of an unknown ref", path: "/repos/o/r/actions/workflows/ci.yml/dispatches", body: `{"ref":"no-such-branch"}`, wantStatus: 422},
		{name: "injected 422", fault: &Fault{Status: 422, Message: "Unexpected inputs provided"}, path: "/repos/o/r/actions/workflows/ci.yml/dispatches", body: `{"ref":"main"}`, wantStatus: 422},
		{name: "injected 503", fault: &Fault{}, path: "/repos/o/r/actions/workflows/ci.yml/dispatches", body: `{"ref":"main"}`, wantStatus: 503},
		{name: "bad credentials", auth: "Bearer wrong", path: "/repos/o/r/actions/workflows/ci.yml/dispatches", body: `{"ref":"main"}`, wantStatus: 401},
		{name: "unknown API version", version: "1999-01-01", path: "/repos/o/r/actions/workflows/ci.yml/dispatches", body: `{"ref":"main"}`, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.Refs = []string{"main"} })
			if tt.fault != nil {
				f.srv.Inject(*tt.fault)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.gh.BaseURL()+strings.TrimPrefix(tt.path, "/"), strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			auth := "Bearer " + token
			if tt.auth != "" {
				auth = tt.auth
			}
			req.Header.Set("Authorization", auth)
			req.Header.Set("Content-Type", "application/json")
			if tt.version != "" {
				req.Header.Set("X-GitHub-Api-Version", tt.version)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("answer %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("the %d answer has no %s header", resp.StatusCode, h)
				}
			}
		})
	}
}
