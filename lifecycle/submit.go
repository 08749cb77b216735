package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// The submission of a task's job: sent once (again only after a throttling
// answer, which created no job), and reconciled when its outcome is
// unknown, never submitted again.

// HoldSubmission records that this process intends to submit the task's
// job, so that no tasks/get or sweep takes the task for a submission cut off
// by a crash and reconciles it meanwhile. Each hold is released by
// ReleaseSubmission, or by the submission that StartSubmit runs.
func (l *Lifecycle) HoldSubmission(k mapping.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight[k]++
}

// ReleaseSubmission releases a hold of HoldSubmission.
func (l *Lifecycle) ReleaseSubmission(k mapping.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[k]--; l.inflight[k] <= 0 {
		delete(l.inflight, k)
	}
}

// StartSubmit submits the task's job in the background, on the lifecycle's
// lifetime. The caller holds the submission (HoldSubmission); the hold is
// released when the submission ends.
func (l *Lifecycle) StartSubmit(task *mapping.Task, args map[string]any) {
	if !l.goBackground(func() {
		defer l.ReleaseSubmission(task.Key)
		l.submit(task, args)
	}) {
		// Closing: the task stays submitting and the next process
		// reconciles it.
		l.ReleaseSubmission(task.Key)
	}
}

func (l *Lifecycle) isInflight(k mapping.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight[k] > 0
}

// submit sends the one submission of a task and has the lifecycle record its
// outcome. A throttled submission created no job; it is sent again after the
// pause the backend asked for, while the submit timeout allows.
func (l *Lifecycle) submit(task *mapping.Task, args map[string]any) {
	t := l.toolOf(task)
	if t == nil {
		l.End(task, Failed("tool "+task.Tool+" is no longer in the catalog"))
		return
	}
	req := adapters.StartRequest{Tool: task.Tool, Arguments: args, CorrelationID: task.CorrelationID}
	ref, err := l.StartJob(l.ctx, t, req, func(wait time.Duration, reason string) bool {
		// Say why the task waits, and stop if the user cancelled meanwhile.
		return l.SubmitWaiting(task, wait, reason)
	})
	switch {
	case err == nil:
		l.jobStarted(task, ref)
	case errors.Is(err, ErrSubmissionStopped):
		// Cancelled while waiting, or the lifecycle is closing.
	case errors.Is(err, adapters.ErrOutcomeUnknown):
		l.log.Info("submission outcome unknown; reconciling", "task", ShortKey(task.Key), "correlation", task.CorrelationID)
		l.reconcile(task)
	case errors.Is(err, adapters.ErrJobUnaddressable):
		msg := fmt.Sprintf("%s; the job probably exists: look for correlation ID %s on %q and stop it if it should not run", Clean(err.Error(), 1024), task.CorrelationID, task.Backend)
		l.log.Error("backend accepted the job but its answer cannot be used", "task", ShortKey(task.Key), "correlation", task.CorrelationID, "error", err)
		l.End(task, Failed(msg))
	default:
		if _, throttled := adapters.RetryAfter(err); throttled {
			l.log.Info("submission throttled past the submit timeout", "task", ShortKey(task.Key))
		} else {
			l.log.Info("backend refused the job", "task", ShortKey(task.Key), "class", adapters.ProblemOf(err).Class)
		}
		text := Refusal(task.Backend, err)
		l.End(task, Completed(text, l.opts.Results.Text(text, true)))
	}
}

// ErrSubmissionStopped is returned by StartJob when its waiting was stopped.
var ErrSubmissionStopped = errors.New("submission stopped")

// StartJob submits a job once, and again after each throttling answer (which
// certainly created no job) while SubmitTimeout allows, pacing itself by the
// backend's gate. waiting is told of each pause before it begins; returning
// false stops the submission with ErrSubmissionStopped. The last throttling
// error is returned when the time is up.
func (l *Lifecycle) StartJob(ctx context.Context, t *Tool, req adapters.StartRequest, waiting func(wait time.Duration, reason string) bool) (adapters.JobRef, error) {
	deadline := l.opts.Now().Add(l.opts.SubmitTimeout)
	g := l.Gate(t.Backend)
	for attempt := 1; ; attempt++ {
		var wait time.Duration
		var reason string
		if ok, until, why := g.Allow(); !ok {
			wait, reason = until.Sub(l.opts.Now()), why
		} else {
			// The request's own deadline runs on the real clock; the
			// budget is measured on the lifecycle's (Options.Now).
			sctx, cancel := context.WithTimeout(ctx, deadline.Sub(l.opts.Now()))
			ref, err := t.Adapter.Start(sctx, req)
			cancel()
			d, throttled := adapters.RetryAfter(err)
			if !throttled {
				g.Done(nil)
				return ref, err
			}
			g.Done(err)
			l.metrics.Throttled(t.Backend)
			wait = max(d, Jitter(Backoff(time.Second, attempt, 30*time.Second)))
			reason = fmt.Sprintf("the backend %q is throttling submissions", t.Backend)
			if l.opts.Now().Add(wait).After(deadline) {
				return adapters.JobRef{}, &ThrottledStart{After: l.opts.SubmitTimeout, Err: err}
			}
		}
		if l.opts.Now().Add(wait).After(deadline) {
			return adapters.JobRef{}, &ThrottledStart{After: l.opts.SubmitTimeout, Reason: reason, Err: adapters.ErrThrottled}
		}
		if waiting != nil && !waiting(wait, reason) {
			return adapters.JobRef{}, ErrSubmissionStopped
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return adapters.JobRef{}, ErrSubmissionStopped
		case <-timer.C:
		}
	}
}

