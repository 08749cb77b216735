// Package mapping defines the durable store of task ↔ backend job mappings.
//
// The store is the only state the bridge keeps. It holds one row per task,
// keyed by the SHA-256 of the task ID (never the ID itself, which is a bearer
// secret; the row holds it only sealed by the bridge), bound to the principal
// that created it. Implementations live in mapping/sqlite (embedded, one
// process) and mapping/postgres (several replicas); mapping/storetest is the
// contract suite both must pass. Feed is the in-process fan-out of both
// stores' change feeds (Store.Subscribe).
package mapping

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"time"
)

// Store is a durable table of tasks.
//
// All methods must be safe for concurrent use by multiple goroutines (and, for
// shared databases, by several processes). A method that returns an error has
// not changed anything.
type Store interface {
	// Create inserts a new task. It returns only once the row is durable, so
	// that a Get for the same key resolves. Creating a key that already exists
	// returns an error.
	//
	// When limits.MaxLive is positive and t.Principal already has MaxLive
	// live tasks, Create returns ErrLiveLimit and inserts nothing. For this
	// limit a task is live from its creation (unless it is created terminal)
	// until an Update makes it terminal or PurgeExpired deletes it: a task
	// whose ExpiresAt has passed still counts until the next purge.
	//
	// When limits.PerMinute is positive and t.Principal has already created
	// PerMinute tasks with a positive PerMinute in the rate window of
	// t.CreatedAt (see RateWindow), Create returns ErrRateLimit and inserts
	// nothing. When both limits refuse, the error is ErrLiveLimit. A refused
	// or failed Create counts against neither limit.
	//
	// The checks and the insert are one atomic step, also across processes
	// that share the store, and they cost the same however many tasks the
	// principal or the store has.
	Create(ctx context.Context, t *Task, limits CreateLimits) error

	// Get returns the task with the given key if it belongs to principal. A
	// task of another principal, an unknown key and a task whose ExpiresAt
	// has passed (relative to now) all return ErrNotFound, indistinguishably.
	Get(ctx context.Context, key Key, principal string, now time.Time) (*Task, error)

	// Update writes t if the stored row still has t.Version and is not
	// terminal, and then increments t.Version. If another writer got there
	// first, or the stored row is terminal, it returns ErrConflict and changes
	// nothing; the caller re-reads and decides again. This makes every state
	// transition conditional: a terminal state is written once and never
	// changes afterwards.
	Update(ctx context.Context, t *Task) error

	// ListLive returns up to limit tasks that are not terminal and have not
	// expired, oldest observation first (tasks never observed come first).
	// Sweeps use it to observe tasks no client is polling.
	ListLive(ctx context.Context, now time.Time, limit int) ([]*Task, error)

	// ListByPrincipal returns a page of principal's tasks: those Get would
	// return at now (terminal ones included, expired ones not), newest first
	// (by CreatedAt descending, then by Key ascending), at most limit of
	// them, beginning after the position after marks (from the start when
	// after is nil). limit must be between 1 and MaxListLimit; otherwise it
	// returns an error and no tasks.
	//
	// The returned cursor marks the last task of the page, to be passed as
	// after for the next one; it is nil when no task follows. Pages are
	// positions, not snapshots: a task created after the first page was read
	// is newer than the cursor and so never repeats or displaces an older
	// task on a later page, and a task that expires or is purged between
	// two reads is left out without moving the others. A page costs the
	// same however many tasks the principal or the store holds (expired
	// tasks not purged yet aside, which it skips).
	ListByPrincipal(ctx context.Context, principal string, now time.Time, after *Cursor, limit int) ([]*Task, *Cursor, error)

	// List returns a page of the tasks of every principal that match f and
	// that Get would return at now (terminal ones included, expired ones
	// not), newest first, with the order, limit and cursor rules of
	// ListByPrincipal. A filter with an unknown status returns an error and
	// no tasks. Filtered by principal or correlation ID, a page costs the
	// same however many tasks the store holds; otherwise it may read every
	// unexpired task. For operators (jobbridge tasks list|cancel).
	List(ctx context.Context, f Filter, now time.Time, after *Cursor, limit int) ([]*Task, *Cursor, error)

	// FindByJob returns the tasks of any principal whose Backend and JobID
	// are the given ones and that Get would return at now (terminal ones
	// included, expired ones not), oldest first. Normally there is one; the
	// bridge applies a pushed event to each. An empty jobID matches no
	// task. It costs one indexed read however many tasks the store holds.
	FindByJob(ctx context.Context, backend, jobID string, now time.Time) ([]*Task, error)

	// ClaimDelivery records that the pushed event id from source (a backend
	// name) is being applied at now and reports whether this is the first
	// claim: false means that a claim of the same source and id made less
	// than DeliveryRetention before now exists (a redelivery or a replay,
	// maybe applied by another replica), and the caller drops the event.
	// Concurrent claims, also by processes sharing the store, have exactly
	// one first. A claim is durable when it returns, and counts for
	// DeliveryRetention; PurgeExpired then forgets it. A failed claim
	// (error) recorded nothing.
	ClaimDelivery(ctx context.Context, source, id string, now time.Time) (first bool, err error)

	// Subscribe calls fn after each Create and Update that became durable,
	// made through this store or (for a store several processes share)
	// through another one on the same database, with the key and the
	// version written. A failed write (an error, ErrConflict included)
	// calls nothing.
	//
	// fn is called from one goroutine per subscription, never while the
	// store holds a lock that a Get needs, and must not block (it hands the
	// change on); changes queue while it runs. For one key, the changes made
	// through this store arrive in the order they committed, so their
	// versions only grow; changes made elsewhere may arrive in any order
	// relative to them, and may repeat: subscribers compare versions with
	// what they have seen. A Change with Resync set (and a zero Key) means
	// that changes may have been missed (the shared store's listener lost
	// its connection, or fn fell far behind): the subscriber re-reads every
	// task it cares about.
	//
	// unsubscribe stops further calls and returns once a call in progress
	// has returned; it must not be called from fn. Calling it again does
	// nothing. Close ends every subscription.
	Subscribe(fn func(Change)) (unsubscribe func())

	// PurgeExpired deletes tasks whose ExpiresAt is not after now and returns how
	// many it deleted. The deleted tasks that were not terminal free their
	// slots of the live-task limit (see Create). It also forgets the creation
	// counts of rate windows that ended by now, which no Create reads again,
	// and the delivery claims older than DeliveryRetention, which no
	// ClaimDelivery counts any more.
	PurgeExpired(ctx context.Context, now time.Time) (int, error)

	// Close releases the store's resources.
	Close() error
}

