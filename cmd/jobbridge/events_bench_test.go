package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/bridge"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// BenchmarkEventsBackendCalls counts the GitHub REST calls jobbridge makes
// in an hour for 1,000 live workflow runs, polling only (the backend has no
// events: block) and with webhooks flowing (issue 16: goal at least 10×
// fewer):
//
//	go test -run '^$' -bench EventsBackendCalls -benchtime 1x ./cmd/jobbridge/
//
// The parts are the real ones: a bridge (bridge.New) on a SQLite store in a
// temporary directory, the github_actions adapter built by buildAdapters
// from testdata/events-bench.yaml (refresh_interval 30s; events
// poll_interval 10m, quiet 30m), and the GitHub fake over loopback HTTP,
// which signs its workflow_run and workflow_job deliveries with the
// catalog's secret and POSTs them to the bridge's EventsHandler("/events/")
// on an httptest server. The 1,000 tasks are created with tools/call. Each
// run waits 30s for a runner, then runs a first job of k minutes and 30s
// (k = 0..19: the runs are spread over 20 start offsets) and then jobs of
// 12, 15, 18, 24 or 28 minutes (by offset), so that every run stays in
// progress the whole hour and its jobs move 2 to 5 times an hour (each
// time a workflow_job completed and the next job's in_progress), at a
// steady rate over the 1,000 runs. No job length is a multiple of
// poll_interval, at which an event and a safety poll would fall due at the
// same simulated instant, which the 10s steps cannot order as real time
// does.
//
// An hour cannot pass in real time, so the bridge and the fake run on
// clocks of their own (bridge Options.Now, githubfake Options.Now) that the
// benchmark moves in steps of 10s, the production sweep interval. At each
// step it moves the fake's clock, has the fake deliver the webhooks of what
// changed to a bridge whose clock still shows the previous step (so that
// no sweep of the new instant runs before they arrive; an event's
// observation thus dates from up to one step before the event, which
// brings its safety poll forward as much), moves the bridge's clock, and
// waits, reading the store after each sweep, until no live task is overdue
// by the bridge's policy: observed within its refresh interval, or, once
// it has received an event while the backend's events flow, within
// events.poll_interval. The sweep does the observing, every 100ms of real
// time (a machine too slow to read 1,000 tasks in that time, or -race,
// needs JOBBRIDGE_EVENTS_SWEEP_INTERVAL=1s), with SweepObserveAge at the
// refresh interval, so that the tasks are observed as often as clients
// polling them at their refresh interval have them observed; a third case
// keeps SweepObserveAge at its default, 1m (nobody polls; the sweep alone
// observes). Each simulated instant is swept completely however slow the
// machine, so the counts do not depend on its speed.
//
// The measured window starts after a minute's warm-up (the dispatches, the
// first observations and the runs' start are not counted). With events it
// is the whole hour. Polling only asks about every run at the same pace
// whatever happens, so its window is 5 minutes (whole cycles of the
// adapter's reread of the jobs every fifth poll), its counts scaled to the
// hour; JOBBRIDGE_EVENTS_POLLING_WINDOW (a multiple of 5m) lengthens it,
// to 1h for the whole hour. The
// fake's primary rate limit is raised out of the way (and so is the
// adapter's budget, see the catalog), so that the figures are the demand;
// the SQLite file lives on tmpfs where there is one, which changes no
// count, only how long the fsyncs take.
//
// Backend calls are the requests the fake's REST API received (githubfake
// Server.Requests; deliveries go the other way and are counted apart). It
// reports calls/h of each case, the calls that count against GitHub's
// primary rate limit (answers other than 304), deliveries/h, and the ratio
// of calls polling only to calls with events. It fails, rather than report
// a ratio, when the setup is broken: a run that got no event, a refused
// delivery, a task that ended or stayed overdue, no call counted.
func BenchmarkEventsBackendCalls(b *testing.B) {
	window := envDuration(b, "JOBBRIDGE_EVENTS_POLLING_WINDOW", 5*time.Minute)
	if window > time.Hour || window%(5*time.Minute) != 0 {
		// Whole cycles of the reread at both SweepObserveAges.
		b.Fatalf("JOBBRIDGE_EVENTS_POLLING_WINDOW=%v: want a multiple of 5m, at most 1h", window)
	}
	interval := envDuration(b, "JOBBRIDGE_EVENTS_SWEEP_INTERVAL", 100*time.Millisecond)
	for b.Loop() {
		poll := runEventsCase(b, evCase{sweepAge: evRefresh, window: window, interval: interval})
		sweep := runEventsCase(b, evCase{sweepAge: time.Minute, window: window, interval: interval})
		push := runEventsCase(b, evCase{events: true, sweepAge: evRefresh, window: time.Hour, interval: interval})
		if poll.calls == 0 || sweep.calls == 0 || push.calls == 0 {
			b.Fatalf("no backend call counted (polling only %d and %d, with events %d): the setup is broken", poll.calls, sweep.calls, push.calls)
		}
		b.ReportMetric(poll.perHour(poll.calls), "polling-calls/h")
		b.ReportMetric(poll.perHour(poll.counted), "polling-counted/h")
		b.ReportMetric(sweep.perHour(sweep.calls), "sweep1m-calls/h")
		b.ReportMetric(push.perHour(push.calls), "events-calls/h")
		b.ReportMetric(push.perHour(push.counted), "events-counted/h")
		b.ReportMetric(push.perHour(push.deliveries), "deliveries/h")
		b.ReportMetric(poll.perHour(poll.calls)/push.perHour(push.calls), "x-fewer-calls")
		b.ReportMetric(sweep.perHour(sweep.calls)/push.perHour(push.calls), "x-fewer-than-sweep1m")
		for _, r := range []evResult{poll, sweep, push} {
			b.Logf("%s: %d calls (%d counted), %d deliveries %v in %v, simulated in %v; bridge warnings: %s",
				r.name, r.calls, r.counted, r.deliveries, r.outcomes, r.window, r.took.Round(time.Millisecond), r.warnings)
		}
	}
}

