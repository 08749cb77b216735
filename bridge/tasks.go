package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// lookup validates a tasks/* request and loads its task.
func (b *Bridge) lookup(ctx context.Context, p *taskParams) (*mapping.Task, error) {
	if p == nil || !declaresTasks(p.Meta) && revisionFrom(ctx) != revisionLegacy {
		return nil, missingCapability(tasksCapability(), TasksExtension)
	}
	if p.TaskID == "" {
		return nil, invalidParams("taskId is required")
	}
	t, err := b.store.Get(ctx, mapping.KeyOf(p.TaskID), principalFrom(ctx), b.opts.Now())
	if errors.Is(err, mapping.ErrNotFound) {
		return nil, taskNotFound()
	}
	if err != nil {
		b.log.Error("reading task", "error", err)
		return nil, internalError("the task store is unavailable")
	}
	b.reseal(p.TaskID, t)
	return t, nil
}

// tasksGet answers tasks/get: the task's current state, refreshed from the
// backend unless the last observation is recent enough. It waits at most
// ObserveBudget for the backend.
func (b *Bridge) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*detailedTaskResult, error) {
	t, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	answer := b.refresh(ctx, t, b.opts.ObserveBudget)
	b.metrics.servedTasksGet(t.Tool, t, answer)
	return b.detailed(p.TaskID, answer), nil
}

// needsRefresh reports whether a live task should be brought up to date now:
// an interrupted submission to reconcile, or a stale observation.
func (b *Bridge) needsRefresh(t *mapping.Task) bool {
	if t.Status.Terminal() {
		return false
	}
	tl := b.toolOf(t)
	now := b.opts.Now()
	switch t.Phase {
	case mapping.PhaseSubmitting:
		if b.isInflight(t.Key) {
			return false
		}
		if b.backedOff(t.Key, now) {
			return false
		}
		// Alone on its store, this process knows that a submission it is
		// not running itself was cut off (by a crash or a restart), and
		// reconciles it at once. With a shared store another replica may be
		// submitting: wait until the submission would have timed out.
		return !b.shared || now.Sub(t.UpdatedAt) >= b.opts.SubmitTimeout
	case mapping.PhaseSubmitted:
		if tl == nil {
			return false
		}
		if t.ObservedAt != nil && now.Sub(*t.ObservedAt) < b.refreshInterval(t, tl) {
			return false
		}
		if b.backedOff(t.Key, now) {
			return false
		}
		if _, _, paused := b.gateOf(tl.Backend).Paused(); paused {
			return false
		}
		return true
	}
	return false
}

// refresh brings a non-terminal task up to date: it reconciles an interrupted
// submission and observes the backend when the last observation is older
// than the tool's refresh interval. A task that needs neither is returned as
// it is, without another read of its row. Concurrent refreshes of one task
// share one backend call. refresh waits at most wait for it (zero: until it
// is done); past that it returns the task as it was, and the shared call goes
// on, on the bridge's lifetime, for the next poll.
func (b *Bridge) refresh(ctx context.Context, t *mapping.Task, wait time.Duration) *mapping.Task {
	if !b.needsRefresh(t) {
		return t
	}
	tl := b.toolOf(t)
	ch := b.polls.DoChan(string(t.Key[:]), func() (any, error) {
		if !b.enter() {
			return nil, errBridgeClosed
		}
		defer b.wg.Done()
		// A caller that read the row before the previous shared call
		// finished arrives here after it: read again, and ask the backend
		// only if the observation is still stale.
		cur, err := b.store.Get(b.ctx, t.Key, t.Principal, b.opts.Now())
		if err != nil {
			return nil, err
		}
		if !b.needsRefresh(cur) {
			return cur, nil
		}
		if cur.Phase == mapping.PhaseSubmitted {
			claimed, ok := b.claimObservation(cur, tl)
			if !ok {
				return claimed, nil
			}
			// The row the observation wrote is the answer: no read after it.
			if updated := b.observe(claimed); updated != nil {
				return updated, nil
			}
		} else {
			b.reconcile(cur)
		}
		return b.store.Get(b.ctx, t.Key, t.Principal, b.opts.Now())
	})
	var timeout <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case r := <-ch:
		if cur, ok := r.Val.(*mapping.Task); ok && cur != nil {
			return cur
		}
	case <-timeout:
		b.metrics.observeBudget.WithLabelValues(t.Tool).Inc()
	case <-ctx.Done():
	}
	return t
}

