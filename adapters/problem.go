package adapters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// ProblemClass says what kind of problem kept a backend call from giving
// what was asked. The bridge tells the caller the class, in words, with the
// backend's own; it also labels metrics and logs with it.
type ProblemClass string

// The problem classes of a backend call.
const (
	// ProblemThrottled: the backend asked to be called less often (a 429, a
	// rate-limit 403, TooManyRequestsException). See [ErrThrottled].
	ProblemThrottled ProblemClass = "throttled"
	// ProblemUnreachable: no answer arrived (the connection was refused or
	// reset, the name did not resolve, the call timed out).
	ProblemUnreachable ProblemClass = "unreachable"
	// ProblemRefused: the backend refused the caller (an HTTP 401 or 403
	// that is not throttling: a token expired or lacking a permission).
	ProblemRefused ProblemClass = "refused"
	// ProblemUnreadable: the backend answered, but the answer cannot be
	// read as configured (HTML where JSON was expected, the status field
	// missing). See [ErrUnreadableStatus].
	ProblemUnreadable ProblemClass = "unreadable"
	// ProblemNotFound: the backend does not know the job (or the path).
	// See [ErrJobNotFound].
	ProblemNotFound ProblemClass = "not_found"
	// ProblemUnmapped: the backend reports a state value the catalog maps
	// onto no task state. See [ErrUnmappedState].
	ProblemUnmapped ProblemClass = "unmapped_state"
	// ProblemError: any other answer (a 5xx, an outcome rule with
	// `is: error`).
	ProblemError ProblemClass = "error"
)

// ErrUnmappedState is reported in Observation.Err when the backend reports a
// state value that the configuration maps onto no [State]. Its text (or
// the [CallError]'s Message) names the value and the values that are
// mapped, so that the caller and the operator see the catalog's mistake.
var ErrUnmappedState = errors.New("the backend reports a state the configuration does not map")

// ErrNeverStarted is reported in Observation.Err when the backend will never
// start the job: its queued request was cancelled (by the task's cancel or
// by the backend) or dropped before a job existed. The bridge ends the task
// cancelled when a cancel was asked for, else completed with isError saying
// the job was never started, as for a refused submission.
var ErrNeverStarted = errors.New("the backend never started the job")

// CallError is a backend call that was answered otherwise than asked, or
// not answered at all. Adapters return it (in Observation.Err, or from
// Start, Cancel, Respond and Find), wrapping the sentinel that applies
// ([ErrJobNotFound], [ErrThrottled], [ErrUnreadableStatus], ...), so that
// the bridge can tell the caller what happened in the backend's own words
// and decide what happens next from typed fields, never from the text.
//
// It carries no secret: Path is the request's path without its query, and
// Message is an outcome rule's message or a redacted, size-capped excerpt
// of the answer.
type CallError struct {
	// Class is the kind of problem.
	Class ProblemClass
	// Method is the HTTP method ("GET") or the API operation
	// ("DescribeJobs") of the call; empty when not known.
	Method string
	// Path is the request path without query or host ("/jobs/104"); empty
	// for an API operation or when not known.
	Path string
	// Status is the HTTP status of the answer; zero when none arrived.
	Status int
	// Message is the backend's own words: the message of the outcome rule
	// that matched, or a redacted, size-capped excerpt of the answer, or
	// (for an unanswered call) what went wrong on the way.
	Message string
	// Err is the cause; errors.Is sees through it to the sentinels.
	Err error
}

// Error says in one sentence what was called, what came back and the
// backend's words: `GET /jobs/104 answered 500: an expired or rejected
// token`.
func (e *CallError) Error() string {
	var sb strings.Builder
	call := strings.TrimSpace(e.Method + " " + e.Path)
	switch {
	case call != "" && e.Status != 0:
		fmt.Fprintf(&sb, "%s answered %d", call, e.Status)
	case call != "":
		fmt.Fprintf(&sb, "%s got no answer", call)
	case e.Status != 0:
		fmt.Fprintf(&sb, "the backend answered %d", e.Status)
	}
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg != "" {
		if sb.Len() > 0 {
			sb.WriteString(": ")
		}
		sb.WriteString(msg)
	}
	if sb.Len() == 0 {
		return string(e.Class)
	}
	return sb.String()
}

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// ProblemOf describes err as a CallError: the one err wraps, or one made
// from the sentinels err wraps, with err's text as its Message. It returns
// nil for a nil err.
func ProblemOf(err error) *CallError {
	if err == nil {
		return nil
	}
	var ce *CallError
	if errors.As(err, &ce) {
		c := *ce
		if c.Class == "" {
			c.Class = classOf(err)
		}
		return &c
	}
	return &CallError{Class: classOf(err), Message: err.Error(), Err: err}
}

func classOf(err error) ProblemClass {
	switch {
	case errors.Is(err, ErrThrottled):
		return ProblemThrottled
	case errors.Is(err, ErrJobNotFound):
		return ProblemNotFound
	case errors.Is(err, ErrUnmappedState):
		return ProblemUnmapped
	case errors.Is(err, ErrUnreadableStatus):
		return ProblemUnreadable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrOutcomeUnknown):
		return ProblemUnreachable
	}
	return ProblemError
}

// NotSent reports whether err, the error of an HTTP request, happened before
// a connection to the server existed (the name did not resolve, the
// connection was refused or could not be made), so that the request
// certainly did not reach the server. It is the one rule behind
// [ErrOutcomeUnknown]: a submission that failed otherwise may have
// arrived.
func NotSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
