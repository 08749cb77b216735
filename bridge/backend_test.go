package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// memBackend is an in-memory job system behind the adapter contract, for
// faults the REST fake cannot stage on its own: throttling, hanging and
// failing calls, refused cancels, backend timestamps. Each hook, when set,
// decides one call; otherwise the backend behaves: a started job runs until
// it is told to finish or is cancelled.
type memBackend struct {
	mu   sync.Mutex
	now  func() time.Time
	jobs map[string]*memJob
	seq  int

	starts, polls, cancels int

	// startHook, pollHook and cancelHook, when set, answer the call before
	// the backend does; a nil error with ok false lets the backend answer.
	startHook  func(n int) (err error, ok bool)
	pollHook   func(ctx context.Context, n int) (err error, ok bool)
	cancelHook func(job *memJob) (err error, ok bool)
	// missing, when set, is the Err of an observation of a job the backend
	// does not have (default adapters.ErrJobNotFound).
	missing error
}

type memJob struct {
	id         string
	state      adapters.State
	message    string
	finishedAt time.Time
	obsErr     error
	// inputs are the questions of a job in input_required.
	inputs map[string]adapters.InputRequest
}

func newMemBackend(now func() time.Time) *memBackend {
	if now == nil {
		now = time.Now
	}
	return &memBackend{now: now, jobs: map[string]*memJob{}}
}

func (m *memBackend) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	m.mu.Lock()
	m.starts++
	n, hook := m.starts, m.startHook
	m.mu.Unlock()
	if hook != nil {
		if err, ok := hook(n); ok {
			return adapters.JobRef{}, err
		}
	}
	return m.create(), nil
}

// create makes a running job, as a submission the backend accepted does.
func (m *memBackend) create() adapters.JobRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	j := &memJob{id: fmt.Sprintf("mem-%d", m.seq), state: adapters.StateWorking, message: "RUNNING"}
	m.jobs[j.id] = j
	return adapters.JobRef{ID: j.id}
}

func (m *memBackend) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	m.mu.Lock()
	m.polls++
	n, hook := m.polls, m.pollHook
	m.mu.Unlock()
	if hook != nil {
		if err, ok := hook(ctx, n); ok {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]adapters.Observation, len(refs))
	for i, r := range refs {
		j := m.jobs[r.ID]
		switch {
		case j == nil && m.missing != nil:
			out[i] = adapters.Observation{Err: m.missing}
		case j == nil:
			out[i] = adapters.Observation{Err: adapters.ErrJobNotFound}
		case j.obsErr != nil:
			out[i] = adapters.Observation{Err: j.obsErr}
		default:
			out[i] = adapters.Observation{State: j.state, Message: j.message, FinishedAt: j.finishedAt, InputRequests: j.inputs}
			if j.state == adapters.StateToolError {
				out[i].Result = &adapters.Result{Text: "Job " + j.id + " failed: disk full."}
			}
		}
	}
	return out, nil
}

func (m *memBackend) Cancel(ctx context.Context, ref adapters.JobRef) error {
	m.mu.Lock()
	m.cancels++
	j, hook := m.jobs[ref.ID], m.cancelHook
	m.mu.Unlock()
	if hook != nil {
		if err, ok := hook(j); ok {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if j != nil && !j.state.Terminal() {
		j.state, j.message, j.finishedAt = adapters.StateCancelled, "CANCELLED", m.now()
	}
	return nil
}

// finish ends a job in state at the given time.
func (m *memBackend) finish(id string, state adapters.State, msg string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	j.state, j.message, j.finishedAt = state, msg, at
}

func (m *memBackend) job(id string) *memJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[id]
}

// stateOf returns the state of job id, read under the backend's lock
// (false when there is no such job).
func (m *memBackend) stateOf(id string) (adapters.State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[id]; j != nil {
		return j.state, true
	}
	return 0, false
}

func (m *memBackend) setObsErr(id string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs[id].obsErr = err
}

// forget drops job id, as a backend that purged it (or never listed it).
func (m *memBackend) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jobs, id)
}

func (m *memBackend) counts() (starts, polls, cancels int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts, m.polls, m.cancels
}

func (m *memBackend) set(fn func(m *memBackend)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(m)
}