var (
	// ErrNotFound is returned for an unknown, foreign or expired task.
	ErrNotFound = errors.New("task not found")
	// ErrConflict is returned by Update when the row changed since it was read
	// or is already terminal.
	ErrConflict = errors.New("task changed concurrently")
	// ErrLiveLimit is returned by Create when the principal already has as
	// many live tasks as allowed.
	ErrLiveLimit = errors.New("too many unfinished tasks")
	// ErrRateLimit is returned by Create when the principal already created
	// as many tasks in the current rate window as allowed.
	ErrRateLimit = errors.New("too many tasks created")
	// ErrBadCursor is wrapped by the error ParseCursor returns for a string
	// that no Cursor encodes to.
	ErrBadCursor = errors.New("invalid cursor")
)

// CreateLimits are the per-principal limits Create enforces. The zero value
// means no limit.
type CreateLimits struct {
	// MaxLive is how many live tasks the principal may have; zero or less
	// means no limit.
	MaxLive int
	// PerMinute is how many tasks the principal may create in one rate
	// window; zero or less means no limit (and the task is not counted).
	PerMinute int
}

// RateWindow is the fixed window of CreateLimits.PerMinute: a window begins
// at each whole minute (UTC) and a task belongs to the one its CreatedAt
// falls in. A principal may so create up to PerMinute tasks at the end of
// one window and PerMinute more at the start of the next: at most twice
// PerMinute in any minute, as with a token bucket of PerMinute holding
// PerMinute tokens.
//
// Windows only move forward: a task whose CreatedAt falls in a window older
// than the newest one its principal has created in (a replica whose clock
// lags) counts in the newest one, so that replicas with skewed clocks share
// one count.
const RateWindow = time.Minute

// RateWindowOf returns the start of the rate window that t falls in.
func RateWindowOf(t time.Time) time.Time { return t.UTC().Truncate(RateWindow) }

// MaxListLimit is the largest page ListByPrincipal and List return.
const MaxListLimit = 1000

// DeliveryRetention is how long ClaimDelivery remembers a claim: a
// redelivery of the same event within it is recognised as one. It exceeds
// how far back the backends redeliver (GitHub's manual redelivery reaches
// about three days back).
const DeliveryRetention = 72 * time.Hour

