package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/taskclient"
)

// storeTask reads the row of a task ID from the test server's store, as an
// operator's second process would.
func storeTask(t *testing.T, s *testServer, id string) *mapping.Task {
	t.Helper()
	store, err := openStore(t.Context(), s.store)
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
		{name: "finished without principal", args: []string{"--state", "completed"}, wantErr: "finished tasks can be listed per principal only"},
		{name: "bad state", args: []string{"--state", "done"}, wantErr: `--state "done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCommand(t, t.Context(), "", append([]string{"tasks", "list", "--store", s.store}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
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
		{"jb-a", "a", "alice", mapping.StatusWorking, operatorCancelMessage, "the server forwards it to jobs on its next sweep"},
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
		if got.Status != tt.wantStatus || got.StatusMessage != tt.wantMessage || got.CancelRequestedAt == nil && !got.Status.Terminal() {
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
