package githubfake

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

const hookSecret = "It's a Secret to Everybody"

// receiver is a webhook endpoint that keeps what it received and answers
// status.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	got    []received
	status int
	url    string
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, status: http.StatusAccepted}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Clone(), body})
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/events/github"
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// step is what one delivery says, in short.
type step struct {
	Event, Action, Status, Conclusion string
	Attempt                           int
}

// summarise reads the deliveries as GitHub's receivers do: go-github's
// ParseWebHook on the header's event type.
func summarise(t *testing.T, ds []Delivery) []step {
	t.Helper()
	var out []step
	for _, d := range ds {
		ev, err := github.ParseWebHook(d.Header.Get("X-GitHub-Event"), d.Body)
		if err != nil {
			t.Fatalf("delivery %s: %v", d.ID, err)
		}
		switch e := ev.(type) {
		case *github.WorkflowRunEvent:
			r := e.GetWorkflowRun()
			out = append(out, step{"workflow_run", e.GetAction(), r.GetStatus(), r.GetConclusion(), r.GetRunAttempt()})
		case *github.WorkflowJobEvent:
			j := e.GetWorkflowJob()
			out = append(out, step{"workflow_job", e.GetAction(), j.GetStatus(), j.GetConclusion(), int(j.GetRunAttempt())})
		default:
			t.Fatalf("delivery %s: unexpected %T", d.ID, ev)
		}
	}
	return out
}

var guidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkHeaders checks a received delivery's headers as GitHub documents
// them, and both signatures against the secret.
func checkHeaders(t *testing.T, r received, event string) {
	t.Helper()
	h := r.header
	mac := func(sum func() []byte) string { return hex.EncodeToString(sum()) }
	s256 := hmac.New(sha256.New, []byte(hookSecret))
	s256.Write(r.body)
	s1 := hmac.New(sha1.New, []byte(hookSecret))
	s1.Write(r.body)
	for name, want := range map[string]string{
		"X-GitHub-Event":                         event,
		"X-GitHub-Hook-ID":                       "4000000001",
		"X-GitHub-Hook-Installation-Target-Type": "repository",
		"X-GitHub-Hook-Installation-Target-ID":   "1296269",
		"Content-Type":                           "application/json",
		"X-Hub-Signature-256":                    "sha256=" + mac(func() []byte { return s256.Sum(nil) }),
		"X-Hub-Signature":                        "sha1=" + mac(func() []byte { return s1.Sum(nil) }),
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !guidRE.MatchString(h.Get("X-GitHub-Delivery")) {
		t.Errorf("X-GitHub-Delivery %q is not a GUID", h.Get("X-GitHub-Delivery"))
	}
	if !strings.HasPrefix(h.Get("User-Agent"), "GitHub-Hookshot/") {
		t.Errorf("User-Agent %q", h.Get("User-Agent"))
	}
}

// TestWebhookDeliveriesFollowTheRun: a run's deliveries tell every run and
// job state change, in GitHub's order, whether the clock moves a step at a
// time or jumps past them all at once.
func TestWebhookDeliveriesFollowTheRun(t *testing.T) {
	want := []step{
		{"workflow_run", "requested", "queued", "", 1},
		{"workflow_job", "queued", "queued", "", 1},
		{"workflow_job", "queued", "queued", "", 1},
		{"workflow_run", "in_progress", "in_progress", "", 1},
		{"workflow_job", "in_progress", "in_progress", "", 1},
		{"workflow_job", "completed", "completed", "success", 1},
		{"workflow_job", "in_progress", "in_progress", "", 1},
		{"workflow_job", "completed", "completed", "failure", 1},
		{"workflow_run", "completed", "completed", "failure", 1},
	}
	for _, tt := range []struct {
		name  string
		steps []time.Duration
	}{
		{"step by step", []time.Duration{0, time.Minute, time.Minute, time.Minute, time.Minute}},
		{"in one jump", []time.Duration{10 * time.Minute}},
		{"between the states", []time.Duration{30 * time.Second, time.Minute, time.Minute, time.Minute}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			rc := newReceiver(t)
			f.srv.Webhook(rc.url, hookSecret)
			id := f.dispatch(t, "ci.yml", map[string]any{"id": "wh"}) // queued 1m, build 1m, test 1m fails
			var sent []Delivery
			for _, d := range tt.steps {
				f.clock.Advance(d)
				sent = append(sent, f.srv.DeliverEvents(t.Context())...)
			}
			if diff := cmp.Diff(want, summarise(t, sent)); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s", diff)
			}
			got := rc.received()
			if len(got) != len(sent) {
				t.Fatalf("received %d deliveries, sent %d", len(got), len(sent))
			}
			for i, r := range got {
				checkHeaders(t, r, sent[i].Event)
				if sent[i].Status != http.StatusAccepted || sent[i].Err != nil || sent[i].RunID != id {
					t.Errorf("delivery %d: status %d, err %v, run %d", i, sent[i].Status, sent[i].Err, sent[i].RunID)
				}
			}
			if more := f.srv.DeliverEvents(t.Context()); len(more) != 0 {
				t.Errorf("nothing changed, yet %d more deliveries", len(more))
			}
			// The completion carries the run as the REST API reads it.
			var ev github.WorkflowRunEvent
			if err := json.Unmarshal(sent[len(sent)-1].Body, &ev); err != nil {
				t.Fatal(err)
			}
			rest, _, err := f.gh.Actions.GetWorkflowRunByID(t.Context(), "o", "r", id)
			if err != nil {
				t.Fatal(err)
			}
			if !ev.GetWorkflowRun().GetUpdatedAt().Equal(rest.GetUpdatedAt()) || ev.GetWorkflowRun().GetHTMLURL() != rest.GetHTMLURL() ||
				ev.GetRepo().GetFullName() != "o/r" || ev.GetSender().GetLogin() != "octocat" || ev.GetWorkflow().GetID() != rest.GetWorkflowID() {
				t.Errorf("completed delivery: run %+v, repo %q, sender %q; REST run %+v", ev.GetWorkflowRun(), ev.GetRepo().GetFullName(), ev.GetSender().GetLogin(), rest)
			}
		})
	}
}

