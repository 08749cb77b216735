// Package adapters defines the contract between the bridge and a backend job
// system, in the manner of database/sql/driver: a small required interface
// ([Adapter]) and optional interfaces ([Responder], [Finder], [Batcher],
// [EventSource]) that the bridge discovers by type assertion.
//
// An adapter translates. It starts a job, observes jobs and maps the backend's
// status onto one of six [State] values, and forwards cancellation. It keeps no
// durable state of its own: everything it needs to address a job later lives in
// the [JobRef] it returns from Start, which the bridge stores as opaque bytes.
//
// Adapters never import the bridge or the mapping store.
package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// Adapter is implemented by each backend (the REST job API, AWS Batch, GitHub
// Actions). All methods must be safe for concurrent use by multiple goroutines,
// and must honour ctx's deadline and cancellation.
type Adapter interface {
	// Start submits exactly one job for req.
	//
	// Start must not re-send a submission that may have reached the backend.
	// When the outcome is unknown (a timeout, a reset connection, a 5xx after
	// the request was written), Start returns an error wrapping
	// [ErrOutcomeUnknown] and the bridge reconciles, through [Finder] where the
	// adapter has one. When the backend accepted the submission but its answer
	// gives no usable reference to the job, Start returns an error wrapping
	// [ErrJobUnaddressable]. When the backend refused it for throttling, the
	// error wraps [ErrThrottled] (see [ThrottledError]) and the bridge may
	// submit again later. Any other error means the job was certainly not
	// created; its text should carry the backend's own reason (redacted and
	// size-capped), because the bridge shows it to the caller.
	Start(ctx context.Context, req StartRequest) (JobRef, error)

	// Poll observes the given jobs and returns one Observation per ref, in the
	// same order. An adapter that can ask about many jobs in one backend call
	// does so. A non-nil error means nothing could be observed this time (the
	// backend is down or throttling: wrap [ErrThrottled] then, so that the
	// bridge pauses every call to the backend); the bridge keeps serving its
	// last observation. A problem with one job only is reported in that job's
	// Observation.Err.
	Poll(ctx context.Context, refs []JobRef) ([]Observation, error)

	// Cancel asks the backend to stop the job. Cancellation is cooperative and
	// eventually consistent: the job may still finish in another state.
	//
	// A job that has already finished is not a failure to cancel: Cancel
	// returns nil, or, when the backend says so (an HTTP 409 for a finished
	// job, a run that is already completed), an error wrapping
	// [ErrAlreadyFinished], so that the bridge keeps the job's own outcome
	// instead of calling it cancelled. A backend that refuses to stop a job
	// that is still running returns an error wrapping [ErrCancelRefused]; any
	// other error means the backend could not be asked, and the bridge asks
	// again later.
	Cancel(ctx context.Context, ref JobRef) error
}

// Responder is implemented by adapters whose backend can ask questions while a
// job runs (reported as [StateInputRequired] observations). Respond delivers
// the answers the client gave through tasks/update. The bridge calls it at most
// once per answered key.
type Responder interface {
	Respond(ctx context.Context, ref JobRef, answers map[string]Answer) error
}

// Finder is implemented by adapters that can look a job up by the correlation
// ID it was submitted with. The bridge uses it to reconcile a submission whose
// outcome is unknown (for example after a crash between submitting and
// recording the job reference). found is false with a nil error only when the
// backend provably has no such job.
//
// Backends list a new job some time after they accept it (GitHub's run
// listing lags a dispatch by seconds, Batch's ListJobs too). So Find must not
// conclude "not found" before the backend's listing lag (configurable per
// backend, at least a minute by default) has passed since req.SubmittedAt:
// until then a search that finds nothing returns an error wrapping
// [ErrNotListedYet], and the bridge searches again later, with backoff.
type Finder interface {
	Find(ctx context.Context, req StartRequest) (ref JobRef, found bool, err error)
}

// Batcher is implemented by adapters that say how many jobs one Poll call
// should carry: the most one backend call answers about (AWS Batch's
// DescribeJobs takes 100 IDs), or a size that keeps one Poll within the
// backend's pace. The bridge's background sweep groups the jobs it observes
// in Poll calls of at most BatchSize refs; without Batcher, or for a size of
// zero or less, it uses 50.
type Batcher interface {
	BatchSize() int
}

