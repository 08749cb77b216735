package githubactions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/secrets"
)

// GitHub's webhook headers, as GitHub spells them (net/http canonicalises
// the case).
const (
	headerEvent       = "X-GitHub-Event"
	headerDelivery    = "X-GitHub-Delivery"
	headerSignature   = "X-Hub-Signature-256"
	headerSignature1  = "X-Hub-Signature" // SHA-1: never accepted on its own
	signaturePrefix   = "sha256="
	maxWebhookPayload = 25 << 20 // GitHub sends nothing larger
	maxSecretFile     = 64 << 10
	attemptEntries    = 65536 // runs whose latest attempt the adapter remembers
)

// eventsSetup is the backend's events: block. Its secret is resolved
// through the adapter's secret source at every delivery: an environment
// variable's value is read once, a file's again whenever it changes, so
// that a rotated webhook secret takes effect without a restart.
type eventsSetup struct {
	secret  secrets.Ref
	polling adapters.EventPolling
}

// Events reports the backend's event polling when its config has an
// events: block.
func (a *Adapter) Events() (adapters.EventPolling, bool) {
	if a.events == nil {
		return adapters.EventPolling{}, false
	}
	return a.events.polling, true
}

// ReadEvents reads one webhook delivery from GitHub.
//
// It first checks X-Hub-Signature-256 (sha256=, the hex HMAC-SHA256 of the
// raw body under the backend's secret, compared in constant time by
// go-github's ValidatePayloadFromBody); a delivery without it, or with only
// the legacy SHA-1 X-Hub-Signature, or with a wrong one, is an error
// wrapping [adapters.ErrForgedEvent]. GitHub signs no timestamp, so there is
// no replay window: a replayed delivery keeps its X-GitHub-Delivery, which
// becomes the event's ID, and the bridge applies an ID once. The body may be
// application/json or application/x-www-form-urlencoded (JSON in its
// payload field), as the webhook's content type says.
//
// X-GitHub-Event says what the delivery is:
//
//   - workflow_run (requested, in_progress, completed): the run's state,
//     read by the same rules as a poll's; At is the run's updated_at. The
//     event of a completed run has Reread set: its observation (the
//     conclusion, the run's link, a result naming the run) says what the
//     event did, but the first terminal observation is final, and only a
//     poll's result lists the run's jobs, artifacts and log tails, so the
//     bridge polls the run instead of applying it.
//   - workflow_job (queued, waiting, in_progress, completed): the run the
//     job belongs to (run_id) is working, with the job in the status
//     message; a job that waits names the environment whose deployment
//     awaits approval. A job event never ends a run: only workflow_run
//     completed does. At is the job's completed_at (completed) or
//     started_at. A waiting job's event has Reread set when a tool with
//     approvals: true runs workflows of the event's repository (the event
//     does not say which workflow file the run is of): the approval
//     question needs the pending deployments' environments, which only a
//     poll fetches.
//   - anything else (ping, other events, other actions): no events.
//
// A re-run keeps the run's ID with a higher run_attempt. The adapter
// remembers the latest attempt it has seen of each run, in polls and in
// events, and drops an event of an older attempt, so that a late delivery
// of attempt 1's completion cannot end a task that follows attempt 2. (That
// memory is the process's own; a poll always reads the latest attempt.)
func (a *Adapter) ReadEvents(ctx context.Context, d adapters.Delivery) ([]adapters.Event, error) {
	if a.events == nil {
		return nil, errors.New("the backend has no events: block, so it takes no webhook deliveries")
	}
	payload, err := a.verify(d)
	if err != nil {
		return nil, err
	}
	event, delivery := d.Header.Get(headerEvent), d.Header.Get(headerDelivery)
	switch event {
	case "workflow_run", "workflow_job":
	default:
		a.log.Debug("ignoring a webhook delivery", "event", a.red.Clean(event, 50), "delivery", a.red.Clean(delivery, 100))
		return nil, nil
	}
	parsed, err := github.ParseWebHook(event, payload)
	if err != nil {
		return nil, fmt.Errorf("reading the %s payload: %s", event, a.red.Clean(err.Error(), 300))
	}
	var e adapters.Event
	var ok bool
	switch ev := parsed.(type) {
	case *github.WorkflowRunEvent:
		e, ok, err = a.runEvent(ev)
	case *github.WorkflowJobEvent:
		e, ok, err = a.jobEvent(ev)
	}
	if err != nil || !ok {
		return nil, err
	}
	e.ID = delivery
	return []adapters.Event{e}, nil
}

