package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// metrics are the bridge's Prometheus metrics, in a registry of the
// bridge's own (never the global default one: a process, and a test, may
// build many bridges). Every label value comes from a bounded set: tool and
// backend names from the catalog, states, operations and outcomes from the
// constants below. No task ID, principal or job ID is ever a label.
//
// The README's "Operating jobbridge" section documents every metric.
type metrics struct {
	reg *prometheus.Registry

	limitRejections *prometheus.CounterVec // limit
	observeBudget   *prometheus.CounterVec // tool
	throttled       *prometheus.CounterVec // backend
	syncCancelled   *prometheus.CounterVec // tool
	tasksCreated    *prometheus.CounterVec // tool
	calls           *prometheus.CounterVec // tool, answer (callmetrics.go)
	reuses          *prometheus.CounterVec // tool

	transitions  *prometheus.CounterVec   // tool, from, to
	finished     *prometheus.CounterVec   // tool, outcome
	taskDuration *prometheus.HistogramVec // tool, outcome
	served       *prometheus.CounterVec   // tool, source

	backendRequests *prometheus.CounterVec   // backend, operation, outcome
	backendLatency  *prometheus.HistogramVec // backend, operation
	cancelForwards  *prometheus.CounterVec   // backend, outcome
	cancelResends   *prometheus.CounterVec   // backend

	storeOps     *prometheus.CounterVec   // operation, outcome
	storeLatency *prometheus.HistogramVec // operation

	sweepDuration prometheus.Histogram
	sweepDue      prometheus.Gauge
	sweepBacklog  prometheus.Gauge
	sweepLast     prometheus.Gauge

	streams     prometheus.Gauge       // open listen streams
	pushed      *prometheus.CounterVec // status
	pushResyncs prometheus.Counter
	events      *prometheus.CounterVec // backend, outcome

	// live counts the live tasks this process knows of, by tool and state
	// (see liveTracker).
	live *liveTracker
}

// The limits a request can run into; each has a series of
// jobbridge_limit_rejections_total, present from the start.
var limitNames = []string{"argument_size", "live_tasks", "create_rate", "poll_rate", "request_size", "result_size", "input_wait", "scope", "tool_denied", "streams", "stream_tasks"}

// The outcomes of jobbridge_backend_events_total that the events endpoint
// decides before an event reaches the lifecycle (which decides the others).
const (
	eventForged     = "forged"
	eventReplayed   = "replayed"
	eventUnreadable = "unreadable"
	eventIgnored    = "ignored"
)

// eventOutcomes are the outcomes of jobbridge_backend_events_total.
var eventOutcomes = []string{
	lifecycle.EventApplied, lifecycle.EventDuplicate, lifecycle.EventStale, lifecycle.EventUnknownJob,
	eventIgnored, eventForged, eventReplayed, eventUnreadable, lifecycle.EventFailed,
}

// Latency buckets, in seconds. Backend calls are bounded by CallTimeout
// (15s) and SubmitTimeout (30s) by default; store calls are usually
// milliseconds; a task may live for hours.
var (
	backendBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30}
	storeBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	taskBuckets    = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}
	sweepBuckets   = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