// errBridgeClosed is returned by work that was not started because the
// bridge is closing.
var errBridgeClosed = errors.New("the bridge is closing")

// enter registers a unit of background work with Close (the caller must call
// b.wg.Done when it ends). It reports false once the bridge is closing.
func (b *Bridge) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// claimObservation decides whether this replica observes the task's job now
// (see lifecycle.ClaimObservation).
func (b *Bridge) claimObservation(t *mapping.Task, tl *tool) (*mapping.Task, bool) {
	return b.lc.ClaimObservation(t, b.refreshInterval(t, tl))
}

// observe asks the backend about one task's job and applies the answer. It
// returns the row as the observation left it, or nil when it wrote nothing
// it can vouch for (the backend could not be asked, or the write failed).
func (b *Bridge) observe(task *mapping.Task) *mapping.Task {
	return b.observeFor(task, false)
}

// observeFor is observe; forEvent says a pushed event asked for the poll,
// which then counts as the job's latest event.
func (b *Bridge) observeFor(task *mapping.Task, forEvent bool) *mapping.Task {
	tl := b.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return nil
	}
	g := b.gateOf(tl.Backend)
	if ok, _, _ := g.Allow(); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	obs, err := tl.adapter.Poll(ctx, []adapters.JobRef{ref})
	cancel()
	if err == nil && len(obs) != 1 {
		err = fmt.Errorf("adapter returned %d observations for 1 job", len(obs))
	}
	if b.ctx.Err() != nil {
		g.Done(lifecycle.ErrNotBackendFault)
		return nil
	}
	g.Done(err)
	if err != nil {
		b.unobserved(task, tl, err)
		b.log.Debug("observing job", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		// The problem is the task's, told to its caller until it clears.
		return b.lc.Unobserved(task, tl.Tool, err, nil)
	}
	if forEvent && observable(obs[0].Err) {
		return b.write(task, tl, ref, obs[0], &time.Time{})
	}
	return b.record(task, tl, ref, obs[0])
}

// unobserved notes that a task's job could not be observed now: the task
// keeps serving its last observation and is not asked about again before
// the tool's refresh interval (the backend's gate may pause longer).
func (b *Bridge) unobserved(task *mapping.Task, tl *tool, err error) {
	if _, throttled := adapters.RetryAfter(err); throttled {
		b.metrics.throttled.WithLabelValues(tl.Backend).Inc()
	}
	b.setBackoff(task.Key, tl.RefreshInterval)
}

// observable reports whether an observation's Err still says something
// about the job's state (it is missing, its status cannot be read, its
// state is not mapped, it was never started), which the lifecycle applies
// as an observation; other errors are problems of the call.
func observable(err error) bool {
	return err == nil || errors.Is(err, adapters.ErrJobNotFound) || errors.Is(err, adapters.ErrUnreadableStatus) ||
		errors.Is(err, adapters.ErrUnmappedState) || errors.Is(err, adapters.ErrNeverStarted)
}

