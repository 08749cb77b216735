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
	answer := b.lc.Refresh(ctx, t, b.opts.ObserveBudget)
	b.metrics.servedTasksGet(t.Tool, t, answer)
	return b.detailed(p.TaskID, answer), nil
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
	if note := b.lc.Gate(tl.Backend).PauseNote(now); note != "" {
		notes = append(notes, note)
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
	// says so (see lifecycle.HoldSubmission), and release it if nothing is submitted.
	b.lc.HoldSubmission(task.Key)
	a, err := b.lc.Answer(task, answers)
	submitNow := a.Confirmed && err == nil && a.Task.Phase == mapping.PhaseSubmitting
	if !submitNow {
		b.lc.ReleaseSubmission(task.Key)
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
		b.lc.StartSubmit(a.Task, args)
	}
	if len(a.Job) > 0 {
		b.lc.DeliverAnswers(a.Task, a.Job)
	}
	return newAck(), nil
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
		b.lc.ForwardCancel(updated)
	}
	return newAck(), nil
}

// liveClaimer is implemented by stores that several replicas share: the
// lifecycle's sweep claims leases on live tasks through it. New takes it to
// mean that the store is shared, and the metered store keeps it.
type liveClaimer interface {
	ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error)
}

// ownerReleaser is implemented by shared stores that can free every sweep
// lease an owner holds (the lifecycle's sweep does, at its start); the
// metered store keeps it.
type ownerReleaser interface {
	ReleaseOwner(ctx context.Context, owner string) error
}
