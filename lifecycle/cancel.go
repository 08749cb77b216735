package lifecycle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// Problem classes of a cancel, besides the adapters' ones.
const (
	// cancelRefused: the backend answered that it will not cancel the job
	// now (adapters.ErrCancelRefused).
	cancelRefused = "cancel_refused"
	// cancelDeferred: the cancel was not sent, the backend's gate being
	// closed (throttling, an open breaker).
	cancelDeferred = "deferred"
)

// The backoff of repeated cancels: exponential from cancelBackoffBase,
// with jitter, capped at cancelBackoffMax.
const (
	cancelBackoffBase = 2 * time.Second
	cancelBackoffMax  = 5 * time.Minute
)

// RequestCancel records that by (empty for the task's own client,
// mapping.CancelByOperator for an operator) asked to cancel the task. A task
// still waiting for its confirmation ends cancelled at once, with no job.
// It reports whether this process claimed the cancel's forwarding (only a
// Lifecycle that Forwards does), which the caller then does (see
// CancelAnswered). The first to ask is recorded: a cancel already asked for
// stays its asker's.
func (l *Lifecycle) RequestCancel(task *mapping.Task, by string) (*mapping.Task, bool, error) {
	var forward bool
	u, err := l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		forward = false // fn runs again after a conflict
		if t.Phase == mapping.PhaseConfirming {
			msg := "cancelled before the job was submitted"
			if by == mapping.CancelByOperator {
				msg = "cancelled by an operator (jobbridge tasks cancel) before the job was submitted"
			}
			end(t, Cancelled(msg))
			return true
		}
		if t.CancelRequestedAt != nil {
			// Asked before: forward only if no one has (or a claim is
			// stale).
			forward = l.claimCancel(t, now)
			return forward
		}
		t.CancelRequestedAt = &now
		t.CancelBy = by
		if !l.opts.Forwards {
			// Observed afresh on the server's next sweep, which forwards
			// the cancel.
			t.ObservedAt = nil
		}
		forward = l.claimCancel(t, now)
		if t.Phase == mapping.PhaseSubmitted {
			compose(t, nil, now)
		} else {
			t.StatusMessage = cancelNote(t, now)
		}
		return true
	})
	return u, forward && err == nil, err
}

// ClaimCancel claims the forwarding of a task's pending cancel when it is
// due (see RequestCancel).
func (l *Lifecycle) ClaimCancel(task *mapping.Task) (*mapping.Task, bool) {
	var claimed bool
	cur, err := l.mutateHeld(task, func(c *mapping.Task, now time.Time) bool {
		claimed = l.claimCancel(c, now)
		return claimed
	})
	return cur, err == nil && claimed
}

// CancelDue reports whether a task's pending cancel may be forwarded now:
// asked for, not sent, its next attempt due.
func CancelDue(t *mapping.Task, now time.Time) bool {
	return t.CancelRequestedAt != nil && t.CancelSentAt == nil && t.Phase == mapping.PhaseSubmitted &&
		(t.CancelNextAt == nil || !now.Before(*t.CancelNextAt))
}

// claimCancel marks the cancel of a submitted task as being forwarded, if
// it was requested, is due, and no one forwards it. The conditional write
// that carries the claim makes the forward happen once. A claim that the
// backend never confirmed is taken over when it is stale: left by a process
// that died while forwarding. Alone on its store, this process knows every
// claim older than its own start is such a one.
func (l *Lifecycle) claimCancel(t *mapping.Task, now time.Time) bool {
	if !l.opts.Forwards || !CancelDue(t, now) {
		return false
	}
	if f := t.CancelForwardedAt; f != nil && now.Sub(*f) < l.opts.StaleClaim && (l.opts.Shared || !f.Before(l.opts.Started)) {
		return false
	}
	t.CancelForwardedAt = &now
	return true
}

// CancelDeferred releases a claimed cancel that was not sent because the
// backend's gate is closed until until (reason says why): it is sent again
// then.
func (l *Lifecycle) CancelDeferred(task *mapping.Task, until time.Time, reason string) {
	l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		t.CancelForwardedAt = nil
		t.CancelProblem = mapping.Problem{Class: cancelDeferred, Message: fmt.Sprintf("%s, trying again in %s", reason, CeilSeconds(until.Sub(now)))}
		t.CancelNextAt = &until
		compose(t, nil, now)
		return true
	})
}

