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
// runs until cancelled. It implements neither Responder nor Finder.
type memBackend struct {
	mu   sync.Mutex
	seq  int
	jobs map[string]*memJob
}

type memJob struct {
	kind      adaptertest.JobKind
	started   time.Time
	cancelled bool
}

func (b *memBackend) Start(_ context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	kind, ok := req.Arguments["kind"].(adaptertest.JobKind)
	if !ok {
		return adapters.JobRef{}, fmt.Errorf("no kind in %v", req.Arguments)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	id := fmt.Sprintf("mem-%d", b.seq)
	b.jobs[id] = &memJob{kind: kind, started: time.Now()}
	return adapters.JobRef{ID: id}, nil
}

func (b *memBackend) Poll(_ context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	obs := make([]adapters.Observation, len(refs))
	for i, ref := range refs {
		j, ok := b.jobs[ref.ID]
		switch {
		case !ok:
			obs[i].Err = fmt.Errorf("job %s: %w", ref.ID, adapters.ErrJobNotFound)
		case j.cancelled:
			obs[i].State = adapters.StateCancelled
		case j.kind == adaptertest.RunsLong || time.Since(j.started) < 30*time.Millisecond:
			obs[i].State = adapters.StateWorking
		case j.kind == adaptertest.Succeeds:
			obs[i] = adapters.Observation{State: adapters.StateSucceeded, Result: &adapters.Result{Text: "done"}}
		default:
			obs[i] = adapters.Observation{State: adapters.StateToolError, Result: &adapters.Result{Text: "failed"}}
		}
	}
	return obs, nil
}

func (b *memBackend) Cancel(_ context.Context, ref adapters.JobRef) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[ref.ID]; ok && j.kind == adaptertest.RunsLong {
		j.cancelled = true
	}
	return nil
}

// TestRunWithMinimalAdapter runs the suite against an adapter with only the
// required interface and a harness that cannot ask questions.
func TestRunWithMinimalAdapter(t *testing.T) {
	b := &memBackend{jobs: map[string]*memJob{}}
	adaptertest.Run(t, adaptertest.Harness{
		New: func(*testing.T) adapters.Adapter { return b },
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
	})
}
