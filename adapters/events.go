package adapters

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// EventSource is implemented by adapters whose backend can push job events
// instead of being polled: a GitHub webhook, AWS Batch state changes
// delivered by an EventBridge API destination, a job API's callback. The
// bridge serves one HTTP endpoint per backend and hands each delivery to
// ReadEvents.
//
// An event is an observation like any other: the bridge applies it through
// the same conditional write as a poll, so the first terminal observation
// wins and an event older than the task's last observation does not move
// it. Events are hints, not a contract: while they flow the bridge polls
// each job that has received one at EventPolling.Interval (a safety net for
// a lost delivery), and it falls back to the tools' own refresh intervals
// when none has arrived for EventPolling.Quiet.
type EventSource interface {
	// Events reports whether the backend is configured to push events (its
	// config has an `events:` block) and how the bridge polls its jobs
	// while they flow. When ok is false the bridge serves no endpoint for
	// the backend and never calls ReadEvents.
	Events() (p EventPolling, ok bool)

	// ReadEvents authenticates one delivery and reads the job events it
	// carries. It checks the signature (or credential) over the raw body
	// before it reads anything else, and returns an error wrapping
	// [ErrForgedEvent] when the delivery is not authentic and one wrapping
	// [ErrReplayedEvent] when it is authentic but outside the sender's
	// replay window; the bridge answers both with 401 and counts them. An
	// authentic delivery the adapter does not handle (an event type or
	// action it does not know, a ping) returns no events and a nil error,
	// and is acknowledged. Any other error means the body could not be
	// read; its text says why, for the sender's delivery log.
	//
	// ReadEvents must not call the backend and must return quickly: senders
	// give up after a few seconds (GitHub 10 s, EventBridge 5 s).
	ReadEvents(ctx context.Context, d Delivery) ([]Event, error)
}

// EventPolling says how the bridge polls the jobs of a backend whose events
// flow.
type EventPolling struct {
	// Interval is how often a job that has received an event is still
	// polled while the backend's events flow: the safety net for a lost
	// delivery (10 minutes, say), in place of the tool's refresh interval.
	Interval time.Duration
	// Quiet is how long the backend may send no event at all before the
	// bridge considers its events stopped and polls every job at its
	// tool's refresh interval again.
	Quiet time.Duration
}

// Delivery is one HTTP request a backend pushed to the bridge's event
// endpoint, body already read (and size-capped) by the bridge.
type Delivery struct {
	Header http.Header
	Body   []byte
	// ReceivedAt is when the bridge received the delivery, for replay
	// windows.
	ReceivedAt time.Time
}

// Event is one job event read from a delivery.
type Event struct {
	// ID identifies the event at its sender (X-GitHub-Delivery, the
	// EventBridge envelope's id, a callback's delivery header), so that a
	// redelivery of it can be recognised: the bridge applies an ID once and
	// drops and counts a second delivery of it. Empty when the sender gives
	// none; the event is then applied each time it arrives.
	ID string
	// JobID is the backend's identifier of the job the event is about: the
	// [JobRef.ID] that Start, Find or an Observation.Ref gave the bridge
	// for it. Events for jobs no task holds are dropped and counted.
	JobID string
	// At is when the backend says the job reached the observed state (a
	// run's updated_at, the EventBridge envelope's time); zero when it does
	// not say. A non-terminal event older than the task's last observation
	// is stale and dropped.
	At time.Time
	// Observation is the job's state as the event tells it, read with the
	// same rules as a status answer. Its Err is unset.
	Observation Observation
	// Reread asks the bridge to poll the job now rather than apply
	// Observation: the event is news, but only the backend's full answer
	// carries everything (a finished run's jobs and log tails, an
	// approval's environments). The first terminal observation is final,
	// so an adapter sets it for an event whose observation would be a
	// thinner terminal outcome than a poll's.
	Reread bool
}

// ErrForgedEvent is wrapped by a ReadEvents error when a delivery's
// signature or credential is missing or wrong.
var ErrForgedEvent = errors.New("the event's signature or credential is not valid")

// ErrReplayedEvent is wrapped by a ReadEvents error when an authentic
// delivery's signed timestamp is outside the replay window.
var ErrReplayedEvent = errors.New("the event's timestamp is outside the replay window")
