package lifecycle

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// Backend events: job state pushed by a backend (a GitHub webhook, an
// EventBridge API destination, a job API's callback) instead of polled.
//
// An event is an observation like any other: it is written through the
// same conditional write as a poll, so the first terminal observation wins
// and a terminal task never changes; a non-terminal event older than the
// task's last observation is dropped as stale; an event for a job no task
// holds is dropped. Deliveries are de-duplicated by the sender's event ID in
// the store, so a redelivery or a replay is applied once, whichever replica
// receives it.
//
// While a backend's events flow, a job that has received one is polled only
// at the backend's EventPolling.Interval, a safety net for a lost
// delivery; once the backend has sent nothing for EventPolling.Quiet, every
// job is polled at its tool's refresh interval again.

// eventSource is a backend that pushes events.
type eventSource struct {
	name    string
	src     adapters.EventSource
	polling adapters.EventPolling

	mu   sync.Mutex
	last time.Time // the newest event this process received or read of
}

// seen notes that the backend delivered an event at t.
func (e *eventSource) seen(t time.Time) {
	e.mu.Lock()
	if t.After(e.last) {
		e.last = t
	}
	e.mu.Unlock()
}

// flowing reports whether the backend has delivered an event within its
// quiet period.
func (e *eventSource) flowing(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.last.IsZero() && now.Sub(e.last) < e.polling.Quiet
}

// eventSources finds the backends whose events are configured.
func eventSources(as map[string]adapters.Adapter) map[string]*eventSource {
	out := map[string]*eventSource{}
	for name, a := range as {
		src, ok := a.(adapters.EventSource)
		if !ok {
			continue
		}
		if p, on := src.Events(); on {
			out[name] = &eventSource{name: name, src: src, polling: p}
		}
	}
	return out
}

// EventBackends returns the names of the backends that accept pushed
// events.
func (l *Lifecycle) EventBackends() []string {
	names := make([]string, 0, len(l.events))
	for n := range l.events {
		names = append(names, n)
	}
	return names
}

// AcceptsEvents reports whether the backend called name accepts pushed
// events.
func (l *Lifecycle) AcceptsEvents(name string) bool { return l.events[name] != nil }

// ReadEvents reads the events of one delivery to the backend called name
// (see adapters.EventSource), which must accept events, and notes that its
// events flow when the delivery is genuine.
func (l *Lifecycle) ReadEvents(ctx context.Context, name string, d adapters.Delivery) ([]adapters.Event, error) {
	es := l.events[name]
	events, err := es.src.ReadEvents(ctx, d)
	if err == nil {
		es.seen(d.ReceivedAt)
	}
	return events, err
}

// Event outcomes: what became of one pushed event.
const (
	EventApplied    = "applied"
	EventStale      = "stale"
	EventDuplicate  = "duplicate"
	EventUnknownJob = "unknown_job"
	EventFailed     = "failed"
)

// ApplyEvent applies one event to the tasks of its job and says what
// became of it (one of the Event outcomes).
func (l *Lifecycle) ApplyEvent(ctx context.Context, backend string, ev adapters.Event) (string, error) {
	if ev.JobID == "" {
		return EventUnknownJob, nil
	}
	tasks, err := l.store.FindByJob(ctx, backend, ev.JobID, l.opts.Now())
	if err != nil {
		return EventFailed, err
	}
	if len(tasks) == 0 {
		return EventUnknownJob, nil
	}
	if ev.ID != "" {
		first, err := l.store.ClaimDelivery(ctx, backend, ev.ID, l.opts.Now())
		if err != nil {
			return EventFailed, err
		}
		if !first {
			return EventDuplicate, nil
		}
	}
	outcome := EventStale
	for _, t := range tasks {
		tl := l.toolOf(t)
		if tl == nil || t.Status.Terminal() || t.Phase != mapping.PhaseSubmitted {
			continue
		}
		var ref adapters.JobRef
		if json.Unmarshal(t.JobRef, &ref) != nil {
			continue
		}
		o := ev.Observation
		if ev.Reread {
			// A poll now, on the lifecycle's lifetime: the sender is not kept
			// waiting for the backend. The event asks for a fresh look
			// whatever its time says (a job waiting for an approval whose
			// question only a poll can read is stamped when the job was
			// created, before what the task shows).
			if l.goBackground(func() { l.observeFor(t, true) }) {
				outcome = EventApplied
			}
			continue
		}
		if !o.State.Terminal() && StaleEvent(t, ev.At) {
			// Older than what the task shows. An event must never delay
			// the observation of its job: it never moves the job to the
			// events' safety cadence by itself. Clocks differ between the
			// backend and the bridge, and some backends stamp whole
			// seconds (GitHub), so an event within eventClockSlack of the
			// last observation may be newer than it, and an event whose
			// state differs from the task's is a reason to look again (a
			// message alone is not: a job's step may start before its
			// run's last update): both cause a poll now, which counts as
			// the job's event. Any other stale event leaves the job on
			// its cadence.
			says := mapping.StatusWorking
			if o.State == adapters.StateInputRequired {
				says = mapping.StatusInputRequired
			}
			if says != t.Status || withinClockSlack(t, ev.At) {
				l.goBackground(func() { l.observeFor(t, true) })
			}
			continue
		}
		if l.recordEvent(t, tl, ref, o, ev.At) != nil {
			outcome = EventApplied
		}
	}
	return outcome, nil
}

// eventClockSlack is how far before a task's last observation an event's
// time may read and still be newer than it: backends stamp events in whole
// seconds (GitHub) on clocks of their own.
const eventClockSlack = time.Second

// withinClockSlack reports whether an event of time at, older than what the
// task shows, is within eventClockSlack of it.
func withinClockSlack(t *mapping.Task, at time.Time) bool {
	last := t.CreatedAt
	if t.ObservedAt != nil {
		last = *t.ObservedAt
	}
	return !at.Before(last.Add(-eventClockSlack))
}
