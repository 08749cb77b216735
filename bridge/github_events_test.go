package bridge_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// githubEventsCatalog is the demo's deploy_production on a GitHub backend
// whose webhooks flow (the safety poll at 10 minutes), polled every 2s.
const githubEventsCatalog = `version: 1
defaults:
  task: required
  poll_interval: 2s
  refresh_interval: 2s
  ttl: 1h
backends:
  github:
    type: github_actions
    api_url: %s
    token: ${GITHUB_TOKEN}
    events:
      secret: ${GITHUB_WEBHOOK_SECRET}
      poll_interval: 10m
      quiet: 30m
tools:
  - name: deploy_production
    description: Deploys a version to production; asks for the approval.
    backend: github
    input_schema:
      type: object
      properties:
        version: {type: string}
      required: [version]
    job:
      owner: octo-org
      repo: app
      workflow: deploy.yml
      ref: main
      inputs: {version: "{args.version}"}
      correlation_input: correlation_id
      approvals: true
`

// Item 7, with the GitHub fake's own deliveries in GitHub's order and its
// whole-second timestamps: the deployment's approval is asked within the
// tool's poll interval of the run starting to wait, not at the ten-minute
// safety poll after a webhook judged stale.
func TestGitHubApprovalIsAskedWithinThePollInterval(t *testing.T) {
	// Half a second past a whole second: the fake's timestamps (whole
	// seconds) then read before a poll made at the same instant.
	clk := &clock{now: time.Now().UTC().Truncate(time.Second).Add(time.Minute + 500*time.Millisecond)}
	gh := githubfake.New(&githubfake.Options{Now: clk.Now, ListDelay: githubfake.NoListDelay})
	ghURL, err := gh.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gh.Close() })
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, githubEventsCatalog, ghURL), 0o600); err != nil {
		t.Fatal(err)
	}
	ghType := catalog.BackendType{
		Name:      "github_actions",
		NewConfig: func() catalog.Block { return new(githubactions.BackendConfig) },
		NewJob:    func() catalog.JobBlock { return new(githubactions.JobConfig) },
	}
	cat, err := catalog.Load(path, ghType)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]githubactions.JobConfig{}
	for _, tl := range cat.Tools {
		jobs[tl.Name] = *tl.Job.(*githubactions.JobConfig)
	}
	a, err := githubactions.New("github", *cat.Backends["github"].Config.(*githubactions.BackendConfig), jobs, &githubactions.Options{Now: clk.Now, Getenv: func(name string) (string, bool) {
		v, ok := map[string]string{"GITHUB_TOKEN": "test-token", "GITHUB_WEBHOOK_SECRET": "test-webhook-secret"}[name]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b, err := bridge.New(bridge.Options{Catalog: cat, Store: store, Adapters: map[string]adapters.Adapter{"github": a}, Now: clk.Now, SweepInterval: time.Hour,
		// Each tasks/get waits for its poll: no poll is in flight when the
		// fake delivers (the adapter would share it with the look the
		// waiting job's event asks for, and that look would read the run
		// as it was before).
		ObserveBudget: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	events := httptest.NewServer(b.EventsHandler("/events/"))
	t.Cleanup(events.Close)
	gh.Webhook(events.URL+"/events/github", "test-webhook-secret")
	c := &taskclient.Client{URL: srv.URL, Tasks: true, Elicitation: true}

	res, err := c.CallTool(t.Context(), "deploy_production", map[string]any{"version": "1.2.3"}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	id := res.Task.TaskID
	// The run is dispatched and found (the fake lists it at once) before
	// the clock moves: the events of a run no task holds yet are dropped.
	waitUntil(t, "the run dispatched", func() bool {
		rows, _, _ := store.List(t.Context(), mapping.Filter{}, clk.Now(), nil, 1)
		return len(rows) == 1 && rows[0].Phase == mapping.PhaseSubmitted
	})
	// A client polling at the poll interval, the fake's clock moving with
	// it, and the webhooks of what changed delivered after each poll, as
	// GitHub sends them (after the change, stamped in whole seconds).
	// settle waits until the task's row has stopped changing: the looks
	// the deliveries asked for, which run in the background, have been
	// written before the clock moves on.
	settle := func() {
		last, still := int64(-1), 0
		for deadline := time.Now().Add(10 * time.Second); still < 5 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			rows, _, _ := store.List(t.Context(), mapping.Filter{}, clk.Now(), nil, 1)
			if len(rows) == 1 && rows[0].Version == last {
				still++
				continue
			}
			if len(rows) == 1 {
				last = rows[0].Version
			}
			still = 0
		}
	}
	var waitingAt time.Time
	for step := 0; step < 60; step++ {
		clk.Advance(time.Second)
		if sent := gh.DeliverEvents(t.Context()); len(sent) > 0 {
			for _, d := range sent {
				if waitingAt.IsZero() && d.Event == "workflow_job" && d.Action == "waiting" {
					waitingAt = clk.Now()
				}
			}
			settle()
		}
		got, err := c.GetTask(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "input_required" {
			if waitingAt.IsZero() {
				t.Fatalf("input_required before GitHub said the run waits: %+v", got)
			}
			if late := clk.Now().Sub(waitingAt); late > 2*time.Second {
				t.Errorf("the approval was asked %s after the run started waiting; want within the poll interval (2s)", late)
			}
			return
		}
	}
	t.Fatalf("the approval was never asked in 60s of the fake's clock (the run waited from %v)", waitingAt)
}
