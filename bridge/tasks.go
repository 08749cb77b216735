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
	if p == nil || !declaresTasks(p.Meta) {
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
	return t, nil
}

// tasksGet answers tasks/get: the task's current state, refreshed from the
// backend unless the last observation is recent enough.
func (b *Bridge) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*detailedTaskResult, error) {
	t, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	t = b.refresh(ctx, t)
	return b.detailed(p.TaskID, t), nil
}

// refresh brings a non-terminal task up to date: it reconciles an interrupted
// submission and observes the backend when the last observation is older
// than the tool's refresh interval. Concurrent refreshes of one task share
// one backend call.
func (b *Bridge) refresh(ctx context.Context, t *mapping.Task) *mapping.Task {
	if t.Status.Terminal() {
		return t
	}
	tl := b.tools[t.Tool]
	now := b.opts.Now()
	switch t.Phase {
	case mapping.PhaseSubmitting:
		if b.isInflight(t.Key) || now.Sub(t.UpdatedAt) < b.opts.SubmitTimeout {
			return t
		}
	case mapping.PhaseSubmitted:
		if tl == nil {
			return t
		}
		if t.ObservedAt != nil && now.Sub(*t.ObservedAt) < tl.RefreshInterval {
			return t
		}
		b.mu.Lock()
		wait := b.backoff[t.Key]
		b.mu.Unlock()
		if now.Before(wait) {
			return t
		}
	default:
		return t
	}
	v, _, _ := b.polls.Do(string(t.Key[:]), func() (any, error) {
		// A caller that read the row before the previous shared call
		// finished arrives here after it: read again, and ask the backend
		// only if the observation is still stale.
		if cur, err := b.store.Get(b.ctx, t.Key, t.Principal, b.opts.Now()); err == nil {
			if cur.Status.Terminal() || cur.Phase == mapping.PhaseSubmitted && tl != nil && cur.ObservedAt != nil && b.opts.Now().Sub(*cur.ObservedAt) < tl.RefreshInterval {
				return cur, nil
			}
			t = cur
		}
		switch {
		case t.Phase == mapping.PhaseSubmitting:
			b.reconcile(t)
		case t.Phase == mapping.PhaseSubmitted && b.claimObservation(t, tl):
			b.observe(t)
		}
		cur, err := b.store.Get(b.ctx, t.Key, t.Principal, b.opts.Now())
		if err != nil {
			return nil, err
		}
		return cur, nil
	})
	if cur, ok := v.(*mapping.Task); ok && cur != nil {
		return cur
	}
	return t
}

// claimObservation decides whether this replica observes the task's job now.
// With a store that several replicas share, the replica that moves
// ObservedAt forward by a conditional write observes; the others serve the
// stored observation, so N replicas do not multiply backend calls. Alone on
// its store, the process always observes (singleflight already coalesces).
func (b *Bridge) claimObservation(t *mapping.Task, tl *tool) bool {
	if !b.shared {
		return true
	}
	var claimed bool
	_, err := b.mutate(t, func(c *mapping.Task, now time.Time) bool {
		claimed = false
		if c.Phase != mapping.PhaseSubmitted || c.ObservedAt != nil && now.Sub(*c.ObservedAt) < tl.RefreshInterval {
			return false
		}
		c.ObservedAt = &now
		claimed = true
		return true
	})
	return err == nil && claimed
}