// The benchmark's scale and pacing.
const (
	evRuns    = 1000
	evRefresh = 30 * time.Second // the catalog's refresh_interval
	evStep    = 10 * time.Second // the production sweep interval
	evWarmUp  = time.Minute
	// evOffsets is how many start offsets the runs are spread over, a
	// minute apart.
	evOffsets = 20
	// evStuck bounds the real time one step may wait for the sweep.
	evStuck  = 2 * time.Minute
	evSecret = "events-bench-webhook-secret"
	evTool   = "run_pipeline"
)

// evLengths are the lengths of the jobs after the first, by start offset.
var evLengths = []time.Duration{12 * time.Minute, 15 * time.Minute, 18 * time.Minute, 24 * time.Minute, 28 * time.Minute}

// evCase is one case of the benchmark.
type evCase struct {
	// events gives the backend its events: block and the fake a webhook.
	events bool
	// sweepAge is the bridge's SweepObserveAge.
	sweepAge time.Duration
	// window is how much simulated time is measured, after the warm-up.
	window time.Duration
	// interval is the bridge's SweepInterval, in real time.
	interval time.Duration
}

func (c evCase) name() string {
	if c.events {
		return "with events"
	}
	return fmt.Sprintf("polling only, SweepObserveAge %v", c.sweepAge)
}

// evResult is what one case counted in its window.
type evResult struct {
	name                       string
	window, took               time.Duration
	calls, counted, deliveries int
	outcomes                   map[string]int
	warnings                   string
}

// perHour scales a count of the window to an hour.
func (r evResult) perHour(n int) float64 { return float64(n) * float64(time.Hour) / float64(r.window) }

// evScripts are the fake's scripts of the runs, one per start offset k:
// 30s queued, a first job of k minutes and 30s, then jobs of
// evLengths[k%5] until the run outlasts the warm-up and the hour.
func evScripts() map[string]githubfake.Script {
	out := map[string]githubfake.Script{}
	for k := range evOffsets {
		first, length := time.Duration(k)*time.Minute+30*time.Second, evLengths[k%len(evLengths)]
		jobs := []githubfake.JobScript{{Name: "stage-1", Duration: first}}
		for total := first; total <= evWarmUp+time.Hour; total += length {
			jobs = append(jobs, githubfake.JobScript{Name: fmt.Sprintf("stage-%d", len(jobs)+1), Duration: length})
		}
		out[evScriptName(k)] = githubfake.Script{Queued: 30 * time.Second, Jobs: jobs}
	}
	return out
}

func evScriptName(k int) string { return fmt.Sprintf("offset-%02d", k) }

