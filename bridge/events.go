package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// Backend events: job state pushed by a backend (a GitHub webhook, an
// EventBridge API destination, a job API's callback) instead of polled.
//
// Each backend whose adapter is an adapters.EventSource with events
// configured has an endpoint, POST {prefix}{backend}. It is authenticated
// by the delivery's signature or credential (the adapter checks it), not by
// the MCP server's auth. The lifecycle applies each event as an observation
// (lifecycle.ApplyEvent, which says how stale, duplicate and unknown events
// are dropped and how flowing events pace the polls).

// MaxEventBytes bounds an event delivery's body (GitHub's own cap on
// webhook payloads is 25 MB; job events are a few kilobytes).
const MaxEventBytes = 5 << 20

// eventBudget bounds the handling of one delivery: senders give up after a
// few seconds (EventBridge 5 s, GitHub 10 s).
const eventBudget = 4 * time.Second

// EventBackends returns the names of the backends that accept pushed
// events, for the endpoints EventsHandler serves.
func (b *Bridge) EventBackends() []string {
	return b.lc.EventBackends()
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
		if !b.lc.AcceptsEvents(name) || !under {
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
		events, err := b.lc.ReadEvents(ctx, name, adapters.Delivery{Header: r.Header, Body: body, ReceivedAt: now})
		switch {
		case errors.Is(err, adapters.ErrForgedEvent):
			b.countEvent(name, eventForged)
			b.log.Warn("refused a forged event", "backend", name, "error", err, "remote", r.RemoteAddr)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		case errors.Is(err, adapters.ErrReplayedEvent):
			b.countEvent(name, eventReplayed)
			b.log.Warn("refused a replayed event", "backend", name, "error", err, "remote", r.RemoteAddr)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		case err != nil:
			b.countEvent(name, eventUnreadable)
			b.log.Warn("could not read an event", "backend", name, "error", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type result struct {
			Job     string `json:"job"`
			Outcome string `json:"outcome"`
		}
		answer := struct {
			Events []result `json:"events"`
		}{Events: []result{}}
		if len(events) == 0 {
			b.countEvent(name, eventIgnored)
		}
		status := http.StatusAccepted
		for _, ev := range events {
			outcome, err := b.lc.ApplyEvent(ctx, name, ev)
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