// verify checks the delivery's signature over its raw body and returns the
// JSON payload.
func (a *Adapter) verify(d adapters.Delivery) ([]byte, error) {
	sig := strings.TrimSpace(d.Header.Get(headerSignature))
	switch {
	case sig == "" && d.Header.Get(headerSignature1) != "":
		return nil, fmt.Errorf("the delivery carries only the SHA-1 X-Hub-Signature; X-Hub-Signature-256 is required: %w", adapters.ErrForgedEvent)
	case sig == "":
		return nil, fmt.Errorf("the delivery has no X-Hub-Signature-256 header (does the webhook have the secret set?): %w", adapters.ErrForgedEvent)
	case !strings.HasPrefix(sig, signaturePrefix):
		return nil, fmt.Errorf("X-Hub-Signature-256 is not a sha256= signature: %w", adapters.ErrForgedEvent)
	case len(d.Body) > maxWebhookPayload:
		return nil, fmt.Errorf("the delivery's body is larger than GitHub's %d MiB", maxWebhookPayload>>20)
	}
	// go-github takes the bare media type; GitHub sends no parameters, a
	// proxy might.
	mt, _, err := mime.ParseMediaType(d.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" && mt != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("the delivery's Content-Type %q is neither application/json nor application/x-www-form-urlencoded (set the webhook's content type to application/json)",
			a.red.Clean(d.Header.Get("Content-Type"), 100))
	}
	// With the media type and the size checked, what ValidatePayloadFromBody
	// can still refuse is the signature (or a form body that, unsigned,
	// cannot be told from a forged one).
	secret, err := a.secrets.Value(a.events.secret)
	if err != nil {
		// Only a file that vanished before it was ever read: New rules it out.
		return nil, fmt.Errorf("the webhook secret: %w", err)
	}
	payload, err := github.ValidatePayloadFromBody(mt, bytes.NewReader(d.Body), sig, []byte(secret))
	if err != nil {
		return nil, fmt.Errorf("the delivery's X-Hub-Signature-256 does not match its body under the webhook secret: %w", adapters.ErrForgedEvent)
	}
	return payload, nil
}

// runEvent reads a workflow_run event; ok is false for one to ignore.
func (a *Adapter) runEvent(ev *github.WorkflowRunEvent) (adapters.Event, bool, error) {
	switch ev.GetAction() {
	case "requested", "in_progress", "completed":
	default:
		a.log.Debug("ignoring a workflow_run action", "action", a.red.Clean(ev.GetAction(), 50))
		return adapters.Event{}, false, nil
	}
	run := ev.GetWorkflowRun()
	if run.GetID() <= 0 {
		return adapters.Event{}, false, errors.New("the workflow_run event carries no workflow_run.id")
	}
	if !a.latestAttempt(run.GetID(), int64(run.GetRunAttempt())) {
		a.log.Debug("ignoring an event of an earlier run attempt", "run", run.GetID(), "attempt", run.GetRunAttempt())
		return adapters.Event{}, false, nil
	}
	d := refData{RunID: run.GetID()}
	d.Owner, d.Repo = repoOf(ev.GetRepo(), run.GetRepository())
	// The tool is not known here; it matters only for what an event does
	// not carry (log tails, approvals).
	t := &tool{}
	t.cfg.SetDefaults()
	o := a.runObservation(t, d, run, runFacts{})
	o = afterCancel(o, run.GetStatus() == "completed", run.GetConclusion(), a.cancelRecord(d.key()))
	a.memoDrop(d.key())
	// A poll's terminal result is the full one (jobs, artifacts, log
	// tails), and the first terminal observation is final.
	reread := run.GetStatus() == "completed"
	return adapters.Event{JobID: strconv.FormatInt(run.GetID(), 10), At: run.GetUpdatedAt().Time, Observation: o, Reread: reread}, true, nil
}

