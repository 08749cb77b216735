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

// The observation of a task's job, polled: through its backend's gate,
// shared between concurrent callers of one task, paced per task after a
// problem (the backoff), and applied through Observed or Unobserved.

// NeedsRefresh reports whether a live task should be brought up to date now:
// an interrupted submission to reconcile, or a stale observation.
func (l *Lifecycle) NeedsRefresh(t *mapping.Task) bool {
	if t.Status.Terminal() {
		return false
	}
	tl := l.toolOf(t)
	now := l.opts.Now()
	switch t.Phase {
	case mapping.PhaseSubmitting:
		if l.isInflight(t.Key) {
			return false
		}
		if l.backedOff(t.Key, now) {
			return false
		}
		// Alone on its store, this process knows that a submission it is
		// not running itself was cut off (by a crash or a restart), and
		// reconciles it at once. With a shared store another replica may be
		// submitting: wait until the submission would have timed out.
		return !l.opts.Shared || now.Sub(t.UpdatedAt) >= l.opts.SubmitTimeout
	case mapping.PhaseSubmitted:
		if tl == nil {
			return false
		}
		if t.ObservedAt != nil && now.Sub(*t.ObservedAt) < l.refreshInterval(t, tl) {
			return false
		}
		if l.backedOff(t.Key, now) {
			return false
		}
		if _, _, paused := l.Gate(tl.Backend).Paused(); paused {
			return false
		}
		return true
	}
	return false
}

// Refresh brings a non-terminal task up to date: it reconciles an interrupted
// submission and observes the backend when the last observation is older
// than the tool's refresh interval. A task that needs neither is returned as
// it is, without another read of its row. Concurrent refreshes of one task
// share one backend call. Refresh waits at most wait for it (zero: until it
// is done); past that it returns the task as it was, and the shared call goes
// on, on the lifecycle's lifetime, for the next poll.
func (l *Lifecycle) Refresh(ctx context.Context, t *mapping.Task, wait time.Duration) *mapping.Task {
	if !l.NeedsRefresh(t) {
		return t
	}
	tl := l.toolOf(t)
	ch := l.polls.DoChan(string(t.Key[:]), func() (any, error) {
		if !l.enter() {
			return nil, errClosed
		}
		defer l.wg.Done()
		// A caller that read the row before the previous shared call
		// finished arrives here after it: read again, and ask the backend
		// only if the observation is still stale.
		cur, err := l.store.Get(l.ctx, t.Key, t.Principal, l.opts.Now())
		if err != nil {
			return nil, err
		}
		if !l.NeedsRefresh(cur) {
			return cur, nil
		}
		if cur.Phase == mapping.PhaseSubmitted {
			claimed, ok := l.claimObservation(cur, tl)
			if !ok {
				return claimed, nil
			}
			// The row the observation wrote is the answer: no read after it.
			if updated := l.observe(claimed); updated != nil {
				return updated, nil
			}
		} else {
			l.reconcile(cur)
		}
		return l.store.Get(l.ctx, t.Key, t.Principal, l.opts.Now())
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
		l.metrics.ObserveBudgetSpent(t.Tool)
	case <-ctx.Done():
	}
	return t
}

// errClosed is returned by work that was not started because the
// lifecycle is closing.
var errClosed = errors.New("the lifecycle is closing")

// enter registers a unit of background work with Close (the caller must call
// l.wg.Done when it ends). It reports false once the lifecycle is closing (Close).
func (l *Lifecycle) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	return true
}

// claimObservation decides whether this replica observes the task's job now
// (see ClaimObservation).
func (l *Lifecycle) claimObservation(t *mapping.Task, tl *Tool) (*mapping.Task, bool) {
	return l.ClaimObservation(t, l.refreshInterval(t, tl))
}

// observe asks the backend about one task's job and applies the answer. It
// returns the row as the observation left it, or nil when it wrote nothing
// it can vouch for (the backend could not be asked, or the write failed).
func (l *Lifecycle) observe(task *mapping.Task) *mapping.Task {
	return l.observeFor(task, false)
}

