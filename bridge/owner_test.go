package bridge_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// writerCheck is a store that notes every Create and Update whose caller
// is not the lifecycle package.
type writerCheck struct {
	mapping.Store
	mu     sync.Mutex
	writes int
	others []string
}

func (w *writerCheck) note() {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var stack []string
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "jobbridge/lifecycle.") {
			stack = nil
			break
		}
		stack = append(stack, f.Function)
		if !more {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if stack != nil {
		w.others = append(w.others, strings.Join(stack, " <- "))
	}
}

func (w *writerCheck) Create(ctx context.Context, t *mapping.Task, l mapping.CreateLimits) error {
	w.note()
	return w.Store.Create(ctx, t, l)
}

func (w *writerCheck) Update(ctx context.Context, t *mapping.Task) error {
	w.note()
	return w.Store.Update(ctx, t)
}

// Every task row the bridge writes is written by the lifecycle, on each
// path a task takes: create, submit, observe, answer, cancel, end.
func TestOnlyTheLifecycleWritesTaskRows(t *testing.T) {
	check := &writerCheck{}
	h := newHarness(t, harnessOptions{sweep: 20 * time.Millisecond, wrapStore: func(s mapping.Store) mapping.Store {
		check.Store = s
		return check
	}})
	done := h.createTask("slow_compute", map[string]any{"seconds": 0.1})
	h.waitTerminal(done.TaskID)
	confirm := h.createTask("confirm_delete", map[string]any{"filename": "x"})
	key := confirmKeyOf(t, h.waitStatus(confirm.TaskID, "input_required"))
	if err := h.tasks.UpdateTask(t.Context(), confirm.TaskID, map[string]any{key: taskclient.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}); err != nil {
		t.Fatal(err)
	}
	h.waitTerminal(confirm.TaskID)
	long := h.createTask("long_job", nil)
	h.waitFor(long.TaskID, "running", func(tk *taskclient.Task) bool { return strings.HasPrefix(tk.StatusMessage, "running") })
	if err := h.tasks.CancelTask(t.Context(), long.TaskID); err != nil {
		t.Fatal(err)
	}
	h.waitTerminal(long.TaskID)
	check.mu.Lock()
	defer check.mu.Unlock()
	if check.writes < 6 {
		t.Errorf("%d writes seen; want the paths exercised", check.writes)
	}
	for _, s := range check.others {
		t.Errorf("a task row written outside the lifecycle: %s", s)
	}
}
