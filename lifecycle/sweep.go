package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// The sweep's pace. A sweep reads the live tasks a page at a time, oldest
// observation first, and observes the due ones in batched Poll calls, so
// that 100k live tasks nobody polls are all observed within about one sweep
// interval, while each backend is asked at a bounded rate.
const (
	// sweepPage is how many live tasks a sweep reads from the store at a
	// time (past the ones it has already seen in this sweep).
	sweepPage = 1000
	// defaultBatchSize is how many jobs a sweep asks an adapter about in
	// one Poll when the adapter does not say ([adapters.Batcher]).
	defaultBatchSize = 50
	// sweepPollRate and sweepPollsInFlight bound the Poll calls a sweep
	// makes to one backend: per second, and at once.
	sweepPollRate      = 100
	sweepPollsInFlight = 8
	// sweepWrites is how many observations of one batch are written at
	// once, so that a store that commits concurrent writes together can.
	sweepWrites = 16
)

// Sweep purges expired tasks, reconciles interrupted submissions, retries
// unforwarded cancels, ends tasks whose input waited too long, and observes
// live tasks that no client is polling, so that an outcome is captured
// before a backend forgets the job.
//
// A live task is due for observation when its last observation is older
// than its tool's refresh interval and than SweepObserveAge (or it was never
// observed). The sweep groups due tasks by backend and asks each backend
// about them in batches (see [adapters.Batcher]), at most sweepPollRate
// calls a second and sweepPollsInFlight at once, through the backend's gate:
// once the gate pauses (a throttling answer, an open breaker), the sweep
// sends that backend nothing more. Each observation is applied as a polled
// one is ([Lifecycle.record]).
//
// The sweep pages through the store until it reaches tasks observed more
// recently than any tool's due age, or until the sweep interval is over: a
// sweep that could not cover every due task leaves the rest, oldest first,
// to the next.
func (l *Lifecycle) Sweep() {
	began := time.Now()
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.SweepInterval)
	defer cancel()
	if n, err := l.store.PurgeExpired(ctx, l.opts.Now()); err != nil {
		l.log.Warn("purging expired tasks", "error", err)
	} else if n > 0 {
		l.log.Info("purged expired tasks", "count", n)
	}
	if is := l.opts.IdempotencyKeys; is != nil {
		if _, err := is.PurgeIdempotencyKeys(ctx, l.opts.Now()); err != nil {
			l.log.Warn("purging idempotency keys", "error", err)
		}
	}
	s := &sweepRun{l: l, ctx: ctx, now: l.opts.Now(), seen: map[mapping.Key]bool{}, backends: map[string]*sweepBackend{}}
	s.claimer, _ = l.store.(liveClaimer)
	s.minDue = -1
	for _, tl := range l.opts.Tools.Current() {
		if d := s.dueAge(nil, &tl); s.minDue < 0 || d < s.minDue {
			s.minDue = d
		}
	}
	s.run()
	s.flush()
	s.wg.Wait()
	l.metrics.SweepDone(time.Since(began), s.due, int(s.observed.Load()))
}

// sweepRun is one sweep in progress.
type sweepRun struct {
	l   *Lifecycle
	ctx context.Context
	// now is the sweep's start: due ages are measured from it.
	now time.Time
	// minDue is the least due age over the tools: a task observed more
	// recently than it is not due, nor is any task after it.
	minDue  time.Duration
	claimer liveClaimer

	// seen holds the tasks this sweep has read (ListLive); advanced counts
	// those that it moved to the end of ListLive's order (observed) or out
	// of it (ended), so that the next page skips no task still before them.
	seen     map[mapping.Key]bool
	advanced atomic.Int64
	// due counts the tasks found due for observation, observed those whose
	// observation was recorded (for the sweep's metrics).
	due      int
	observed atomic.Int64

	backends map[string]*sweepBackend
	wg       sync.WaitGroup
}

// sweepBackend is one backend's share of a sweep.
type sweepBackend struct {
	name    string
	adapter adapters.Adapter
	gate    *Gate
	size    int
	limiter *rate.Limiter
	slots   chan struct{} // a slot per Poll in flight
	pending []sweepItem   // due tasks not in a batch yet
	// paused is set once the gate refused a call: the backend gets no more
	// calls in this sweep.
	paused atomic.Bool
}

