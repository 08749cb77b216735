package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

const tasksUsage = `usage: jobbridge tasks list --store URL [--state S] [--tool T] [--principal P] [--limit N]
       jobbridge tasks cancel --store URL --correlation ID [--principal P]

An operator's view of the task store, read directly (the server need not be
asked, and no task ID is needed or shown: task IDs are their owners' bearer
secrets and the store holds only their hashes).

  list    prints the tasks: key (a prefix of the task ID's hash), the
          correlation ID sent to the backend, the backend's job ID, tool,
          principal, state and age, newest first. Without --principal only
          live tasks (working, input_required) can be listed.
  cancel  cancels the live task with the given correlation ID on behalf of
          its owner, recorded as an operator cancel: the task's status
          message says so and the server forwards the cancel to the backend
          on its next sweep (a task still waiting for confirmation ends at
          once, nothing having been submitted).

Example:

  jobbridge tasks list --store sqlite:jobbridge.db --state working
  jobbridge tasks cancel --store sqlite:jobbridge.db --correlation jb-5f2c...

Flags:
`

// scanLimit bounds how many rows one command reads from the store.
const scanLimit = 100_000

// runTasks implements `jobbridge tasks`.
func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("tasks", tasksUsage, stdout, stderr)
	storeURL := cmd.fs.String("store", os.Getenv("JOBBRIDGE_STORE"), "task store `URL`: sqlite:PATH or postgres://... (default $JOBBRIDGE_STORE)")
	state := cmd.fs.String("state", "", "list only tasks in this `state`: working, input_required, completed, failed, cancelled")
	tool := cmd.fs.String("tool", "", "list only tasks of this `tool`")
	principal := cmd.fs.String("principal", "", "only tasks of this `principal` (needed to list finished tasks)")
	limit := cmd.fs.Int("limit", 200, "print at most `N` tasks")
	correlation := cmd.fs.String("correlation", "", "cancel: the task's correlation `ID`")
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(positional) != 1 || *storeURL == "" {
		return cmd.usageError()
	}
	switch positional[0] {
	case "list":
		if *correlation != "" {
			return cmd.usageError()
		}
		f := taskFilter{state: mapping.Status(*state), tool: *tool, principal: *principal}
		if err := f.check(); err != nil {
			return err
		}
		store, err := openStore(ctx, *storeURL)
		if err != nil {
			return err
		}
		defer store.Close()
		return listTasks(ctx, store, f, *limit, time.Now(), stdout)
	case "cancel":
		if *correlation == "" || *state != "" || *tool != "" {
			return cmd.usageError()
		}
		store, err := openStore(ctx, *storeURL)
		if err != nil {
			return err
		}
		defer store.Close()
		return operatorCancel(ctx, store, *correlation, *principal, time.Now, stdout)
	}
	fmt.Fprintf(stderr, "jobbridge tasks: unknown action %q\n\n", positional[0])
	return cmd.usageError()
}

// taskFilter selects tasks of the store.
type taskFilter struct {
	state     mapping.Status
	tool      string
	principal string
}

func (f taskFilter) check() error {
	switch f.state {
	case "", mapping.StatusWorking, mapping.StatusInputRequired:
	case mapping.StatusCompleted, mapping.StatusFailed, mapping.StatusCancelled:
		if f.principal == "" {
			return fmt.Errorf("--state %s: finished tasks can be listed per principal only (give --principal); without one the store lists live tasks", f.state)
		}
	default:
		return fmt.Errorf("--state %q: want working, input_required, completed, failed or cancelled", f.state)
	}
	return nil
}

func (f taskFilter) match(t *mapping.Task) bool {
	return (f.state == "" || t.Status == f.state) && (f.tool == "" || t.Tool == f.tool) &&
		(f.principal == "" || t.Principal == f.principal)
}

