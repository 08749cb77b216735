package bridge

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobbridge/jobbridge/adapters"
)

// meteredAdapter wraps a backend's adapter at the bridge's calls into it:
// each call counts in jobbridge_backend_requests_total (by operation and
// outcome), is timed in jobbridge_backend_request_duration_seconds and is a
// client span ("backend <operation>", attributes backend, operation and
// outcome) under the request or background work that made it. It is the one
// wrapper for every backend; the adapters themselves know nothing of metrics
// and only see the span in their context (the REST adapter may propagate it).
type meteredAdapter struct {
	backend string
	a       adapters.Adapter
	m       *metrics
	tracer  trace.Tracer
}

// meterAdapter wraps a, keeping the optional interfaces the bridge
// discovers by type assertion (Responder, Finder) exactly as a has them.
// Batcher is always answered: a size of zero means "not said", as for an
// adapter without it.
func meterAdapter(backend string, a adapters.Adapter, m *metrics, tracer trace.Tracer) adapters.Adapter {
	base := &meteredAdapter{backend: backend, a: a, m: m, tracer: tracer}
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

// begin starts the span of one call.
func (w *meteredAdapter) begin(ctx context.Context, op string) (context.Context, trace.Span) {
	return w.tracer.Start(ctx, "backend "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrBackend.String(w.backend), attrOperation.String(op)))
}

// done records one call that began at start, and ends its span.
func (w *meteredAdapter) done(span trace.Span, op string, start time.Time, outcome string) {
	w.m.backendLatency.WithLabelValues(w.backend, op).Observe(time.Since(start).Seconds())
	w.m.backendRequests.WithLabelValues(w.backend, op, outcome).Inc()
	span.SetAttributes(attrOutcome.String(outcome))
	if outcome != "ok" && outcome != "not_found" {
		// The outcome names the failure; the error's text may carry what
		// the backend said and is not recorded.
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

func (w *meteredAdapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	ctx, span := w.begin(ctx, "start")
	start := time.Now()
	ref, err := w.a.Start(ctx, req)
	w.done(span, "start", start, backendOutcome(err))
	return ref, err
}

func (w *meteredAdapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	ctx, span := w.begin(ctx, "poll")
	start := time.Now()
	obs, err := w.a.Poll(ctx, refs)
	w.done(span, "poll", start, backendOutcome(err))
	return obs, err
}

func (w *meteredAdapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	ctx, span := w.begin(ctx, "cancel")
	start := time.Now()
	err := w.a.Cancel(ctx, ref)
	w.done(span, "cancel", start, backendOutcome(err))
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
	ctx, span := w.begin(ctx, "respond")
	start := time.Now()
	err := r.Respond(ctx, ref, answers)
	w.done(span, "respond", start, backendOutcome(err))
	return err
}

func (w *meteredAdapter) find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	f, ok := w.a.(adapters.Finder)
	if !ok {
		return adapters.JobRef{}, false, errors.ErrUnsupported
	}
	ctx, span := w.begin(ctx, "find")
	start := time.Now()
	ref, found, err := f.Find(ctx, req)
	outcome := backendOutcome(err)
	if err == nil && !found {
		outcome = "not_found"
	}
	w.done(span, "find", start, outcome)
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