// CancelAnswered records the backend's answer to a forwarded cancel (err
// nil: accepted). An accepted cancel is confirmed and the job observed
// afresh; a job that had already finished keeps its own outcome; any other
// answer (refused, an error, no answer) is told in the status message, in
// the backend's words, and the cancel is sent again after a backoff that
// doubles with each attempt (with jitter, capped at 5 minutes) or the pause
// the backend asked for. It returns the number of attempts so far.
func (l *Lifecycle) CancelAnswered(task *mapping.Task, err error) int {
	attempts := 0
	l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		attempts = t.CancelAttempts + 1
		switch {
		case err == nil:
			t.CancelAttempts = attempts
			t.CancelSentAt = &now
			t.CancelProblem, t.CancelNextAt = mapping.Problem{}, nil
			t.ObservedAt = nil // observe afresh on the next tasks/get
		case errors.Is(err, adapters.ErrAlreadyFinished):
			// The job reached its own outcome first: observe it afresh
			// and keep it, not "cancelled".
			t.CancelRequestedAt, t.CancelForwardedAt, t.CancelSentAt, t.CancelNextAt = nil, nil, nil, nil
			t.CancelProblem, t.CancelAttempts = mapping.Problem{}, 0
			t.ObservedAt = nil
			t.JobMessage = fmt.Sprintf("the job had already finished when the cancel reached %s", t.Backend)
		default:
			p := adapters.ProblemOf(err)
			if errors.Is(err, adapters.ErrCancelRefused) {
				p.Class = cancelRefused
			}
			recordProblem(&t.CancelProblem, p, now)
			t.CancelAttempts = attempts
			t.CancelForwardedAt = nil
			wait := Jitter(Backoff(cancelBackoffBase, attempts, cancelBackoffMax))
			if d, throttled := adapters.RetryAfter(err); throttled && d > wait {
				wait = d
			}
			next := now.Add(wait)
			t.CancelNextAt = &next
		}
		compose(t, nil, now)
		return true
	})
	return attempts
}

// ExpireInput ends a task nobody answered within maxWait: a confirmation
// is cancelled before anything was submitted; a waiting job is cancelled
// downstream (the caller forwards the cancel when this reports true).
func (l *Lifecycle) ExpireInput(task *mapping.Task, maxWait time.Duration) (*mapping.Task, bool) {
	msg := fmt.Sprintf("no answer within %s (max_input_wait)", maxWait)
	var forward bool
	u, err := l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		forward = false
		if t.Phase == mapping.PhaseConfirming {
			end(t, Cancelled(msg+"; no job was submitted"))
			return true
		}
		if t.CancelRequestedAt == nil {
			t.CancelRequestedAt = &now
		}
		t.JobMessage = msg + "; cancelling the job"
		forward = l.claimCancel(t, now)
		compose(t, nil, now)
		return true
	})
	return u, forward && err == nil
}

// CancelNow ends a task cancelled at once, as a 2025-11-25 tasks/cancel
// asks, after its cancel was forwarded (or not): its message says what the
// backend answered, so that a job the backend could not stop is not hidden.
// A task that ended first is returned with ErrTerminal.
func (l *Lifecycle) CancelNow(task *mapping.Task) (*mapping.Task, error) {
	return l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		msg := "cancelled at the caller's request"
		switch {
		case t.Phase == mapping.PhaseConfirming:
			msg = "cancelled before the job was submitted"
		case t.CancelSentAt != nil:
			msg += fmt.Sprintf("; the cancel was sent to %s", t.Backend)
		case t.JobRef == nil:
			msg += "; no job had been submitted yet"
		default:
			msg += fmt.Sprintf("; %s has not confirmed the cancel (%s): the job may still run", t.Backend, cancelNote(t, now))
		}
		end(t, Cancelled(msg))
		return true
	})
}

// Backoff is base doubled n-1 times, capped at max.
func Backoff(base time.Duration, n int, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Jitter spreads d over [d/2, d), so that tasks paused together do not
// return together.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}
