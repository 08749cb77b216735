package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// storedInput is an outstanding input request as kept in the store.
type storedInput struct {
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema"`
	// Job marks a request that came from the backend (delivered through the
	// adapter's Responder) rather than the bridge's confirmation.
	Job bool `json:"job,omitempty"`
	// Since is when the request was first asked, for max_input_wait.
	Since time.Time `json:"since"`
}

func encodeInputs(m map[string]storedInput) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

func decodeInputs(raw json.RawMessage) map[string]storedInput {
	m := map[string]storedInput{}
	if len(raw) > 0 {
		json.Unmarshal(raw, &m)
	}
	return m
}

func decodeKeys(raw json.RawMessage) []string {
	var keys []string
	if len(raw) > 0 {
		json.Unmarshal(raw, &keys)
	}
	return keys
}

func encodeKeys(keys []string) json.RawMessage {
	b, _ := json.Marshal(keys)
	return b
}

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
	tl := b.taskTool(t)
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
		if _, _, paused := b.gateOf(tl.Backend).paused(); paused {
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
	tl := b.taskTool(t)
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

// claimObservation decides whether this replica observes the task's job now,
// and returns the row to observe from (the one it claimed, or the current
// one when it did not). With a store that several replicas share, the
// replica that moves ObservedAt forward by a conditional write observes; the
// others serve the stored observation, so N replicas do not multiply backend
// calls. Alone on its store, the process always observes (singleflight
// already coalesces).
func (b *Bridge) claimObservation(t *mapping.Task, tl *tool) (*mapping.Task, bool) {
	if !b.shared {
		return t, true
	}
	var claimed bool
	cur, err := b.mutateHeld(t, func(c *mapping.Task, now time.Time) bool {
		claimed = false
		if c.Phase != mapping.PhaseSubmitted || c.ObservedAt != nil && now.Sub(*c.ObservedAt) < b.refreshInterval(c, tl) {
			return false
		}
		c.ObservedAt = &now
		claimed = true
		return true
	})
	if cur == nil {
		cur = t
	}
	return cur, err == nil && claimed
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
	tl := b.taskTool(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return nil
	}
	g := b.gateOf(tl.Backend)
	if ok, _, _ := g.allow(); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	obs, err := tl.adapter.Poll(ctx, []adapters.JobRef{ref})
	cancel()
	if err == nil && len(obs) != 1 {
		err = fmt.Errorf("adapter returned %d observations for 1 job", len(obs))
	}
	if b.ctx.Err() != nil {
		g.done(errNotBackendFault)
		return nil
	}
	g.done(err)
	if err != nil {
		b.unobserved(task, tl, err)
		b.log.Debug("observing job", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		return nil
	}
	if forEvent {
		if err := obs[0].Err; err == nil || errors.Is(err, adapters.ErrJobNotFound) || errors.Is(err, adapters.ErrUnreadableStatus) {
			return b.write(task, tl, ref, obs[0], &time.Time{})
		}
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

// record applies one observation of a task's job (the row as read before
// the backend was asked, and the reference it was asked about) through the
// same conditional write every state change takes. A job that could not be
// observed (its Err, other than a missing job or an unreadable status)
// keeps the last observation, but a new job reference it carries is stored.
// record returns the row as written, or nil when nothing was.
func (b *Bridge) record(task *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation) *mapping.Task {
	if err := o.Err; err != nil && !errors.Is(err, adapters.ErrJobNotFound) && !errors.Is(err, adapters.ErrUnreadableStatus) {
		var updated *mapping.Task
		if o.Ref != nil {
			// The job's new reference is durable even when the job could
			// not be observed yet.
			newRef := *o.Ref
			u, err := b.mutateHeld(task, func(t *mapping.Task, now time.Time) bool {
				data, err := json.Marshal(newRef)
				t.JobRef = data
				t.JobID = newRef.ID
				return err == nil
			})
			if err != nil && !errors.Is(err, errTerminal) {
				b.log.Error("recording job reference", "task", shortKey(task.Key), "error", err)
			} else if err == nil {
				updated = u
			}
		}
		b.unobserved(task, tl, err)
		// The call answered, but not about this job: the same line as a
		// failed call (see meteredAdapter).
		b.log.Warn("backend call failed", "backend", task.Backend, "operation", "poll", "class", backendOutcome(err), "task", shortKey(task.Key), "job", ref.ID, "error", err)
		return updated
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

// write is the conditional write of an observation, and what follows it:
// a terminal task is forgotten, a cancel it claimed is forwarded. eventAt
// is set for an event: the backend's time of it (zero when not given).
func (b *Bridge) write(task *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation, eventAt *time.Time) *mapping.Task {
	var forward bool
	updated, err := b.mutateHeld(task, func(t *mapping.Task, now time.Time) bool {
		if eventAt != nil && !o.State.Terminal() && staleEvent(t, *eventAt) {
			return false // a poll got there first
		}
		b.apply(t, tl, ref, o, now)
		if eventAt != nil {
			t.EventAt = &now
			if at := *eventAt; !at.IsZero() && at.Before(now) && t.ObservedAt != nil && t.ObservedAt.Equal(now) {
				t.ObservedAt = &at
			}
		}
		forward = b.claimCancel(t, now)
		return true
	})
	if err != nil && !errors.Is(err, errTerminal) {
		b.log.Error("recording observation", "task", shortKey(task.Key), "error", err)
		return nil
	}
	if updated != nil && updated.Status.Terminal() {
		b.forget(task.Key)
	}
	if forward && err == nil {
		b.forwardCancel(updated)
	}
	return updated
}

// mutateHeld is mutate for a caller that holds a recent read of the row:
// fn decides on a copy of it and the conditional write goes out without
// reading the row again. Only when another writer got there first (the
// write conflicts) does it fall back to mutate, which reads afresh. A held
// row that is terminal is final: it returns errTerminal at once.
func (b *Bridge) mutateHeld(held *mapping.Task, fn func(t *mapping.Task, now time.Time) bool) (*mapping.Task, error) {
	if held.Status.Terminal() {
		return held, errTerminal
	}
	c := *held
	now := b.opts.Now().UTC()
	if !fn(&c, now) {
		return &c, nil
	}
	c.UpdatedAt = now
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	err := b.store.Update(ctx, &c)
	cancel()
	if errors.Is(err, mapping.ErrConflict) {
		return b.mutate(held, fn)
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
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

// apply translates one observation into the task's state.
func (b *Bridge) apply(t *mapping.Task, tl *tool, ref adapters.JobRef, o adapters.Observation, now time.Time) {
	if o.Ref != nil {
		// The adapter has learnt the job's own reference (a queued
		// submission has become a job): keep it, with this observation.
		if data, err := json.Marshal(o.Ref); err == nil {
			t.JobRef = data
			t.JobID = o.Ref.ID
			ref = *o.Ref
			b.log.Info("job reference updated", "task", shortKey(t.Key), "job", ref.ID)
		}
	}
	if errors.Is(o.Err, adapters.ErrJobNotFound) || errors.Is(o.Err, adapters.ErrUnreadableStatus) {
		// The job's state cannot be seen: allow the tool's missing grace,
		// saying why, then end the task.
		if t.MissingSince == nil {
			t.MissingSince = &now
		}
		missing := now.Sub(*t.MissingSince)
		t.ObservedAt = &now
		if errors.Is(o.Err, adapters.ErrUnreadableStatus) {
			reason := sanitize(o.Err.Error(), 512)
			if missing >= tl.MissingGrace {
				msg := fmt.Sprintf("the status of job %s on %q could not be read for %s: %s", ref.ID, t.Backend, missing.Round(time.Second), reason)
				setTerminal(t, mapping.StatusFailed, msg, nil, &wireError{Code: -32603, Message: msg})
				return
			}
			t.StatusMessage = fmt.Sprintf("the status of job %s cannot be read (%s so far; the task fails after %s): %s", ref.ID, missing.Round(time.Second), tl.MissingGrace, reason)
			return
		}
		if missing >= tl.MissingGrace {
			msg := fmt.Sprintf("the backend %q no longer reports job %s (missing for %s)", t.Backend, ref.ID, missing.Round(time.Second))
			setTerminal(t, mapping.StatusCompleted, msg, toolResultText(msg+"; its outcome is unknown.", true), nil)
			return
		}
		t.StatusMessage = fmt.Sprintf("job %s is not visible on %s yet (%s)", ref.ID, t.Backend, missing.Round(time.Second))
		return
	}
	t.MissingSince = nil
	t.ObservedAt = &now
	msg := sanitize(o.Message, 1024)
	if p := o.Progress; p != nil && p.Total > 0 && p.Done >= 0 && !o.State.Terminal() {
		// A percentage is shown only while the job runs: for a cancelled or
		// failed job, "done" children are not progress.
		msg = strings.TrimSpace(fmt.Sprintf("%s (%d%%)", msg, int(100*min(p.Done/p.Total, 1))))
	}
	switch o.State {
	case adapters.StateWorking:
		t.Status = mapping.StatusWorking
		t.InputRequests = nil
		if t.CancelRequestedAt != nil && strings.HasPrefix(t.StatusMessage, "cancellation ") {
			// While a cancel is pending, the task keeps saying where it
			// stands (refused and why, not sent yet, sent), with the job's
			// own status after it.
			cancelNote, _, _ := strings.Cut(t.StatusMessage, "; job: ")
			t.StatusMessage = cancelNote + "; job: " + msg
		} else {
			t.StatusMessage = msg
		}
	case adapters.StateInputRequired:
		answered := decodeKeys(t.AnsweredKeys)
		asked := decodeInputs(t.InputRequests)
		open := map[string]storedInput{}
		for k, r := range o.InputRequests {
			if !contains(answered, k) {
				since := now
				if prev, ok := asked[k]; ok && !prev.Since.IsZero() {
					since = prev.Since
				}
				open[k] = storedInput{Message: sanitize(r.Message, 2048), Schema: r.Schema, Job: true, Since: since}
			}
		}
		if len(open) == 0 {
			t.Status = mapping.StatusWorking
			t.InputRequests = nil
			t.StatusMessage = "answers delivered; waiting for the backend"
		} else {
			t.Status = mapping.StatusInputRequired
			t.InputRequests = encodeInputs(open)
			t.StatusMessage = msg
		}
	case adapters.StateSucceeded:
		setTerminal(t, mapping.StatusCompleted, msg, b.toolResultOf(tl, o, ref), nil)
	case adapters.StateToolError:
		if stoppedByCancel(t, o) {
			setTerminal(t, mapping.StatusCancelled, cancelledMessage(t, ref.ID, msg), nil, nil)
			return
		}
		setTerminal(t, mapping.StatusCompleted, msg, b.toolResultOf(tl, o, ref), nil)
	case adapters.StateCancelled:
		setTerminal(t, mapping.StatusCancelled, cancelledMessage(t, ref.ID, msg), nil, nil)
	case adapters.StateFailed:
		code, emsg := failure(o)
		setTerminal(t, mapping.StatusFailed, emsg, nil, &wireError{Code: code, Message: emsg})
	default:
		t.StatusMessage = msg
	}
}

// stoppedByCancel decides whether a job that ended in failure was stopped by
// the task's cancel (the task is then cancelled) or failed on its own (the
// task is completed with the failure, which is then the first terminal state
// the job reached). A cancel stopped the job only if the backend accepted it,
// and, where the backend says when the job finished, only if the job
// finished after the cancel was sent (within finishClockSlack). A cancel the backend answered with
// "already finished" was cleared when the answer came.
func stoppedByCancel(t *mapping.Task, o adapters.Observation) bool {
	if t.CancelRequestedAt == nil || t.CancelSentAt == nil {
		return false
	}
	if o.FinishedAt.IsZero() {
		return true
	}
	sent := *t.CancelSentAt
	if t.CancelForwardedAt != nil && t.CancelForwardedAt.Before(sent) {
		sent = *t.CancelForwardedAt
	}
	// Backends that report whole seconds (GitHub) may put a finish caused
	// by the cancel just before the moment it was sent.
	return !o.FinishedAt.Before(sent.Add(-finishClockSlack))
}

// finishClockSlack is how much earlier than the cancel a backend's finish
// time may read and still count as caused by it.
const finishClockSlack = time.Second

// cancelledMessage is the status message of a cancelled job: the backend's
// message when it says more than that the job was cancelled.
func cancelledMessage(t *mapping.Task, jobID, msg string) string {
	base := fmt.Sprintf("job %s was cancelled", jobID)
	if t.CancelRequestedAt != nil && t.CancelBy == mapping.CancelByOperator {
		base += " by an operator"
	}
	if saysOnlyCancelled(msg) {
		return base
	}
	return base + ": " + msg
}

// saysOnlyCancelled reports whether a backend status message carries nothing
// but status words ("cancelled", "completed: cancelled", "CANCELED").
func saysOnlyCancelled(msg string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return !(r >= 'a' && r <= 'z')
	}) {
		switch w {
		case "cancelled", "canceled", "cancel", "completed", "complete", "terminated", "stopped", "job", "the", "was", "by", "user", "status":
		default:
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
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
		for k, in := range decodeInputs(t.InputRequests) {
			r.InputRequests[k] = elicitationJSON(in.Message, in.Schema)
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
	tl := b.taskTool(t)
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
		if note := g.pauseNote(now); note != "" {
			notes = append(notes, note)
		}
	}
	if len(notes) == 0 {
		return msg
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s)", msg, strings.Join(notes, "; ")))
}

// tasksUpdate answers tasks/update: answers to outstanding input requests are
// recorded, then delivered (a confirmation submits the job; backend questions
// go to the adapter's Responder, once per key). Keys that are not
// outstanding are ignored, as the spec asks.
func (b *Bridge) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if task.Status.Terminal() || len(p.InputResponses) == 0 {
		return newAck(), nil
	}
	var (
		confirmed  bool
		jobAnswers = map[string]adapters.Answer{}
		args       map[string]any
	)
	// A confirmation may submit the job: hold the submission before the row
	// says so (see holdSubmission), and release it if nothing is submitted.
	b.holdSubmission(task.Key)
	updated, err := b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		confirmed, jobAnswers = false, map[string]adapters.Answer{}
		open := decodeInputs(t.InputRequests)
		answered := decodeKeys(t.AnsweredKeys)
		var confirm *elicitAnswer
		for key, raw := range p.InputResponses {
			in, ok := open[key]
			if !ok || contains(answered, key) {
				continue
			}
			a, ok := decodeAnswer(raw)
			if !ok {
				continue
			}
			if in.Job {
				delete(open, key)
				answered = append(answered, key)
				jobAnswers[key] = adapters.Answer{Action: a.Action, Content: a.Content}
			} else if key == confirmKey {
				confirm = &a
			}
		}
		if confirm == nil && len(jobAnswers) == 0 {
			return false
		}
		if confirm != nil {
			switch verdict, why := judgeConfirmation(confirm); verdict {
			case confirmYes:
				json.Unmarshal(t.Args, &args)
				t.InputRequests = nil
				t.SubmittedAt = &now
				t.Phase = mapping.PhaseSubmitting
				t.Status = mapping.StatusWorking
				t.StatusMessage = fmt.Sprintf("confirmed; submitting the job to %s", t.Backend)
				confirmed = true
			case confirmNo:
				setTerminal(t, mapping.StatusCancelled, why+"; no job was submitted", nil, nil)
			default:
				// Not a confirmation: nothing is submitted, and the same
				// question stays open (its wait keeps counting).
				t.StatusMessage = "waiting for the user to confirm: " + why
			}
			return true
		}
		sort.Strings(answered)
		t.AnsweredKeys = encodeKeys(answered)
		t.InputRequests = encodeInputs(open)
		if len(open) == 0 {
			t.Status = mapping.StatusWorking
			t.StatusMessage = "answers received; delivering them to the backend"
		}
		// Observe afresh on the next tasks/get.
		t.ObservedAt = nil
		return true
	})
	submitNow := confirmed && err == nil && updated.Phase == mapping.PhaseSubmitting
	if !submitNow {
		b.releaseSubmission(task.Key)
	}
	if errors.Is(err, errTerminal) {
		return newAck(), nil
	}
	if err != nil {
		b.log.Error("recording answers", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the answers could not be recorded")
	}
	if submitNow {
		if args == nil {
			args = map[string]any{}
		}
		b.startSubmit(updated, args)
	}
	if len(jobAnswers) > 0 {
		b.deliverAnswers(updated, jobAnswers)
	}
	return newAck(), nil
}

// confirmVerdict is what an answer to a confirmation prompt says.
type confirmVerdict int

const (
	confirmUnclear confirmVerdict = iota // ask again
	confirmYes                           // submit the job
	confirmNo                            // end the task, submitting nothing
)

// judgeConfirmation reads an answer to a confirmation prompt. Only an
// accepted form whose confirm field is the boolean true confirms; a decline
// or a cancel ends the task; anything else (confirm missing, false, or not a
// boolean) confirms nothing and the question stays open. why says, in words
// for the user, what the answer was taken to mean.
func judgeConfirmation(a *elicitAnswer) (confirmVerdict, string) {
	switch a.Action {
	case "decline":
		return confirmNo, "the user declined the confirmation"
	case "cancel":
		return confirmNo, "the user dismissed the confirmation"
	}
	switch v, ok := a.Content["confirm"]; {
	case !ok:
		return confirmUnclear, "the answer did not say confirm: true (the box was not ticked); confirm to submit the job, or decline"
	case v == true:
		return confirmYes, ""
	case v == false:
		return confirmUnclear, "the answer said confirm: false; confirm to submit the job, or decline to cancel it"
	default:
		return confirmUnclear, fmt.Sprintf("confirm must be true or false, not %s; confirm to submit the job, or decline", jsonKind(v))
	}
}

// jsonKind names the JSON type of a decoded value, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// deliverAnswers sends answers to the backend. The keys were already marked
// answered by a conditional write, so they are delivered once; if delivery
// fails they are asked again.
func (b *Bridge) deliverAnswers(task *mapping.Task, answers map[string]adapters.Answer) {
	tl := b.taskTool(task)
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
	b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		var keep []string
		for _, k := range decodeKeys(t.AnsweredKeys) {
			if _, failed := answers[k]; !failed {
				keep = append(keep, k)
			}
		}
		t.AnsweredKeys = encodeKeys(keep)
		t.ObservedAt = nil
		t.StatusMessage = "the answers could not be delivered to the backend; they will be asked again"
		return true
	})
}

// tasksCancel answers tasks/cancel: the intent is recorded durably and the
// cancel forwarded downstream once. The ack is the same for terminal tasks.
func (b *Bridge) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if task.Status.Terminal() {
		return newAck(), nil
	}
	var forward bool
	updated, err := b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		forward = false // fn runs again after a conflict
		if t.Phase == mapping.PhaseConfirming {
			setTerminal(t, mapping.StatusCancelled, "cancelled before the job was submitted", nil, nil)
			return true
		}
		if t.CancelRequestedAt != nil {
			// Asked before: forward only if no one has (or a claim is stale).
			forward = b.claimCancel(t, now)
			return forward
		}
		t.CancelRequestedAt = &now
		t.StatusMessage = "cancellation requested"
		forward = b.claimCancel(t, now)
		return true
	})
	if err != nil && !errors.Is(err, errTerminal) {
		b.log.Error("recording cancel", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the cancel could not be recorded")
	}
	if forward {
		b.forwardCancel(updated)
	}
	return newAck(), nil
}

// forwardCancel sends a claimed cancel downstream. If the backend cannot be
// reached, or refuses, the claim is released so that the sweep tries again;
// if the job had already finished, the cancel is dropped and the job's own
// outcome stands.
func (b *Bridge) forwardCancel(task *mapping.Task) {
	tl := b.taskTool(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	release := func(msg string) {
		b.mutate(task, func(t *mapping.Task, now time.Time) bool {
			t.CancelForwardedAt = nil
			t.StatusMessage = cancelNote(t, msg)
			return true
		})
	}
	g := b.gateOf(tl.Backend)
	if ok, until, reason := g.allow(); !ok {
		b.metrics.cancelDeferred(tl.Backend)
		release(fmt.Sprintf("cancellation requested; not sent yet: %s, trying again in %s", reason, ceilSeconds(until.Sub(b.opts.Now()))))
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	err := tl.adapter.Cancel(ctx, ref)
	cancel()
	b.metrics.cancelForwarded(tl.Backend, err)
	switch {
	case errors.Is(err, adapters.ErrAlreadyFinished):
		g.done(nil)
		b.log.Info("cancel came after the job finished", "task", shortKey(task.Key), "job", ref.ID)
		// The job reached its own outcome first: observe it afresh and keep
		// it, not "cancelled".
		b.mutate(task, func(t *mapping.Task, now time.Time) bool {
			t.CancelRequestedAt, t.CancelForwardedAt, t.CancelSentAt = nil, nil, nil
			t.ObservedAt = nil
			t.StatusMessage = fmt.Sprintf("the job had already finished when the cancel reached %s", t.Backend)
			return true
		})
	case errors.Is(err, adapters.ErrCancelRefused):
		g.done(nil)
		b.log.Debug("cancel refused by the backend", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		release(fmt.Sprintf("cancellation requested; %s refused it (%s); it will be tried again", task.Backend, sanitize(err.Error(), 512)))
	case err != nil:
		g.done(err)
		b.log.Debug("forwarding cancel", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		if _, throttled := adapters.RetryAfter(err); throttled {
			release(fmt.Sprintf("cancellation requested; %s is throttling requests, it will be sent again", task.Backend))
		} else {
			release("cancellation requested; the backend could not be reached yet, it will be tried again")
		}
	default:
		g.done(nil)
		b.log.Info("cancel forwarded", "task", shortKey(task.Key), "job", ref.ID)
		// Confirm the forward, and observe afresh on the next tasks/get.
		b.mutate(task, func(t *mapping.Task, now time.Time) bool {
			t.CancelSentAt = &now
			t.ObservedAt = nil
			t.StatusMessage = cancelNote(t, fmt.Sprintf("cancellation sent to %s", t.Backend))
			return true
		})
	}
}

// cancelNote is the status message of a pending cancel, which names an
// operator who asked for it (jobbridge tasks cancel): "cancellation (by an
// operator) sent to ...". Every such note begins with "cancellation ", which
// observations keep in front of the job's own status.
func cancelNote(t *mapping.Task, msg string) string {
	if t.CancelBy != mapping.CancelByOperator {
		return msg
	}
	rest, ok := strings.CutPrefix(msg, "cancellation ")
	if !ok {
		return msg
	}
	return "cancellation (by an operator) " + rest
}

// ceilSeconds rounds a positive wait up to whole seconds, for messages.
func ceilSeconds(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// inputExpired reports whether a task has waited for an answer longer than
// max_input_wait.
func (b *Bridge) inputExpired(t *mapping.Task, now time.Time) bool {
	if t.Status != mapping.StatusInputRequired {
		return false
	}
	for _, in := range decodeInputs(t.InputRequests) {
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
	msg := fmt.Sprintf("no answer within %s (max_input_wait)", b.limits.MaxInputWait)
	if task.Phase == mapping.PhaseConfirming {
		b.finish(task, mapping.StatusCancelled, msg+"; no job was submitted", nil, nil)
		return
	}
	var forward bool
	updated, err := b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		forward = false
		if t.CancelRequestedAt == nil {
			t.CancelRequestedAt = &now
		}
		t.StatusMessage = msg + "; cancelling the job"
		forward = b.claimCancel(t, now)
		return true
	})
	if err == nil && forward {
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