// record applies one observation of a task's job (the row as read before
// the backend was asked, and the reference it was asked about) through the
// lifecycle. A job that could not be observed (its Err, see observable)
// keeps the last observation, with the problem recorded and told, and a
// new job reference it carries is stored. record returns the row as
// written, or nil when nothing was.
func (b *Bridge) record(task *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation) *mapping.Task {
	if err := o.Err; !observable(err) {
		b.unobserved(task, tl, err)
		// The call answered, but not about this job: the same line as a
		// failed call (see meteredAdapter).
		b.log.Warn("backend call failed", "backend", task.Backend, "operation", "poll", "class", backendOutcome(err), "task", shortKey(task.Key), "job", ref.ID, "error", err)
		return b.lc.Unobserved(task, tl.Tool, err, o.Ref)
	}
	b.setBackoff(task.Key, o.RetryAfter)
	return b.write(task, tl, ref, o, nil)
}

// recordEvent applies a job event pushed by the backend as record applies
// a poll's observation, and notes when the job's last event came. The
// observation dates from the event's time at (when the backend gave one),
// so that a later event with an earlier time is seen to be stale.
func (b *Bridge) recordEvent(task *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation, at time.Time) *mapping.Task {
	return b.write(task, tl, ref, o, &at)
}

// write applies an observation through the lifecycle, and what follows it:
// a terminal task is forgotten, a cancel it claimed is forwarded. eventAt
// is set for an event: the backend's time of it (zero when not given).
func (b *Bridge) write(task *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation, eventAt *time.Time) *mapping.Task {
	updated, forward := b.lc.Observed(lifecycle.Observation{Task: task, Tool: tl.Tool, Ref: ref, Obs: o, EventAt: eventAt})
	if updated != nil && updated.Status.Terminal() {
		b.forget(task.Key)
	}
	if forward {
		b.forwardCancel(updated)
	}
	return updated
}

// forget drops what this process keeps in memory about a task that has
// ended, so that memory does not grow with the number of tasks served.
func (b *Bridge) forget(k mapping.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.backoff, k)
	delete(b.lookups, k)
}

// backedOff reports whether the task's next backend call (an observation
// or a lookup) must wait still.
func (b *Bridge) backedOff(k mapping.Key, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.backoff[k])
}

func (b *Bridge) setBackoff(k mapping.Key, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d <= 0 {
		delete(b.backoff, k)
		return
	}
	b.backoff[k] = b.opts.Now().Add(d)
}

// fields renders the Task fields of a row.
func (b *Bridge) fields(id string, t *mapping.Task) taskFields {
	ttl := t.TTL.Milliseconds()
	poll := b.pollInterval(t).Milliseconds()
	updated := t.UpdatedAt
	if updated.Before(t.CreatedAt) {
		updated = t.CreatedAt
	}
	return taskFields{
		TaskID:         id,
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      formatTime(t.CreatedAt),
		LastUpdatedAt:  formatTime(updated),
		TTLMs:          &ttl,
		PollIntervalMs: &poll,
	}
}