// sweepItem is a due task with its tool and job reference.
type sweepItem struct {
	task *mapping.Task
	tool *Tool
	ref  adapters.JobRef
}

// dueAge is how old a task's observation must be for the sweep to observe
// it (for a tool's tasks in general when t is nil).
func (s *sweepRun) dueAge(t *mapping.Task, tl *Tool) time.Duration {
	interval := tl.RefreshInterval
	if t != nil {
		interval = s.l.refreshInterval(t, tl)
	}
	return max(interval, s.l.opts.SweepObserveAge)
}

// run reads the live tasks page by page and handles each one.
func (s *sweepRun) run() {
	l := s.l
	for first := true; ; first = false {
		if s.ctx.Err() != nil {
			return
		}
		page, err := s.next()
		if err != nil {
			if s.ctx.Err() == nil || first {
				l.log.Warn("listing live tasks", "error", err)
			}
			return
		}
		var fresh, last bool
		for _, t := range page {
			if s.seen[t.Key] {
				continue
			}
			s.seen[t.Key] = true
			fresh = true
			if t.ObservedAt != nil && s.now.Sub(*t.ObservedAt) < s.minDue {
				// Every task after this one was observed later still.
				last = true
			}
			if l.ctx.Err() != nil {
				return
			}
			s.handle(t)
		}
		if !fresh || last {
			return
		}
	}
}

// next reads the next page of live tasks: claimed on a shared store (the
// claims themselves keep pages apart), else listed past the tasks this
// sweep has seen that still come first in ListLive's order.
func (s *sweepRun) next() ([]*mapping.Task, error) {
	if s.claimer != nil {
		// The store uses the database clock for leases.
		return s.claimer.ClaimLive(s.ctx, s.l.opts.ReplicaID, time.Time{}, s.l.opts.SweepLease, sweepPage)
	}
	before := len(s.seen) - int(s.advanced.Load())
	return s.l.store.ListLive(s.ctx, s.l.opts.Now(), before+sweepPage)
}

// handle does what one live task needs from the sweep. Submissions,
// cancels and expired inputs are handled at once, as before batching; a
// due observation joins its backend's next batch.
func (s *sweepRun) handle(t *mapping.Task) {
	l := s.l
	if l.inputExpired(t, s.now) {
		l.expireInput(t)
		return
	}
	switch {
	case t.Phase == mapping.PhaseSubmitting:
		l.Refresh(s.ctx, t, 0)
	case t.Phase == mapping.PhaseSubmitted && t.CancelRequestedAt != nil && t.CancelSentAt == nil:
		// A pending cancel is forwarded when its next attempt is due
		// (repeated ones back off); until then the job is observed.
		if CancelDue(t, s.now) {
			if cur, claimed := l.ClaimCancel(t); claimed {
				l.ForwardCancel(cur)
			}
			return
		}
		s.observeDue(t)
	case t.Phase == mapping.PhaseSubmitted:
		s.observeDue(t)
	}
}

// observeDue adds a submitted task to its backend's next batch when its
// observation is due.
func (s *sweepRun) observeDue(t *mapping.Task) {
	l := s.l
	tl := l.toolOf(t)
	if tl == nil || t.ObservedAt != nil && s.now.Sub(*t.ObservedAt) < s.dueAge(t, tl) || l.backedOff(t.Key, s.now) {
		return
	}
	var ref adapters.JobRef
	if json.Unmarshal(t.JobRef, &ref) != nil {
		return
	}
	s.due++
	s.add(sweepItem{task: t, tool: tl, ref: ref})
}

// add queues a due task on its backend and sends a batch once it is full.
func (s *sweepRun) add(it sweepItem) {
	be := s.backend(it.tool)
	if be.paused.Load() {
		return
	}
	be.pending = append(be.pending, it)
	if len(be.pending) >= be.size {
		s.send(be)
	}
}

// flush sends every backend's last, partial batch.
func (s *sweepRun) flush() {
	for _, be := range s.backends {
		if len(be.pending) > 0 && !be.paused.Load() {
			s.send(be)
		}
	}
}

