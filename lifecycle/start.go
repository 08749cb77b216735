package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// ThrottledStart is the error of a submission the backend kept throttling
// past the submit timeout: no job was created.
type ThrottledStart struct {
	// After is the submit timeout that ran out.
	After time.Duration
	// Reason says why the submission waited when the gate paused it.
	Reason string
	// Err is the last throttling answer (it wraps adapters.ErrThrottled).
	Err error
}

func (e *ThrottledStart) Error() string {
	return fmt.Sprintf("the backend kept throttling submissions for %s, the submit timeout; no job was created", e.After)
}

// Unwrap returns the last throttling answer.
func (e *ThrottledStart) Unwrap() error { return e.Err }

// Words is the backend's own words about a failed call, in one phrase: the
// call and its answer and the message (adapters.ProblemOf), cleaned and
// capped.
func Words(err error) string {
	p := adapters.ProblemOf(err)
	if p == nil {
		return ""
	}
	return Clean(p.Error(), 1024)
}

// Refusal says in one sentence that the backend did not start the job, in
// the backend's words, and what to do: `The backend "slurm" did not start
// the job: POST /jobs answered 500: an expired or rejected token. Check
// the credentials ...`.
func Refusal(backend string, err error) string {
	words := Words(err)
	if ts, ok := err.(*ThrottledStart); ok {
		words = fmt.Sprintf("it kept throttling submissions for %s (the submit timeout), so no job was created", ts.After)
	}
	p := adapters.ProblemOf(err)
	return fmt.Sprintf("The backend %q did not start the job: %s. %s", backend, strings.TrimRight(words, ". "), advice(p.Class))
}

// advice says what to do after a refused submission of a problem class.
func advice(class adapters.ProblemClass) string {
	switch class {
	case adapters.ProblemThrottled:
		return "Call again later."
	case adapters.ProblemRefused:
		return "No job was created; the server's credentials for this backend need checking by its operator."
	case adapters.ProblemUnreachable:
		return "No job was created; call again once the backend can be reached."
	case adapters.ProblemUnreadable:
		return "The backend's answer could not be read as the catalog says; its operator should check the tool's start block."
	}
	return "No job was created; check the arguments and call again, or ask the backend's operator."
}

// CallOutcome classifies an adapter call's error into a bounded set of
// outcomes (the outcome label of the backend metrics, the class of a
// failed call's log line). The adapters' sentinels come first: an outcome-unknown error
// may also wrap a deadline.
func CallOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, adapters.ErrThrottled):
		return "throttled"
	case errors.Is(err, adapters.ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, adapters.ErrJobUnaddressable):
		return "unaddressable"
	case errors.Is(err, adapters.ErrAlreadyFinished):
		return "already_finished"
	case errors.Is(err, adapters.ErrCancelRefused):
		return "refused"
	case errors.Is(err, adapters.ErrNotListedYet):
		return "not_listed_yet"
	case errors.Is(err, errors.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