// pollInterval is the tool's interval, grown for tasks that have been
// running long: doubled after 10 minutes, quadrupled after an hour, but
// never more than a minute unless the tool's own interval is longer.
func (b *Bridge) pollInterval(t *mapping.Task) time.Duration {
	base := t.PollInterval
	if base <= 0 {
		base = 2 * time.Second
	}
	if t.Status.Terminal() {
		return base
	}
	age := b.opts.Now().Sub(t.CreatedAt)
	d := base
	switch {
	case age > time.Hour:
		d = 4 * base
	case age > 10*time.Minute:
		d = 2 * base
	}
	if d > time.Minute && base <= time.Minute {
		d = time.Minute
	}
	return d
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// detailed renders a row as a DetailedTask.
func (b *Bridge) detailed(id string, t *mapping.Task) *detailedTaskResult {
	r := &detailedTaskResult{ResultType: "complete", taskFields: b.fields(id, t)}
	switch t.Status {
	case mapping.StatusInputRequired:
		r.InputRequests = map[string]json.RawMessage{}
		for k, in := range lifecycle.DecodeInputs(t.InputRequests) {
			r.InputRequests[k] = elicitationJSON(in.Prompt(), in.Schema)
		}
		if len(r.InputRequests) == 0 {
			// Defensive: never show input_required without a request.
			r.Status = string(mapping.StatusWorking)
			r.InputRequests = nil
		}
	case mapping.StatusCompleted, mapping.StatusFailed:
		var o outcome
		json.Unmarshal(t.Outcome, &o)
		if t.Status == mapping.StatusCompleted {
			r.Result = o.Result
			if len(r.Result) == 0 {
				r.Result = toolResultText(t.StatusMessage, false)
			}
		} else {
			r.Error = o.Error
			if r.Error == nil {
				r.Error = &wireError{Code: -32603, Message: t.StatusMessage}
			}
		}
	}
	if !t.Status.Terminal() && t.Phase == mapping.PhaseSubmitted {
		r.StatusMessage = b.staleNote(t, r.StatusMessage)
	}
	return r
}

// staleNote adds to a live task's status message how old its last
// observation is, when it is older than the tool's refresh interval allows,
// and why no fresher one was made.
func (b *Bridge) staleNote(t *mapping.Task, msg string) string {
	tl := b.toolOf(t)
	if tl == nil {
		return msg
	}
	now := b.opts.Now()
	var notes []string
	if t.ObservedAt != nil {
		if age := now.Sub(*t.ObservedAt); age > 2*tl.RefreshInterval+time.Second {
			notes = append(notes, fmt.Sprintf("as of %s ago", age.Round(time.Second)))
		}
	}
	if g := b.gateOf(tl.Backend); g != nil {
		if note := g.PauseNote(now); note != "" {
			notes = append(notes, note)
		}
	}
	if len(notes) == 0 {
		return msg
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s)", msg, strings.Join(notes, "; ")))
}

// tasksUpdate answers tasks/update: answers to outstanding input requests are
// recorded by the lifecycle, then delivered (a confirmation submits the job;
// backend questions go to the adapter's Responder, once per key). Keys that
// are not outstanding are ignored, as the spec asks.
func (b *Bridge) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if task.Status.Terminal() || len(p.InputResponses) == 0 {
		return newAck(), nil
	}
	answers := map[string]adapters.Answer{}
	for key, raw := range p.InputResponses {
		if a, ok := decodeAnswer(raw); ok {
			answers[key] = adapters.Answer{Action: a.Action, Content: a.Content}
		}
	}
	// A confirmation may submit the job: hold the submission before the row
	// says so (see holdSubmission), and release it if nothing is submitted.
	b.holdSubmission(task.Key)
	a, err := b.lc.Answer(task, answers)
	submitNow := a.Confirmed && err == nil && a.Task.Phase == mapping.PhaseSubmitting
	if !submitNow {
		b.releaseSubmission(task.Key)
	}
	if errors.Is(err, lifecycle.ErrTerminal) {
		return newAck(), nil
	}
	if err != nil {
		b.log.Error("recording answers", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the answers could not be recorded")
	}
	if submitNow {
		args := a.Args
		if args == nil {
			args = map[string]any{}
		}
		b.startSubmit(a.Task, args)
	}
	if len(a.Job) > 0 {
		b.deliverAnswers(a.Task, a.Job)
	}
	return newAck(), nil
}

// deliverAnswers sends answers to the backend. The keys were already marked
// answered by a conditional write, so they are delivered once; if delivery
// fails they are asked again.
func (b *Bridge) deliverAnswers(task *mapping.Task, answers map[string]adapters.Answer) {
	tl := b.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	r, ok := tl.adapter.(adapters.Responder)
	if !ok {
		b.log.Warn("backend asked for input but its adapter cannot deliver answers", "backend", task.Backend)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	err := r.Respond(ctx, ref, answers)
	cancel()
	if err == nil {
		return
	}
	b.log.Debug("delivering answers", "task", shortKey(task.Key), "job", ref.ID, "error", err)
	b.lc.AnswersUndelivered(task, answers)
}

// tasksCancel answers tasks/cancel: the intent is recorded durably by the
// lifecycle and the cancel forwarded downstream once. The ack is the same
// for terminal tasks.
func (b *Bridge) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if task.Status.Terminal() {
		return newAck(), nil
	}
	updated, forward, err := b.lc.RequestCancel(task, "")
	if err != nil && !errors.Is(err, lifecycle.ErrTerminal) {
		b.log.Error("recording cancel", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the cancel could not be recorded")
	}
	if forward {
		b.forwardCancel(updated)
	}
	return newAck(), nil
}

// forwardCancel sends a claimed cancel downstream, through the backend's
// gate, and has the lifecycle record the answer: an accepted cancel is
// confirmed; a job that had already finished keeps its own outcome; a
// refusal, an error or no answer is told and the cancel sent again after a
// growing backoff (lifecycle.CancelAnswered).
func (b *Bridge) forwardCancel(task *mapping.Task) {
	tl := b.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	g := b.gateOf(tl.Backend)
	if ok, until, reason := g.Allow(); !ok {
		b.metrics.cancelDeferred(tl.Backend)
		b.lc.CancelDeferred(task, until, reason)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	err := tl.adapter.Cancel(ctx, ref)
	cancel()
	b.metrics.cancelForwarded(tl.Backend, err)
	switch {
	case err == nil, errors.Is(err, adapters.ErrAlreadyFinished), errors.Is(err, adapters.ErrCancelRefused):
		g.Done(nil)
	default:
		g.Done(err)
	}
	attempts := b.lc.CancelAnswered(task, err)
	b.metrics.cancelAttempt(tl.Backend, attempts)
	switch {
	case err == nil:
		b.log.Info("cancel forwarded", "task", shortKey(task.Key), "job", ref.ID, "attempt", attempts)
	case errors.Is(err, adapters.ErrAlreadyFinished):
		b.log.Info("cancel came after the job finished", "task", shortKey(task.Key), "job", ref.ID)
	default:
		b.log.Debug("forwarding cancel", "task", shortKey(task.Key), "job", ref.ID, "attempt", attempts, "error", err)
	}
}

// inputExpired reports whether a task has waited for an answer longer than
// max_input_wait.
func (b *Bridge) inputExpired(t *mapping.Task, now time.Time) bool {
	if t.Status != mapping.StatusInputRequired {
		return false
	}
	for _, in := range lifecycle.DecodeInputs(t.InputRequests) {
		if !in.Since.IsZero() && now.Sub(in.Since) > b.limits.MaxInputWait {
			return true
		}
	}
	return false
}

// expireInput ends a task nobody answered: a confirmation is cancelled
// before anything was submitted; a waiting job is cancelled downstream.
func (b *Bridge) expireInput(task *mapping.Task) {
	b.metrics.reject("input_wait")
	if updated, forward := b.lc.ExpireInput(task, b.limits.MaxInputWait); forward {
		b.forwardCancel(updated)
	}
}

// liveClaimer is implemented by stores that several replicas share. The
// sweep claims a lease on the tasks it works on, so that replicas split the
// live tasks between them, and a dead replica's share is taken over once its
// leases run out.
type liveClaimer interface {
	ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error)
}

// ownerReleaser is implemented by shared stores that can free every sweep
// lease an owner holds: a replica that restarts under the same ReplicaID
// takes back, at once, the tasks its previous process had claimed.
type ownerReleaser interface {
	ReleaseOwner(ctx context.Context, owner string) error
}

// sweepLoop runs the background sweep until the bridge closes.
func (b *Bridge) sweepLoop() {
	defer b.wg.Done()
	if r, ok := b.store.(ownerReleaser); ok {
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
		if err := r.ReleaseOwner(ctx, b.replica); err != nil {
			b.log.Warn("releasing the leases of this replica's previous process", "replica", b.replica, "error", err)
		}
		cancel()
	}
	tick := time.NewTicker(b.opts.SweepInterval)
	defer tick.Stop()
	b.sweep()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-tick.C:
			b.sweep()
		}
	}
}
