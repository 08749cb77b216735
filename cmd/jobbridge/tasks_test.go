package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/sqlite"
	"github.com/jobbridge/jobbridge/taskclient"
)

// storeTask reads the row of a task ID from the test server's store, as an
// operator's second process would (while the server holds it).
func storeTask(t *testing.T, s *testServer, id string) *mapping.Task {
	t.Helper()
	store, err := openToolStore(t.Context(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	task, err := store.Get(t.Context(), mapping.KeyOf(id), "anonymous", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestTasksList(t *testing.T) {
	s := newTestServer(t)
	slow := s.startTask(t, "slow_compute", map[string]any{"seconds": 30})
	failing := s.startTask(t, "failing_job", map[string]any{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := taskclient.Wait(ctx, s.client(), failing, nil); err != nil {
		t.Fatal(err)
	}
	slowRow, failingRow := storeTask(t, s, slow), storeTask(t, s, failing)

	tests := []struct {
		name     string
		args     []string
		want     []string // rows, by correlation ID
		dontWant []string
		wantErr  string
	}{
		{name: "live tasks", args: nil, want: []string{slowRow.CorrelationID}, dontWant: []string{failingRow.CorrelationID}},
		{name: "by tool", args: []string{"--tool", "failing_job"}, dontWant: []string{slowRow.CorrelationID, failingRow.CorrelationID}},
		{name: "finished by principal", args: []string{"--principal", "anonymous", "--state", "completed"}, want: []string{failingRow.CorrelationID}, dontWant: []string{slowRow.CorrelationID}},
		{name: "all of a principal", args: []string{"--principal", "anonymous"}, want: []string{slowRow.CorrelationID, failingRow.CorrelationID}},
		{name: "finished of every principal", args: []string{"--state", "completed"}, want: []string{failingRow.CorrelationID}, dontWant: []string{slowRow.CorrelationID}},
		{name: "every state", args: []string{"--state", "all"}, want: []string{slowRow.CorrelationID, failingRow.CorrelationID}},
		{name: "by correlation ID", args: []string{"--correlation", failingRow.CorrelationID}, want: []string{failingRow.CorrelationID}, dontWant: []string{slowRow.CorrelationID}},
		{name: "finished by tool", args: []string{"--tool", "failing_job", "--state", "completed,failed"}, want: []string{failingRow.CorrelationID}, dontWant: []string{slowRow.CorrelationID}},
		{name: "bad state", args: []string{"--state", "done"}, wantErr: `--state "done"`},
		{name: "bad state among good ones", args: []string{"--state", "working,Done"}, wantErr: `--state "Done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCommand(t, t.Context(), "", append([]string{"tasks", "list", "--store", s.store}, tt.args...)...)
			if tt.wantErr != "" {
				// A usage error: exit status 2, the problem on stderr.
				if !errors.Is(err, exitError(2)) || !strings.Contains(stderr, tt.wantErr) {
					t.Fatalf("error %v, stderr %q; want exit status 2 and %q", err, stderr, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("tasks list: %v\n%s", err, stderr)
			}
			if !strings.HasPrefix(stdout, "KEY ") || !strings.Contains(stdout, "CORRELATION") || !strings.Contains(stdout, "PRINCIPAL") {
				t.Errorf("no header in:\n%s", stdout)
			}
			for _, id := range []string{slow, failing} {
				if strings.Contains(stdout, id) {
					t.Errorf("the listing shows a task ID:\n%s", stdout)
				}
			}
			for _, c := range tt.want {
				if !strings.Contains(stdout, c) {
					t.Errorf("no row for %s in:\n%s", c, stdout)
				}
			}
			for _, c := range tt.dontWant {
				if strings.Contains(stdout, c) {
					t.Errorf("a row for %s in:\n%s", c, stdout)
				}
			}
		})
	}
	// A row names the key prefix, the backend's job ID and the state.
	stdout, _, err := runCommand(t, t.Context(), "", "tasks", "list", "--store", s.store)
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, slowRow.CorrelationID) {
			row = line
		}
	}
	f := strings.Fields(row)
	if len(f) != 7 || f[0] != keyPrefix(slowRow.Key) || f[2] != jobID(slowRow) || f[2] == "-" || f[3] != "slow_compute" || f[4] != "anonymous" || f[5] != "working" {
		t.Errorf("row %q", row)
	}
}

func TestTasksCancelIsForwardedByTheServer(t *testing.T) {
	s := newTestServer(t)
	id := s.startTask(t, "slow_compute", map[string]any{"seconds": 30})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Wait for the job to exist, so that there is something to cancel.
	var row *mapping.Task
	for row = storeTask(t, s, id); row.Phase != mapping.PhaseSubmitted; row = storeTask(t, s, id) {
		if ctx.Err() != nil {
			t.Fatal("the job was never submitted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stdout, stderr, err := runCommand(t, t.Context(), "", "tasks", "cancel", "--store", s.store, "--correlation", row.CorrelationID)
	if err != nil {
		t.Fatalf("tasks cancel: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "cancel recorded for task "+keyPrefix(row.Key)) || !strings.Contains(stdout, "job "+jobID(row)) {
		t.Errorf("stdout %q", stdout)
	}
	final, err := taskclient.Wait(ctx, s.client(), id, nil)
	if err != nil || final.Status != "cancelled" {
		t.Fatalf("after the operator cancel: %v %+v", err, final)
	}
	if n := s.fake.Cancels(jobID(row)); n != 1 {
		t.Errorf("the backend saw %d cancels, want 1", n)
	}
	// Cancelling again finds no live task.
	if _, _, err := runCommand(t, t.Context(), "", "tasks", "cancel", "--store", s.store, "--correlation", row.CorrelationID); err == nil || !strings.Contains(err.Error(), "no live task has correlation ID") {
		t.Errorf("second cancel: %v", err)
	}
}

func TestTasksCancelRecordsAnOperatorCancel(t *testing.T) {
	s := newTestServer(t)
	s.stop() // nobody forwards it: the row shows what the CLI recorded
	store, err := openStore(t.Context(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	rows := []*mapping.Task{
		{Key: mapping.KeyOf("a"), Principal: "alice", Tool: "slow_compute", Backend: "jobs", CorrelationID: "jb-a", JobRef: []byte(`{"id":"job-1"}`),
			Phase: mapping.PhaseSubmitted, Status: mapping.StatusWorking, ObservedAt: &now},
		{Key: mapping.KeyOf("b"), Principal: "bob", Tool: "confirm_delete", Backend: "jobs", CorrelationID: "jb-b",
			Phase: mapping.PhaseConfirming, Status: mapping.StatusInputRequired, InputRequests: []byte(`{}`)},
	}
	for _, r := range rows {
		r.CreatedAt, r.UpdatedAt, r.TTL, r.ExpiresAt = now, now, time.Hour, now.Add(time.Hour)
		if err := store.Create(t.Context(), r, mapping.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		correlation string
		key         string
		principal   string
		wantStatus  mapping.Status
		wantMessage string
		wantOut     string
	}{
		{"jb-a", "a", "alice", mapping.StatusWorking, "cancellation requested by an operator (jobbridge tasks cancel); the server forwards it to the backend; job: ", "the server forwards it to jobs on its next sweep"},
		{"jb-b", "b", "bob", mapping.StatusCancelled, "cancelled by an operator (jobbridge tasks cancel) before the job was submitted", "no job had been submitted"},
	}
	for _, tt := range tests {
		stdout, stderr, err := runCommand(t, t.Context(), "", "tasks", "cancel", "--store", s.store, "--correlation", tt.correlation)
		if err != nil {
			t.Fatalf("tasks cancel %s: %v\n%s", tt.correlation, err, stderr)
		}
		if !strings.Contains(stdout, tt.wantOut) {
			t.Errorf("%s: stdout %q, want %q", tt.correlation, stdout, tt.wantOut)
		}
		got, err := store.Get(t.Context(), mapping.KeyOf(tt.key), tt.principal, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tt.wantStatus || !strings.HasPrefix(got.StatusMessage, tt.wantMessage) || got.CancelRequestedAt == nil && !got.Status.Terminal() ||
			!got.Status.Terminal() && got.CancelBy != mapping.CancelByOperator {
			t.Errorf("%s: row %s %q (cancel requested %v)", tt.correlation, got.Status, got.StatusMessage, got.CancelRequestedAt)
		}
		if got.CancelForwardedAt != nil || (!got.Status.Terminal() && got.ObservedAt != nil) {
			t.Errorf("%s: not a pending cancel the sweep picks up: forwarded %v, observed %v", tt.correlation, got.CancelForwardedAt, got.ObservedAt)
		}
	}
	if _, _, err := runCommand(t, t.Context(), "", "tasks", "cancel", "--store", s.store, "--correlation", "jb-none"); err == nil {
		t.Error("cancelling an unknown correlation ID succeeded")
	}
}

// operatorStore creates a store file with tasks of several principals,
// tools and states, as a server left it, and returns its URL and the time
// the tasks were created at.
func operatorStore(t *testing.T) (string, time.Time) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	store, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, r := range []struct {
		id, principal, tool string
		status              mapping.Status
	}{
		{"a1", "alice", "deploy", mapping.StatusWorking},
		{"a2", "alice", "deploy", mapping.StatusCompleted},
		{"a3", "alice", "test", mapping.StatusInputRequired},
		{"b1", "bob", "deploy", mapping.StatusWorking},
		{"b2", "bob", "test", mapping.StatusFailed},
		{"b3", "bob", "test", mapping.StatusCancelled},
	} {
		task := &mapping.Task{Key: mapping.KeyOf(r.id), Principal: r.principal, Tool: r.tool, Backend: "jobs",
			CorrelationID: "jb-" + r.id, JobID: "job-" + r.id, JobRef: []byte(`{"id":"job-` + r.id + `"}`),
			Phase: mapping.PhaseSubmitted, Status: r.status}
		if r.status.Terminal() {
			task.Phase = mapping.PhaseDone
		}
		created := now.Add(time.Duration(i-10) * time.Minute) // a1 oldest
		task.CreatedAt, task.UpdatedAt, task.TTL, task.ExpiresAt = created, created, 24*time.Hour, created.Add(24*time.Hour)
		if err := store.Create(t.Context(), task, mapping.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite:" + path, now
}

// rowsOf returns the correlation IDs of a listing's rows, in order, and
// whether it says more tasks match.
func rowsOf(t *testing.T, stdout string) ([]string, bool) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "KEY ") {
		t.Fatalf("no header in:\n%s", stdout)
	}
	var ids []string
	more := false
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "(more tasks match") {
			more = true
			continue
		}
		ids = append(ids, strings.Fields(l)[1])
	}
	return ids, more
}

func TestTasksListFilters(t *testing.T) {
	store, _ := operatorStore(t)
	tests := []struct {
		name     string
		args     []string
		want     []string // correlation IDs, newest first
		wantMore bool
	}{
		{"live by default", nil, []string{"jb-b1", "jb-a3", "jb-a1"}, false},
		{"every task of a principal by default", []string{"--principal", "bob"}, []string{"jb-b3", "jb-b2", "jb-b1"}, false},
		{"a state", []string{"--state", "working"}, []string{"jb-b1", "jb-a1"}, false},
		{"states", []string{"--state", "failed, cancelled"}, []string{"jb-b3", "jb-b2"}, false},
		{"live and one more", []string{"--state", "live,completed"}, []string{"jb-b1", "jb-a3", "jb-a2", "jb-a1"}, false},
		{"all", []string{"--state", "all"}, []string{"jb-b3", "jb-b2", "jb-b1", "jb-a3", "jb-a2", "jb-a1"}, false},
		{"a tool in every state", []string{"--tool", "test", "--state", "all"}, []string{"jb-b3", "jb-b2", "jb-a3"}, false},
		{"a tool of a principal", []string{"--tool", "deploy", "--principal", "alice"}, []string{"jb-a2", "jb-a1"}, false},
		{"a correlation ID", []string{"--correlation", "jb-b2"}, []string{"jb-b2"}, false},
		{"a correlation ID of another principal", []string{"--correlation", "jb-b2", "--principal", "alice"}, nil, false},
		{"a limit", []string{"--state", "all", "--limit", "2"}, []string{"jb-b3", "jb-b2"}, true},
		{"a limit the tasks fill exactly", []string{"--state", "all", "--limit", "6"}, []string{"jb-b3", "jb-b2", "jb-b1", "jb-a3", "jb-a2", "jb-a1"}, false},
		{"no limit", []string{"--state", "all", "--limit", "0"}, []string{"jb-b3", "jb-b2", "jb-b1", "jb-a3", "jb-a2", "jb-a1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCommand(t, t.Context(), "", append([]string{"tasks", "list", "--store", store}, tt.args...)...)
			if err != nil {
				t.Fatalf("tasks list: %v\n%s", err, stderr)
			}
			got, more := rowsOf(t, stdout)
			if !slices.Equal(got, tt.want) || more != tt.wantMore {
				t.Errorf("rows %v (more: %v), want %v (more: %v):\n%s", got, more, tt.want, tt.wantMore, stdout)
			}
		})
	}
}

func TestTasksOpensTheStoreBesideItsServer(t *testing.T) {
	store, _ := operatorStore(t)
	path := strings.TrimPrefix(store, "sqlite:")
	server, err := sqlite.Open(t.Context(), path, nil) // the server holds the file
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, stderr, err := runCommand(t, t.Context(), "", "tasks", "list", "--store", store); err != nil {
		t.Fatalf("tasks list beside the server: %v\n%s", err, stderr)
	}
	if _, stderr, err := runCommand(t, t.Context(), "", "tasks", "cancel", "--store", store, "--correlation", "jb-a1"); err != nil {
		t.Fatalf("tasks cancel beside the server: %v\n%s", err, stderr)
	}
	got, err := server.Get(t.Context(), mapping.KeyOf("a1"), "alice", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.CancelBy != mapping.CancelByOperator || got.CancelRequestedAt == nil {
		t.Errorf("the server reads cancel by %q at %v, want the operator's", got.CancelBy, got.CancelRequestedAt)
	}
	// A second server is still refused.
	if s, err := sqlite.Open(t.Context(), path, nil); err == nil {
		_ = s.Close()
		t.Error("a second server opened the file beside the first and the tools")
	}
	// A store that does not exist is not created by a tool.
	missing := filepath.Join(t.TempDir(), "typo.db")
	if _, _, err := runCommand(t, t.Context(), "", "tasks", "list", "--store", "sqlite:"+missing); err == nil {
		t.Error("tasks list of a missing store succeeded")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tasks list created the missing store: %v", err)
	}
}

func TestTasksCancelFindsTheTaskByCorrelation(t *testing.T) {
	store, _ := operatorStore(t)
	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{"a live task of any principal", []string{"--correlation", "jb-b1"}, "cancel recorded for task " + keyPrefix(mapping.KeyOf("b1")), ""},
		{"a live task of its principal", []string{"--correlation", "jb-a3", "--principal", "alice"}, "cancel recorded for task " + keyPrefix(mapping.KeyOf("a3")), ""},
		{"a task of another principal", []string{"--correlation", "jb-a1", "--principal", "bob"}, "", `principal "bob" has no task with correlation ID "jb-a1"`},
		{"an ended task", []string{"--correlation", "jb-b2"}, "", `no live task has correlation ID "jb-b2": it has ended (failed)`},
		{"an ended task of its principal", []string{"--correlation", "jb-b2", "--principal", "bob"}, "has already ended: failed", ""},
		{"an unknown correlation ID", []string{"--correlation", "jb-zz"}, "", `no task has correlation ID "jb-zz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := runCommand(t, t.Context(), "", append([]string{"tasks", "cancel", "--store", store}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(stdout, tt.wantOut) {
				t.Errorf("stdout %q, error %v; want %q", stdout, err, tt.wantOut)
			}
		})
	}
	// The cancels were recorded as the operator's; the others changed
	// nothing.
	s, err := openToolStore(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, principal := range map[string]string{"b1": "bob", "a3": "alice", "a1": "alice", "b2": "bob"} {
		got, err := s.Get(t.Context(), mapping.KeyOf(id), principal, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cancelled := id == "b1" || id == "a3"
		if (got.CancelBy == mapping.CancelByOperator) != cancelled || (got.CancelRequestedAt != nil) != cancelled {
			t.Errorf("%s: cancel by %q at %v, want an operator cancel: %v", id, got.CancelBy, got.CancelRequestedAt, cancelled)
		}
	}
}
