package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// fakeAdapter answers every Poll with its next answer, and counts the
// calls.
type fakeAdapter struct {
	mu    sync.Mutex
	polls [][]adapters.JobRef
	obs   adapters.Observation
	err   error
}

func (a *fakeAdapter) Start(context.Context, adapters.StartRequest) (adapters.JobRef, error) {
	return adapters.JobRef{}, errors.ErrUnsupported
}

func (a *fakeAdapter) Poll(_ context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls = append(a.polls, refs)
	if a.err != nil {
		return nil, a.err
	}
	out := make([]adapters.Observation, len(refs))
	for i := range refs {
		out[i] = a.obs
	}
	return out, nil
}

func (a *fakeAdapter) Cancel(context.Context, adapters.JobRef) error { return nil }

func (a *fakeAdapter) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.polls)
}

// oneTool is a catalog of one tool, the fixture's.
type oneTool struct{ tool lifecycle.Tool }

func (o oneTool) ToolOf(t *mapping.Task) (lifecycle.Tool, bool) {
	return o.tool, t.Tool == o.tool.Name
}

func (o oneTool) Current() []lifecycle.Tool { return []lifecycle.Tool{o.tool} }

// sweeps records what the lifecycle counts of its sweeps.
type sweeps struct {
	lifecycle.Metrics
	mu            sync.Mutex
	due, observed int
}

func (s *sweeps) SweepDone(_ time.Duration, due, observed int) {
	s.mu.Lock()
	s.due, s.observed = due, observed
	s.mu.Unlock()
}

// observer is a lifecycle of a server that observes the fixture's task
// through a.
func (f *fixture) observer(t *testing.T, a adapters.Adapter, m lifecycle.Metrics) *lifecycle.Lifecycle {
	t.Helper()
	f.rules.Name, f.rules.Backend = "deploy", "slurm"
	l, err := lifecycle.New(lifecycle.Options{
		Store: f.store, Results: results{}, Now: f.clk.Now, Context: t.Context(), Forwards: true,
		Tools: oneTool{lifecycle.Tool{Tool: f.rules, Adapter: a}}, Metrics: m, SweepObserveAge: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// The sweep observes a live task no client polls, without any MCP, and
// records the outcome the backend reports.
func TestSweepObservesLiveTasks(t *testing.T) {
	f := newFixture(t)
	a := &fakeAdapter{obs: adapters.Observation{State: adapters.StateSucceeded, Message: "COMPLETED"}}
	m := &sweeps{Metrics: noMetrics{}}
	l := f.observer(t, a, m)

	l.Sweep()
	if n := a.calls(); n != 0 {
		t.Fatalf("the sweep polled a task observed just now: %d calls", n)
	}
	f.clk.Advance(11 * time.Second) // past the tool's refresh interval
	l.Sweep()
	if n := a.calls(); n != 1 || a.polls[0][0].ID != "104" {
		t.Fatalf("polls %v; want one, of job 104", a.polls)
	}
	if row := f.row(t); row.Status != mapping.StatusCompleted || row.StatusMessage != "COMPLETED" {
		t.Errorf("after the sweep: %s %q; want completed", row.Status, row.StatusMessage)
	}
	if m.due != 1 || m.observed != 1 {
		t.Errorf("sweep counted %d due, %d observed; want 1, 1", m.due, m.observed)
	}
}

// A backend that keeps failing is asked less, not more: after three failed
// polls its gate opens, and Refresh serves the stored row, whose status
// message tells the problem, without asking it.
func TestRefreshStopsAtAnOpenBreaker(t *testing.T) {
	f := newFixture(t)
	a := &fakeAdapter{err: fmt.Errorf("dial tcp: connection refused")}
	l := f.observer(t, a, nil)
	for i := 1; i <= 3; i++ {
		f.clk.Advance(11 * time.Second) // past the refresh interval and the task's backoff
		if !l.NeedsRefresh(f.row(t)) {
			t.Fatalf("poll %d: the task does not need a refresh", i)
		}
		l.Refresh(t.Context(), f.row(t), 0)
		if n := a.calls(); n != i {
			t.Fatalf("poll %d: %d calls", i, n)
		}
	}
	row := f.row(t)
	if row.Problem.Count != 3 || !strings.Contains(row.StatusMessage, "connection refused") {
		t.Errorf("after three failed polls: problem %+v, message %q", row.Problem, row.StatusMessage)
	}
	if row.Status.Terminal() {
		t.Errorf("a job observed before ended on a backend outage: %s %q", row.Status, row.StatusMessage)
	}
	if _, reason, paused := l.Gate("slurm").Paused(); !paused || !strings.Contains(reason, "failing (3 calls in a row)") {
		t.Fatalf("gate paused %v (%q); want open after three failures", paused, reason)
	}
	if l.NeedsRefresh(row) {
		t.Error("a task needs a refresh while its backend's breaker is open")
	}
	if got := l.Refresh(t.Context(), row, 0); got != row || a.calls() != 3 {
		t.Errorf("Refresh asked the backend through an open breaker (%d calls)", a.calls())
	}
}

// A gate's breaker lets one probe through once its pause is over; the
// probe's success closes it. A throttling answer pauses every call for as
// long as the backend asked.
func TestGate(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	g := lifecycle.NewGate("slurm", clk.Now)
	for range 3 {
		if ok, _, _ := g.Allow(); !ok {
			t.Fatal("a call was refused before the breaker opened")
		}
		g.Done(errors.New("HTTP 503"))
	}
	if ok, _, reason := g.Allow(); ok || reason != `the backend "slurm" is failing (3 calls in a row)` {
		t.Fatalf("after three failures: allowed %v (%q)", ok, reason)
	}
	clk.Advance(time.Second)
	if ok, _, _ := g.Allow(); !ok {
		t.Fatal("no probe once the pause was over")
	}
	if ok, _, _ := g.Allow(); ok {
		t.Fatal("a second call while the probe is in flight")
	}
	g.Done(nil)
	if ok, _, _ := g.Allow(); !ok {
		t.Fatal("the breaker stayed open after a successful probe")
	}
	g.Done(&adapters.ThrottledError{RetryAfter: 30 * time.Second, Err: adapters.ErrThrottled})
	clk.Advance(29 * time.Second)
	if note := g.PauseNote(clk.Now()); note != `the backend "slurm" is throttling requests; next check in 1s` {
		t.Errorf("pause note %q", note)
	}
	clk.Advance(time.Second)
	if ok, _, _ := g.Allow(); !ok {
		t.Error("still paused after the backend's Retry-After")
	}
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) Throttled(string)                  {}
func (noMetrics) CancelForwarded(string, error)     {}
func (noMetrics) CancelAttempt(string, int)         {}
func (noMetrics) CancelDeferred(string)             {}
func (noMetrics) ObserveBudgetSpent(string)         {}
func (noMetrics) SweepDone(time.Duration, int, int) {}
func (noMetrics) InputExpired()                     {}