// Filter selects tasks for List. Every condition that is set must hold.
type Filter struct {
	// Status lists the statuses to select, any of them; empty selects all.
	Status []Status
	// Tool selects the tasks of one tool; empty selects all.
	Tool string
	// Principal selects the tasks of one principal; empty selects all (so
	// the tasks of the empty principal are selected only with the others).
	Principal string
	// CorrelationID selects the task with this correlation ID; empty
	// selects all.
	CorrelationID string
}

// Change is what Store.Subscribe reports: the task with Key was written
// (created or updated) and now has Version; or, with Resync set, changes
// may have been missed.
type Change struct {
	Key Key
	// Version is the row's version after the write: the created version
	// for a Create, the incremented one for an Update.
	Version int64
	// Resync means changes may have been missed; Key and Version are zero.
	Resync bool
}

// Problem is a problem of a backend call, as the lifecycle records it on a
// task: typed, so that what happens next is decided from it and the status
// message is written from it. The zero Problem means none.
type Problem struct {
	// Class is the kind of problem (an adapters.ProblemClass value:
	// throttled, unreachable, refused, unreadable, not_found,
	// unmapped_state, error).
	Class string
	// Call names the call ("GET /jobs/104", "DescribeJobs"); never a host,
	// query or secret.
	Call string
	// Status is the HTTP status of the answer; zero when none came.
	Status int
	// Message is the backend's own words (an outcome rule's message or a
	// redacted excerpt of its answer).
	Message string
	// Since is when the problem was first seen (of this class), Count how
	// many calls in a row met it.
	Since *time.Time
	Count int
}

// IsZero reports whether p records no problem.
func (p Problem) IsZero() bool { return p.Class == "" }

// CancelByOperator is Task.CancelBy for a cancel an operator recorded with
// jobbridge tasks cancel.
const CancelByOperator = "operator"

// Key is the SHA-256 of a task ID: the only form in which a store can read it.
type Key [sha256.Size]byte

// KeyOf returns the store key of a task ID.
func KeyOf(taskID string) Key { return sha256.Sum256([]byte(taskID)) }

// Status is a task's MCP status.
type Status string