func newMetrics() *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),

		limitRejections: counter("jobbridge_limit_rejections_total", "Requests refused by a limit, by limit.", "limit"),
		observeBudget:   counter("jobbridge_observe_budget_exceeded_total", "tasks/get answers given from the last observation because the backend did not answer within the observe budget.", "tool"),
		throttled:       counter("jobbridge_backend_throttled_total", "Throttling answers from a backend (submissions retried later, polls paused).", "backend"),
		syncCancelled:   counter("jobbridge_sync_jobs_cancelled_total", "Jobs of synchronous calls cancelled because nobody could follow them any more.", "tool"),
		tasksCreated:    counter("jobbridge_tasks_created_total", "Tasks created by this process.", "tool"),
		calls:           counter("jobbridge_calls_total", "tools/call requests of catalog tools, by how they were answered: task, inline (a task-capable call answered with its result), handle, sync (a call without tasks answered with its result), question (an interim request for input), error (a JSON-RPC error).", "tool", "answer"),
		reuses:          counter("jobbridge_idempotent_reuses_total", "Calls answered with the task of their idempotency key instead of a new job.", "tool"),

		transitions:  counter("jobbridge_task_transitions_total", "Task state changes written by this process.", "tool", "from", "to"),
		finished:     counter("jobbridge_tasks_finished_total", "Tasks that reached a terminal state, written by this process, by outcome (succeeded, tool_error, failed, cancelled).", "tool", "outcome"),
		taskDuration: histogram("jobbridge_task_duration_seconds", "Time from a task's creation to its terminal state.", taskBuckets, "tool", "outcome"),
		served:       counter("jobbridge_task_observations_served_total", "tasks/get answers, by where their observation came from: the backend during the request, or the store.", "tool", "source"),

		backendRequests: counter("jobbridge_backend_requests_total", "Calls into a backend's adapter, by operation and outcome.", "backend", "operation", "outcome"),
		backendLatency:  histogram("jobbridge_backend_request_duration_seconds", "Latency of calls into a backend's adapter.", backendBuckets, "backend", "operation"),
		cancelForwards:  counter("jobbridge_cancel_forwards_total", "Cancels forwarded to a backend, by outcome (sent, already_finished, refused, failed, deferred).", "backend", "outcome"),
		cancelResends:   counter("jobbridge_cancel_resends_total", "Cancels sent to a backend again after an earlier attempt for the same task was refused or failed (they back off exponentially).", "backend"),

		storeOps:     counter("jobbridge_store_operations_total", "Task store calls, by operation and outcome.", "operation", "outcome"),
		storeLatency: histogram("jobbridge_store_operation_duration_seconds", "Latency of task store calls.", storeBuckets, "operation"),

		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobbridge_sweep_duration_seconds", Help: "Duration of background sweeps.", Buckets: sweepBuckets}),
		sweepDue:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobbridge_sweep_due_tasks", Help: "Live tasks the last sweep found overdue for observation."}),
		sweepBacklog:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobbridge_sweep_backlog_tasks", Help: "Overdue live tasks the last sweep read but did not observe (backend paused or failing, sweep out of time)."}),
		sweepLast:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobbridge_sweep_last_run_timestamp_seconds", Help: "When the last sweep ended, in Unix seconds."}),

		streams:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobbridge_listen_streams", Help: "Open subscriptions/listen streams of task notifications on this process."}),
		pushed:      counter("jobbridge_task_notifications_total", "notifications/tasks sent on listen streams, by the task's status.", "status"),
		pushResyncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobbridge_push_resyncs_total", Help: "Times the streams re-read all their tasks because changes may have been missed (the store's listener reconnected, or the fan-out fell behind)."}),
		events:      counter("jobbridge_backend_events_total", "Job events pushed by backends, by outcome (applied, duplicate, stale, unknown_job, ignored, forged, replayed, unreadable, failed).", "backend", "outcome"),

		live: newLiveTracker(),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.limitRejections, m.observeBudget, m.throttled, m.syncCancelled, m.tasksCreated, m.calls, m.reuses,
		m.transitions, m.finished, m.taskDuration, m.served,
		m.backendRequests, m.backendLatency, m.cancelForwards, m.cancelResends,
		m.storeOps, m.storeLatency,
		m.sweepDuration, m.sweepDue, m.sweepBacklog, m.sweepLast,
		m.streams, m.pushed, m.pushResyncs, m.events,
		m.live,
	)
	for _, n := range limitNames {
		m.limitRejections.WithLabelValues(n)
	}
	return m
}

// handler serves the registry in the Prometheus exposition format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// knowTool makes the per-tool series of a catalog tool present (at zero)
// from the start, so that rates and alerts have a series before the first
// event; the live-task series only for a tool that makes tasks.
func (m *metrics) knowTool(tool, backend string, tasks bool) {
	m.tasksCreated.WithLabelValues(tool)
	m.reuses.WithLabelValues(tool)
	m.observeBudget.WithLabelValues(tool)
	m.syncCancelled.WithLabelValues(tool)
	if tasks {
		m.live.knowTool(tool)
	}
	m.throttled.WithLabelValues(backend)
	for _, outcome := range cancelOutcomes {
		m.cancelForwards.WithLabelValues(backend, outcome)
	}
}