// runEventsCase creates evRuns live runs and simulates the warm-up and the
// case's window, and returns what it counted.
func runEventsCase(b *testing.B, c evCase) evResult {
	ctx := b.Context()
	// The clocks start now and only run ahead: the bridge derives a
	// submission's context deadline from its clock (bridge startJob).
	start := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	ghClock, brClock := &evClock{t: start}, &evClock{t: start}

	scripts := evScripts()
	gh := githubfake.New(&githubfake.Options{
		Now:       ghClock.Now,
		Workflows: []githubfake.Workflow{{File: "pipeline.yml", Name: "Pipeline", Script: scripts[evScriptName(0)]}},
		Scripts:   scripts,
		RateLimit: 1 << 30,
		ListDelay: githubfake.NoListDelay,
	})
	ghURL, err := gh.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer gh.Close()

	cat, err := catalog.Load("testdata/events-bench.yaml", catalogTypes()...)
	if err != nil {
		b.Fatal(err)
	}
	pointAtFakes(cat, demoFakes{github: ghURL})
	if !c.events {
		cat.Backends["github"].Config.(*githubactions.BackendConfig).Events = nil
	}
	if got := cat.Tool(evTool).RefreshInterval; got != evRefresh {
		b.Fatalf("the catalog's refresh_interval is %v, want %v", got, evRefresh)
	}
	env := map[string]string{"GITHUB_TOKEN": "events-bench-token", "GITHUB_WEBHOOK_SECRET": evSecret}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	warnings := &evWarnings{}
	logger := slog.New(warnings)
	set, err := buildAdapters(cat, adapterOptions{getenv: getenv, logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	pacing := evPacing{refresh: evRefresh, sweepAge: c.sweepAge}
	if src, ok := set["github"].(adapters.EventSource); ok {
		pacing.polling, pacing.events = src.Events()
	}
	if pacing.events != c.events {
		b.Fatalf("the backend's events are %v, want %v", pacing.events, c.events)
	}

	store, err := openStore(ctx, "sqlite:"+filepath.Join(evStoreDir(b), "tasks.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	// The tasks are created through a bridge at the default sweep
	// interval, whose sweeps have the time to reconcile a submission; the
	// simulation is run by a second bridge on the same store and adapters
	// (one process, as far as GitHub can tell) whose sweep runs every
	// c.interval.
	opts := bridge.Options{Catalog: cat, Store: store, Adapters: set, Logger: logger, Build: "events-bench", Now: brClock.Now}
	var served atomic.Pointer[evServed]
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Load().mcp.ServeHTTP(w, r) }))
	mux.Handle("/events/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Load().events.ServeHTTP(w, r) }))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	creator := evServe(b, opts, &served)
	evCreateRuns(b, ctx, &taskclient.Client{URL: srv.URL + "/mcp", Tasks: true})
	h := &evDriver{b: b, ctx: ctx, store: store, gh: gh, pacing: pacing}
	h.waitSubmitted(start)
	creator.Close()
	if c.events {
		// Created while the runs wait for a runner: the deliveries start
		// with their jobs (workflow_run and workflow_job in_progress).
		gh.Webhook(srv.URL+"/events/github", evSecret)
	}
	opts.SweepInterval, opts.SweepObserveAge = c.interval, c.sweepAge
	br := evServe(b, opts, &served)
	defer br.Close()
	h.br = br
	h.waitSwept(start)

	began := time.Now()
	var calls0, counted0 int
	var outcomes0 map[string]int
	from, end := start.Add(evWarmUp), start.Add(evWarmUp+c.window)
	for prev, now := start, start.Add(evStep); !now.After(end); prev, now = now, now.Add(evStep) {
		h.counting = now.After(from)
		ghClock.Set(now)
		h.deliver(prev)
		brClock.Set(now)
		h.waitSwept(now)
		if now.Equal(from) {
			calls0, counted0, outcomes0 = gh.Requests(), gh.Counted(), evEventOutcomes(b, br)
			warnings.reset()
		}
	}
	res := evResult{
		name: c.name(), window: c.window, took: time.Since(began),
		calls: gh.Requests() - calls0, counted: gh.Counted() - counted0, deliveries: h.deliveries,
		outcomes: map[string]int{}, warnings: warnings.String(),
	}
	for o, n := range evEventOutcomes(b, br) {
		if d := n - outcomes0[o]; d != 0 {
			res.outcomes[o] = d
		}
	}
	h.checkEnd(end)
	if c.events && res.deliveries == 0 {
		b.Fatal("no webhook delivery in the hour: the events did not flow")
	}
	return res
}

// evClock is a clock the benchmark sets.
type evClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *evClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *evClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// evServed is what the benchmark's HTTP server serves: one bridge's MCP
// endpoint and event endpoints.
type evServed struct{ mcp, events http.Handler }

// evServe starts a bridge and has served serve it.
func evServe(b *testing.B, opts bridge.Options, served *atomic.Pointer[evServed]) *bridge.Bridge {
	br, err := bridge.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	served.Store(&evServed{mcp: br.Handler(), events: br.EventsHandler("/events/")})
	return br
}

// evCreateRuns creates evRuns tasks with tools/call, spread over the
// scripts' start offsets.
func evCreateRuns(b *testing.B, ctx context.Context, c *taskclient.Client) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= evRuns || b.Failed() {
					return
				}
				res, err := c.CallTool(ctx, evTool, map[string]any{"script": evScriptName(i % evOffsets)}, nil)
				if err != nil || res.Task == nil {
					b.Errorf("tools/call %s: %v %+v", evTool, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// evPacing is the bridge's observation policy for the benchmark's tool, as
// bridge/events.go documents it: a task is observed again once its
// observation is older than the tool's refresh interval, or, once it has
// received an event while the backend's events flow, than
// events.poll_interval; the sweep, never before SweepObserveAge.
type evPacing struct {
	refresh, sweepAge time.Duration
	polling           adapters.EventPolling
	events            bool
}

// evDriver drives one case's simulated time.
type evDriver struct {
	b      *testing.B
	ctx    context.Context
	store  mapping.Store
	gh     *githubfake.Server
	br     *bridge.Bridge
	pacing evPacing

	// lastEvent is the bridge's time of the newest accepted delivery.
	lastEvent time.Time
	// nextDue is when the next task falls due, as the last read of the
	// store found while the events' flowing was nextDueFlowing.
	nextDue        time.Time
	nextDueFlowing bool
	// counting is set in the measured window; deliveries counts what was
	// delivered then.
	counting   bool
	deliveries int
}

// live returns the live tasks.
func (h *evDriver) live(now time.Time) []*mapping.Task {
	tasks, err := h.store.ListLive(h.ctx, now, 2*evRuns)
	if err != nil {
		h.b.Fatalf("listing the live tasks: %v", err)
	}
	return tasks
}

// waitSubmitted waits until every task's run is dispatched.
func (h *evDriver) waitSubmitted(now time.Time) {
	deadline := time.Now().Add(evStuck)
	for {
		tasks := h.live(now)
		n := 0
		for _, t := range tasks {
			if t.Phase == mapping.PhaseSubmitted {
				n++
			}
		}
		if n == evRuns {
			return
		}
		if time.Now().After(deadline) {
			h.b.Fatalf("%d of %d tasks submitted (%d live)", n, evRuns, len(tasks))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deliver has the fake send the deliveries of what changed up to its
// clock's time; at is the bridge's time meanwhile. A delivery the bridge
// does not accept is a broken setup.
func (h *evDriver) deliver(at time.Time) {
	if !h.pacing.events {
		return
	}
	sent := h.gh.DeliverEvents(h.ctx)
	for _, d := range sent {
		if d.Err != nil || d.Status != http.StatusAccepted {
			h.b.Fatalf("delivery %s %s of run %d: status %d, %v", d.Event, d.Action, d.RunID, d.Status, d.Err)
		}
	}
	if len(sent) > 0 {
		h.lastEvent = at
	}
	if h.counting {
		h.deliveries += len(sent)
	}
}

// flowing reports whether the backend's events flow at now, as the bridge
// judges it: an event arrived within events.quiet.
func (h *evDriver) flowing(now time.Time) bool {
	return h.pacing.events && !h.lastEvent.IsZero() && now.Sub(h.lastEvent) < h.pacing.polling.Quiet
}

// overdue counts the live tasks whose observation is due at now by the
// policy of evPacing, and returns the earliest time at which one of the
// others falls due (while the events' flowing stays as it is now: events
// and polls only ever move a task's due time later).
func (h *evDriver) overdue(now time.Time) (overdue, live int, example *mapping.Task, next time.Time) {
	tasks := h.live(now)
	flowing := h.flowing(now)
	for _, t := range tasks {
		age := h.pacing.refresh
		if flowing && t.EventAt != nil {
			age = max(age, h.pacing.polling.Interval)
		}
		age = max(age, h.pacing.sweepAge)
		if t.Phase != mapping.PhaseSubmitted || t.ObservedAt == nil || now.Sub(*t.ObservedAt) >= age {
			overdue++
			example = t
		} else if due := t.ObservedAt.Add(age); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return overdue, len(tasks), example, next
}

// waitSwept waits until the sweep has observed every task due at now: it
// reads the store after each sweep that ends once the bridge's clock shows
// now, until no task is overdue. Before the earliest due time the last read
// found, nothing can be due, and nothing is read.
func (h *evDriver) waitSwept(now time.Time) {
	if now.Before(h.nextDue) && h.flowing(now) == h.nextDueFlowing {
		return
	}
	deadline := time.Now().Add(evStuck)
	// The first sweep to end may have begun before now; the next did not.
	for want := h.sweeps() + 1; ; want++ {
		for h.sweeps() < want {
			if time.Now().After(deadline) {
				h.b.Fatalf("the sweep stopped at %v", now)
			}
			time.Sleep(5 * time.Millisecond)
		}
		n, live, ex, next := h.overdue(now)
		if live != evRuns {
			h.b.Fatalf("%d live tasks at %v, want %d: a run ended within the hour", live, now, evRuns)
		}
		if n == 0 {
			h.nextDue, h.nextDueFlowing = next, h.flowing(now)
			return
		}
		if time.Now().After(deadline) {
			h.b.Fatalf("%d tasks still overdue for observation at %v after %v: the sweep is not observing them (one is %s, %s %q, observed at %v; "+
				"on a slow machine, raise JOBBRIDGE_EVENTS_SWEEP_INTERVAL)", n, now, evStuck, ex.Phase, ex.Status, ex.StatusMessage, ex.ObservedAt)
		}
	}
}

// checkEnd checks, at the end of the window, that every run is still
// working and, with events, that every run got one.
func (h *evDriver) checkEnd(now time.Time) {
	withEvent := 0
	for _, t := range h.live(now) {
		if t.Status != mapping.StatusWorking {
			h.b.Fatalf("a task is %s at the end of the window (%q), want working", t.Status, t.StatusMessage)
		}
		if t.EventAt != nil {
			withEvent++
		}
	}
	switch {
	case h.pacing.events && withEvent != evRuns:
		h.b.Fatalf("%d of %d tasks received an event: the webhooks did not reach every run", withEvent, evRuns)
	case !h.pacing.events && withEvent != 0:
		h.b.Fatalf("%d tasks received an event without an events: block", withEvent)
	}
}

// sweeps is how many sweeps the bridge has finished, from its metrics.
func (h *evDriver) sweeps() int {
	m := evSweepCount.FindStringSubmatch(evMetrics(h.br))
	if m == nil {
		h.b.Fatal("no jobbridge_sweep_duration_seconds_count in the bridge's metrics")
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		h.b.Fatalf("reading the sweep count %q: %v", m[1], err)
	}
	return int(n)
}

var (
	evSweepCount  = regexp.MustCompile(`(?m)^jobbridge_sweep_duration_seconds_count (\S+)$`)
	evOutcomeLine = regexp.MustCompile(`(?m)^jobbridge_backend_events_total\{backend="github",outcome="([a-z_]+)"\} (\S+)$`)
)

// evMetrics returns the bridge's metrics in the Prometheus text format.
func evMetrics(br *bridge.Bridge) string {
	rec := httptest.NewRecorder()
	br.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// evEventOutcomes reads the bridge's count of events by outcome from its
// metrics (jobbridge_backend_events_total).
func evEventOutcomes(b *testing.B, br *bridge.Bridge) map[string]int {
	out := map[string]int{}
	for _, m := range evOutcomeLine.FindAllStringSubmatch(evMetrics(br), -1) {
		n, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			b.Fatalf("reading the metric line %q: %v", m[0], err)
		}
		out[m[1]] = int(n)
	}
	return out
}

// evWarnings is a slog handler that counts the warnings and errors logged,
// keeping the first, so that the benchmark's output says whether the
// bridge complained in the measured window.
type evWarnings struct {
	mu    sync.Mutex
	n     int
	first string
}

func (w *evWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *evWarnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		w.first = r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				w.first += ": " + a.Value.String()
			}
			return true
		})
	}
	w.n++
	return nil
}

func (w *evWarnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *evWarnings) WithGroup(string) slog.Handler      { return w }

func (w *evWarnings) reset() {
	w.mu.Lock()
	w.n, w.first = 0, ""
	w.mu.Unlock()
}

func (w *evWarnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, the first: %s", w.n, w.first)
}

// evStoreDir is the directory of a case's SQLite file: a temporary
// directory on tmpfs (/dev/shm) when there is one, else the benchmark's.
func evStoreDir(b *testing.B) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "jobbridge-events-bench-"); err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}
