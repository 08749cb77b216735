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
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
)

const tasksUsage = `usage: jobbridge tasks list --store URL [--state S[,S...]] [--tool T] [--principal P] [--correlation ID] [--limit N]
       jobbridge tasks cancel --store URL --correlation ID [--principal P]

An operator's view of the task store, read directly (the server need not be
asked, and no task ID is needed or shown: task IDs are their owners' bearer
secrets and the store holds only their hashes). It runs beside a running
server: a SQLite store is opened as a tool's, without the server's lock.

  list    prints the tasks: key (a prefix of the task ID's hash), the
          correlation ID sent to the backend, the backend's job ID, tool,
          principal, state and age, newest first. --state takes states
          (working, input_required, completed, failed, cancelled), "live"
          (working and input_required) or "all"; without it the live tasks
          are listed, or all of them with --principal or --correlation.
  cancel  cancels the live task with the given correlation ID on behalf of
          its owner, recorded as an operator cancel: the task's status
          message says so and the server forwards the cancel to the backend
          on its next sweep (a task still waiting for confirmation ends at
          once, nothing having been submitted).

Example:

  jobbridge tasks list --store sqlite:jobbridge.db --state working
  jobbridge tasks list --store sqlite:jobbridge.db --state completed,failed --tool deploy
  jobbridge tasks cancel --store sqlite:jobbridge.db --correlation jb-5f2c...

Flags:
`

// runTasks implements `jobbridge tasks`.
func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("tasks", tasksUsage, stdout, stderr)
	storeURL := cmd.fs.String("store", os.Getenv("JOBBRIDGE_STORE"), "task store `URL`: sqlite:PATH or postgres://... (default $JOBBRIDGE_STORE)")
	state := cmd.fs.String("state", "", "list only tasks in these `states`: comma-separated working, input_required, completed, failed, cancelled; live; all")
	tool := cmd.fs.String("tool", "", "list only tasks of this `tool`")
	principal := cmd.fs.String("principal", "", "only tasks of this `principal`")
	limit := cmd.fs.Int("limit", 200, "print at most `N` tasks (0: all)")
	correlation := cmd.fs.String("correlation", "", "the task's correlation `ID` (cancel: required)")
	positional, err := cmd.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) == 0:
		return cmd.usageErrorf("missing the action: list or cancel")
	case positional[0] != "list" && positional[0] != "cancel":
		return cmd.usageErrorf("unknown action %q (want list or cancel)", positional[0])
	case len(positional) > 1:
		return cmd.usageErrorf("unexpected argument %q after the action", positional[1])
	case *storeURL == "":
		return cmd.usageErrorf("missing --store URL (or $JOBBRIDGE_STORE), the task store to read")
	}
	if positional[0] == "list" {
		f, err := listFilter(*state, *tool, *principal, *correlation)
		if err != nil {
			return cmd.usageErrorf("%v", err)
		}
		store, err := openToolStore(ctx, *storeURL)
		if err != nil {
			return err
		}
		defer store.Close()
		return listTasks(ctx, store, f, *limit, time.Now(), stdout)
	}
	switch { // cancel
	case *correlation == "":
		return cmd.usageErrorf("missing --correlation ID, the task to cancel")
	case *state != "" || *tool != "":
		return cmd.usageErrorf("--state and --tool select tasks to list; cancel takes --correlation ID")
	}
	store, err := openToolStore(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	return operatorCancel(ctx, store, *correlation, *principal, time.Now, stdout)
}

// openToolStore opens the store at url for a command that runs beside the
// server: a SQLite file is opened shared (without the server's lock, see
// sqlite.Options) and must exist already; other stores open as the server
// opens them.
func openToolStore(ctx context.Context, url string) (mapping.Store, error) {
	scheme, rest, ok := strings.Cut(url, ":")
	if !ok || scheme != "sqlite" {
		return openStore(ctx, url)
	}
	path := strings.TrimPrefix(rest, "//")
	if path == "" {
		return nil, fmt.Errorf("--store %q: missing path", url)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening store %s: %w (a server creates it on its first start)", path, err)
	}
	s, err := sqlite.Open(ctx, path, &sqlite.Options{Shared: true})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return s, nil
}

// liveStatuses are the states of tasks that have not ended.
var liveStatuses = []mapping.Status{mapping.StatusWorking, mapping.StatusInputRequired}

// listFilter returns the store filter of the list flags. Without --state
// it selects the live tasks, or every task of a principal or correlation
// ID, as earlier builds listed them.
func listFilter(state, tool, principal, correlation string) (mapping.Filter, error) {
	f := mapping.Filter{Tool: tool, Principal: principal, CorrelationID: correlation}
	switch state {
	case "":
		if principal == "" && correlation == "" {
			f.Status = liveStatuses
		}
		return f, nil
	case "all":
		return f, nil
	}
	for _, s := range strings.Split(state, ",") {
		s = strings.TrimSpace(s)
		switch st := mapping.Status(s); {
		case s == "live":
			f.Status = append(f.Status, liveStatuses...)
		case st.Valid():
			f.Status = append(f.Status, st)
		default:
			return mapping.Filter{}, fmt.Errorf("--state %q: want working, input_required, completed, failed or cancelled (comma-separated), live or all", s)
		}
	}
	slices.Sort(f.Status)
	f.Status = slices.Compact(f.Status)
	return f, nil
}

