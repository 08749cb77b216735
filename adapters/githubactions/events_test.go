package githubactions

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/adapters"
)

// withEvents gives the backend an events: block with the tests' secret.
func withEvents(b *BackendConfig, _ map[string]JobConfig) {
	b.Events = &EventsConfig{Secret: "${TEST_WEBHOOK_SECRET}"}
}

// eventsAdapter is an adapter with events, on a fake with the fixture's
// clock.
func eventsAdapter(t *testing.T) (*fixture, *Adapter) {
	f := newFixture(t, fixtureOptions{scripts: cancelScripts()})
	return f, f.adapter(withEvents)
}

func mac(h func() hash.Hash, secret string, body []byte) string {
	m := hmac.New(h, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// delivery is what GitHub would POST for event with body, signed with the
// tests' secret.
func delivery(event, guid string, body []byte) adapters.Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/8e03811")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", guid)
	h.Set("X-GitHub-Hook-ID", "4000000001")
	h.Set("X-Hub-Signature", "sha1="+mac(sha1.New, testWebhookSecret, body))
	h.Set("X-Hub-Signature-256", "sha256="+mac(sha256.New, testWebhookSecret, body))
	return adapters.Delivery{Header: h, Body: body, ReceivedAt: t0}
}

var hookRepo = &github.Repository{
	ID: github.Ptr[int64](1296269), Name: github.Ptr("app"), FullName: github.Ptr("octo-org/app"),
	Owner: &github.User{Login: github.Ptr("octo-org")}, HTMLURL: github.Ptr("https://github.com/octo-org/app"),
}

