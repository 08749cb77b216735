// Package lifecycle owns a task's life: it creates the task's row, records
// each observation of its job (polled or pushed, through one path, where the
// first terminal observation wins), the answers to its input requests, its
// cancel (the intent, each attempt to forward it, its backoff) and its end.
// It is the only code that writes a task row: the MCP side (package bridge)
// and the store CLI (jobbridge tasks cancel) call it.
//
// A task's state is typed and durable in its row (mapping.Task): the cancel
// intent and its attempts, the last problem of the observation path, the
// last state the backend reported and when it was seen, whether the job was
// ever observed. The status message is written from that state at every
// write and never read back.
//
// The package knows nothing of MCP: the tool results it stores are rendered
// by a Results value its caller injects.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// Results renders the tool results a task stores as its outcome.
type Results interface {
	// Result is the tool result of a terminal observation of task t's
	// job ref (the task names the tool, whose output schema applies).
	Result(t *mapping.Task, o adapters.Observation, ref adapters.JobRef) json.RawMessage
	// Text is a tool result of one text block.
	Text(text string, isError bool) json.RawMessage
	// Failure is the JSON-RPC error code and message of an observation
	// that failed at the protocol level.
	Failure(o adapters.Observation) (code int, message string)
}

// Options configure a Lifecycle.
type Options struct {
	// Store is where the task rows live. Required.
	Store mapping.Store
	// Results renders stored tool results. Required to record observations.
	Results Results
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the lifecycle's logs. Default: discard.
	Logger *slog.Logger
	// Context is the lifetime of the writes (they outlive the requests that
	// cause them). Default: a context that is never cancelled.
	Context context.Context
	// CallTimeout bounds one write (with its re-reads). Default 15s.
	CallTimeout time.Duration
	// Forwards says that this process forwards cancels to the backends (a
	// server). A tool that only records them (the store CLI) leaves it
	// false: it never claims a cancel, and the server's sweep forwards it.
	Forwards bool
	// Shared says that other processes share the store.
	Shared bool
	// Started is when this process opened the store: alone on it, a cancel
	// claim older than this was left by an earlier process.
	Started time.Time
	// StaleClaim is how long a cancel claim may stay unconfirmed before
	// another attempt takes it over. Default 40s.
	StaleClaim time.Duration
}

// Lifecycle writes task rows. It is safe for concurrent use.
type Lifecycle struct {
	opts  Options
	store mapping.Store
	log   *slog.Logger
	ctx   context.Context
}

