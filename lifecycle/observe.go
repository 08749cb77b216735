package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// ClaimObservation decides whether this process observes the task's job
// now, and returns the row to observe from. With a store that several
// processes share, the one that moves ObservedAt forward by a conditional
// write observes; the others serve the stored observation. Alone on its
// store, the process always observes.
func (l *Lifecycle) ClaimObservation(task *mapping.Task, interval time.Duration) (*mapping.Task, bool) {
	if !l.opts.Shared {
		return task, true
	}
	var claimed bool
	cur, err := l.mutateHeld(task, func(c *mapping.Task, now time.Time) bool {
		claimed = false
		if c.Phase != mapping.PhaseSubmitted || c.ObservedAt != nil && now.Sub(*c.ObservedAt) < interval {
			return false
		}
		c.ObservedAt = &now
		claimed = true
		return true
	})
	if cur == nil {
		cur = task
	}
	return cur, err == nil && claimed
}

// An Observation is one answer about a task's job, polled or pushed.
type Observation struct {
	// Task is the row as read before the backend was asked.
	Task *mapping.Task
	// Tool is the task's tool (its rules: missing grace, refresh).
	Tool *catalog.Tool
	// Ref is the job reference the backend was asked about.
	Ref adapters.JobRef
	// Obs is the backend's answer about the job.
	Obs adapters.Observation
	// EventAt is set for a pushed event: the backend's time of it (zero
	// when it gave none).
	EventAt *time.Time
}

// Observed applies one observation of a task's job through the one
// conditional write every state change takes. A non-terminal event older
// than what the task shows is not applied. It returns the row as written
// (nil when nothing was), and whether this process claimed a pending cancel
// to forward.
func (l *Lifecycle) Observed(ob Observation) (*mapping.Task, bool) {
	var forward bool
	o := ob.Obs
	updated, err := l.mutateHeld(ob.Task, func(t *mapping.Task, now time.Time) bool {
		forward = false
		if ob.EventAt != nil && !o.State.Terminal() && StaleEvent(t, *ob.EventAt) {
			return false // a poll got there first
		}
		l.apply(t, ob.Tool, ob.Ref, o, now)
		if ob.EventAt != nil {
			t.EventAt = &now
			if at := *ob.EventAt; !at.IsZero() && at.Before(now) && t.ObservedAt != nil && t.ObservedAt.Equal(now) {
				t.ObservedAt = &at
			}
		}
		forward = l.claimCancel(t, now)
		return true
	})
	if err != nil && !errors.Is(err, ErrTerminal) {
		l.log.Error("recording observation", "task", ShortKey(ob.Task.Key), "error", err)
		return nil, false
	}
	return updated, forward && err == nil
}

// Unobserved records that the backend could not tell about the task's job:
// the call failed (err), or it answered about this job with a problem
// (adapters.Observation.Err other than a missing job, an unreadable status
// or an unmapped state, which Observed takes). newRef is a new reference the
// answer carried, if any. The problem is kept in the row (class, HTTP
// status, the backend's words, since when, how many calls) and told in the
// status message; a job never observed ends failed after the tool's missing
// grace, a job observed before stays alive within its TTL. It returns the
// row as written, or nil when nothing was.
func (l *Lifecycle) Unobserved(task *mapping.Task, tl *catalog.Tool, err error, newRef *adapters.JobRef) *mapping.Task {
	p := adapters.ProblemOf(err)
	u, werr := l.mutateHeld(task, func(t *mapping.Task, now time.Time) bool {
		if newRef != nil {
			if data, err := json.Marshal(*newRef); err == nil {
				t.JobRef, t.JobID = data, newRef.ID
			}
		}
		if t.Phase != mapping.PhaseSubmitted {
			return newRef != nil
		}
		recordProblem(&t.Problem, p, now)
		if ends, e := l.problemEnds(t, tl, now); ends {
			end(t, e)
			return true
		}
		compose(t, tl, now)
		return true
	})
	if werr != nil && !errors.Is(werr, ErrTerminal) {
		l.log.Error("recording an observation problem", "task", ShortKey(task.Key), "error", werr)
		return nil
	}
	return u
}

// recordProblem makes p the last problem in slot, counting it and keeping
// its start while its class stays the same.
func recordProblem(slot *mapping.Problem, p *adapters.CallError, now time.Time) {
	class := string(p.Class)
	since, count := &now, 1
	if slot.Class == class && slot.Since != nil {
		since, count = slot.Since, slot.Count+1
	}
	msg := p.Message
	if msg == "" && p.Err != nil {
		msg = p.Err.Error()
	}
	*slot = mapping.Problem{
		Class:   class,
		Call:    strings.TrimSpace(p.Method + " " + p.Path),
		Status:  p.Status,
		Message: Clean(msg, 512),
		Since:   since,
		Count:   count,
	}
}

// Clean makes untrusted backend text safe to show: control characters
// other than newline and tab are dropped and the length is capped.
func Clean(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("…")
			break
		}
		if r == '\n' || r == '\t' || r >= 0x20 && r != 0x7f && !(r >= 0x80 && r < 0xa0) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// endsAfterGrace reports whether a task whose observation path has the
