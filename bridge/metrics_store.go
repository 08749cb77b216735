package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobbridge/jobbridge/mapping"
)

// meteredStore wraps the bridge's store: it times every call
// (jobbridge_store_operation_duration_seconds, jobbridge_store_operations_total),
// counts created tasks and the state changes this process writes, and keeps
// the live-task gauge up to date from the rows that pass through it. It adds
// no store access of its own.
type meteredStore struct {
	mapping.Store
	m   *metrics
	log *slog.Logger // one line per state change
}

// meterStore wraps s, keeping the optional interfaces the bridge discovers
// by type assertion (liveClaimer, ownerReleaser) exactly as s has them.
func meterStore(s mapping.Store, m *metrics, log *slog.Logger) mapping.Store {
	base := &meteredStore{Store: s, m: m, log: log}
	claimer, isClaimer := s.(liveClaimer)
	releaser, isReleaser := s.(ownerReleaser)
	switch {
	case isClaimer && isReleaser:
		return &meteredSharedStore{meteredStore: base, claimer: claimer, releaser: releaser}
	case isClaimer:
		return &meteredClaimerStore{meteredStore: base, claimer: claimer}
	case isReleaser:
		return &meteredReleaserStore{meteredStore: base, releaser: releaser}
	}
	return base
}

// timed runs one store call and records its latency and outcome.
func (s *meteredStore) timed(op string, call func() error) error {
	start := time.Now()
	err := call()
	s.m.storeLatency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	s.m.storeOps.WithLabelValues(op, storeOutcome(err)).Inc()
	return err
}

func (s *meteredStore) Create(ctx context.Context, t *mapping.Task, limits mapping.CreateLimits) error {
	err := s.timed("create", func() error { return s.Store.Create(ctx, t, limits) })
	if err == nil {
		s.m.tasksCreated.WithLabelValues(t.Tool).Inc()
		s.m.live.see(t)
	}
	return err
}

func (s *meteredStore) Get(ctx context.Context, key mapping.Key, principal string, now time.Time) (*mapping.Task, error) {
	var t *mapping.Task
	err := s.timed("get", func() (err error) {
		t, err = s.Store.Get(ctx, key, principal, now)
		return err
	})
	if err == nil {
		s.m.live.see(t)
	}
	return t, err
}

func (s *meteredStore) Update(ctx context.Context, t *mapping.Task) error {
	// The state before the write is the one the writer read (the write is
	// conditional on it), taken before a concurrent read of the new row can
	// replace it.
	from, since := s.m.live.state(t.Key)
	err := s.timed("update", func() error { return s.Store.Update(ctx, t) })
	if err == nil {
		s.m.live.see(t)
		s.m.written(t, from)
		if from != "" && from != t.Status {
			s.logTransition(t, from, since)
		}
	}
	return err
}

// logTransition writes the one log line of a task's state change: which
// task (its hash, never its ID), tool, backend, job and correlation ID,
// from → to, and how long it was in the state it left.
func (s *meteredStore) logTransition(t *mapping.Task, from mapping.Status, since time.Time) {
	if s.log == nil {
		return
	}
	var ref struct {
		ID string `json:"id"`
	}
	json.Unmarshal(t.JobRef, &ref)
	attrs := []any{"task", shortKey(t.Key), "tool", t.Tool, "backend", t.Backend}
	if ref.ID != "" {
		attrs = append(attrs, "job", ref.ID)
	}
	attrs = append(attrs, "correlation", t.CorrelationID, "from", string(from), "to", string(t.Status))
	if !since.IsZero() {
		attrs = append(attrs, "in_state", t.UpdatedAt.Sub(since).Round(time.Millisecond))
	}
	s.log.Info("task state changed", attrs...)
}

func (s *meteredStore) ListLive(ctx context.Context, now time.Time, limit int) ([]*mapping.Task, error) {
	var ts []*mapping.Task
	err := s.timed("list_live", func() (err error) {
		ts, err = s.Store.ListLive(ctx, now, limit)
		return err
	})
	for _, t := range ts {
		s.m.live.see(t)
	}
	return ts, err
}

func (s *meteredStore) ListByPrincipal(ctx context.Context, principal string, now time.Time, after *mapping.Cursor, limit int) ([]*mapping.Task, *mapping.Cursor, error) {
	var ts []*mapping.Task
	var next *mapping.Cursor
	err := s.timed("list_by_principal", func() (err error) {
		ts, next, err = s.Store.ListByPrincipal(ctx, principal, now, after, limit)
		return err
	})
	for _, t := range ts {
		s.m.live.see(t)
	}
	return ts, next, err
}

func (s *meteredStore) FindByJob(ctx context.Context, backend, jobID string, now time.Time) ([]*mapping.Task, error) {
	var ts []*mapping.Task
	err := s.timed("find_by_job", func() (err error) {
		ts, err = s.Store.FindByJob(ctx, backend, jobID, now)
		return err
	})
	for _, t := range ts {
		s.m.live.see(t)
	}
	return ts, err
}

func (s *meteredStore) ClaimDelivery(ctx context.Context, source, id string, now time.Time) (bool, error) {
	var first bool
	err := s.timed("claim_delivery", func() (err error) {
		first, err = s.Store.ClaimDelivery(ctx, source, id, now)
		return err
	})
	return first, err
}