// jobEvent reads a workflow_job event as news of the run the job belongs
// to; ok is false for one to ignore.
func (a *Adapter) jobEvent(ev *github.WorkflowJobEvent) (adapters.Event, bool, error) {
	j := ev.GetWorkflowJob()
	name := a.red.Clean(j.GetName(), 200)
	o := adapters.Observation{State: adapters.StateWorking}
	switch ev.GetAction() {
	case "queued":
		o.Message = "queued: job " + name + " waits for a runner"
	case "waiting":
		if env := ev.GetDeployment().GetEnvironment(); env != "" {
			o.Message = waitingMessage([]string{env}, nil) + " (job " + name + ")"
		} else {
			o.Message = "waiting: job " + name + " waits for a deployment protection rule"
		}
	case "in_progress":
		o.Message = "in_progress: job " + name
	case "completed":
		o.Message = fmt.Sprintf("in_progress: job %s concluded %s", name, orNone(j.GetConclusion()))
	default:
		a.log.Debug("ignoring a workflow_job action", "action", a.red.Clean(ev.GetAction(), 50))
		return adapters.Event{}, false, nil
	}
	runID := j.GetRunID()
	if runID <= 0 {
		return adapters.Event{}, false, errors.New("the workflow_job event carries no workflow_job.run_id")
	}
	if !a.latestAttempt(runID, j.GetRunAttempt()) {
		a.log.Debug("ignoring an event of an earlier run attempt", "run", runID, "attempt", j.GetRunAttempt())
		return adapters.Event{}, false, nil
	}
	d := refData{RunID: runID}
	d.Owner, d.Repo = repoOf(ev.GetRepo(), nil)
	if u := ev.GetRepo().GetHTMLURL(); u != "" {
		o.Links = []adapters.Link{{Title: "Workflow run", URL: fmt.Sprintf("%s/actions/runs/%d", strings.TrimSuffix(u, "/"), runID)}}
	}
	at := j.GetStartedAt().Time
	if ev.GetAction() == "completed" && !j.GetCompletedAt().IsZero() {
		at = j.GetCompletedAt().Time
	}
	if at.IsZero() {
		at = j.GetCreatedAt().Time
	}
	o.Message = a.red.Clean(o.Message, maxMessage)
	o = afterCancel(o, false, "", a.cancelRecord(d.key()))
	// The job moved: the next poll reads the run's jobs again.
	a.memoDrop(d.key())
	// Only a poll fetches the pending deployments an approval question
	// offers.
	reread := ev.GetAction() == "waiting" && a.approvalsIn(d.Owner, d.Repo)
	return adapters.Event{JobID: strconv.FormatInt(runID, 10), At: at, Observation: o, Reread: reread}, true, nil
}

// approvalsIn reports whether a tool with approvals: true runs workflows of
// the repository owner/repo (case-insensitively, as GitHub compares them);
// with the repository unknown, whether any tool has approvals: true.
func (a *Adapter) approvalsIn(owner, repo string) bool {
	for _, t := range a.tools {
		if !t.cfg.Approvals {
			continue
		}
		if owner == "" && repo == "" || strings.EqualFold(t.cfg.Owner, owner) && strings.EqualFold(t.cfg.Repo, repo) {
			return true
		}
	}
	return false
}

// repoOf is the owner and name of the event's repository (or else of the
// run's).
func repoOf(repo, runRepo *github.Repository) (owner, name string) {
	for _, r := range []*github.Repository{repo, runRepo} {
		if r.GetName() != "" && r.GetOwner().GetLogin() != "" {
			return r.GetOwner().GetLogin(), r.GetName()
		}
		if o, n, ok := strings.Cut(r.GetFullName(), "/"); ok {
			return o, n
		}
	}
	return "", ""
}

// latestAttempt notes that attempt of the run was seen and reports whether
// it is the latest the adapter knows of; an unknown attempt (0) is taken
// as the latest.
func (a *Adapter) latestAttempt(runID, attempt int64) bool {
	if attempt <= 0 {
		return true
	}
	key := strconv.FormatInt(runID, 10)
	a.mu.Lock()
	defer a.mu.Unlock()
	if known, ok := a.attempts.get(key); ok && attempt < known {
		return false
	} else if ok && attempt == known {
		return true
	}
	a.attempts.put(key, attempt)
	return true
}

// eventsPolling turns the config's block into the bridge's pacing.
func eventsPolling(e *EventsConfig) adapters.EventPolling {
	return adapters.EventPolling{Interval: e.PollInterval, Quiet: e.Quiet}
}