// TestWebhookApprovals: a job gated by an environment sends waiting, with
// the deployment, until a review; an approval lets it run, a rejection
// ends it (and the run) failed without it ever being in progress.
func TestWebhookApprovals(t *testing.T) {
	for _, tt := range []struct {
		state string
		want  []step
	}{
		{"approved", []step{
			{"workflow_job", "in_progress", "in_progress", "", 1},
			{"workflow_job", "completed", "completed", "success", 1},
			{"workflow_run", "completed", "completed", "success", 1},
		}},
		{"rejected", []step{
			{"workflow_job", "completed", "completed", "failure", 1},
			{"workflow_run", "completed", "completed", "failure", 1},
		}},
	} {
		t.Run(tt.state, func(t *testing.T) {
			f := newFixture(t, nil)
			rc := newReceiver(t)
			f.srv.Webhook(rc.url, hookSecret)
			id := f.dispatch(t, "deploy.yml", nil)
			sent := f.srv.DeliverEvents(t.Context())
			wantFirst := []step{
				{"workflow_run", "requested", "queued", "", 1},
				{"workflow_job", "queued", "queued", "", 1},
				{"workflow_job", "waiting", "waiting", "", 1},
			}
			if diff := cmp.Diff(wantFirst, summarise(t, sent)); diff != "" {
				t.Fatalf("deliveries before the review (-want +got):\n%s", diff)
			}
			var ev github.WorkflowJobEvent
			if err := json.Unmarshal(sent[2].Body, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.GetDeployment().GetEnvironment() != "prod" {
				t.Errorf("waiting delivery's deployment: %+v", ev.GetDeployment())
			}
			f.clock.Advance(time.Minute)
			if _, _, err := f.gh.Actions.PendingDeployments(t.Context(), "o", "r", id, github.PendingDeploymentsRequest{EnvironmentIDs: []int64{9}, State: tt.state, Comment: "ok"}); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(5 * time.Minute)
			got := summarise(t, f.srv.DeliverEvents(t.Context()))
			// An approved job runs: the run is in progress first.
			if tt.state == "approved" {
				tt.want = append([]step{{"workflow_run", "in_progress", "in_progress", "", 1}}, tt.want...)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("deliveries after the review (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWebhookCancelAndRerun: a force-cancel completes the run cancelled;
// a re-run attempt sends no requested, and its deliveries carry
// run_attempt 2.
func TestWebhookCancelAndRerun(t *testing.T) {
	f := newFixture(t, nil)
	rc := newReceiver(t)
	f.srv.Webhook(rc.url, hookSecret)
	id := f.dispatch(t, "stubborn.yml", nil)
	f.srv.DeliverEvents(t.Context())
	req, _ := f.gh.NewRequest(t.Context(), "POST", "repos/o/r/actions/runs/"+itoa(id)+"/force-cancel", nil)
	_, _ = f.gh.Do(req, nil) // 202
	got := summarise(t, f.srv.DeliverEvents(t.Context()))
	want := []step{
		{"workflow_job", "completed", "completed", "cancelled", 1},
		{"workflow_run", "completed", "completed", "cancelled", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the force-cancel (-want +got):\n%s", diff)
	}
	f.clock.Advance(time.Minute)
	f.srv.Rerun(id)
	f.clock.Advance(2 * time.Hour)
	got = summarise(t, f.srv.DeliverEvents(t.Context()))
	want = []step{
		{"workflow_job", "queued", "queued", "", 2},
		{"workflow_run", "in_progress", "in_progress", "", 2},
		{"workflow_job", "in_progress", "in_progress", "", 2},
		{"workflow_job", "completed", "completed", "success", 2},
		{"workflow_run", "completed", "completed", "success", 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the re-run (-want +got):\n%s", diff)
	}
}

// TestWebhookNoRetryAndRedeliver: a delivery the receiver refuses is not
// sent again by itself; Redeliver sends it again with the same GUID and
// body.
func TestWebhookNoRetryAndRedeliver(t *testing.T) {
	f := newFixture(t, nil)
	rc := newReceiver(t)
	rc.status = http.StatusServiceUnavailable
	f.srv.Webhook(rc.url, hookSecret)
	f.dispatch(t, "ci.yml", nil)
	first := f.srv.DeliverEvents(t.Context())
	if len(first) == 0 || first[0].Status != http.StatusServiceUnavailable {
		t.Fatalf("deliveries %+v", first)
	}
	if more := f.srv.DeliverEvents(t.Context()); len(more) != 0 || len(rc.received()) != len(first) {
		t.Fatalf("a refused delivery was sent again: %d more, %d received", len(more), len(rc.received()))
	}
	rc.mu.Lock()
	rc.status = http.StatusOK
	rc.mu.Unlock()
	again, err := f.srv.Redeliver(t.Context(), first[0].ID)
	if err != nil || again.Status != http.StatusOK {
		t.Fatalf("Redeliver: %+v, %v", again, err)
	}
	got := rc.received()
	last := got[len(got)-1]
	if last.header.Get("X-GitHub-Delivery") != first[0].ID || string(last.body) != string(first[0].Body) {
		t.Errorf("redelivery: %s %s, want the first delivery's GUID and body", last.header.Get("X-GitHub-Delivery"), last.body)
	}
	checkHeaders(t, last, "workflow_run")
	if n := len(f.srv.Deliveries()); n != len(first)+1 {
		t.Errorf("Deliveries: %d, want %d", n, len(first)+1)
	}
	if _, err := f.srv.Redeliver(t.Context(), "no-such-delivery"); err == nil {
		t.Error("Redeliver of an unknown GUID succeeded")
	}
}

// TestWebhookPingAndApp: the ping a new hook sends; an App's deliveries
// carry the installation and name the App as the hook's target.
func TestWebhookPingAndApp(t *testing.T) {
	key := mustKey()
	f := newFixture(t, func(o *Options) {
		o.AppPublicKey, o.AppID, o.InstallationID = &key.PublicKey, 12345, 67890
	})
	rc := newReceiver(t)
	f.srv.Webhook(rc.url, hookSecret)
	ping, err := f.srv.Ping(t.Context())
	if err != nil || ping.Event != "ping" {
		t.Fatalf("Ping: %+v, %v", ping, err)
	}
	var pe github.PingEvent
	if err := json.Unmarshal(ping.Body, &pe); err != nil || pe.GetHookID() != 4000000001 || pe.GetZen() == "" {
		t.Errorf("ping payload %s: %v", ping.Body, err)
	}
	id := f.dispatch(t, "ci.yml", nil)
	sent := f.srv.DeliverEvents(t.Context())
	if len(sent) == 0 {
		t.Fatal("no deliveries")
	}
	var ev github.WorkflowRunEvent
	if err := json.Unmarshal(sent[0].Body, &ev); err != nil || ev.GetInstallation().GetID() != 67890 || ev.GetWorkflowRun().GetID() != id {
		t.Errorf("App delivery: installation %+v, run %d: %v", ev.GetInstallation(), ev.GetWorkflowRun().GetID(), err)
	}
	if h := sent[0].Header; h.Get("X-GitHub-Hook-Installation-Target-Type") != "integration" || h.Get("X-GitHub-Hook-Installation-Target-ID") != "12345" {
		t.Errorf("App delivery target: %v", h)
	}
}

// TestWebhookHookCreatedMidRun: a hook configured while a run goes on
// tells only what changes from then on.
func TestWebhookHookCreatedMidRun(t *testing.T) {
	f := newFixture(t, nil)
	f.dispatch(t, "ci.yml", nil)
	f.clock.Advance(90 * time.Second) // build in progress
	rc := newReceiver(t)
	f.srv.Webhook(rc.url, hookSecret)
	f.clock.Advance(time.Minute)
	got := summarise(t, f.srv.DeliverEvents(t.Context()))
	want := []step{
		{"workflow_job", "completed", "completed", "success", 1},
		{"workflow_job", "in_progress", "in_progress", "", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestWebhookDeliveriesRecorded: with JOBBRIDGE_EXCHANGES set, each
// delivery is recorded as an exchange the spec checks validate against the
// webhook payload schemas: Operation "webhook", the receiver's path, the
// headers and body sent, the receiver's answer.
func TestWebhookDeliveriesRecorded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ExchangesEnv, dir)
	f := newFixture(t, nil)
	rc := newReceiver(t)
	f.srv.Webhook(rc.url, hookSecret)
	f.dispatch(t, "ci.yml", nil)
	sent := f.srv.DeliverEvents(t.Context())

	file, err := os.Open(filepath.Join(dir, fmt.Sprintf("github-%d.jsonl", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var hooks []exchanges.Exchange
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e exchanges.Exchange
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Operation == WebhookOperation {
			hooks = append(hooks, e)
		}
	}
	if len(hooks) != len(sent) {
		t.Fatalf("%d webhook records, %d deliveries", len(hooks), len(sent))
	}
	for i, e := range hooks {
		if e.Method != "POST" || e.Path != "/events/github" || e.Status != http.StatusAccepted || e.RequestBody != string(sent[i].Body) ||
			e.RequestHeaders.Get("X-GitHub-Event") != sent[i].Event || e.RequestHeaders.Get("X-Hub-Signature-256") == "" {
			t.Errorf("record %d: %+v", i, e)
		}
	}
}
