package adaptertest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
)

// memBackend is an in-memory backend and its adapter: a job of kind
// Succeeds or FailsWithToolError ends 30ms after it starts; a RunsLong job
// runs until cancelled. Cancelling a finished job answers
// adapters.ErrAlreadyFinished. While throttled, every call answers an
// adapters.ThrottledError. It implements neither Responder nor Finder.
type memBackend struct {
	mu       sync.Mutex
	seq      int
	jobs     map[string]*memJob
	throttle time.Duration // > 0: throttled, asking for this pause
}

type memJob struct {
	kind        adaptertest.JobKind
	correlation string
	started     time.Time
	cancelledAt time.Time
}

const memRunTime = 30 * time.Millisecond

func (b *memBackend) throttled() error {
	if b.throttle > 0 {
		return &adapters.ThrottledError{RetryAfter: b.throttle, Err: fmt.Errorf("429 Too Many Requests")}
	}
	return nil
}

func (b *memBackend) Start(_ context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	kind, ok := req.Arguments["kind"].(adaptertest.JobKind)
	if !ok {
		return adapters.JobRef{}, fmt.Errorf("no kind in %v", req.Arguments)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.throttled(); err != nil {
		return adapters.JobRef{}, err
	}
	b.seq++
	id := fmt.Sprintf("mem-%d", b.seq)
	b.jobs[id] = &memJob{kind: kind, correlation: req.CorrelationID, started: time.Now()}
	return adapters.JobRef{ID: id}, nil
}

func (b *memBackend) Poll(_ context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.throttled(); err != nil {
		return nil, err
	}
	obs := make([]adapters.Observation, len(refs))
	for i, ref := range refs {
		j, ok := b.jobs[ref.ID]
		if !ok {
			obs[i].Err = fmt.Errorf("job %s: %w", ref.ID, adapters.ErrJobNotFound)
			continue
		}
		end := j.started.Add(memRunTime)
		switch {
		case !j.cancelledAt.IsZero():
			obs[i] = adapters.Observation{State: adapters.StateCancelled, FinishedAt: j.cancelledAt}
		case j.kind == adaptertest.RunsLong || time.Now().Before(end):
			obs[i].State = adapters.StateWorking
		case j.kind == adaptertest.Succeeds:
			obs[i] = adapters.Observation{State: adapters.StateSucceeded, Result: &adapters.Result{Text: "done"}, FinishedAt: end}
		default:
			obs[i] = adapters.Observation{State: adapters.StateToolError, Result: &adapters.Result{Text: "failed"}, FinishedAt: end}
		}
	}
	return obs, nil
}

func (b *memBackend) Cancel(_ context.Context, ref adapters.JobRef) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.throttled(); err != nil {
		return err
	}
	j, ok := b.jobs[ref.ID]
	switch {
	case !ok:
		return nil
	case j.kind == adaptertest.RunsLong && j.cancelledAt.IsZero():
		j.cancelledAt = time.Now()
		return nil
	}
	return fmt.Errorf("job %s: %w", ref.ID, adapters.ErrAlreadyFinished)
}

func (b *memBackend) setThrottle(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.throttle = d
}

// memFinder is a memBackend that is also a Finder.
type memFinder struct{ *memBackend }

func (f memFinder) Find(_ context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.throttled(); err != nil {
		return adapters.JobRef{}, false, err
	}
	for id, j := range f.jobs {
		if j.correlation == req.CorrelationID {
			return adapters.JobRef{ID: id}, true, nil
		}
	}
	return adapters.JobRef{}, false, nil
}

func memHarness(b *memBackend, a adapters.Adapter) adaptertest.Harness {
	return adaptertest.Harness{
		New: func(*testing.T) adapters.Adapter { return a },
		Job: func(kind adaptertest.JobKind) (adapters.StartRequest, bool) {
			if kind == adaptertest.AsksQuestion {
				return adapters.StartRequest{}, false
			}
			return adapters.StartRequest{Tool: "mem", Arguments: map[string]any{"kind": kind}}, true
		},
		Purge: func(_ *testing.T, ref adapters.JobRef) {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(b.jobs, ref.ID)
		},
		PollInterval: 5 * time.Millisecond,
	}
}

// TestRunWithMinimalAdapter runs the suite against an adapter with only the
// required interface and a harness that cannot ask questions or throttle.
func TestRunWithMinimalAdapter(t *testing.T) {
	b := &memBackend{jobs: map[string]*memJob{}}
	adaptertest.Run(t, memHarness(b, b))
}

// TestRunWithThrottlingFinder runs the suite against a Finder whose harness
// can throttle the backend, so that the throttling checks, including "no
// job was created", run.
func TestRunWithThrottlingFinder(t *testing.T) {
	b := &memBackend{jobs: map[string]*memJob{}}
	h := memHarness(b, memFinder{b})
	h.Throttle = func(_ *testing.T, d time.Duration) func() {
		b.setThrottle(d)
		return func() { b.setThrottle(0) }
	}
	adaptertest.Run(t, h)
}
