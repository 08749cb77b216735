package bridge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/taskclient"
)

// queuingBackend is memBackend behind a queue: a submission is first a
// queue item, which names its job only once the job has left the queue, as
// Jenkins' /queue/item/N/ and long-running operations do.
type queuingBackend struct {
	*memBackend
	queuePolls int
	released   bool
	jobID      string
}

func (q *queuingBackend) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	q.memBackend.mu.Lock()
	q.starts++
	q.memBackend.mu.Unlock()
	return adapters.JobRef{ID: "queue-1"}, nil
}

func (q *queuingBackend) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	var jobs []adapters.JobRef
	out := make([]adapters.Observation, len(refs))
	for i, r := range refs {
		if r.ID != "queue-1" {
			jobs = append(jobs, r)
			continue
		}
		q.memBackend.mu.Lock()
		q.queuePolls++
		released := q.released
		q.memBackend.mu.Unlock()
		if !released {
			out[i] = adapters.Observation{State: adapters.StateWorking, Message: "queued at the backend: waiting for an executor"}
			continue
		}
		ref := q.create()
		q.memBackend.mu.Lock()
		q.jobID = ref.ID
		q.memBackend.mu.Unlock()
		obs, err := q.memBackend.Poll(ctx, []adapters.JobRef{ref})
		if err != nil {
			return nil, err
		}
		out[i] = obs[0]
		out[i].Ref = &ref
	}
	if len(jobs) > 0 {
		obs, err := q.memBackend.Poll(ctx, jobs)
		if err != nil {
			return nil, err
		}
		k := 0
		for i, r := range refs {
			if r.ID != "queue-1" {
				out[i] = obs[k]
				k++
			}
		}
	}
	return out, nil
}

// A queued submission's job reference is replaced, durably, once the
// backend names the job: a restarted server observes and cancels the job,
// never the queue item again.
func TestQueuedSubmissionBecomesTheJob(t *testing.T) {
	q := &queuingBackend{memBackend: newMemBackend(nil)}
	opts := harnessOptions{adapters: func(map[string]adapters.Adapter) map[string]adapters.Adapter {
		return map[string]adapters.Adapter{"jobs": q}
	}}
	h := newHarness(t, opts)
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	h.waitFor(task.TaskID, "queued", func(tk *taskclient.Task) bool {
		return strings.Contains(tk.StatusMessage, "queued at the backend")
	})
	q.set(func(*memBackend) { q.released = true })
	h.waitFor(task.TaskID, "the job observed", func(tk *taskclient.Task) bool { return tk.StatusMessage == "RUNNING" })

	// Restart: the store must hold the job's reference, not the queue's.
	h.stop()
	h.start(opts)
	q.set(func(*memBackend) { q.queuePolls = 0 })
	if err := h.tasks.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	got := h.waitTerminal(task.TaskID)
	if got.Status != "cancelled" {
		t.Fatalf("task %s (%s), want cancelled", got.Status, got.StatusMessage)
	}
	q.set(func(m *memBackend) {
		if j := m.jobs[q.jobID]; j == nil || j.state != adapters.StateCancelled {
			t.Errorf("job %s is %+v, want it cancelled at the backend", q.jobID, j)
		}
		if q.queuePolls != 0 {
			t.Errorf("%d polls of the queue item after the restart, want none", q.queuePolls)
		}
	})
}
