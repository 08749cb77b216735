package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// compose writes the status message of a live submitted task from its typed
// state: the pending cancel (who asked, where it stands), the job's own
// words, and the observation path's last problem (what, since when, what
// happens next). tl may be nil (what happens next is then not said).
func compose(t *mapping.Task, tl *catalog.Tool, now time.Time) {
	if t.Status.Terminal() || t.Phase != mapping.PhaseSubmitted {
		return
	}
	job := t.JobMessage
	if job == "" {
		job = fmt.Sprintf("job %s submitted to %s", t.JobID, t.Backend)
	}
	msg := job
	if t.CancelRequestedAt != nil {
		msg = cancelNote(t, now) + "; job: " + job
	}
	if !t.Problem.IsZero() && adapters.ProblemClass(t.Problem.Class) != adapters.ProblemThrottled {
		// (Throttling is told at each read by the backend's gate, with the
		// time of the next check.)
		msg += "; " + problemNote(t, tl, now)
	}
	t.StatusMessage = msg
}

// problemNote says what keeps the task from a fresh view of its job, since
// when, and what happens next.
func problemNote(t *mapping.Task, tl *catalog.Tool, now time.Time) string {
	p := t.Problem
	lasted := time.Duration(0)
	if p.Since != nil {
		lasted = now.Sub(*p.Since).Round(time.Second)
	}
	what := problemWords(t, p)
	var sb strings.Builder
	switch adapters.ProblemClass(p.Class) {
	case adapters.ProblemNotFound:
		if t.FirstObservedAt == nil {
			fmt.Fprintf(&sb, "the job is not listed by %s yet (%s so far): %s", t.Backend, lasted, what)
		} else {
			fmt.Fprintf(&sb, "the job vanished from %s (not reported for %s): %s", t.Backend, lasted, what)
		}
	case adapters.ProblemUnmapped:
		fmt.Fprintf(&sb, "%s (a catalog problem, for %s)", what, lasted)
	default:
		if p.Count > 1 {
			fmt.Fprintf(&sb, "checking the job failed (%s, %d calls in a row, for %s): %s", classWords(p.Class), p.Count, lasted, what)
		} else {
			fmt.Fprintf(&sb, "checking the job failed (%s): %s", classWords(p.Class), what)
		}
	}
	if tl == nil {
		return sb.String()
	}
	switch {
	case endsAfterGrace(t, p) && adapters.ProblemClass(p.Class) == adapters.ProblemNotFound && t.FirstObservedAt != nil:
		// What the end will say depends on the adapter's words (a job
		// whose outcome is unknown, a queued request never started); the
		// note promises only when.
		fmt.Fprintf(&sb, "; the task ends in %s unless the job reappears", CeilSeconds(tl.MissingGrace-lasted))
	case endsAfterGrace(t, p):
		fmt.Fprintf(&sb, "; the task fails in %s unless this clears (missing_grace %s)", CeilSeconds(tl.MissingGrace-lasted), tl.MissingGrace)
	case adapters.ProblemClass(p.Class) == adapters.ProblemThrottled:
		sb.WriteString("; asking again when the backend allows")
	default:
		left := t.ExpiresAt.Sub(now).Round(time.Minute)
		fmt.Fprintf(&sb, "; the job was seen before, so the task stays alive and keeps asking every %s (its TTL ends in %s)", tl.RefreshInterval, left)
	}
	return sb.String()
}

// cancelNote says where a pending cancel stands: asked (by whom), sent,
// refused or not answered (why), how many attempts and when the next.
func cancelNote(t *mapping.Task, now time.Time) string {
	by := ""
	if t.CancelBy == mapping.CancelByOperator {
		by = " (by an operator)"
	}
	switch {
	case t.CancelSentAt != nil:
		return fmt.Sprintf("cancellation%s sent to %s", by, t.Backend)
	case !t.CancelProblem.IsZero():
		var sb strings.Builder
		p := t.CancelProblem
		switch adapters.ProblemClass(p.Class) {
		case cancelRefused:
			fmt.Fprintf(&sb, "cancellation%s requested; %s refused it (%s)", by, t.Backend, problemWords(t, p))
		case adapters.ProblemThrottled:
			fmt.Fprintf(&sb, "cancellation%s requested; %s is throttling requests", by, t.Backend)
		case cancelDeferred:
			fmt.Fprintf(&sb, "cancellation%s requested; not sent yet: %s", by, p.Message)
		case adapters.ProblemUnreachable:
			fmt.Fprintf(&sb, "cancellation%s requested; %s could not be reached (%s)", by, t.Backend, problemWords(t, p))
		default:
			fmt.Fprintf(&sb, "cancellation%s requested; %s answered the cancel with an error (%s)", by, t.Backend, problemWords(t, p))
		}
		if t.CancelAttempts > 0 {
			attempts := "attempt"
			if t.CancelAttempts != 1 {
				attempts = "attempts"
			}
			fmt.Fprintf(&sb, "; %d %s", t.CancelAttempts, attempts)
		}
		if t.CancelNextAt != nil {
			fmt.Fprintf(&sb, "; trying again in %s", CeilSeconds(t.CancelNextAt.Sub(now)))
		} else {
			sb.WriteString("; it will be tried again")
		}
		return sb.String()
	case t.CancelBy == mapping.CancelByOperator:
		return "cancellation requested by an operator (jobbridge tasks cancel); the server forwards it to the backend"
	}
	return "cancellation requested"
}