// ErrOutcomeUnknown is wrapped by a Start error when the submission may or may
// not have created a job. It must not be used when the backend certainly did
// not act on the request.
var ErrOutcomeUnknown = errors.New("submission outcome unknown")

// ErrJobNotFound is reported in Observation.Err when the backend does not know
// the job (an HTTP 404, or an ID missing from a batched answer). The bridge
// allows a bounded grace before it treats the job as gone.
var ErrJobNotFound = errors.New("backend does not report the job")

// ErrNotListedYet is wrapped by a Find error when no job carries the
// correlation ID yet, but the submission is too recent for that to prove
// anything: the backend's listing may still catch up.
var ErrNotListedYet = errors.New("no such job is listed yet; the backend's listing may lag the submission")

// ErrUnreadableStatus is reported in Observation.Err when the backend
// answered about the job but the answer cannot be read as configured (the
// status field is missing or not a string or number). The error's text says
// what is wrong, in words for the caller; the bridge shows it in the task's
// status message and, if it persists past the tool's missing grace, ends the
// task failed with it.
var ErrUnreadableStatus = errors.New("the backend's status answer cannot be read")

// ErrJobUnaddressable is wrapped by a Start error when the backend accepted
// the submission, so that a job very likely exists, but its answer gives no
// reference the adapter can use (the job ID is not where the configuration
// says, or it would address something outside the backend). The error's text
// names what was wrong, the HTTP status and a redacted excerpt of the answer.
// The bridge ends the task failed with it and the correlation ID, so that an
// operator can find and stop the job; it never submits again.
var ErrJobUnaddressable = errors.New("the backend accepted the job but its answer does not say how to address it")

// ErrThrottled is wrapped by an error when the backend refused a request
// because too many were sent (an HTTP 429, a rate-limit 403, AWS's
// TooManyRequestsException). A throttled Start certainly created no job.
// Wrap it in a [ThrottledError] when the backend said how long to wait.
var ErrThrottled = errors.New("the backend is throttling requests")

// ErrAlreadyFinished is wrapped by a Cancel error when the backend answered
// that the job had already finished before the cancel reached it.
var ErrAlreadyFinished = errors.New("the job had already finished")

// ErrCancelRefused is wrapped by a Cancel error when the backend refused to
// stop a job that is still running (for example an HTTP 409 or 403 while the
// status call still reports it working). The error's text carries the
// backend's reason.
var ErrCancelRefused = errors.New("the backend refused to cancel the job")

// ThrottledError is a throttling answer with the pause the backend asked for
// (Retry-After, a rate-limit reset). It wraps [ErrThrottled].
type ThrottledError struct {
	// RetryAfter is how long the backend asked callers to wait; zero when it
	// did not say.
	RetryAfter time.Duration
	// Err is the underlying error, with the backend's message.
	Err error
}

func (e *ThrottledError) Error() string {
	msg := ErrThrottled.Error()
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter.Round(time.Second))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrThrottled and the underlying error.
func (e *ThrottledError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrThrottled}
	}
	return []error{ErrThrottled, e.Err}
}

// RetryAfter reports the pause a throttling error asked for. ok is false when
// err does not wrap [ErrThrottled]; d is zero when the backend did not say.
func RetryAfter(err error) (d time.Duration, ok bool) {
	if !errors.Is(err, ErrThrottled) {
		return 0, false
	}
	var te *ThrottledError
	if errors.As(err, &te) {
		return te.RetryAfter, true
	}
	return 0, true
}

// StartRequest is what the bridge asks an adapter to submit.
type StartRequest struct {
	// Tool is the catalog name of the tool being called.
	Tool string
	// Arguments are the tool arguments, already validated against the tool's
	// input schema.
	Arguments map[string]any
	// CorrelationID is a bridge-generated identifier the adapter attaches to
	// the job (a job name, a dispatch input, an idempotency header) so it can
	// be found again. It is never the task ID: task IDs are bearer secrets and
	// backends show job names to anyone with list rights.
	CorrelationID string
	// SubmittedAt, in a Find request, is when the submission was (or may
	// have been) sent; it is no earlier than the real moment. Zero means
	// unknown: assume it was just now.
	SubmittedAt time.Time
}