// findTasks returns the tasks f selects, newest first. The store has no
// list by filter: a principal's tasks are read page by page
// (ListByPrincipal); without a principal the live tasks are (ListLive),
// which leaves finished ones out.
func findTasks(ctx context.Context, store mapping.Store, f taskFilter, now time.Time) ([]*mapping.Task, error) {
	var all []*mapping.Task
	if f.principal != "" {
		var after *mapping.Cursor
		for len(all) < scanLimit {
			page, next, err := store.ListByPrincipal(ctx, f.principal, now, after, mapping.MaxListLimit)
			if err != nil {
				return nil, err
			}
			all = append(all, page...)
			if next == nil {
				break
			}
			after = next
		}
	} else {
		live, err := store.ListLive(ctx, now, scanLimit)
		if err != nil {
			return nil, err
		}
		all = live
	}
	var out []*mapping.Task
	for _, t := range all {
		if f.match(t) {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b *mapping.Task) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// listTasks prints the tasks f selects as a table.
func listTasks(ctx context.Context, store mapping.Store, f taskFilter, limit int, now time.Time, w io.Writer) error {
	tasks, err := findTasks(ctx, store, f, now)
	if err != nil {
		return fmt.Errorf("listing tasks: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCORRELATION\tJOB\tTOOL\tPRINCIPAL\tSTATE\tAGE")
	for i, t := range tasks {
		if limit > 0 && i == limit {
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", keyPrefix(t.Key), orDash(t.CorrelationID), orDash(jobID(t)),
			sanitize(t.Tool), orDash(sanitize(t.Principal)), t.Status, now.Sub(t.CreatedAt).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if limit > 0 && len(tasks) > limit {
		fmt.Fprintf(w, "(%d more not shown; raise --limit or narrow the filter)\n", len(tasks)-limit)
	}
	return nil
}

// keyPrefix is the start of a task's key (the hash of its ID), enough to
// tell tasks apart in a listing; it matches the bridge's log lines.
func keyPrefix(k mapping.Key) string { return hex.EncodeToString(k[:6]) }

// jobID is the backend's job ID from the task's job reference, "" before
// the job is submitted.
func jobID(t *mapping.Task) string {
	var ref adapters.JobRef
	if len(t.JobRef) == 0 || json.Unmarshal(t.JobRef, &ref) != nil {
		return ""
	}
	return sanitize(ref.ID)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// operatorCancelMessage is the status message of a task an operator
// cancelled, until the server reports the cancel's progress.
const operatorCancelMessage = "cancelled by an operator (jobbridge tasks cancel); the cancel is forwarded to the backend"

// operatorCancel records a cancel of the live task with the given
// correlation ID as the server's tasks/cancel would, for the server to
// forward: a pending cancel (requested, not forwarded) with the row marked
// for observation, which the next sweep picks up and forwards. A task
// still waiting for confirmation, with no job, ends cancelled at once.
func operatorCancel(ctx context.Context, store mapping.Store, correlation, principal string, now func() time.Time, w io.Writer) error {
	tasks, err := findTasks(ctx, store, taskFilter{principal: principal}, now())
	if err != nil {
		return fmt.Errorf("finding the task: %w", err)
	}
	var task *mapping.Task
	for _, t := range tasks {
		if t.CorrelationID == correlation {
			task = t
			break
		}
	}
	if task == nil {
		if principal == "" {
			return fmt.Errorf("no live task has correlation ID %q (a finished task is listed with --principal)", correlation)
		}
		return fmt.Errorf("principal %q has no task with correlation ID %q", principal, correlation)
	}
	for range 20 {
		if task.Status.Terminal() {
			fmt.Fprintf(w, "task %s (correlation %s) has already ended: %s\n", keyPrefix(task.Key), correlation, task.Status)
			return nil
		}
		at := now().UTC()
		t := task.Clone()
		if t.Phase == mapping.PhaseConfirming {
			// Nothing was submitted: end it as the server ends a cancelled
			// confirmation (an outcome with neither result nor error).
			t.Status, t.Phase = mapping.StatusCancelled, mapping.PhaseDone
			t.StatusMessage = "cancelled by an operator (jobbridge tasks cancel) before the job was submitted"
			t.InputRequests, t.Args = nil, nil
			t.Outcome = json.RawMessage(`{}`)
		} else {
			if t.CancelRequestedAt == nil {
				t.CancelRequestedAt = &at
			}
			t.StatusMessage = operatorCancelMessage
			// Observed afresh on the next sweep, which forwards the cancel.
			t.ObservedAt = nil
		}
		t.UpdatedAt = at
		err := store.Update(ctx, t)
		if errors.Is(err, mapping.ErrConflict) {
			if task, err = store.Get(ctx, task.Key, task.Principal, at); err != nil {
				return fmt.Errorf("re-reading the task: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("recording the cancel: %w", err)
		}
		if t.Status.Terminal() {
			fmt.Fprintf(w, "task %s (correlation %s, principal %s) cancelled: no job had been submitted\n", keyPrefix(t.Key), correlation, orDash(t.Principal))
			return nil
		}
		job := jobID(t)
		fmt.Fprintf(w, "cancel recorded for task %s (correlation %s, job %s, principal %s); the server forwards it to %s on its next sweep\n",
			keyPrefix(t.Key), correlation, orDash(job), orDash(t.Principal), strings.TrimSpace(t.Backend))
		return nil
	}
	return fmt.Errorf("recording the cancel: %w", mapping.ErrConflict)
}