// listTasks prints at most limit (0: every one) of the tasks f selects as
// a table, newest first, reading them from the store page by page.
func listTasks(ctx context.Context, store mapping.Store, f mapping.Filter, limit int, now time.Time, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCORRELATION\tJOB\tTOOL\tPRINCIPAL\tSTATE\tAGE")
	var (
		after   *mapping.Cursor
		printed int
		more    bool
	)
	for {
		page := mapping.MaxListLimit
		if limit > 0 {
			// One more than is left to print tells whether more follow.
			page = min(limit-printed+1, mapping.MaxListLimit)
		}
		tasks, next, err := store.List(ctx, f, now, after, page)
		if err != nil {
			return fmt.Errorf("listing tasks: %w", err)
		}
		for _, t := range tasks {
			if limit > 0 && printed == limit {
				more = true
				break
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", keyPrefix(t.Key), orDash(sanitize(t.CorrelationID)), orDash(jobID(t)),
				sanitize(t.Tool), orDash(sanitize(t.Principal)), t.Status, now.Sub(t.CreatedAt).Round(time.Second))
			printed++
		}
		if more || next == nil {
			break
		}
		after = next
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(w, "(more tasks match; raise --limit or narrow the filter)\n")
	}
	return nil
}

// keyPrefix is the start of a task's key (the hash of its ID), enough to
// tell tasks apart in a listing; it matches the bridge's log lines.
func keyPrefix(k mapping.Key) string { return hex.EncodeToString(k[:6]) }

// jobID is the backend's job ID of the task (from its job reference if the
// row has none of its own), "" before the job is submitted.
func jobID(t *mapping.Task) string {
	if t.JobID != "" {
		return sanitize(t.JobID)
	}
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

// operatorCancel records a cancel of the live task with the given
// correlation ID (of principal, if not empty) as the server's tasks/cancel
// would, through the same lifecycle path, for the server to forward: a
// pending cancel (requested by mapping.CancelByOperator, not forwarded)
// with the row marked for observation, which the next sweep picks up and
// forwards. A task still waiting for confirmation, with no job, ends
// cancelled at once.
func operatorCancel(ctx context.Context, store mapping.Store, correlation, principal string, now func() time.Time, w io.Writer) error {
	// Correlation IDs are unique; a few rows are enough to tell if not.
	found, _, err := store.List(ctx, mapping.Filter{CorrelationID: correlation, Principal: principal}, now(), nil, 10)
	if err != nil {
		return fmt.Errorf("finding the task: %w", err)
	}
	var live []*mapping.Task
	for _, t := range found {
		if !t.Status.Terminal() {
			live = append(live, t)
		}
	}
	var task *mapping.Task
	switch {
	case len(live) == 1:
		task = live[0]
	case len(live) > 1:
		var owners []string
		for _, t := range live {
			owners = append(owners, orDash(sanitize(t.Principal)))
		}
		return fmt.Errorf("%d live tasks have correlation ID %q (principals %s): give --principal", len(live), correlation, strings.Join(owners, ", "))
	case len(found) == 0 && principal == "":
		return fmt.Errorf("no task has correlation ID %q", correlation)
	case len(found) == 0:
		return fmt.Errorf("principal %q has no task with correlation ID %q", principal, correlation)
	case principal == "":
		return fmt.Errorf("no live task has correlation ID %q: it has ended (%s)", correlation, found[0].Status)
	default:
		task = found[0]
	}
	if task.Status.Terminal() {
		fmt.Fprintf(w, "task %s (correlation %s) has already ended: %s\n", keyPrefix(task.Key), correlation, task.Status)
		return nil
	}
	// The same cancel path as the server's tasks/cancel; this tool records
	// the intent and the server's sweep forwards it.
	lc, err := lifecycle.New(lifecycle.Options{Store: store, Now: now, Context: ctx})
	if err != nil {
		return err
	}
	t, _, err := lc.RequestCancel(task, mapping.CancelByOperator)
	switch {
	case errors.Is(err, lifecycle.ErrTerminal):
		fmt.Fprintf(w, "task %s (correlation %s) has already ended: %s\n", keyPrefix(task.Key), correlation, t.Status)
		return nil
	case err != nil:
		return fmt.Errorf("recording the cancel: %w", err)
	case t.Status.Terminal():
		fmt.Fprintf(w, "task %s (correlation %s, principal %s) cancelled: no job had been submitted\n", keyPrefix(t.Key), correlation, orDash(t.Principal))
		return nil
	}
	fmt.Fprintf(w, "cancel recorded for task %s (correlation %s, job %s, principal %s); the server forwards it to %s on its next sweep\n",
		keyPrefix(t.Key), correlation, orDash(jobID(t)), orDash(t.Principal), strings.TrimSpace(t.Backend))
	return nil
}