func (s *meteredStore) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.timed("purge_expired", func() (err error) {
		n, err = s.Store.PurgeExpired(ctx, now)
		return err
	})
	if err == nil {
		s.m.live.expire(now)
	}
	return n, err
}

func (s *meteredStore) claimLive(c liveClaimer, ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error) {
	var ts []*mapping.Task
	err := s.timed("claim_live", func() (err error) {
		ts, err = c.ClaimLive(ctx, owner, now, lease, limit)
		return err
	})
	for _, t := range ts {
		s.m.live.see(t)
	}
	return ts, err
}

func (s *meteredStore) releaseOwner(r ownerReleaser, ctx context.Context, owner string) error {
	return s.timed("release_owner", func() error { return r.ReleaseOwner(ctx, owner) })
}

// meteredClaimerStore, meteredReleaserStore and meteredSharedStore are
// meteredStore for stores with the optional interfaces.
type (
	meteredClaimerStore struct {
		*meteredStore
		claimer liveClaimer
	}
	meteredReleaserStore struct {
		*meteredStore
		releaser ownerReleaser
	}
	meteredSharedStore struct {
		*meteredStore
		claimer  liveClaimer
		releaser ownerReleaser
	}
)

func (s *meteredClaimerStore) ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error) {
	return s.claimLive(s.claimer, ctx, owner, now, lease, limit)
}

func (s *meteredReleaserStore) ReleaseOwner(ctx context.Context, owner string) error {
	return s.releaseOwner(s.releaser, ctx, owner)
}

func (s *meteredSharedStore) ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error) {
	return s.claimLive(s.claimer, ctx, owner, now, lease, limit)
}

func (s *meteredSharedStore) ReleaseOwner(ctx context.Context, owner string) error {
	return s.releaseOwner(s.releaser, ctx, owner)
}

// maxTrackedLive bounds the live tasks the tracker remembers (about 100
// bytes each); past it, newly seen tasks are not counted until some end.
const maxTrackedLive = 250_000

// liveTracker keeps the last state this process saw of each live task,
// from the rows that pass through meteredStore (created, read, listed,
// claimed, written), and counts them by tool and state as they change. A
// scrape reads the counts: its cost is one entry per tool and live state,
// with no store query. Tasks leave it when a row shows them terminal, or
// when they expire (checked after each purge, once a sweep).
//
// Alone on its store, the count is exact once every live task has been
// seen: at once for tasks created by this process, within a sweep or a
// client's poll for those left by a previous one. With replicas, each
// counts the tasks it has touched; a task another replica ended is dropped
// when this one reads it again or it expires.
type liveTracker struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	tasks  map[mapping.Key]liveEntry
	counts map[liveSeries]int
	tools  map[string]bool
}

type liveEntry struct {
	series  liveSeries
	expires time.Time
	since   time.Time // when the task was seen entering its state
}

type liveSeries struct {
	tool  string
	state mapping.Status
}

func newLiveTracker() *liveTracker {
	return &liveTracker{
		desc:   prometheus.NewDesc("jobbridge_tasks_live", "Live (working or input_required) tasks this process knows of, by tool and state.", []string{"tool", "state"}, nil),
		tasks:  map[mapping.Key]liveEntry{},
		counts: map[liveSeries]int{},
		tools:  map[string]bool{},
	}
}

// knowTool makes a tool's series present at zero.
func (l *liveTracker) knowTool(tool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tools[tool] = true
}

// see notes a row's state.
func (l *liveTracker) see(t *mapping.Task) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, known := l.tasks[t.Key]
	switch {
	case t.Status.Terminal():
		if known {
			delete(l.tasks, t.Key)
			l.counts[old.series]--
		}
	case known && old.series.state == t.Status:
		// No change.
	default:
		if known {
			l.counts[old.series]--
		} else if len(l.tasks) >= maxTrackedLive {
			return
		}
		s := liveSeries{tool: t.Tool, state: t.Status}
		l.tasks[t.Key] = liveEntry{series: s, expires: t.ExpiresAt, since: t.UpdatedAt}
		l.counts[s]++
	}
}

// state returns the state the tracker knows of a task, or "".
func (l *liveTracker) state(k mapping.Key) (mapping.Status, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.tasks[k]
	return e.series.state, e.since
}

// expire drops the tasks whose lifetime has ended: the store no longer
// serves them.
func (l *liveTracker) expire(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.tasks {
		if !e.expires.IsZero() && !e.expires.After(now) {
			delete(l.tasks, k)
			l.counts[e.series]--
		}
	}
}

// Describe implements prometheus.Collector.
func (l *liveTracker) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

// Collect implements prometheus.Collector: one series per known tool and
// live state, zeros included.
func (l *liveTracker) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	counts := make(map[liveSeries]int, 2*len(l.tools))
	for tool := range l.tools {
		counts[liveSeries{tool, mapping.StatusWorking}] = 0
		counts[liveSeries{tool, mapping.StatusInputRequired}] = 0
	}
	for s, n := range l.counts {
		if n == 0 && !l.tools[s.tool] {
			delete(l.counts, s)
			continue
		}
		counts[s] = n
	}
	l.mu.Unlock()
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, float64(n), s.tool, string(s.state))
	}
}
