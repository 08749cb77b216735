package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// Backend events: job state pushed by a backend (a GitHub webhook, an
// EventBridge API destination, a job API's callback) instead of polled.
//
// Each backend whose adapter is an adapters.EventSource with events
// configured has an endpoint, POST {prefix}{backend}. It is authenticated
// by the delivery's signature or credential (the adapter checks it), not by
// the MCP server's auth. An event is an observation like any other: it is
// written through the same conditional write as a poll, so the first
// terminal observation wins and a terminal task never changes; a
// non-terminal event older than the task's last observation is dropped as
// stale; an event for a job no task holds is dropped. Deliveries are
// de-duplicated by the sender's event ID in the store, so a redelivery or a
// replay is applied once, whichever replica receives it.
//
// While a backend's events flow, a job that has received one is polled only
// at the backend's EventPolling.Interval, a safety net for a lost
// delivery; once the backend has sent nothing for EventPolling.Quiet, every
// job is polled at its tool's refresh interval again.

// MaxEventBytes bounds an event delivery's body (GitHub's own cap on
// webhook payloads is 25 MB; job events are a few kilobytes).
const MaxEventBytes = 5 << 20

// eventBudget bounds the handling of one delivery: senders give up after a
// few seconds (EventBridge 5 s, GitHub 10 s).
const eventBudget = 4 * time.Second

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
// events, for the endpoints EventsHandler serves.
func (b *Bridge) EventBackends() []string {
	names := make([]string, 0, len(b.events))
	for n := range b.events {
		names = append(names, n)
	}
	return names
}

// refreshInterval is how old a task's observation may be before it is
// observed again: its tool's refresh interval, or, for a job that has
// received an event while its backend's events flow, the backend's safety
// interval. Rows carry when their last event came, so every replica learns
// that a backend's events flow from the rows it reads.
func (b *Bridge) refreshInterval(t *mapping.Task, tl *tool) time.Duration {
	es := b.events[tl.Backend]
	if es == nil || t.EventAt == nil {
		return tl.RefreshInterval
	}
	es.seen(*t.EventAt)
	if !es.flowing(b.opts.Now()) {
		return tl.RefreshInterval
	}
	return max(tl.RefreshInterval, es.polling.Interval)
}

// EventsHandler serves the backends' event endpoints, POST
// {prefix}{backend}; mount it at prefix (the serve command mounts it at
// /events/). It answers 202 with what became of each event, 401 for a
// forged or replayed delivery, 400 for one that cannot be read, 404 for a
// backend without events, 413 for a body over MaxEventBytes, and 503 when
// the store cannot be reached (the sender's retry, where it has one, finds
// the event not yet applied only if the store never recorded its ID).
func (b *Bridge) EventsHandler(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, under := strings.CutPrefix(r.URL.Path, prefix)
		es := b.events[name]
		if es == nil || !under {
			http.Error(w, "no backend accepts events at this path", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "events are delivered with POST", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEventBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("the delivery is over %d bytes", MaxEventBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the delivery: "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), eventBudget)
		defer cancel()
		now := b.opts.Now()
		events, err := es.src.ReadEvents(ctx, adapters.Delivery{Header: r.Header, Body: body, ReceivedAt: now})
		switch {
		case errors.Is(err, adapters.ErrForgedEvent):
			b.countEvent(name, "forged")
			b.log.Warn("refused a forged event", "backend", name, "error", err, "remote", r.RemoteAddr)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		case errors.Is(err, adapters.ErrReplayedEvent):
			b.countEvent(name, "replayed")
			b.log.Warn("refused a replayed event", "backend", name, "error", err, "remote", r.RemoteAddr)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		case err != nil:
			b.countEvent(name, "unreadable")
			b.log.Warn("could not read an event", "backend", name, "error", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		es.seen(now)
		type result struct {
			Job     string `json:"job"`
			Outcome string `json:"outcome"`
		}
		answer := struct {
			Events []result `json:"events"`
		}{Events: []result{}}
		if len(events) == 0 {
			b.countEvent(name, "ignored")
		}
		status := http.StatusAccepted
		for _, ev := range events {
			outcome, err := b.applyEvent(ctx, name, ev)
			b.countEvent(name, outcome)
			if err != nil {
				b.log.Error("applying an event", "backend", name, "job", ev.JobID, "error", err)
				status = http.StatusServiceUnavailable
			}
			answer.Events = append(answer.Events, result{Job: ev.JobID, Outcome: outcome})
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(answer)
	})
}

func (b *Bridge) countEvent(backend, outcome string) {
	b.metrics.events.WithLabelValues(backend, outcome).Inc()
}

// applyEvent applies one event to the tasks of its job and says what
// became of it (an eventOutcomes value).
func (b *Bridge) applyEvent(ctx context.Context, backend string, ev adapters.Event) (string, error) {
	if ev.JobID == "" {
		return "unknown_job", nil
	}
	tasks, err := b.store.FindByJob(ctx, backend, ev.JobID, b.opts.Now())
	if err != nil {
		return "failed", err
	}
	if len(tasks) == 0 {
		return "unknown_job", nil
	}
	if ev.ID != "" {
		first, err := b.store.ClaimDelivery(ctx, backend, ev.ID, b.opts.Now())
		if err != nil {
			return "failed", err
		}
		if !first {
			return "duplicate", nil
		}
	}
	outcome := "stale"
	for _, t := range tasks {
		tl := b.toolOf(t)
		if tl == nil || t.Status.Terminal() || t.Phase != mapping.PhaseSubmitted {
			continue
		}
		var ref adapters.JobRef
		if json.Unmarshal(t.JobRef, &ref) != nil {
			continue
		}
		o := ev.Observation
		if ev.Reread {
			// A poll now, on the bridge's lifetime: the sender is not kept
			// waiting for the backend. The event asks for a fresh look
			// whatever its time says (a job waiting for an approval whose
			// question only a poll can read is stamped when the job was
			// created, before what the task shows).
			if b.goBackground(func() { b.observeFor(t, true) }) {
				outcome = "applied"
			}
			continue
		}
		if !o.State.Terminal() && lifecycle.StaleEvent(t, ev.At) {
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
				b.goBackground(func() { b.observeFor(t, true) })
			}
			continue
		}
		if b.recordEvent(t, tl, ref, o, ev.At) != nil {
			outcome = "applied"
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