// JobRef addresses one backend job. The bridge and the store treat it as
// opaque; only the adapter that created it reads Data.
type JobRef struct {
	// ID is the backend's own identifier for the job, shown to people in
	// status messages (a Batch job ID, a workflow run ID, a REST job ID).
	ID string `json:"id"`
	// Data is adapter-owned state needed to address the job later, such as a
	// status URL. It must be valid JSON when set.
	Data json.RawMessage `json:"data,omitempty"`
}

// State is a backend job's state, already translated by the adapter.
type State int

// The states an adapter reports. They map onto the five MCP task states:
// StateSucceeded and StateToolError are both the task state "completed" (the
// latter with isError set); StateFailed is reserved for errors at the protocol
// or bridge level, never for a job that ran and failed.
const (
	StateWorking State = iota + 1
	StateInputRequired
	StateSucceeded
	StateToolError
	StateCancelled
	StateFailed
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateToolError || s == StateCancelled || s == StateFailed
}

func (s State) String() string {
	switch s {
	case StateWorking:
		return "working"
	case StateInputRequired:
		return "input_required"
	case StateSucceeded:
		return "succeeded"
	case StateToolError:
		return "tool_error"
	case StateCancelled:
		return "cancelled"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ParseState parses the names printed by [State.String]. It is used by
// configuration that maps backend values onto states.
func ParseState(name string) (State, bool) {
	for s := StateWorking; s <= StateFailed; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// Observation is what an adapter saw of one job.
type Observation struct {
	// Err, when non-nil, means this job could not be observed now; every other
	// field is then unset, except Ref. Wrap [ErrJobNotFound] when the backend
	// does not know the job.
	Err error

	// Ref, when set, replaces the job's reference from now on: the adapter
	// has learnt the job's own ID (a submission that was a queue item or an
	// operation has become a job). The bridge stores it durably with the
	// observation, also when Err is set, and uses it for every later call.
	Ref *JobRef

	State State
	// Message is a short human-readable status (shown as the task's
	// statusMessage). It is untrusted backend text; the bridge caps its size.
	Message string
	// Progress, when known, says how far the job has got.
	Progress *Progress
	// Links point at the job in the backend's own UI or logs.
	Links []Link
	// InputRequests are the backend's outstanding questions, by key, for
	// StateInputRequired. Keys must be unique over the job's life.
	InputRequests map[string]InputRequest
	// Result is the job's output for StateSucceeded and StateToolError (and
	// optionally StateCancelled).
	Result *Result
	// Error describes a StateFailed outcome.
	Error *JobError
	// RetryAfter, when positive, is the backend's request not to be asked
	// about this job again sooner (a Retry-After header, a poll hint).
	RetryAfter time.Duration
	// FinishedAt, for a terminal State, is when the backend says the job
	// finished (Batch's stoppedAt, a run's completion time); zero when it
	// does not say. The bridge uses it to tell a job that failed before a
	// cancel took effect from one the cancel stopped.
	FinishedAt time.Time
}

// Progress is how far a job has got, for example 37 of 100 array children.
type Progress struct {
	Done  float64
	Total float64 // zero when unknown
}

// Link is a titled URL.
type Link struct {
	Title string
	URL   string
}

// Result is a finished job's output, turned into tool-result content by the
// bridge.
type Result struct {
	// Text is a readable summary for people and models.
	Text string
	// Structured is optional machine-readable output (structuredContent).
	Structured map[string]any
}

// JobError describes a failure at the protocol or bridge level, surfaced as a
// failed task with a JSON-RPC error.
type JobError struct {
	Code    int
	Message string
}

// InputRequest is a question for the user, asked as a form elicitation.
type InputRequest struct {
	// Message is shown to the user.
	Message string
	// Schema is the elicitation's requestedSchema: a JSON object schema whose
	// properties are primitive.
	Schema json.RawMessage
}

// Answer is the client's response to one [InputRequest].
type Answer struct {
	// Action is "accept", "decline" or "cancel".
	Action string
	// Content holds the submitted values when Action is "accept".
	Content map[string]any
}

// FieldError is the adapters' name for [fielderr.Error]: a configuration
// problem in one field of an adapter's config, returned (possibly joined with
// others) by a config's Validate method so that the catalog loader can point
// at the field's line and column, or inside its value (Offset).
type FieldError = fielderr.Error

// Fieldf is the adapters' name for [fielderr.Errorf]: it returns a
// *FieldError for path with a formatted message.
func Fieldf(path, format string, args ...any) error {
	return fielderr.Errorf(path, format, args...)
}
