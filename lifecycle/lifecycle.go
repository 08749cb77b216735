// Package lifecycle owns a task's life: it creates the task's row, submits
// its job (once; again only after a throttling answer, which created none)
// and reconciles a submission whose outcome is unknown, observes the job
// (polls through the backend's gate, shared between concurrent callers; the
// background sweep, which batches them; events the backend pushes), records
// the answers to its input requests, forwards its cancel (the intent, each
// attempt, its backoff) and ends it. Polled or pushed, every observation
// takes one path, where the first terminal observation wins. It is the only
// code that writes a task row: the MCP side (package bridge) and the store
// CLI (jobbridge tasks cancel) call it.
//
// A task's state is typed and durable in its row (mapping.Task): the cancel
// intent and its attempts, the last problem of the observation path, the
// last state the backend reported and when it was seen, whether the job was
// ever observed. The status message is written from that state at every
// write and never read back.
//
// Each backend's gate paces every call made to it (a throttling pause, a
// circuit breaker); it is the backend's state and outlives catalog reloads.
//
// The package knows nothing of MCP: its caller injects the tool results it
// stores (Results), each task's tool and adapter (Tools) and where its
// counts go (Metrics).
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
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

	// The observation side (polls, submissions, cancels forwarded, the
	// sweep, events) needs the fields below; a tool that only records
	// (the store CLI) leaves them unset.

	// Tools finds each task's tool. Required to observe, submit, forward
	// cancels and sweep.
	Tools Tools
	// Metrics counts what the observation side does. Default: nothing.
	Metrics Metrics
	// Adapters are the backends' adapters by name: those that push job
	// events (adapters.EventSource, with events on) accept them.
	Adapters map[string]adapters.Adapter
	// IdempotencyKeys, when set, is where the sweep purges expired
	// idempotency keys.
	IdempotencyKeys mapping.IdempotencyStore
	// SubmitTimeout bounds one submission, its retries after throttling
	// included; a submission unsettled after it on a shared store is
	// reconciled. Default 30s.
	SubmitTimeout time.Duration
	// LookupBackoff is the first pause between lookups of a submission
	// whose outcome is not settled yet; it doubles up to 15 times its
	// value. Default 2s.
	LookupBackoff time.Duration
	// SweepInterval is how often the background sweep runs. Default 10s.
	SweepInterval time.Duration
	// SweepLease is how long this process holds the tasks a sweep claimed
	// from a shared store. Default three sweep intervals.
	SweepLease time.Duration
	// SweepObserveAge is how old a live task's last observation may get
	// before the sweep observes it (see Sweep). Default 1m.
	SweepObserveAge time.Duration
	// ReplicaID names this process in sweep leases.
	ReplicaID string
	// MaxInputWait is how long a task may wait for an answer before the
	// sweep ends it (ExpireInput). Zero: no limit.
	MaxInputWait time.Duration
}

// Tool is what the lifecycle needs of a task's tool: its catalog entry
// (backend, refresh interval, missing grace) and its backend's adapter.
type Tool struct {
	*catalog.Tool
	Adapter adapters.Adapter
}

// Tools finds the tools tasks run under (the bridge keeps them, across
// catalog reloads).
type Tools interface {
	// ToolOf returns the tool task t runs under, or false when there is
	// none.
	ToolOf(t *mapping.Task) (Tool, bool)
	// Current returns the current catalog's tools.
	Current() []Tool
}

// Metrics counts what the observation side does (the bridge exports them).
type Metrics interface {
	// Throttled counts a throttling answer of a backend.
	Throttled(backend string)
	// CancelForwarded counts one attempt to forward a cancel, by its answer.
	CancelForwarded(backend string, err error)
	// CancelAttempt counts the attempt-th cancel sent for one task.
	CancelAttempt(backend string, attempt int)
	// CancelDeferred counts a cancel not sent yet: the backend's gate is
	// paused.
	CancelDeferred(backend string)
	// ObserveBudgetSpent counts a Refresh that stopped waiting for the
	// backend.
	ObserveBudgetSpent(tool string)
	// SweepDone records one sweep: its wall time, the tasks it found due
	// for observation and those it observed.
	SweepDone(took time.Duration, due, observed int)
	// InputExpired counts a task ended because nobody answered it in time.
	InputExpired()
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) Throttled(string)                  {}
func (noMetrics) CancelForwarded(string, error)     {}
func (noMetrics) CancelAttempt(string, int)         {}
func (noMetrics) CancelDeferred(string)             {}
func (noMetrics) ObserveBudgetSpent(string)         {}
func (noMetrics) SweepDone(time.Duration, int, int) {}
func (noMetrics) InputExpired()                     {}

// Lifecycle writes task rows, and asks the backends what it writes. It is
// safe for concurrent use.
type Lifecycle struct {
	opts    Options
	store   mapping.Store
	log     *slog.Logger
	metrics Metrics
	// ctx is the lifetime of the writes and of the background work (polls,
	// submissions, cancels, the sweep); Close ends it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// polls shares one backend call between concurrent refreshes of a task.
	polls singleflight.Group
	// events are the backends that push job events, by name.
	events map[string]*eventSource

	mu       sync.Mutex
	closed   bool
	gates    map[string]*Gate          // per backend (throttling, breaker)
	inflight map[mapping.Key]int       // submissions this process holds
	backoff  map[mapping.Key]time.Time // no backend poll (or lookup) before this time
	lookups  map[mapping.Key]int       // lookups of an unsettled submission so far
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
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	setDefault(&opts.SubmitTimeout, 30*time.Second)
	setDefault(&opts.LookupBackoff, 2*time.Second)
	setDefault(&opts.SweepInterval, 10*time.Second)
	setDefault(&opts.SweepObserveAge, time.Minute)
	setDefault(&opts.SweepLease, 3*opts.SweepInterval)
	l := &Lifecycle{
		opts:     opts,
		store:    opts.Store,
		log:      opts.Logger,
		metrics:  opts.Metrics,
		events:   eventSources(opts.Adapters),
		gates:    map[string]*Gate{},
		inflight: map[mapping.Key]int{},
		backoff:  map[mapping.Key]time.Time{},
		lookups:  map[mapping.Key]int{},
	}
	l.ctx, l.cancel = context.WithCancel(opts.Context)
	return l, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Close stops the background work (polls, submissions, cancels, the sweep)
// and waits for it; writes made after it fail. It cancels no backend job:
// tasks survive the process, and a submission it cut off is reconciled by
// the next.
func (l *Lifecycle) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

// goBackground runs fn on the lifecycle's lifetime, tracked by Close. It
// reports false, and does not run fn, once the lifecycle is closing.
func (l *Lifecycle) goBackground(fn func()) bool {
	if !l.enter() {
		return false
	}
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return true
}

// Gate returns the gate of the backend called name: a backend's pacing
// outlives catalog reloads, it is the backend's state.
func (l *Lifecycle) Gate(name string) *Gate {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[name]
	if g == nil {
		g = NewGate(name, l.opts.Now)
		l.gates[name] = g
	}
	return g
}

// toolOf returns the tool task t runs under, or nil.
func (l *Lifecycle) toolOf(t *mapping.Task) *Tool {
	if l.opts.Tools == nil {
		return nil
	}
	tl, ok := l.opts.Tools.ToolOf(t)
	if !ok {
		return nil
	}
	return &tl
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