// observe asks the backend about one task's job and applies the answer.
func (b *Bridge) observe(task *mapping.Task) {
	tl := b.tools[task.Tool]
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	obs, err := tl.adapter.Poll(ctx, []adapters.JobRef{ref})
	cancel()
	if err == nil && len(obs) != 1 {
		err = fmt.Errorf("adapter returned %d observations for 1 job", len(obs))
	}
	if err == nil && obs[0].Err != nil && !errors.Is(obs[0].Err, adapters.ErrJobNotFound) {
		err = obs[0].Err
	}
	if err != nil {
		// The backend could not be asked: keep serving the last observation
		// and do not ask again before the refresh interval.
		b.log.Warn("observing job", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		b.setBackoff(task.Key, tl.RefreshInterval)
		return
	}
	o := obs[0]
	b.setBackoff(task.Key, o.RetryAfter)
	var forward bool
	updated, err := b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		b.apply(t, tl, ref, o, now)
		forward = claimCancel(t, now, b.staleClaim())
		return true
	})
	if err != nil && !errors.Is(err, errTerminal) {
		b.log.Error("recording observation", "task", shortKey(task.Key), "error", err)
		return
	}
	if forward && err == nil {
		b.forwardCancel(updated)
	}
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
	if errors.Is(o.Err, adapters.ErrJobNotFound) {
		if t.MissingSince == nil {
			t.MissingSince = &now
		}
		missing := now.Sub(*t.MissingSince)
		if missing >= tl.MissingGrace {
			msg := fmt.Sprintf("the backend %q no longer reports job %s (missing for %s)", t.Backend, ref.ID, missing.Round(time.Second))
			setTerminal(t, mapping.StatusCompleted, msg, toolResultText(msg+"; its outcome is unknown.", true), nil)
			return
		}
		t.StatusMessage = fmt.Sprintf("job %s is not visible on %s yet (%s)", ref.ID, t.Backend, missing.Round(time.Second))
		t.ObservedAt = &now
		return
	}
	t.MissingSince = nil
	t.ObservedAt = &now
	msg := sanitize(o.Message, 1024)
	if p := o.Progress; p != nil && p.Total > 0 && p.Done >= 0 {
		msg = strings.TrimSpace(fmt.Sprintf("%s (%d%%)", msg, int(100*min(p.Done/p.Total, 1))))
	}
	switch o.State {
	case adapters.StateWorking:
		t.Status = mapping.StatusWorking
		t.InputRequests = nil
		t.StatusMessage = msg
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
		setTerminal(t, mapping.StatusCompleted, msg, toolResultJSON(o, ref, b.limits.MaxResultBytes), nil)
	case adapters.StateToolError:
		if t.CancelRequestedAt != nil {
			// A job that fails after we asked to stop it was stopped.
			setTerminal(t, mapping.StatusCancelled, cancelledMessage(msg), nil, nil)
			return
		}
		setTerminal(t, mapping.StatusCompleted, msg, toolResultJSON(o, ref, b.limits.MaxResultBytes), nil)
	case adapters.StateCancelled:
		setTerminal(t, mapping.StatusCancelled, cancelledMessage(msg), nil, nil)
	case adapters.StateFailed:
		code, emsg := failure(o)
		setTerminal(t, mapping.StatusFailed, emsg, nil, &wireError{Code: code, Message: emsg})
	default:
		t.StatusMessage = msg
	}
}

