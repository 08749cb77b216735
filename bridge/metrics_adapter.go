package bridge

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
)

// meteredAdapter wraps a backend's adapter at the bridge's calls into it:
// each call counts in jobbridge_backend_requests_total (by operation and
// outcome), is timed in jobbridge_backend_request_duration_seconds and is a
// client span ("backend <operation>", attributes backend, operation and
// outcome) under the request or background work that made it. It is the one
// wrapper for every backend; the adapters themselves know nothing of metrics
// and only see the span in their context (the REST adapter may propagate it).
//
// It is also where a failed call is logged, once, whichever part of the
// bridge made it: a WARN line "backend call failed" with the backend, the
// operation, the failure's class (the outcome label of the metrics), the
// jobs concerned and the error. The callers log what they decide at DEBUG.
type meteredAdapter struct {
	backend string
	a       adapters.Adapter
	m       *metrics
	tracer  trace.Tracer
	log     *slog.Logger
}

// meterAdapter wraps a, keeping the optional interfaces the bridge
// discovers by type assertion (Responder, Finder) exactly as a has them.
// Batcher is always answered: a size of zero means "not said", as for an
// adapter without it.
func meterAdapter(backend string, a adapters.Adapter, m *metrics, tracer trace.Tracer, log *slog.Logger) adapters.Adapter {
	base := &meteredAdapter{backend: backend, a: a, m: m, tracer: tracer, log: log}
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

// quietOutcomes are the outcomes that are not failures worth a line: an
// answer the bridge expects (a job not listed yet, a cancel after the end)
// or its own shutdown.
var quietOutcomes = map[string]bool{"ok": true, "not_found": true, "already_finished": true, "not_listed_yet": true, "canceled": true}

// failed logs a failed call (see meteredAdapter).
func (w *meteredAdapter) failed(op, outcome string, err error, jobs ...string) {
	if err == nil || quietOutcomes[outcome] {
		return
	}
	attrs := []any{"backend", w.backend, "operation", op, "class", outcome}
	switch {
	case len(jobs) == 1:
		attrs = append(attrs, "job", jobs[0])
	case len(jobs) > 1:
		attrs = append(attrs, "jobs", len(jobs))
	}
	if d, ok := adapters.RetryAfter(err); ok && d > 0 {
		attrs = append(attrs, "retry_after", d)
	}
	w.log.Warn("backend call failed", append(attrs, "error", err)...)
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
	outcome := lifecycle.CallOutcome(err)
	w.done(span, "start", start, outcome)
	w.failed("start", outcome, err)
	return ref, err
}

func (w *meteredAdapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	ctx, span := w.begin(ctx, "poll")
	start := time.Now()
	obs, err := w.a.Poll(ctx, refs)
	outcome := lifecycle.CallOutcome(err)
	w.done(span, "poll", start, outcome)
	w.failed("poll", outcome, err, jobIDs(refs)...)
	return obs, err
}

func (w *meteredAdapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	ctx, span := w.begin(ctx, "cancel")
	start := time.Now()
	err := w.a.Cancel(ctx, ref)
	outcome := lifecycle.CallOutcome(err)
	w.done(span, "cancel", start, outcome)
	w.failed("cancel", outcome, err, ref.ID)
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
	outcome := lifecycle.CallOutcome(err)
	w.done(span, "respond", start, outcome)
	w.failed("respond", outcome, err, ref.ID)
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
	outcome := lifecycle.CallOutcome(err)
	if err == nil && !found {
		outcome = "not_found"
	}
	w.done(span, "find", start, outcome)
	w.failed("find", outcome, err)
	return ref, found, err
}

func jobIDs(refs []adapters.JobRef) []string {
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return ids
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