// New returns a Lifecycle.
func New(opts Options) (*Lifecycle, error) {
	if opts.Store == nil {
		return nil, errors.New("lifecycle: a store is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	if opts.Context == nil {
		// The writes of a tool that has no lifetime of its own are bounded
		// by CallTimeout alone.
		opts.Context = context.Background()
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 15 * time.Second
	}
	if opts.StaleClaim <= 0 {
		opts.StaleClaim = 40 * time.Second
	}
	if opts.Started.IsZero() {
		opts.Started = opts.Now()
	}
	return &Lifecycle{opts: opts, store: opts.Store, log: opts.Logger, ctx: opts.Context}, nil
}

// ErrTerminal is returned by a write to a task that has ended: its row is
// final and was not changed.
var ErrTerminal = errors.New("the task has ended")

// Outcome is the stored terminal outcome of a task (the row's Outcome): the
// tool result, or the JSON-RPC error of a task that failed.
type Outcome struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object stored with a failed task.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// CodeInternal is the JSON-RPC code of a task that failed in the bridge or
// at the protocol level.
const CodeInternal = -32603

// Ending is how a task ends.
type Ending struct {
	Status  mapping.Status
	Message string
	// Result is the tool result of a completed task.
	Result json.RawMessage
	// Error is the error of a failed task; nil means CodeInternal with
	// Message.
	Error *Error
}

// Failed is the Ending of a task that failed with msg.
func Failed(msg string) Ending {
	return Ending{Status: mapping.StatusFailed, Message: msg, Error: &Error{Code: CodeInternal, Message: msg}}
}

// Cancelled is the Ending of a cancelled task.
func Cancelled(msg string) Ending { return Ending{Status: mapping.StatusCancelled, Message: msg} }

// Completed is the Ending of a completed task with its tool result.
func Completed(msg string, result json.RawMessage) Ending {
	return Ending{Status: mapping.StatusCompleted, Message: msg, Result: result}
}

// end writes e into t (in memory).
func end(t *mapping.Task, e Ending) {
	if e.Status == mapping.StatusFailed && e.Error == nil {
		e.Error = &Error{Code: CodeInternal, Message: e.Message}
	}
	t.Status = e.Status
	t.Phase = mapping.PhaseDone
	t.StatusMessage = e.Message
	t.InputRequests = nil
	t.Args = nil
	t.CancelNextAt = nil
	t.Outcome, _ = json.Marshal(Outcome{Result: e.Result, Error: e.Error})
}

// Create stores a new task's row (see mapping.Store.Create).
func (l *Lifecycle) Create(ctx context.Context, t *mapping.Task, limits mapping.CreateLimits) error {
	return l.store.Create(ctx, t, limits)
}

// End ends the task, unless it has ended already (ErrTerminal).
func (l *Lifecycle) End(task *mapping.Task, e Ending) (*mapping.Task, error) {
	u, err := l.mutate(task, func(t *mapping.Task, _ time.Time) bool {
		end(t, e)
		return true
	})
	if err != nil && !errors.Is(err, ErrTerminal) {
		l.log.Error("ending task", "task", ShortKey(task.Key), "error", err)
	}
	return u, err
}

// mutate applies fn to the current row of task and writes it conditionally,
// re-reading and retrying when another writer got there first. fn returns
// false to write nothing. The row as written (or as read) is returned.
func (l *Lifecycle) mutate(task *mapping.Task, fn func(t *mapping.Task, now time.Time) bool) (*mapping.Task, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	defer cancel()
	for range 20 {
		cur, err := l.store.Get(ctx, task.Key, task.Principal, l.opts.Now())
		if err != nil {
			return nil, err
		}
		if cur.Status.Terminal() {
			return cur, ErrTerminal
		}
		now := l.opts.Now().UTC()
		if !fn(cur, now) {
			return cur, nil
		}
		cur.UpdatedAt = now
		err = l.store.Update(ctx, cur)
		if errors.Is(err, mapping.ErrConflict) {
			continue
		}
		return cur, err
	}
	return nil, fmt.Errorf("updating task: %w", mapping.ErrConflict)
}

// mutateHeld is mutate for a caller that holds a recent read of the row:
// fn decides on a copy of it and the conditional write goes out without
// reading the row again. Only when another writer got there first does it
// fall back to mutate. A held row that is terminal is final (ErrTerminal).
func (l *Lifecycle) mutateHeld(held *mapping.Task, fn func(t *mapping.Task, now time.Time) bool) (*mapping.Task, error) {
	if held.Status.Terminal() {
		return held, ErrTerminal
	}
	c := held.Clone()
	now := l.opts.Now().UTC()
	if !fn(c, now) {
		return c, nil
	}
	c.UpdatedAt = now
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	err := l.store.Update(ctx, c)
	cancel()
	if errors.Is(err, mapping.ErrConflict) {
		return l.mutate(held, fn)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Settling notes that a task has no job yet (its submission's outcome is
// being settled) and says why in msg; problem, when not nil, is the failed
// lookup, kept in the row as the task's observation problem until the job
// is found.
func (l *Lifecycle) Settling(task *mapping.Task, msg string, problem error) {
	l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		if t.Phase == mapping.PhaseSubmitted || t.StatusMessage == msg && problem == nil {
			return false
		}
		if problem != nil {
			recordProblem(&t.Problem, adapters.ProblemOf(problem), now)
		}
		t.StatusMessage = msg
		return true
	})
}

// SubmitWaiting records that a submission waits (the backend throttles)
// and why, unless the task was cancelled meanwhile: it then ends cancelled
// with no job, and SubmitWaiting reports false.
func (l *Lifecycle) SubmitWaiting(task *mapping.Task, wait time.Duration, reason string) bool {
	var cancelled bool
	_, err := l.mutate(task, func(t *mapping.Task, _ time.Time) bool {
		cancelled = t.CancelRequestedAt != nil
		if cancelled {
			end(t, Cancelled(notStartedCancel(t)))
			return true
		}
		t.StatusMessage = fmt.Sprintf("%s; submitting again in %s", reason, CeilSeconds(wait))
		return true
	})
	return err == nil && !cancelled
}

// notStartedCancel is the message of a task cancelled before its job was
// started.
func notStartedCancel(t *mapping.Task) string {
	if t.CancelBy == mapping.CancelByOperator {
		return "cancelled by an operator before the job was submitted; the job was never started"
	}
	return "cancelled before the job was submitted"
}

// RecordJob records the job reference of a submitted task. It reports
// whether this process claimed a cancel that came while the submission was
// in flight, which the caller forwards.
func (l *Lifecycle) RecordJob(task *mapping.Task, ref adapters.JobRef) (*mapping.Task, bool, error) {
	refJSON, err := json.Marshal(ref)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the job reference: %w", err)
	}
	var forward bool
	u, err := l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		forward = false // fn runs again after a conflict
		if t.Phase != mapping.PhaseSubmitting {
			return false
		}
		t.Phase = mapping.PhaseSubmitted
		t.JobRef = refJSON
		t.JobID = ref.ID
		t.Args = nil
		t.Problem = mapping.Problem{}
		t.JobMessage = fmt.Sprintf("job %s submitted to %s", ref.ID, t.Backend)
		forward = l.claimCancel(t, now)
		compose(t, nil, now)
		return true
	})
	return u, forward && err == nil, err
}

// Reseal stores a new sealed task ID in a live task's row.
func (l *Lifecycle) Reseal(task *mapping.Task, seal func(mapping.Key) []byte) {
	l.mutate(task, func(t *mapping.Task, _ time.Time) bool {
		t.SealedID = seal(t.Key)
		return true
	})
}

// ShortKey is a loggable handle of a task: a prefix of the hash of its ID.
func ShortKey(k mapping.Key) string { return fmt.Sprintf("%x", k[:4]) }

// CeilSeconds rounds a positive wait up to whole seconds, for messages.
func CeilSeconds(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