// problem p ends after the tool's missing grace (else it lives on within
// its TTL): a status that cannot be read or a state the catalog does not
// map always does (the catalog must change); a failing call does for a job
// never observed (most likely a catalog or credential mistake), not for one
// observed before (a backend outage); throttling never does.
func endsAfterGrace(t *mapping.Task, p mapping.Problem) bool {
	switch adapters.ProblemClass(p.Class) {
	case adapters.ProblemThrottled, "":
		return false
	case adapters.ProblemUnreadable, adapters.ProblemUnmapped, adapters.ProblemNotFound:
		return true
	}
	return t.FirstObservedAt == nil
}

// problemEnds decides whether the task's observation problem ends it now,
// and how.
func (l *Lifecycle) problemEnds(t *mapping.Task, tl *catalog.Tool, now time.Time) (bool, Ending) {
	p := t.Problem
	if tl == nil || p.Since == nil || !endsAfterGrace(t, p) || now.Sub(*p.Since) < tl.MissingGrace {
		return false, Ending{}
	}
	lasted := now.Sub(*p.Since).Round(time.Second)
	what := problemWords(t, p)
	switch {
	case adapters.ProblemClass(p.Class) == adapters.ProblemNotFound && t.FirstObservedAt != nil:
		// The job was seen and is gone: its outcome is unknown, which is
		// the job's result, not the bridge's failure.
		msg := fmt.Sprintf("the backend %q no longer reports job %s (missing for %s)", t.Backend, t.JobID, lasted)
		if p.Message != "" {
			msg += ": " + p.Message
		}
		return true, Completed(msg, l.opts.Results.Text(msg+"; its outcome is unknown.", true))
	case adapters.ProblemClass(p.Class) == adapters.ProblemNotFound:
		return true, Failed(fmt.Sprintf("job %s was never listed by %q (for %s, the tool's missing_grace): %s", t.JobID, t.Backend, lasted, what))
	case adapters.ProblemClass(p.Class) == adapters.ProblemUnmapped:
		return true, Failed(fmt.Sprintf("job %s on %q: %s, for %s (the tool's missing_grace); map it in the tool's states", t.JobID, t.Backend, what, lasted))
	case adapters.ProblemClass(p.Class) == adapters.ProblemUnreadable:
		return true, Failed(fmt.Sprintf("the status of job %s on %q could not be read for %s: %s", t.JobID, t.Backend, lasted, what))
	}
	return true, Failed(fmt.Sprintf("job %s on %q was never observed: its status calls failed for %s (the tool's missing_grace), %d in a row: %s", t.JobID, t.Backend, lasted, p.Count, what))
}

// problemWords says in one phrase what the problem was: the call and its
// answer, and the backend's words.
func problemWords(t *mapping.Task, p mapping.Problem) string {
	var sb strings.Builder
	switch {
	case p.Call != "" && p.Status != 0:
		fmt.Fprintf(&sb, "%s answered %d", p.Call, p.Status)
	case p.Call != "":
		fmt.Fprintf(&sb, "%s got no answer", p.Call)
	case p.Status != 0:
		fmt.Fprintf(&sb, "the backend answered %d", p.Status)
	}
	if p.Message != "" {
		if sb.Len() > 0 {
			sb.WriteString(": ")
		}
		sb.WriteString(p.Message)
	}
	if sb.Len() == 0 {
		return classWords(p.Class)
	}
	return sb.String()
}

// classWords names a problem class in words.
func classWords(class string) string {
	switch adapters.ProblemClass(class) {
	case adapters.ProblemThrottled:
		return "the backend is throttling requests"
	case adapters.ProblemUnreachable:
		return "the backend could not be reached"
	case adapters.ProblemRefused:
		return "the backend refused the call"
	case adapters.ProblemUnreadable:
		return "the backend's answer could not be read"
	case adapters.ProblemNotFound:
		return "the backend does not report the job"
	case adapters.ProblemUnmapped:
		return "the backend reports a state the catalog does not map"
	}
	return "the backend answered with an error"
}