// observeFor is observe; forEvent says a pushed event asked for the poll,
// which then counts as the job's latest event.
func (l *Lifecycle) observeFor(task *mapping.Task, forEvent bool) *mapping.Task {
	tl := l.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return nil
	}
	g := l.Gate(tl.Backend)
	if ok, _, _ := g.Allow(); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	obs, err := tl.Adapter.Poll(ctx, []adapters.JobRef{ref})
	cancel()
	if err == nil && len(obs) != 1 {
		err = fmt.Errorf("adapter returned %d observations for 1 job", len(obs))
	}
	if l.ctx.Err() != nil {
		g.Done(ErrNotBackendFault)
		return nil
	}
	g.Done(err)
	if err != nil {
		l.unobserved(task, tl, err)
		l.log.Debug("observing job", "task", ShortKey(task.Key), "job", ref.ID, "error", err)
		// The problem is the task's, told to its caller until it clears.
		return l.Unobserved(task, tl.Tool, err, nil)
	}
	if forEvent && observable(obs[0].Err) {
		return l.write(task, tl, ref, obs[0], &time.Time{})
	}
	return l.record(task, tl, ref, obs[0])
}

// unobserved notes that a task's job could not be observed now: the task
// keeps serving its last observation and is not asked about again before
// the tool's refresh interval (the backend's gate may pause longer).
func (l *Lifecycle) unobserved(task *mapping.Task, tl *Tool, err error) {
	if _, throttled := adapters.RetryAfter(err); throttled {
		l.metrics.Throttled(tl.Backend)
	}
	l.setBackoff(task.Key, tl.RefreshInterval)
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
//
//	A job that could not be observed (its Err, see observable)
//
// keeps the last observation, with the problem recorded and told, and a
// new job reference it carries is stored. record returns the row as
// written, or nil when nothing was.
func (l *Lifecycle) record(task *mapping.Task, tl *Tool, ref adapters.JobRef, o adapters.Observation) *mapping.Task {
	if err := o.Err; !observable(err) {
		l.unobserved(task, tl, err)
		// The call answered, but not about this job: the same line as a
		// failed call (see meteredAdapter).
		l.log.Warn("backend call failed", "backend", task.Backend, "operation", "poll", "class", CallOutcome(err), "task", ShortKey(task.Key), "job", ref.ID, "error", err)
		return l.Unobserved(task, tl.Tool, err, o.Ref)
	}
	l.setBackoff(task.Key, o.RetryAfter)
	return l.write(task, tl, ref, o, nil)
}

// recordEvent applies a job event pushed by the backend as record applies
// a poll's observation, and notes when the job's last event came. The
// observation dates from the event's time at (when the backend gave one),
// so that a later event with an earlier time is seen to be stale.
func (l *Lifecycle) recordEvent(task *mapping.Task, tl *Tool, ref adapters.JobRef, o adapters.Observation, at time.Time) *mapping.Task {
	return l.write(task, tl, ref, o, &at)
}

// write applies an observation through the lifecycle, and what follows it:
// a terminal task is forgotten, a cancel it claimed is forwarded. eventAt
// is set for an event: the backend's time of it (zero when not given).
func (l *Lifecycle) write(task *mapping.Task, tl *Tool, ref adapters.JobRef, o adapters.Observation, eventAt *time.Time) *mapping.Task {
	updated, forward := l.Observed(Observation{Task: task, Tool: tl.Tool, Ref: ref, Obs: o, EventAt: eventAt})
	if updated != nil && updated.Status.Terminal() {
		l.Forget(task.Key)
	}
	if forward {
		l.ForwardCancel(updated)
	}
	return updated
}

// Forget drops what this process keeps in memory about a task that has
// ended, so that memory does not grow with the number of tasks served.
func (l *Lifecycle) Forget(k mapping.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.backoff, k)
	delete(l.lookups, k)
}

// backedOff reports whether the task's next backend call (an observation
// or a lookup) must wait still.
func (l *Lifecycle) backedOff(k mapping.Key, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.backoff[k])
}

func (l *Lifecycle) setBackoff(k mapping.Key, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d <= 0 {
		delete(l.backoff, k)
		return
	}
	l.backoff[k] = l.opts.Now().Add(d)
}

// refreshInterval is how old a task's observation may be before it is
// observed again: its tool's refresh interval, or, for a job that has
// received an event while its backend's events flow, the backend's safety
// interval. Rows carry when their last event came, so every replica learns
// that a backend's events flow from the rows it reads.
func (l *Lifecycle) refreshInterval(t *mapping.Task, tl *Tool) time.Duration {
	es := l.events[tl.Backend]
	if es == nil || t.EventAt == nil {
		return tl.RefreshInterval
	}
	es.seen(*t.EventAt)
	if !es.flowing(l.opts.Now()) {
		return tl.RefreshInterval
	}
	return max(tl.RefreshInterval, es.polling.Interval)
}