// Valid reports whether s is one of the five task states.
func (s Status) Valid() bool {
	switch s {
	case StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// The five task states of the Tasks extension.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Phase is where a task is in the bridge's create path.
type Phase string

const (
	// PhaseConfirming: the task waits for the user to confirm; no job exists.
	PhaseConfirming Phase = "confirming"
	// PhaseSubmitting: the row is committed and a submission may be under way.
	// A task that stays here past the submit timeout was left by a crash and
	// is reconciled.
	PhaseSubmitting Phase = "submitting"
	// PhaseSubmitted: the backend job reference is recorded.
	PhaseSubmitted Phase = "submitted"
	// PhaseDone: the task is terminal.
	PhaseDone Phase = "done"
)

// Task is one row of the store. Fields marked "bridge-owned JSON" are stored
// as given and never interpreted by the store.
type Task struct {
	Key       Key
	Principal string
	// Tool is the catalog name of the tool that was called.
	Tool string
	// ArgsDigest is a hex SHA-256 of the canonical JSON arguments.
	ArgsDigest string
	// Args holds the arguments only while they are still needed: to submit
	// the job (PhaseConfirming, PhaseSubmitting) or to look it up after a
	// submission with an unknown outcome. The bridge clears them once the
	// job reference is recorded.
	Args json.RawMessage
	// ServerBuild and CatalogRevision record what created the task.
	ServerBuild     string
	CatalogRevision string
	// Backend is the catalog name of the backend.
	Backend string
	// JobRef is the adapter's opaque reference (JSON), nil until submitted.
	JobRef json.RawMessage
	// JobID is the backend's identifier of the job (the JobRef's "id"),
	// written by the bridge with JobRef; empty until submitted. FindByJob
	// looks tasks up by Backend and JobID.
	JobID string
	// CorrelationID is the bridge-generated ID sent to the backend. It is not
	// the task ID.
	CorrelationID string
	// SealedID is the task ID sealed (encrypted and authenticated) by the
	// bridge, so that a list of tasks can name them; the store holds it as
	// given and cannot open it. Nil for a task created before the store
	// kept it.
	SealedID []byte

	Phase         Phase
	Status        Status
	StatusMessage string

	CreatedAt time.Time
	UpdatedAt time.Time
	// TTL is the task's lifetime from CreatedAt; ExpiresAt = CreatedAt + TTL.
	TTL       time.Duration
	ExpiresAt time.Time
	// PollInterval is the pollIntervalMs advertised to the client.
	PollInterval time.Duration

	// CancelRequestedAt is set when a client (or an operator) asked to
	// cancel.
	CancelRequestedAt *time.Time
	// CancelBy says who asked to cancel, written with CancelRequestedAt:
	// empty for the task's own client, CancelByOperator for an operator.
	CancelBy string
	// CancelForwardedAt is set when a replica claimed forwarding the cancel
	// downstream; the claim (an Update) makes the forward happen once.
	CancelForwardedAt *time.Time
	// SubmittedAt is when the job's submission was first sent to the
	// backend (or was about to be): the start of the backend's listing lag
	// when a submission with an unknown outcome is looked up.
	SubmittedAt *time.Time
	// CancelSentAt is set once the backend accepted the forwarded cancel. A
	// claim that stays unconfirmed for long was left by a replica that died
	// while forwarding.
	CancelSentAt *time.Time

	// InputRequests are the outstanding input requests (bridge-owned JSON).
	InputRequests json.RawMessage
	// AnsweredKeys lists input keys already answered (bridge-owned JSON).
	AnsweredKeys json.RawMessage

	// Observation is the last backend observation (bridge-owned JSON) and
	// ObservedAt when it was made.
	Observation json.RawMessage
	ObservedAt  *time.Time
	// MissingSince is when the backend first stopped reporting the job.
	MissingSince *time.Time
	// EventAt is when the last event the backend pushed about the job was
	// applied; nil if none was.
	EventAt *time.Time

	// Outcome is the first terminal outcome (bridge-owned JSON: the inlined
	// result or error), written together with a terminal Status.
	Outcome json.RawMessage

	// The lifecycle's typed state (written by package lifecycle only; the
	// status message is rendered from it, never read back).

	// CancelAttempts counts the cancels sent to the backend (or refused,
	// or not answered) for this task; CancelNextAt is when the next one
	// may be sent (nil: at once).
	CancelAttempts int
	CancelNextAt   *time.Time
	// CancelProblem is the last problem of forwarding the cancel (a
	// refusal, an error, an unreachable backend); zero when none.
	CancelProblem Problem
	// Problem is the last problem of the observation path (a status call or
	// a lookup refused, unreadable, missing, an unmapped state); zero once
	// an observation succeeds.
	Problem Problem
	// BackendState is the last state value the backend reported for the
	// job (its own word, e.g. "RUNNING"), StateSince when that value was
	// first seen and StateSeenAt when it was last seen.
	BackendState string
	StateSince   *time.Time
	StateSeenAt  *time.Time
	// FirstObservedAt is when the job was first observed (reported by the
	// backend at all); nil while it never was.
	FirstObservedAt *time.Time
	// JobMessage is the backend's own words about the job at its last
	// observation (the status message's job part).
	JobMessage string

	// Version increments on every Update; it makes updates conditional.
	Version int64
}

// Clone returns a deep copy of t.
func (t *Task) Clone() *Task {
	c := *t
	c.Args = cloneBytes(t.Args)
	c.JobRef = cloneBytes(t.JobRef)
	c.SealedID = cloneBytes(t.SealedID)
	c.InputRequests = cloneBytes(t.InputRequests)
	c.AnsweredKeys = cloneBytes(t.AnsweredKeys)
	c.Observation = cloneBytes(t.Observation)
	c.Outcome = cloneBytes(t.Outcome)
	c.CancelRequestedAt = cloneTime(t.CancelRequestedAt)
	c.CancelForwardedAt = cloneTime(t.CancelForwardedAt)
	c.CancelSentAt = cloneTime(t.CancelSentAt)
	c.SubmittedAt = cloneTime(t.SubmittedAt)
	c.ObservedAt = cloneTime(t.ObservedAt)
	c.MissingSince = cloneTime(t.MissingSince)
	c.EventAt = cloneTime(t.EventAt)
	c.CancelNextAt = cloneTime(t.CancelNextAt)
	c.StateSince = cloneTime(t.StateSince)
	c.StateSeenAt = cloneTime(t.StateSeenAt)
	c.FirstObservedAt = cloneTime(t.FirstObservedAt)
	c.Problem.Since = cloneTime(t.Problem.Since)
	c.CancelProblem.Since = cloneTime(t.CancelProblem.Since)
	return &c
}

func cloneBytes(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
