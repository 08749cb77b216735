package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// ForwardCancel sends a claimed cancel downstream, through the backend's
// gate, and has the lifecycle record the answer: an accepted cancel is
// confirmed; a job that had already finished keeps its own outcome; a
// refusal, an error or no answer is told and the cancel sent again after a
// growing backoff (CancelAnswered).
func (l *Lifecycle) ForwardCancel(task *mapping.Task) {
	tl := l.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	g := l.Gate(tl.Backend)
	if ok, until, reason := g.Allow(); !ok {
		l.metrics.CancelDeferred(tl.Backend)
		l.CancelDeferred(task, until, reason)
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	err := tl.Adapter.Cancel(ctx, ref)
	cancel()
	l.metrics.CancelForwarded(tl.Backend, err)
	switch {
	case err == nil, errors.Is(err, adapters.ErrAlreadyFinished), errors.Is(err, adapters.ErrCancelRefused):
		g.Done(nil)
	default:
		g.Done(err)
	}
	attempts := l.CancelAnswered(task, err)
	l.metrics.CancelAttempt(tl.Backend, attempts)
	switch {
	case err == nil:
		l.log.Info("cancel forwarded", "task", ShortKey(task.Key), "job", ref.ID, "attempt", attempts)
	case errors.Is(err, adapters.ErrAlreadyFinished):
		l.log.Info("cancel came after the job finished", "task", ShortKey(task.Key), "job", ref.ID)
	default:
		l.log.Debug("forwarding cancel", "task", ShortKey(task.Key), "job", ref.ID, "attempt", attempts, "error", err)
	}
}

// inputExpired reports whether a task has waited for an answer longer than
// max_input_wait.
func (l *Lifecycle) inputExpired(t *mapping.Task, now time.Time) bool {
	if t.Status != mapping.StatusInputRequired || l.opts.MaxInputWait <= 0 {
		return false
	}
	for _, in := range DecodeInputs(t.InputRequests) {
		if !in.Since.IsZero() && now.Sub(in.Since) > l.opts.MaxInputWait {
			return true
		}
	}
	return false
}

// expireInput ends a task nobody answered: a confirmation is cancelled
// before anything was submitted; a waiting job is cancelled downstream.
func (l *Lifecycle) expireInput(task *mapping.Task) {
	l.metrics.InputExpired()
	if updated, forward := l.ExpireInput(task, l.opts.MaxInputWait); forward {
		l.ForwardCancel(updated)
	}
}
