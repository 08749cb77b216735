package lifecycle_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
)

// results renders tool results as their text, for tests.
type results struct{}

func (results) Result(_ *mapping.Task, o adapters.Observation, ref adapters.JobRef) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"text": o.Message, "job": ref.ID})
	return b
}

func (results) Text(text string, isError bool) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"text": text, "isError": isError})
	return b
}

func (results) Failure(o adapters.Observation) (int, string) {
	return lifecycle.CodeInternal, o.Message
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is a store on a temporary SQLite file with a live submitted task,
// and the lifecycles of a server (which forwards cancels) and of the store
// CLI (which only records them) on it.
type fixture struct {
	store        mapping.Store
	clk          *clock
	server, tool *lifecycle.Lifecycle
	task         *mapping.Task
	rules        *catalog.Tool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	f := &fixture{store: store, clk: clk, rules: &catalog.Tool{MissingGrace: time.Minute, RefreshInterval: 10 * time.Second}}
	if f.server, err = lifecycle.New(lifecycle.Options{Store: store, Results: results{}, Now: clk.Now, Context: t.Context(), Forwards: true}); err != nil {
		t.Fatal(err)
	}
	if f.tool, err = lifecycle.New(lifecycle.Options{Store: store, Now: clk.Now, Context: t.Context()}); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	f.task = &mapping.Task{Key: mapping.KeyOf("task-1"), Principal: "alice", Tool: "deploy", Backend: "slurm", CorrelationID: "jb-1",
		Phase: mapping.PhaseSubmitting, Status: mapping.StatusWorking, StatusMessage: "submitting the job to slurm",
		CreatedAt: now, UpdatedAt: now, TTL: time.Hour, ExpiresAt: now.Add(time.Hour)}
	if err := f.server.Create(t.Context(), f.task, mapping.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.server.RecordJob(f.task, adapters.JobRef{ID: "104"}); err != nil {
		t.Fatal(err)
	}
	f.observe(t, adapters.Observation{State: adapters.StateWorking, Message: "RUNNING"})
	return f
}

func (f *fixture) row(t *testing.T) *mapping.Task {
	t.Helper()
	r, err := f.store.Get(t.Context(), f.task.Key, f.task.Principal, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) observe(t *testing.T, o adapters.Observation) (*mapping.Task, bool) {
	t.Helper()
	return f.server.Observed(lifecycle.Observation{Task: f.row(t), Tool: f.rules, Ref: adapters.JobRef{ID: "104"}, Obs: o})
}

// The store CLI and the server share one cancel path: the operator's cancel
// is recorded as intent (never claimed by the tool), the server claims and
// forwards it, repeated attempts back off, and every status message is
// written from the typed state and names the operator.
func TestOneCancelPathForServerAndOperator(t *testing.T) {
	f := newFixture(t)
	row, forward, err := f.tool.RequestCancel(f.row(t), mapping.CancelByOperator)
	if err != nil || forward {
		t.Fatalf("operator cancel: forward %v, %v; want recorded, not forwarded", forward, err)
	}
	if row.CancelBy != mapping.CancelByOperator || row.CancelRequestedAt == nil || row.CancelForwardedAt != nil || row.ObservedAt != nil ||
		row.StatusMessage != "cancellation requested by an operator (jobbridge tasks cancel); the server forwards it to the backend; job: RUNNING" {
		t.Fatalf("after the operator's cancel: %+v", row)
	}
	claimed, ok := f.server.ClaimCancel(f.row(t))
	if !ok {
		t.Fatal("the server did not claim the operator's cancel")
	}
	if n := f.server.CancelAnswered(claimed, fmt.Errorf("%w: HTTP 409: the job is in a protected phase", adapters.ErrCancelRefused)); n != 1 {
		t.Errorf("attempts %d, want 1", n)
	}
	row = f.row(t)
	if row.CancelAttempts != 1 || row.CancelNextAt == nil || row.CancelProblem.Class != "cancel_refused" ||
		!strings.HasPrefix(row.StatusMessage, "cancellation (by an operator) requested; slurm refused it (") || !strings.Contains(row.StatusMessage, "1 attempt; trying again in") {
		t.Errorf("after a refusal: attempts %d next %v problem %+v message %q", row.CancelAttempts, row.CancelNextAt, row.CancelProblem, row.StatusMessage)
	}
	if _, ok := f.server.ClaimCancel(row); ok {
		t.Error("the cancel was claimed again before its next attempt")
	}
	// A tasks/cancel asked again meanwhile does not bypass the backoff.
	if _, forward, _ := f.server.RequestCancel(row, ""); forward {
		t.Error("a repeated tasks/cancel forwarded the cancel before its next attempt")
	}
	f.clk.Advance(row.CancelNextAt.Sub(f.clk.Now()))
	claimed, ok = f.server.ClaimCancel(f.row(t))
	if !ok {
		t.Fatal("the cancel was not claimed once its next attempt was due")
	}
	f.server.CancelAnswered(claimed, nil)
	if row = f.row(t); row.StatusMessage != "cancellation (by an operator) sent to slurm; job: RUNNING" || row.CancelAttempts != 2 || row.CancelBy != mapping.CancelByOperator {
		t.Errorf("after the cancel was sent: %q, attempts %d, by %q", row.StatusMessage, row.CancelAttempts, row.CancelBy)
	}
	ended, _ := f.observe(t, adapters.Observation{State: adapters.StateCancelled, Message: "CANCELLED"})
	if ended == nil || ended.Status != mapping.StatusCancelled || ended.StatusMessage != "job 104 was cancelled by an operator" {
		t.Errorf("ended %+v; want cancelled by an operator", ended)
	}
}

// The status message is written from the typed state, never read back
// (the old bridge parsed "cancellation " out of the message): a text that
// says a cancel is pending, without one, is not taken for one, and a
// pending cancel whose text says something else is still told.
func TestStatusTextIsNeverParsed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pending bool
		text    string
		want    string
	}{
		{"text without a cancel", false, "cancellation sent to slurm; job: RUNNING", "RUNNING 60%"},
		{"a cancel without its text", true, "no answer within 10m0s (max_input_wait); cancelling the job", "cancellation requested; job: RUNNING 60%"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			row := f.row(t)
			if tt.pending {
				now := f.clk.Now()
				row.CancelRequestedAt = &now
			}
			row.StatusMessage = tt.text
			row.UpdatedAt = f.clk.Now()
			if err := f.store.Update(t.Context(), row); err != nil {
				t.Fatal(err)
			}
			got, _ := f.observe(t, adapters.Observation{State: adapters.StateWorking, Message: "RUNNING 60%"})
			if got.StatusMessage != tt.want {
				t.Errorf("status message %q; want %q", got.StatusMessage, tt.want)
			}
		})
	}
}

// The first terminal observation is stored and never changes.
func TestFirstTerminalObservationWins(t *testing.T) {
	f := newFixture(t)
	first, _ := f.observe(t, adapters.Observation{State: adapters.StateSucceeded, Message: "done"})
	if first == nil || first.Status != mapping.StatusCompleted {
		t.Fatalf("first terminal observation: %+v", first)
	}
	f.observe(t, adapters.Observation{State: adapters.StateFailed, Message: "lost"})
	if _, err := f.server.End(f.row(t), lifecycle.Failed("late")); !errors.Is(err, lifecycle.ErrTerminal) {
		t.Errorf("End of an ended task: %v; want ErrTerminal", err)
	}
	if got := f.row(t); got.Status != mapping.StatusCompleted || got.StatusMessage != "done" || got.Version != first.Version {
		t.Errorf("after later observations: %s %q version %d; want the first one's", got.Status, got.StatusMessage, got.Version)
	}
}
