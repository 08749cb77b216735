package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// meteredAdapter wraps a backend's adapter at the bridge's calls into it:
// each call counts in jobbridge_backend_requests_total (by operation and
// outcome) and is timed in jobbridge_backend_request_duration_seconds.
// It is the one wrapper for every backend; the adapters themselves know
// nothing of metrics.
type meteredAdapter struct {
	backend string
	a       adapters.Adapter
	m       *metrics
}

// meterAdapter wraps a, keeping the optional interfaces the bridge
// discovers by type assertion (Responder, Finder) exactly as a has them.
// Batcher is always answered: a size of zero means "not said", as for an
// adapter without it.
func meterAdapter(backend string, a adapters.Adapter, m *metrics) adapters.Adapter {
	base := &meteredAdapter{backend: backend, a: a, m: m}
	_, responds := a.(adapters.Responder)
	_, finds := a.(adapters.Finder)
	switch {
	case responds && finds:
		return &meteredFullAdapter{base}
	case responds:
		return &meteredResponderAdapter{base}
	case finds:
		return &meteredFinderAdapter{base}
	}
	return base
}

// done records one call that began at start.
func (w *meteredAdapter) done(op string, start time.Time, outcome string) {
	w.m.backendLatency.WithLabelValues(w.backend, op).Observe(time.Since(start).Seconds())
	w.m.backendRequests.WithLabelValues(w.backend, op, outcome).Inc()
}

func (w *meteredAdapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	start := time.Now()
	ref, err := w.a.Start(ctx, req)
	w.done("start", start, backendOutcome(err))
	return ref, err
}

func (w *meteredAdapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	start := time.Now()
	obs, err := w.a.Poll(ctx, refs)
	w.done("poll", start, backendOutcome(err))
	return obs, err
}

func (w *meteredAdapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	start := time.Now()
	err := w.a.Cancel(ctx, ref)
	w.done("cancel", start, backendOutcome(err))
	return err
}

// BatchSize reports the wrapped adapter's batch size, or zero.
func (w *meteredAdapter) BatchSize() int {
	if b, ok := w.a.(adapters.Batcher); ok {
		return b.BatchSize()
	}
	return 0
}

func (w *meteredAdapter) respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	r, ok := w.a.(adapters.Responder)
	if !ok {
		return errors.ErrUnsupported
	}
	start := time.Now()
	err := r.Respond(ctx, ref, answers)
	w.done("respond", start, backendOutcome(err))
	return err
}

func (w *meteredAdapter) find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	f, ok := w.a.(adapters.Finder)
	if !ok {
		return adapters.JobRef{}, false, errors.ErrUnsupported
	}
	start := time.Now()
	ref, found, err := f.Find(ctx, req)
	outcome := backendOutcome(err)
	if err == nil && !found {
		outcome = "not_found"
	}
	w.done("find", start, outcome)
	return ref, found, err
}

// meteredResponderAdapter, meteredFinderAdapter and meteredFullAdapter are
// meteredAdapter for adapters with the optional interfaces.
type (
	meteredResponderAdapter struct{ *meteredAdapter }
	meteredFinderAdapter    struct{ *meteredAdapter }
	meteredFullAdapter      struct{ *meteredAdapter }
)

func (w *meteredResponderAdapter) Respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	return w.respond(ctx, ref, answers)
}

func (w *meteredFinderAdapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	return w.find(ctx, req)
}

func (w *meteredFullAdapter) Respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	return w.respond(ctx, ref, answers)
}

func (w *meteredFullAdapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	return w.find(ctx, req)
}