// jobStarted has the lifecycle store the job reference of a submitted task,
// and forwards a cancel that arrived while the submission was in flight.
func (l *Lifecycle) jobStarted(task *mapping.Task, ref adapters.JobRef) {
	updated, forward, err := l.RecordJob(task, ref)
	if err != nil {
		l.log.Error("recording job", "task", ShortKey(task.Key), "job", ref.ID, "error", err)
		return
	}
	l.mu.Lock()
	delete(l.lookups, task.Key)
	l.mu.Unlock()
	l.log.Info("job submitted", "task", ShortKey(task.Key), "job", ref.ID)
	if forward {
		l.ForwardCancel(updated)
	}
}

// reconcile settles a task whose submission has an unknown outcome: through
// the adapter's Finder where it has one, else as failed with the correlation
// ID, so that an operator can look for the job. It never submits again.
func (l *Lifecycle) reconcile(task *mapping.Task) {
	t := l.toolOf(task)
	msg := fmt.Sprintf("submission outcome unknown: the backend %q may or may not have created the job; look for correlation ID %s", task.Backend, task.CorrelationID)
	if t != nil {
		if f, ok := t.Adapter.(adapters.Finder); ok {
			ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
			req := adapters.StartRequest{Tool: task.Tool, CorrelationID: task.CorrelationID, SubmittedAt: task.CreatedAt}
			if task.SubmittedAt != nil {
				req.SubmittedAt = *task.SubmittedAt
			}
			if len(task.Args) > 0 {
				json.Unmarshal(task.Args, &req.Arguments)
			}
			ref, found, err := f.Find(ctx, req)
			cancel()
			switch {
			case err == nil && found:
				l.log.Info("reconciled: job found", "task", ShortKey(task.Key), "job", ref.ID)
				l.jobStarted(task, ref)
				return
			case err == nil:
				msg = fmt.Sprintf("the job was not created: the backend %q has no job with correlation ID %s", task.Backend, task.CorrelationID)
			case errors.Is(err, adapters.ErrJobUnaddressable):
				// Found, but its reference cannot be used: say so, and how
				// to find the job.
				msg = fmt.Sprintf("%s; the job probably exists: look for correlation ID %s on %q and stop it if it should not run", Clean(err.Error(), 1024), task.CorrelationID, task.Backend)
				l.log.Error("reconciled job cannot be addressed", "task", ShortKey(task.Key), "correlation", task.CorrelationID, "error", err)
			case errors.Is(err, adapters.ErrNotListedYet):
				// Too early to tell: the backend's listing lags. Look again
				// later, with backoff; the adapter decides when its listing
				// has caught up.
				l.log.Info("reconcile: job not listed yet; looking again later", "task", ShortKey(task.Key), "correlation", task.CorrelationID)
				l.lookAgainLater(task, fmt.Sprintf("submission outcome unknown: the job is not listed by %q yet (its listing lags); looking again for correlation ID %s", task.Backend, task.CorrelationID), nil)
				return
			case !errors.Is(err, errors.ErrUnsupported):
				// The lookup itself failed: try again later, unless the task
				// has been unsettled for long.
				if l.opts.Now().Sub(task.CreatedAt) < 10*l.opts.SubmitTimeout {
					l.log.Warn("reconcile lookup failed; will retry", "task", ShortKey(task.Key), "error", err)
					l.lookAgainLater(task, fmt.Sprintf("submission outcome unknown: looking the job up on %q failed (%s); trying again for correlation ID %s", task.Backend, Words(err), task.CorrelationID), err)
					return
				}
				msg = fmt.Sprintf("submission outcome unknown: the backend %q may or may not have created the job, and looking it up kept failing (%s); look for correlation ID %s", task.Backend, Words(err), task.CorrelationID)
			}
		}
	}
	l.Forget(task.Key)
	l.End(task, Failed(msg))
}

// lookAgainLater paces the lookups of a submission whose outcome is not
// settled yet: doubling from LookupBackoff up to 15 times it, per task, with
// jitter, and says in the status message (msg) that the task is still being
// settled, and why (problem: the failed lookup, if one failed).
func (l *Lifecycle) lookAgainLater(task *mapping.Task, msg string, problem error) {
	l.mu.Lock()
	n := l.lookups[task.Key] + 1
	l.lookups[task.Key] = n
	l.mu.Unlock()
	l.setBackoff(task.Key, Jitter(Backoff(l.opts.LookupBackoff, n, 15*l.opts.LookupBackoff)))
	l.Settling(task, msg, problem)
}