// runBody is a workflow_run payload.
func runBody(t *testing.T, action string, run *github.WorkflowRun) []byte {
	t.Helper()
	b, err := json.Marshal(github.WorkflowRunEvent{Action: &action, WorkflowRun: run, Repo: hookRepo,
		Sender: &github.User{Login: github.Ptr("octocat")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobBody is a workflow_job payload.
func jobBody(t *testing.T, action string, job *github.WorkflowJob, dep *github.Deployment) []byte {
	t.Helper()
	b, err := json.Marshal(github.WorkflowJobEvent{Action: &action, WorkflowJob: job, Repo: hookRepo, Deployment: dep,
		Sender: &github.User{Login: github.Ptr("octocat")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const hookRunID = 30000000042

func hookRun(status, conclusion string, attempt int, updated time.Time) *github.WorkflowRun {
	r := &github.WorkflowRun{
		ID: github.Ptr[int64](hookRunID), Name: github.Ptr("Tests"), RunNumber: github.Ptr(7), RunAttempt: github.Ptr(attempt),
		DisplayTitle: github.Ptr("Tests [corr-1]"), Status: github.Ptr(status),
		HTMLURL:   github.Ptr("https://github.com/octo-org/app/actions/runs/30000000042"),
		UpdatedAt: &github.Timestamp{Time: updated}, Repository: hookRepo,
	}
	if conclusion != "" {
		r.Conclusion = github.Ptr(conclusion)
	}
	return r
}

func hookJob(status, conclusion string, attempt int64, started, completed time.Time) *github.WorkflowJob {
	j := &github.WorkflowJob{
		ID: github.Ptr[int64](70000000001), RunID: github.Ptr[int64](hookRunID), RunAttempt: github.Ptr(attempt),
		Name: github.Ptr("unit"), Status: github.Ptr(status), StartedAt: &github.Timestamp{Time: started},
		CreatedAt: &github.Timestamp{Time: started},
	}
	if conclusion != "" {
		j.Conclusion = github.Ptr(conclusion)
	}
	if !completed.IsZero() {
		j.CompletedAt = &github.Timestamp{Time: completed}
	}
	return j
}

// TestEventsConfigured: Events reports the block's pacing (defaults 10m
// and 30m) and nothing without a block; the secret's reference must
// resolve when the adapter is made.
func TestEventsConfigured(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	if _, ok := f.adapter(nil).Events(); ok {
		t.Error("Events() ok without an events: block")
	}
	if _, err := f.adapter(nil).ReadEvents(t.Context(), delivery("ping", "g", []byte(`{}`))); err == nil {
		t.Error("ReadEvents without an events: block succeeded")
	}
	p, ok := f.adapter(withEvents).Events()
	if !ok || p != (adapters.EventPolling{Interval: 10 * time.Minute, Quiet: 30 * time.Minute}) {
		t.Errorf("Events() = %+v, %v; want the defaults", p, ok)
	}
	p, _ = f.adapter(func(b *BackendConfig, _ map[string]JobConfig) {
		b.Events = &EventsConfig{Secret: "${TEST_WEBHOOK_SECRET}", PollInterval: time.Minute, Quiet: time.Hour}
	}).Events()
	if p != (adapters.EventPolling{Interval: time.Minute, Quiet: time.Hour}) {
		t.Errorf("Events() = %+v", p)
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good, empty, twoLines := write("good", testWebhookSecret+"\n"), write("empty", "\n"), write("two", "a\nb\n")
	for _, tt := range []struct {
		name, secret, wantErr string
	}{
		{"file", "${file:" + good + "}", ""},
		{"unset variable", "${NO_SUCH_SECRET}", "events.secret: environment variable NO_SUCH_SECRET is not set"},
		{"missing file", "${file:" + filepath.Join(dir, "absent") + "}", "events.secret: secret file " + filepath.Join(dir, "absent") + ": no such file or directory"},
		{"empty file", "${file:" + empty + "}", "events.secret: secret file " + empty + " is empty"},
		{"two lines", "${file:" + twoLines + "}", "events.secret: secret file " + twoLines + " contains a line break or NUL"},
		{"literal", "s3cr3t-value", "events.secret: must be a single ${NAME} or ${file:/absolute/path} reference, not the secret itself"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := f.newAdapter(func(b *BackendConfig, _ map[string]JobConfig) { b.Events = &EventsConfig{Secret: tt.secret} })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				body := []byte(`{"zen":"Design for failure."}`)
				if _, err := a.ReadEvents(t.Context(), delivery("ping", "g", body)); err != nil {
					t.Errorf("a delivery signed with the file's secret: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New: %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t-value") {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

// TestReadEventsAuthentication: only a delivery whose X-Hub-Signature-256
// matches its body under the secret is read; anything else is a forgery,
// the SHA-1 signature alone included. A wrong content type is a plain
// error.
func TestReadEventsAuthentication(t *testing.T) {
	_, a := eventsAdapter(t)
	body := runBody(t, "in_progress", hookRun("in_progress", "", 1, t0))
	form := []byte("payload=" + url.QueryEscape(string(body)))
	tests := []struct {
		name    string
		edit    func(*adapters.Delivery)
		forged  bool
		plain   string // a plain error containing this
		wantOne bool
	}{
		{name: "signed", wantOne: true},
		{name: "content type with parameters", edit: func(d *adapters.Delivery) { d.Header.Set("Content-Type", "application/json; charset=utf-8") }, wantOne: true},
		{name: "form encoded", edit: func(d *adapters.Delivery) {
			d.Body = form
			d.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			d.Header.Set("X-Hub-Signature-256", "sha256="+mac(sha256.New, testWebhookSecret, form))
		}, wantOne: true},
		{name: "no signature", edit: func(d *adapters.Delivery) { d.Header.Del("X-Hub-Signature-256"); d.Header.Del("X-Hub-Signature") }, forged: true},
		{name: "SHA-1 signature only", edit: func(d *adapters.Delivery) { d.Header.Del("X-Hub-Signature-256") }, forged: true},
		{name: "SHA-512 signature", edit: func(d *adapters.Delivery) {
			d.Header.Set("X-Hub-Signature-256", "sha512="+mac(sha512.New, testWebhookSecret, d.Body))
		}, forged: true},
		{name: "another secret", edit: func(d *adapters.Delivery) {
			d.Header.Set("X-Hub-Signature-256", "sha256="+mac(sha256.New, "not-the-secret", d.Body))
		}, forged: true},
		{name: "body changed", edit: func(d *adapters.Delivery) {
			d.Body = []byte(strings.Replace(string(d.Body), `"in_progress"`, `"completed"`, 1))
		}, forged: true},
		{name: "not hex", edit: func(d *adapters.Delivery) { d.Header.Set("X-Hub-Signature-256", "sha256=zz") }, forged: true},
		// Authentic (the signature covers the raw body), but not the form
		// it says it is.
		{name: "JSON body sent as a form", edit: func(d *adapters.Delivery) { d.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, plain: "reading the workflow_run payload"},
		{name: "text content type", edit: func(d *adapters.Delivery) { d.Header.Set("Content-Type", "text/plain") }, plain: "set the webhook's content type to application/json"},
		{name: "no content type", edit: func(d *adapters.Delivery) { d.Header.Del("Content-Type") }, plain: "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := delivery("workflow_run", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)
			if tt.edit != nil {
				tt.edit(&d)
			}
			events, err := a.ReadEvents(t.Context(), d)
			switch {
			case tt.forged:
				if !errors.Is(err, adapters.ErrForgedEvent) || events != nil {
					t.Errorf("ReadEvents = %v, %v; want an error wrapping ErrForgedEvent", events, err)
				}
			case tt.plain != "":
				if err == nil || errors.Is(err, adapters.ErrForgedEvent) || !strings.Contains(err.Error(), tt.plain) {
					t.Errorf("ReadEvents error %v; want a plain error containing %q", err, tt.plain)
				}
			case err != nil || len(events) != 1:
				t.Errorf("ReadEvents = %v, %v; want one event", events, err)
			}
			if err != nil && strings.Contains(err.Error(), testWebhookSecret) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

// TestReadEventsMapping: each action GitHub sends reads as the task state
// a poll of the run would give, with the delivery's GUID as ID, the run ID
// as JobID and the event's time as At.
func TestReadEventsMapping(t *testing.T) {
	started, updated := t0.Add(time.Minute), t0.Add(3*time.Minute)
	production := &github.Deployment{Environment: github.Ptr("production")}
	tests := []struct {
		name, event string
		body        func(t *testing.T) []byte
		state       adapters.State
		message     string
		at          time.Time
		finished    time.Time
		text        []string // substrings of the result text
		// reread: the bridge is to poll the run rather than apply the
		// event (a completed run; a waiting job, since the fixture has
		// tools with approvals: true on octo-org/app).
		reread bool
	}{
		{name: "run requested", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "requested", hookRun("queued", "", 1, t0)) },
			state: adapters.StateWorking, message: "queued: waiting for a runner", at: t0},
		{name: "run requested, pending", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "requested", hookRun("pending", "", 1, t0)) },
			state: adapters.StateWorking, message: "pending: waiting for its concurrency group", at: t0},
		{name: "run in progress", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "in_progress", hookRun("in_progress", "", 1, started)) },
			state: adapters.StateWorking, message: "in_progress", at: started},
		{name: "run succeeded", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "completed", hookRun("completed", "success", 1, updated)) },
			state: adapters.StateSucceeded, message: "completed: success", at: updated, finished: updated, reread: true,
			text: []string{"Workflow run 30000000042 (Tests #7, attempt 1) of octo-org/app concluded success.", "Run: https://github.com/octo-org/app/actions/runs/30000000042", "on the run's page"}},
		{name: "run failed", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "completed", hookRun("completed", "failure", 1, updated)) },
			state: adapters.StateToolError, message: "completed: failure", at: updated, finished: updated, reread: true, text: []string{"concluded failure"}},
		{name: "run timed out", event: "workflow_run", body: func(t *testing.T) []byte {
			return runBody(t, "completed", hookRun("completed", "timed_out", 1, updated))
		},
			state: adapters.StateToolError, message: "completed: timed_out", at: updated, finished: updated, reread: true},
		{name: "run cancelled", event: "workflow_run", body: func(t *testing.T) []byte {
			return runBody(t, "completed", hookRun("completed", "cancelled", 1, updated))
		},
			state: adapters.StateCancelled, message: "completed: cancelled", at: updated, finished: updated, reread: true},
		{name: "run neutral", event: "workflow_run", body: func(t *testing.T) []byte { return runBody(t, "completed", hookRun("completed", "neutral", 1, updated)) },
			state: adapters.StateSucceeded, message: "completed: neutral", at: updated, finished: updated, reread: true, text: []string{"finished without failures (neutral)"}},
		{name: "run needs action", event: "workflow_run", body: func(t *testing.T) []byte {
			return runBody(t, "completed", hookRun("completed", "action_required", 1, updated))
		}, state: adapters.StateToolError, message: "completed: action_required", at: updated, finished: updated, reread: true, text: []string{"needs a maintainer's action"}},
		{name: "job queued", event: "workflow_job", body: func(t *testing.T) []byte { return jobBody(t, "queued", hookJob("queued", "", 1, t0, time.Time{}), nil) },
			state: adapters.StateWorking, message: "queued: job unit waits for a runner", at: t0},
		{name: "job waiting for approval", event: "workflow_job", body: func(t *testing.T) []byte {
			return jobBody(t, "waiting", hookJob("waiting", "", 1, t0, time.Time{}), production)
		}, state: adapters.StateWorking, message: "waiting: deployment to production awaits approval (job unit)", at: t0, reread: true},
		{name: "job waiting for another rule", event: "workflow_job", body: func(t *testing.T) []byte {
			return jobBody(t, "waiting", hookJob("waiting", "", 1, t0, time.Time{}), nil)
		}, state: adapters.StateWorking, message: "waiting: job unit waits for a deployment protection rule", at: t0, reread: true},
		{name: "job in progress", event: "workflow_job", body: func(t *testing.T) []byte {
			return jobBody(t, "in_progress", hookJob("in_progress", "", 1, started, time.Time{}), nil)
		}, state: adapters.StateWorking, message: "in_progress: job unit", at: started},
		{name: "job failed: the run goes on", event: "workflow_job", body: func(t *testing.T) []byte {
			return jobBody(t, "completed", hookJob("completed", "failure", 1, started, updated), nil)
		}, state: adapters.StateWorking, message: "in_progress: job unit concluded failure", at: updated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, a := eventsAdapter(t)
			events, err := a.ReadEvents(t.Context(), delivery(tt.event, "guid-"+tt.name, tt.body(t)))
			if err != nil || len(events) != 1 {
				t.Fatalf("ReadEvents = %v, %v; want one event", events, err)
			}
			e := events[0]
			if e.ID != "guid-"+tt.name || e.JobID != "30000000042" || !e.At.Equal(tt.at) {
				t.Errorf("event ID %q, JobID %q, At %v; want the GUID, 30000000042, %v", e.ID, e.JobID, e.At, tt.at)
			}
			if e.Reread != tt.reread {
				t.Errorf("Reread %v, want %v", e.Reread, tt.reread)
			}
			o := e.Observation
			if o.State != tt.state || o.Message != tt.message || !o.FinishedAt.Equal(tt.finished) || o.Err != nil {
				t.Errorf("observation %v %q finished %v (err %v); want %v %q finished %v", o.State, o.Message, o.FinishedAt, o.Err, tt.state, tt.message, tt.finished)
			}
			wantLinks := []adapters.Link{{Title: "Workflow run", URL: "https://github.com/octo-org/app/actions/runs/30000000042"}}
			if diff := cmp.Diff(wantLinks, o.Links); diff != "" {
				t.Errorf("links (-want +got):\n%s", diff)
			}
			if tt.state.Terminal() != (o.Result != nil) {
				t.Fatalf("result %+v for state %v", o.Result, o.State)
			}
			for _, s := range tt.text {
				if !strings.Contains(o.Result.Text, s) {
					t.Errorf("result text lacks %q:\n%s", s, o.Result.Text)
				}
			}
			if o.Result != nil {
				if _, ok := o.Result.Structured["jobs"]; ok {
					t.Errorf("structured result lists jobs the event does not carry: %v", o.Result.Structured)
				}
				if o.Result.Structured["run_id"] != int64(hookRunID) || o.Result.Structured["conclusion"] == "" {
					t.Errorf("structured result %v", o.Result.Structured)
				}
			}
		})
	}
}

// TestReadEventsRereadApproval: a waiting job's event asks the bridge to
// poll the run when a tool with approvals: true runs workflows of the
// event's repository, since only a poll fetches the environments the
// approval question offers; the observation still says what the event did.
// Without such a tool, and for the other job actions, the event is applied.
func TestReadEventsRereadApproval(t *testing.T) {
	production := &github.Deployment{Environment: github.Ptr("production")}
	// approvals sets the tools' approvals: on for the named tools (moved
	// to repository repo when it is given), off for every other one.
	approvals := func(repo string, names ...string) func(*BackendConfig, map[string]JobConfig) {
		return func(b *BackendConfig, tools map[string]JobConfig) {
			withEvents(b, tools)
			for name, c := range tools {
				c.Approvals = false
				for _, n := range names {
					if n == name {
						c.Approvals = true
						if repo != "" {
							c.Owner, c.Repo, _ = strings.Cut(repo, "/")
						}
					}
				}
				tools[name] = c
			}
		}
	}
	tests := []struct {
		name   string
		edit   func(*BackendConfig, map[string]JobConfig)
		action string
		repo   *github.Repository
		reread bool
	}{
		{name: "approvals on the event's repository", edit: approvals("", "approval"), action: "waiting", repo: hookRepo, reread: true},
		{name: "the repository spelt in another case", edit: approvals("Octo-Org/App", "approval"), action: "waiting", repo: hookRepo, reread: true},
		{name: "approvals off everywhere", edit: approvals(""), action: "waiting", repo: hookRepo},
		{name: "approvals only on another repository", edit: approvals("octo-org/other", "approval"), action: "waiting", repo: hookRepo},
		{name: "no repository in the event, a tool with approvals", edit: approvals("octo-org/other", "approval"), action: "waiting", reread: true},
		{name: "no repository in the event, no tool with approvals", edit: approvals(""), action: "waiting"},
		{name: "a queued job", edit: approvals("", "approval"), action: "queued", repo: hookRepo},
		{name: "a job in progress", edit: approvals("", "approval"), action: "in_progress", repo: hookRepo},
		{name: "a completed job", edit: approvals("", "approval"), action: "completed", repo: hookRepo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			a := f.adapter(tt.edit)
			job := hookJob(tt.action, "", 1, t0, time.Time{})
			if tt.action == "completed" {
				job = hookJob("completed", "success", 1, t0, t0.Add(time.Minute))
			}
			var dep *github.Deployment
			if tt.action == "waiting" {
				dep = production
			}
			body, err := json.Marshal(github.WorkflowJobEvent{Action: &tt.action, WorkflowJob: job, Repo: tt.repo, Deployment: dep,
				Sender: &github.User{Login: github.Ptr("octocat")}})
			if err != nil {
				t.Fatal(err)
			}
			events, err := a.ReadEvents(t.Context(), delivery("workflow_job", "g", body))
			if err != nil || len(events) != 1 {
				t.Fatalf("ReadEvents = %v, %v; want one event", events, err)
			}
			e := events[0]
			if e.Reread != tt.reread {
				t.Errorf("Reread %v, want %v", e.Reread, tt.reread)
			}
			if e.Observation.State != adapters.StateWorking || e.Observation.Message == "" || e.Observation.InputRequests != nil {
				t.Errorf("observation %v %q (input requests %v); want working with the event's message and no question", e.Observation.State, e.Observation.Message, e.Observation.InputRequests)
			}
			if tt.action == "waiting" && e.Observation.Message != "waiting: deployment to production awaits approval (job unit)" {
				t.Errorf("message %q", e.Observation.Message)
			}
		})
	}
}

// TestReadEventsIgnored: deliveries the adapter does not handle are
// acknowledged with no events: a ping, other events, other actions.
func TestReadEventsIgnored(t *testing.T) {
	_, a := eventsAdapter(t)
	for _, tt := range []struct{ event, body string }{
		{"ping", `{"zen":"Anything added dilutes everything else.","hook_id":1}`},
		{"push", `{"ref":"refs/heads/main"}`},
		{"check_run", `{"action":"completed","check_run":{"id":1}}`},
		{"no_such_event", `{}`},
		{"workflow_run", `{"action":"archived","workflow_run":{"id":30000000042}}`},
		{"workflow_job", `{"action":"deleted","workflow_job":{"id":1,"run_id":30000000042}}`},
	} {
		events, err := a.ReadEvents(t.Context(), delivery(tt.event, "g", []byte(tt.body)))
		if err != nil || len(events) != 0 {
			t.Errorf("%s %s: ReadEvents = %v, %v; want none and no error", tt.event, tt.body, events, err)
		}
	}
}

// TestReadEventsMalformed: an authentic delivery that cannot be read is a
// plain error saying why (for GitHub's delivery log), not a forgery.
func TestReadEventsMalformed(t *testing.T) {
	_, a := eventsAdapter(t)
	for _, tt := range []struct{ event, body, want string }{
		{"workflow_run", `{"action":"completed",`, "reading the workflow_run payload"},
		{"workflow_run", `{"action":"completed","workflow_run":{"status":"completed"}}`, "no workflow_run.id"},
		{"workflow_job", `{"action":"queued","workflow_job":{"id":5}}`, "no workflow_job.run_id"},
	} {
		_, err := a.ReadEvents(t.Context(), delivery(tt.event, "g", []byte(tt.body)))
		if err == nil || errors.Is(err, adapters.ErrForgedEvent) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadEvents error %v, want a plain error containing %q", tt.body, err, tt.want)
		}
	}
}

// TestReadEventsOlderAttempt: once an attempt of a run is known (from an
// event or a poll), events of earlier attempts are dropped: a late
// completion of attempt 1 does not end a task that follows attempt 2.
func TestReadEventsOlderAttempt(t *testing.T) {
	t.Run("from events", func(t *testing.T) {
		_, a := eventsAdapter(t)
		read := func(action string, run *github.WorkflowRun) []adapters.Event {
			t.Helper()
			events, err := a.ReadEvents(t.Context(), delivery("workflow_run", "g-"+action, runBody(t, action, run)))
			if err != nil {
				t.Fatal(err)
			}
			return events
		}
		if n := len(read("in_progress", hookRun("in_progress", "", 2, t0.Add(time.Hour)))); n != 1 {
			t.Fatalf("attempt 2 in progress: %d events", n)
		}
		if n := len(read("completed", hookRun("completed", "failure", 1, t0.Add(time.Minute)))); n != 0 {
			t.Errorf("attempt 1's completion after attempt 2 started: %d events, want none", n)
		}
		job, err := a.ReadEvents(t.Context(), delivery("workflow_job", "g-job", jobBody(t, "completed", hookJob("completed", "failure", 1, t0, t0.Add(time.Minute)), nil)))
		if err != nil || len(job) != 0 {
			t.Errorf("a job of attempt 1: %v, %v; want none", job, err)
		}
		if events := read("completed", hookRun("completed", "success", 2, t0.Add(2*time.Hour))); len(events) != 1 || events[0].Observation.State != adapters.StateSucceeded {
			t.Errorf("attempt 2's completion: %+v", events)
		}
	})
	t.Run("from a poll", func(t *testing.T) {
		f, a := eventsAdapter(t)
		ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-rerun")
		f.clock.Advance(time.Minute)
		f.gh.Rerun(runID(t, ref))
		if o := f.poll(a, ref); o.State != adapters.StateWorking {
			t.Fatalf("the re-run attempt: %v %q", o.State, o.Message)
		}
		run := hookRun("completed", "success", 1, t0)
		run.ID = github.Ptr(runID(t, ref))
		events, err := a.ReadEvents(t.Context(), delivery("workflow_run", "g", runBody(t, "completed", run)))
		if err != nil || len(events) != 0 {
			t.Errorf("attempt 1's completion after a poll saw attempt 2: %v, %v; want none", events, err)
		}
	})
}

// TestReadEventsAfterCancel: a cancel the adapter sent reads in events as
// in polls: a run going on says so, and a run that then concludes failure
// is cancelled.
func TestReadEventsAfterCancel(t *testing.T) {
	f, a := eventsAdapter(t)
	ref := f.start(a, "scripted", map[string]any{"script": "ignores"}, "corr-cancel")
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	id := runID(t, ref)
	going := hookRun("in_progress", "", 1, t0)
	going.ID = &id
	failed := hookRun("completed", "failure", 1, t0.Add(time.Minute))
	failed.ID = &id
	for _, tt := range []struct {
		action  string
		run     *github.WorkflowRun
		state   adapters.State
		message string
	}{
		{"in_progress", going, adapters.StateWorking, "in_progress (cancel requested)"},
		{"completed", failed, adapters.StateCancelled, "cancelled (the run concluded failure after the cancel)"},
	} {
		events, err := a.ReadEvents(t.Context(), delivery("workflow_run", "g-"+tt.action, runBody(t, tt.action, tt.run)))
		if err != nil || len(events) != 1 {
			t.Fatalf("%s: %v, %v", tt.action, events, err)
		}
		if o := events[0].Observation; o.State != tt.state || o.Message != tt.message {
			t.Errorf("%s: %v %q, want %v %q", tt.action, o.State, o.Message, tt.state, tt.message)
		}
	}
}

// hookReceiver is the bridge's side of a webhook, reduced to ReadEvents: it
// hands each delivery to the adapter and answers as the bridge does (401
// for a forgery, 400 for another error, 202 otherwise).
type hookReceiver struct {
	mu     sync.Mutex
	events []adapters.Event
	errs   []error
	url    string
}

func newHookReceiver(t *testing.T, a *Adapter, now func() time.Time) *hookReceiver {
	rc := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 25<<20))
		events, err := a.ReadEvents(r.Context(), adapters.Delivery{Header: r.Header, Body: body, ReceivedAt: now()})
		rc.mu.Lock()
		rc.events = append(rc.events, events...)
		if err != nil {
			rc.errs = append(rc.errs, err)
		}
		rc.mu.Unlock()
		switch {
		case errors.Is(err, adapters.ErrForgedEvent):
			w.WriteHeader(http.StatusUnauthorized)
		case err != nil:
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/events/github"
	return rc
}

func (rc *hookReceiver) take() ([]adapters.Event, []error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e, err := rc.events, rc.errs
	rc.events, rc.errs = nil, nil
	return e, err
}

// TestEventsFromTheFake: the GitHub fake's signed deliveries, read by the
// adapter end to end, follow a dispatched run to its end, and the final
// event reads as the final poll does; a redelivery keeps its ID, and a
// delivery signed with another secret is refused.
func TestEventsFromTheFake(t *testing.T) {
	for _, tt := range []struct {
		name, tool string
		args       map[string]any
		messages   []string // the working events' messages, in order
		state      adapters.State
	}{
		{name: "failing run", tool: "fails", messages: []string{
			"queued: waiting for a runner", "queued: job lint waits for a runner", "queued: job unit waits for a runner",
			"in_progress", "in_progress: job lint", "in_progress: job lint concluded success",
			"in_progress: job unit", "in_progress: job unit concluded failure",
		}, state: adapters.StateToolError},
		{name: "succeeding run", tool: "succeeds", args: map[string]any{"branch": "main"}, messages: []string{
			"queued: waiting for a runner", "queued: job build waits for a runner", "queued: job test waits for a runner",
			"in_progress", "in_progress: job build", "in_progress: job build concluded success",
			"in_progress: job test", "in_progress: job test concluded success",
		}, state: adapters.StateSucceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, a := eventsAdapter(t)
			rc := newHookReceiver(t, a, f.clock.Now)
			f.gh.Webhook(rc.url, testWebhookSecret)
			ref := f.start(a, tt.tool, tt.args, "corr-e2e")
			var events []adapters.Event
			for range 6 {
				sent := f.gh.DeliverEvents(t.Context())
				for _, d := range sent {
					if d.Status != http.StatusAccepted {
						t.Errorf("delivery %s %s answered %d", d.Event, d.Action, d.Status)
					}
				}
				got, errs := rc.take()
				if len(errs) > 0 {
					t.Fatalf("ReadEvents: %v", errs)
				}
				events = append(events, got...)
				f.clock.Advance(20 * time.Millisecond)
			}
			if len(events) != len(tt.messages)+1 {
				t.Fatalf("%d events, want %d: %+v", len(events), len(tt.messages)+1, events)
			}
			var messages []string
			for i, e := range events {
				if e.JobID != ref.ID || e.ID == "" || e.At.IsZero() {
					t.Errorf("event %d: JobID %q ID %q At %v; want the run %s, a GUID and a time", i, e.JobID, e.ID, e.At, ref.ID)
				}
				if wantReread := i == len(events)-1; e.Reread != wantReread {
					t.Errorf("event %d (%q): Reread %v, want %v (only the run's completion is reread)", i, e.Observation.Message, e.Reread, wantReread)
				}
				if i < len(events)-1 {
					if e.Observation.State != adapters.StateWorking {
						t.Errorf("event %d (%q): %v before the run completed", i, e.Observation.Message, e.Observation.State)
					}
					messages = append(messages, e.Observation.Message)
				}
			}
			if diff := cmp.Diff(tt.messages, messages); diff != "" {
				t.Errorf("working events' messages (-want +got):\n%s", diff)
			}
			last := events[len(events)-1].Observation
			polled := f.poll(a, ref)
			if last.State != tt.state || polled.State != last.State || polled.Message != last.Message || !polled.FinishedAt.Equal(last.FinishedAt) ||
				last.Result == nil || !strings.HasPrefix(polled.Result.Text, strings.SplitN(last.Result.Text, "\n", 3)[0]) {
				t.Errorf("final event %v %q %v, poll %v %q %v", last.State, last.Message, last.FinishedAt, polled.State, polled.Message, polled.FinishedAt)
			}

			// A redelivery has the first delivery's ID.
			first := f.gh.Deliveries()[0]
			if _, err := f.gh.Redeliver(t.Context(), first.ID); err != nil {
				t.Fatal(err)
			}
			again, _ := rc.take()
			if len(again) != 1 || again[0].ID != events[0].ID {
				t.Errorf("redelivery read as %+v, want ID %s", again, events[0].ID)
			}

			// The fake signing with another secret: refused as forged.
			f.gh.Webhook(rc.url, "another-secret")
			f.gh.Rerun(runID(t, ref))
			f.clock.Advance(time.Second)
			for _, d := range f.gh.DeliverEvents(t.Context()) {
				if d.Status != http.StatusUnauthorized {
					t.Errorf("delivery signed with another secret answered %d", d.Status)
				}
			}
			if got, errs := rc.take(); len(got) != 0 || len(errs) == 0 {
				t.Errorf("deliveries signed with another secret: %d events, %d errors", len(got), len(errs))
			}
		})
	}
}

// TestEventsApprovalFromTheFake: a job held by an environment's reviewers
// reads as waiting for the deployment's approval, as the poll says. With a
// tool that takes approvals the event asks for a poll (Reread), and the
// poll is what asks the approval question; with none, the event is applied.
func TestEventsApprovalFromTheFake(t *testing.T) {
	noApprovals := func(b *BackendConfig, tools map[string]JobConfig) {
		withEvents(b, tools)
		for name, c := range tools {
			c.Approvals = false
			tools[name] = c
		}
	}
	for _, tt := range []struct {
		name, tool string
		edit       func(*BackendConfig, map[string]JobConfig)
		reread     bool
		polled     adapters.State
	}{
		{name: "approvals on", tool: "approval", edit: withEvents, reread: true, polled: adapters.StateInputRequired},
		{name: "approvals off", tool: "approval_off", edit: noApprovals, polled: adapters.StateWorking},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			a := f.adapter(tt.edit)
			rc := newHookReceiver(t, a, f.clock.Now)
			f.gh.Webhook(rc.url, testWebhookSecret)
			ref := f.start(a, tt.tool, nil, "corr-approval")
			f.clock.Advance(time.Second)
			f.gh.DeliverEvents(t.Context())
			events, errs := rc.take()
			if len(errs) > 0 || len(events) == 0 {
				t.Fatalf("events %v, errors %v", events, errs)
			}
			last := events[len(events)-1]
			if o := last.Observation; o.State != adapters.StateWorking || o.Message != "waiting: deployment to production awaits approval (job deploy)" {
				t.Errorf("last event: %v %q", o.State, o.Message)
			}
			if last.Reread != tt.reread {
				t.Errorf("the waiting job's event: Reread %v, want %v", last.Reread, tt.reread)
			}
			for _, e := range events[:len(events)-1] {
				if e.Reread {
					t.Errorf("event %q before the wait asks for a poll", e.Observation.Message)
				}
			}
			o := f.poll(a, ref)
			if o.State != tt.polled || !strings.HasPrefix(o.Message, "waiting: deployment to production awaits approval") {
				t.Errorf("poll: %v %q, want %v", o.State, o.Message, tt.polled)
			}
			if (len(o.InputRequests) == 1) != (tt.polled == adapters.StateInputRequired) {
				t.Errorf("poll's input requests %v", o.InputRequests)
			}
		})
	}
}