func cancelledMessage(msg string) string {
	if msg == "" {
		return "cancelled"
	}
	return "cancelled: " + msg
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
	case mapping.StatusWorking:
		if t.ObservedAt != nil && t.Phase == mapping.PhaseSubmitted {
			if tl := b.tools[t.Tool]; tl != nil {
				age := b.opts.Now().Sub(*t.ObservedAt)
				if age > 2*tl.RefreshInterval+time.Second {
					r.StatusMessage = strings.TrimSpace(fmt.Sprintf("%s (as of %s ago)", r.StatusMessage, age.Round(time.Second)))
				}
			}
		}
	}
	return r
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
		confirm    *elicitAnswer
		jobAnswers = map[string]adapters.Answer{}
		args       map[string]any
	)
	updated, err := b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		confirm, jobAnswers = nil, map[string]adapters.Answer{}
		open := decodeInputs(t.InputRequests)
		answered := decodeKeys(t.AnsweredKeys)
		for key, raw := range p.InputResponses {
			in, ok := open[key]
			if !ok || contains(answered, key) {
				continue
			}
			a, ok := decodeAnswer(raw)
			if !ok {
				continue
			}
			delete(open, key)
			answered = append(answered, key)
			if in.Job {
				jobAnswers[key] = adapters.Answer{Action: a.Action, Content: a.Content}
			} else if key == confirmKey {
				confirm = &a
			}
		}
		if confirm == nil && len(jobAnswers) == 0 {
			return false
		}
		sort.Strings(answered)
		t.AnsweredKeys = encodeKeys(answered)
		t.InputRequests = encodeInputs(open)
		if confirm != nil {
			if confirm.Action != "accept" || confirm.Content["confirm"] == false {
				setTerminal(t, mapping.StatusCancelled, fmt.Sprintf("the user %s the confirmation; no job was submitted", pastTense(confirm.Action, confirm.Content)), nil, nil)
				return true
			}
			json.Unmarshal(t.Args, &args)
			t.Phase = mapping.PhaseSubmitting
			t.Status = mapping.StatusWorking
			t.StatusMessage = fmt.Sprintf("confirmed; submitting the job to %s", t.Backend)
			return true
		}
		if len(open) == 0 {
			t.Status = mapping.StatusWorking
			t.StatusMessage = "answers received; delivering them to the backend"
		}
		// Observe afresh on the next tasks/get.
		t.ObservedAt = nil
		return true
	})
	if errors.Is(err, errTerminal) {
		return newAck(), nil
	}
	if err != nil {
		b.log.Error("recording answers", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the answers could not be recorded")
	}
	if confirm != nil && updated.Phase == mapping.PhaseSubmitting {
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

func pastTense(action string, content map[string]any) string {
	switch {
	case action == "accept" && content["confirm"] == false:
		return "did not confirm"
	case action == "decline":
		return "declined"
	default:
		return "cancelled"
	}
}

// deliverAnswers sends answers to the backend. The keys were already marked
// answered by a conditional write, so they are delivered once; if delivery
// fails they are asked again.
func (b *Bridge) deliverAnswers(task *mapping.Task, answers map[string]adapters.Answer) {
	tl := b.tools[task.Tool]
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
	b.log.Warn("delivering answers", "task", shortKey(task.Key), "job", ref.ID, "error", err)
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
			forward = claimCancel(t, now, b.staleClaim())
			return forward
		}
		t.CancelRequestedAt = &now
		t.StatusMessage = "cancellation requested"
		forward = claimCancel(t, now, b.staleClaim())
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
// reached, the claim is released so that the sweep tries again.
func (b *Bridge) forwardCancel(task *mapping.Task) {
	tl := b.tools[task.Tool]
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
	err := tl.adapter.Cancel(ctx, ref)
	cancel()
	if err != nil {
		b.log.Warn("forwarding cancel", "task", shortKey(task.Key), "job", ref.ID, "error", err)
		b.mutate(task, func(t *mapping.Task, now time.Time) bool {
			t.CancelForwardedAt = nil
			t.StatusMessage = "cancellation requested; the backend could not be reached yet"
			return true
		})
		return
	}
	b.log.Info("cancel forwarded", "task", shortKey(task.Key), "job", ref.ID)
	// Confirm the forward, and observe afresh on the next tasks/get.
	b.mutate(task, func(t *mapping.Task, now time.Time) bool {
		t.CancelSentAt = &now
		t.ObservedAt = nil
		t.StatusMessage = fmt.Sprintf("cancellation sent to %s", t.Backend)
		return true
	})
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
	b.metrics.add("input_wait")
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
		forward = claimCancel(t, now, b.staleClaim())
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

// sweepLoop runs the background sweep until the bridge closes.
func (b *Bridge) sweepLoop() {
	defer b.wg.Done()
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

// sweep purges expired tasks, reconciles interrupted submissions, retries
// unforwarded cancels and observes live tasks that no client is polling, so
// that an outcome is captured before a backend forgets the job.
func (b *Bridge) sweep() {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.SweepInterval)
	defer cancel()
	if n, err := b.store.PurgeExpired(ctx, b.opts.Now()); err != nil {
		b.log.Warn("purging expired tasks", "error", err)
	} else if n > 0 {
		b.log.Info("purged expired tasks", "count", n)
	}
	var live []*mapping.Task
	var err error
	if c, ok := b.store.(liveClaimer); ok {
		// Shared store: take a lease on a share of the live tasks. The store
		// uses the database clock for leases.
		live, err = c.ClaimLive(ctx, b.replica, time.Time{}, b.opts.SweepLease, 100)
	} else {
		live, err = b.store.ListLive(ctx, b.opts.Now(), 500)
	}
	if err != nil {
		b.log.Warn("listing live tasks", "error", err)
		return
	}
	now := b.opts.Now()
	for _, t := range live {
		if b.ctx.Err() != nil {
			return
		}
		if b.inputExpired(t, now) {
			b.expireInput(t)
			continue
		}
		switch {
		case t.Phase == mapping.PhaseSubmitting:
			b.refresh(ctx, t)
		case t.Phase == mapping.PhaseSubmitted && t.CancelRequestedAt != nil && t.CancelSentAt == nil:
			var claimed bool
			cur, err := b.mutate(t, func(c *mapping.Task, now time.Time) bool {
				claimed = claimCancel(c, now, b.staleClaim())
				return claimed
			})
			if err == nil && claimed {
				b.forwardCancel(cur)
			}
		case t.Phase == mapping.PhaseSubmitted && (t.ObservedAt == nil || now.Sub(*t.ObservedAt) >= b.opts.SweepObserveAge):
			b.refresh(ctx, t)
		}
	}
}