// cancelOutcomes are the outcomes of jobbridge_cancel_forwards_total.
var cancelOutcomes = []string{"sent", "already_finished", "refused", "failed", "deferred"}

// reject counts a request refused by a limit.
func (m *metrics) reject(limit string) { m.limitRejections.WithLabelValues(limit).Inc() }

// servedTasksGet counts a tasks/get answer: from the backend when the
// answer carries an observation newer than the row the request read, else
// from the store.
func (m *metrics) servedTasksGet(tool string, read, answer *mapping.Task) {
	source := "store"
	if answer.ObservedAt != nil && (read.ObservedAt == nil || answer.ObservedAt.After(*read.ObservedAt)) {
		source = "backend"
	}
	m.served.WithLabelValues(tool, source).Inc()
}

// written accounts for a row this process wrote: a state change (from is
// empty when this process did not know the previous state) and, for a
// terminal state, the outcome and the task's duration.
func (m *metrics) written(t *mapping.Task, from mapping.Status) {
	if from != "" && from != t.Status {
		m.transitions.WithLabelValues(t.Tool, string(from), string(t.Status)).Inc()
	}
	if !t.Status.Terminal() || from.Terminal() {
		return
	}
	outcome := taskOutcome(t)
	m.finished.WithLabelValues(t.Tool, outcome).Inc()
	m.taskDuration.WithLabelValues(t.Tool, outcome).Observe(max(0, t.UpdatedAt.Sub(t.CreatedAt).Seconds()))
}

// taskOutcome names a terminal task's outcome: a completed task is
// succeeded or tool_error (isError), as the adapters' states say.
func taskOutcome(t *mapping.Task) string {
	if t.Status != mapping.StatusCompleted {
		return string(t.Status)
	}
	var o struct {
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if json.Unmarshal(t.Outcome, &o) == nil && o.Result.IsError {
		return "tool_error"
	}
	return "succeeded"
}

// cancelForwarded counts one attempt to forward a cancel downstream, by the
// adapter's answer.
func (m *metrics) cancelForwarded(backend string, err error) {
	outcome := "failed"
	switch {
	case err == nil:
		outcome = "sent"
	case errors.Is(err, adapters.ErrAlreadyFinished):
		outcome = "already_finished"
	case errors.Is(err, adapters.ErrCancelRefused):
		outcome = "refused"
	}
	m.cancelForwards.WithLabelValues(backend, outcome).Inc()
}

// cancelAttempt counts the attempt-th cancel sent to a backend for one
// task: the second and later are resends.
func (m *metrics) cancelAttempt(backend string, attempt int) {
	if attempt > 1 {
		m.cancelResends.WithLabelValues(backend).Inc()
	}
}

// cancelDeferred counts a cancel not sent yet because the backend's gate
// is paused (throttling, open breaker); it is sent later.
func (m *metrics) cancelDeferred(backend string) {
	m.cancelForwards.WithLabelValues(backend, "deferred").Inc()
}

// sweepDone records one sweep: how long it took (wall time), how many live
// tasks it found due for observation and how many of those it observed.
func (m *metrics) sweepDone(took time.Duration, due, observed int) {
	m.sweepDuration.Observe(took.Seconds())
	m.sweepDue.Set(float64(due))
	m.sweepBacklog.Set(float64(max(0, due-observed)))
	m.sweepLast.Set(float64(time.Now().UnixNano()) / 1e9)
}

// storeOutcome classifies a store call's error.
func storeOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, mapping.ErrNotFound):
		return "not_found"
	case errors.Is(err, mapping.ErrConflict):
		return "conflict"
	case errors.Is(err, mapping.ErrLiveLimit):
		return "live_limit"
	case errors.Is(err, mapping.ErrRateLimit):
		return "rate_limit"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