// apply translates one observation into the task's state (in memory).
func (l *Lifecycle) apply(t *mapping.Task, tl *catalog.Tool, ref adapters.JobRef, o adapters.Observation, now time.Time) {
	if o.Ref != nil {
		// The adapter has learnt the job's own reference (a queued
		// submission has become a job): keep it, with this observation.
		if data, err := json.Marshal(o.Ref); err == nil {
			t.JobRef = data
			t.JobID = o.Ref.ID
			ref = *o.Ref
			l.log.Info("job reference updated", "task", ShortKey(t.Key), "job", ref.ID)
		}
	}
	t.ObservedAt = &now
	if errors.Is(o.Err, adapters.ErrNeverStarted) && (!errors.Is(o.Err, adapters.ErrJobNotFound) || t.FirstObservedAt != nil && t.MissingSince != nil && tl != nil && now.Sub(*t.MissingSince) >= tl.MissingGrace) {
		// A queued request the backend cancelled or dropped: no job ran.
		// A cancel the task asked for wins; otherwise the job was not
		// started, which is the tool's result (as for a refused
		// submission), not the bridge's failure.
		words := Words(o.Err)
		if t.CancelRequestedAt != nil {
			end(t, Cancelled(cancelledMessage(t, ref.ID, "the job was never started")))
			return
		}
		text := fmt.Sprintf("The backend %q did not start the job: %s", t.Backend, words)
		end(t, Completed("the job was never started: "+words, l.opts.Results.Text(text, true)))
		return
	}
	if o.Err != nil {
		// The job's state cannot be seen: a missing job, an unreadable
		// status, a state the catalog does not map. Say so at once; end
		// the task when the rules say.
		p := adapters.ProblemOf(o.Err)
		first := t.Problem.Class != string(p.Class)
		recordProblem(&t.Problem, p, now)
		if first && p.Class == adapters.ProblemUnmapped {
			l.log.Warn("catalog problem: the backend reports a state the tool's states do not map", "tool", t.Tool, "backend", t.Backend, "job", ref.ID, "error", Clean(p.Error(), 512))
		}
		if adapters.ProblemClass(t.Problem.Class) == adapters.ProblemNotFound {
			if t.MissingSince == nil {
				t.MissingSince = &now
			}
		}
		if ends, e := l.problemEnds(t, tl, now); ends {
			end(t, e)
			return
		}
		compose(t, tl, now)
		return
	}
	t.MissingSince = nil
	t.Problem = mapping.Problem{}
	if t.FirstObservedAt == nil {
		t.FirstObservedAt = &now
	}
	if state := o.State.String(); t.BackendState != state || t.StateSince == nil {
		t.BackendState, t.StateSince = state, &now
	}
	t.StateSeenAt = &now
	msg := Clean(o.Message, 1024)
	if p := o.Progress; p != nil && p.Total > 0 && p.Done >= 0 && !o.State.Terminal() {
		// A percentage is shown only while the job runs: for a cancelled or
		// failed job, "done" children are not progress.
		msg = strings.TrimSpace(fmt.Sprintf("%s (%d%%)", msg, int(100*min(p.Done/p.Total, 1))))
	}
	switch o.State {
	case adapters.StateWorking:
		t.Status = mapping.StatusWorking
		t.InputRequests = nil
		t.JobMessage = msg
	case adapters.StateInputRequired:
		answered := DecodeKeys(t.AnsweredKeys)
		asked := DecodeInputs(t.InputRequests)
		open := map[string]Input{}
		for k, r := range o.InputRequests {
			if !contains(answered, k) {
				since := now
				if prev, ok := asked[k]; ok && !prev.Since.IsZero() {
					since = prev.Since
				}
				open[k] = Input{Message: Clean(r.Message, 2048), Schema: r.Schema, Job: true, Since: since}
			}
		}
		if len(open) == 0 {
			t.Status = mapping.StatusWorking
			t.InputRequests = nil
			t.JobMessage = "answers delivered; waiting for the backend"
		} else {
			t.Status = mapping.StatusInputRequired
			t.InputRequests = EncodeInputs(open)
			t.JobMessage = msg
		}
	case adapters.StateSucceeded:
		end(t, Completed(msg, l.opts.Results.Result(t, o, ref)))
		return
	case adapters.StateToolError:
		if stoppedByCancel(t, o) {
			end(t, Cancelled(cancelledMessage(t, ref.ID, msg)))
			return
		}
		end(t, Completed(msg, l.opts.Results.Result(t, o, ref)))
		return
	case adapters.StateCancelled:
		end(t, Cancelled(cancelledMessage(t, ref.ID, msg)))
		return
	case adapters.StateFailed:
		if t.CancelRequestedAt != nil && t.CancelSentAt != nil {
			// The backend accepted the task's cancel and then reports the
			// job (or its queued request) failed: the cancel wins.
			end(t, Cancelled(cancelledMessage(t, ref.ID, msg)))
			return
		}
		code, emsg := l.opts.Results.Failure(o)
		end(t, Ending{Status: mapping.StatusFailed, Message: emsg, Error: &Error{Code: code, Message: emsg}})
		return
	default:
		t.JobMessage = msg
	}
	compose(t, tl, now)
}

// stoppedByCancel decides whether a job that ended in failure was stopped by
// the task's cancel (the task is then cancelled) or failed on its own. A
// cancel stopped the job only if the backend accepted it, and, where the
// backend says when the job finished, only if the job finished after the
// cancel was sent (within finishClockSlack).
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
	return !o.FinishedAt.Before(sent.Add(-finishClockSlack))
}

// finishClockSlack is how much earlier than the cancel a backend's finish
// time may read and still count as caused by it (GitHub reports seconds).
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

// StaleEvent reports whether an event of the given time is older than what
// the task shows: its last observation, or its creation when it has none.
func StaleEvent(t *mapping.Task, at time.Time) bool {
	if at.IsZero() {
		return false
	}
	last := t.CreatedAt
	if t.ObservedAt != nil {
		last = *t.ObservedAt
	}
	return at.Before(last)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