func (s *sweepRun) backend(tl *Tool) *sweepBackend {
	be := s.backends[tl.Backend]
	if be == nil {
		size := defaultBatchSize
		if bs, ok := tl.Adapter.(adapters.Batcher); ok && bs.BatchSize() > 0 {
			size = bs.BatchSize()
		}
		be = &sweepBackend{
			name:    tl.Backend,
			adapter: tl.Adapter,
			gate:    s.l.Gate(tl.Backend),
			size:    size,
			limiter: rate.NewLimiter(sweepPollRate, sweepPollsInFlight),
			slots:   make(chan struct{}, sweepPollsInFlight),
		}
		s.backends[tl.Backend] = be
	}
	return be
}

// send hands the backend's pending tasks to a Poll of their own, waiting
// for a free slot and for the backend's rate.
func (s *sweepRun) send(be *sweepBackend) {
	batch := be.pending
	be.pending = nil
	select {
	case be.slots <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	if err := be.limiter.Wait(s.ctx); err != nil {
		<-be.slots
		return
	}
	if !s.l.enter() {
		<-be.slots
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.l.wg.Done()
		defer s.wg.Done()
		defer func() { <-be.slots }()
		s.poll(be, batch)
	}()
}

// poll observes one batch of a backend's jobs and records each answer.
func (s *sweepRun) poll(be *sweepBackend, batch []sweepItem) {
	l := s.l
	if be.paused.Load() {
		return
	}
	if ok, _, _ := be.gate.Allow(); !ok {
		be.paused.Store(true)
		return
	}
	refs := make([]adapters.JobRef, len(batch))
	for i, it := range batch {
		refs[i] = it.ref
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	obs, err := be.adapter.Poll(ctx, refs)
	cancel()
	if err == nil && len(obs) != len(refs) {
		err = fmt.Errorf("adapter returned %d observations for %d jobs", len(obs), len(refs))
	}
	if l.ctx.Err() != nil {
		be.gate.Done(ErrNotBackendFault)
		return
	}
	be.gate.Done(err)
	if err != nil {
		if _, _, paused := be.gate.Paused(); paused {
			be.paused.Store(true)
		}
		for _, it := range batch {
			l.unobserved(it.task, it.tool, err)
			// The problem is each task's, told to its caller until it
			// clears (and ending a job never observed after its grace).
			l.Unobserved(it.task, it.tool.Tool, err, nil)
		}
		l.log.Debug("observing jobs", "backend", be.name, "jobs", len(batch), "error", err)
		return
	}
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(sweepWrites, len(batch)) {
		wg.Go(func() {
			for i := range work {
				it := batch[i]
				u := l.record(it.task, it.tool, it.ref, obs[i])
				if u != nil {
					s.observed.Add(1)
				}
				if u != nil && (u.Status.Terminal() || u.ObservedAt != nil && !u.ObservedAt.Before(s.now)) {
					// Observed, or ended: no longer before the
					// tasks this sweep has not read.
					s.advanced.Add(1)
				}
			}
		})
	}
	for i := range batch {
		work <- i
	}
	close(work)
	wg.Wait()
}

// liveClaimer is implemented by stores that several replicas share. The
// sweep claims a lease on the tasks it works on, so that replicas split the
// live tasks between them, and a dead replica's share is taken over once its
// leases run out.
type liveClaimer interface {
	ClaimLive(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*mapping.Task, error)
}

// ownerReleaser is implemented by shared stores that can free every sweep
// lease an owner holds: a replica that restarts under the same ReplicaID
// takes back, at once, the tasks its previous process had claimed.
type ownerReleaser interface {
	ReleaseOwner(ctx context.Context, owner string) error
}

// StartSweeping runs the background sweep, every SweepInterval, until
// Close.
func (l *Lifecycle) StartSweeping() {
	l.goBackground(l.sweepLoop)
}

// sweepLoop runs the background sweep until the lifecycle closes.
func (l *Lifecycle) sweepLoop() {
	if r, ok := l.store.(ownerReleaser); ok {
		ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
		if err := r.ReleaseOwner(ctx, l.opts.ReplicaID); err != nil {
			l.log.Warn("releasing the leases of this replica's previous process", "replica", l.opts.ReplicaID, "error", err)
		}
		cancel()
	}
	tick := time.NewTicker(l.opts.SweepInterval)
	defer tick.Stop()
	l.Sweep()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
			l.Sweep()
		}
	}
}
