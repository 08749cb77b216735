package bridge_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

func TestOperatorCancelIsToldToTheCaller(t *testing.T) {
	h := newHarness(t, harnessOptions{sweep: 20 * time.Millisecond})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	h.waitFor(task.TaskID, "running", func(t *taskclient.Task) bool { return strings.HasPrefix(t.StatusMessage, "running") })

	// What `jobbridge tasks cancel` writes: a pending cancel marked as the
	// operator's, which the server's sweep forwards.
	key := mapping.KeyOf(task.TaskID)
	for {
		row, err := h.store.Get(t.Context(), key, "anonymous", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		row.CancelRequestedAt, row.CancelBy = &now, mapping.CancelByOperator
		row.StatusMessage = "cancellation requested by an operator (jobbridge tasks cancel)"
		row.ObservedAt = nil
		if err := h.store.Update(t.Context(), row); err == nil {
			break
		}
	}
	final := h.waitTerminal(task.TaskID)
	if final.Status != "cancelled" || !strings.Contains(final.StatusMessage, "was cancelled by an operator") {
		t.Fatalf("final %s %q; want cancelled, saying an operator did it", final.Status, final.StatusMessage)
	}
}

func TestBackendErrorsAreLoggedOnceWithTheirClass(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, harnessOptions{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	task := h.createTask("slow_compute", map[string]any{"seconds": 60})
	h.waitFor(task.TaskID, "running", func(t *taskclient.Task) bool { return strings.HasPrefix(t.StatusMessage, "running") })
	time.Sleep(150 * time.Millisecond) // past the refresh interval
	// The adapter retries a 500 itself: the call fails once every retry
	// has.
	remove := h.fake.InjectUntil(jobapi.Fault{Method: "GET", Path: "/jobs/", Status: 500})
	defer remove()
	deadline := time.Now().Add(5 * time.Second)
	var lines []string
	for time.Now().Before(deadline) {
		lines = lines[:0]
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			remove()
			time.Sleep(100 * time.Millisecond) // nothing else follows
			lines = lines[:0]
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					lines = append(lines, l)
				}
			}
			break
		}
		h.tasks.GetTask(t.Context(), task.TaskID)
		time.Sleep(20 * time.Millisecond)
	}
	if len(lines) != 1 {
		t.Fatalf("%d warning lines for one failed backend call; want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{`msg="backend call failed"`, "backend=jobs", "operation=poll", "class=error", "job=", "error="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %s", lines[0], want)
		}
	}
}
