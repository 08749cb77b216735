package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/jobbridge/jobbridge/mapping"
)

// Listing a principal's tasks: ListByPrincipal pages through the tasks Get
// would return to that principal (terminal ones included, expired ones not),
// newest first and then by key, and its cursors survive the trip through
// Encode and ParseCursor that the bridge makes them take to its clients.

// newestFirst returns tasks in ListByPrincipal's order.
func newestFirst(tasks ...*mapping.Task) []*mapping.Task {
	s := slices.Clone(tasks)
	slices.SortFunc(s, func(a, b *mapping.Task) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return bytes.Compare(a.Key[:], b.Key[:])
	})
	return s
}

// page is one ListByPrincipal call's result.
type page struct {
	tasks []*mapping.Task
	next  *mapping.Cursor
}

// listPage reads the page of principal after the encoded cursor (empty:
// the first page), as the bridge would.
func listPage(t *testing.T, s mapping.Store, principal string, now time.Time, cursor string, limit int) page {
	t.Helper()
	var after *mapping.Cursor
	if cursor != "" {
		c, err := mapping.ParseCursor(cursor)
		if err != nil {
			t.Fatalf("ParseCursor of a cursor the store returned: %v", err)
		}
		after = c
	}
	tasks, next, err := s.ListByPrincipal(t.Context(), principal, now, after, limit)
	if err != nil {
		t.Fatalf("ListByPrincipal(%q, limit %d): %v", principal, limit, err)
	}
	if len(tasks) > limit {
		t.Fatalf("ListByPrincipal(%q, limit %d) returned %d tasks", principal, limit, len(tasks))
	}
	return page{tasks: tasks, next: next}
}

// listAll walks every page of principal from the encoded cursor, checking
// that each page but the last is full and that the last has no cursor, and
// returns the tasks in the order read and how many pages there were.
func listAll(t *testing.T, s mapping.Store, principal string, now time.Time, cursor string, limit int) ([]*mapping.Task, int) {
	t.Helper()
	var all []*mapping.Task
	for pages := 1; ; pages++ {
		p := listPage(t, s, principal, now, cursor, limit)
		all = append(all, p.tasks...)
		if p.next == nil {
			return all, pages
		}
		if len(p.tasks) != limit {
			t.Fatalf("page %d has %d tasks and a next cursor, want %d", pages, len(p.tasks), limit)
		}
		if pages > 1000 {
			t.Fatalf("still paging after %d pages", pages)
		}
		cursor = p.next.Encode()
	}
}

// keysOf returns the correlation IDs of tasks, which name them in messages.
func keysOf(tasks []*mapping.Task) []string {
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.CorrelationID
	}
	return ids
}

func testListByPrincipal(t *testing.T, h Harness) {
	now := at(30 * time.Minute)

	// Alice's tasks, created a minute apart, in an order unrelated to
	// creation, and interleaved in time with Bob's.
	var alice []*mapping.Task
	for _, minute := range []int{7, 1, 5, 3, 9, 2} {
		task := newTask(fmt.Sprintf("alice-%d", minute), "alice")
		lifetime(task, at(time.Duration(minute)*time.Minute), at(2*time.Hour))
		alice = append(alice, task)
	}
	done := completedTask("alice-done", "alice")
	lifetime(done, at(4*time.Minute), at(2*time.Hour))
	full := fullTask("alice-full", "alice") // created at(-90m), live for 36h
	alice = append(alice, done, full)
	want := newestFirst(alice...)

	expired := newTask("alice-expired", "alice")
	lifetime(expired, at(-2*time.Hour), at(-time.Hour))
	expiresNow := newTask("alice-expires-now", "alice")
	lifetime(expiresNow, at(8*time.Minute), now)
	var bob []*mapping.Task
	for _, minute := range []int{6, 4, 8, 10} {
		task := newTask(fmt.Sprintf("bob-%d", minute), "bob")
		lifetime(task, at(time.Duration(minute)*time.Minute), at(2*time.Hour))
		bob = append(bob, task)
	}
	// A key of Alice's under another principal stays Bob's.
	aliceCase := newTask("alice-case", "Alice")
	lifetime(aliceCase, at(6*time.Minute), at(2*time.Hour))

	s := h.Open(t)
	mustCreate(t, s, bob...)
	mustCreate(t, s, alice...)
	mustCreate(t, s, expired, expiresNow, aliceCase)

	t.Run("pages cover the principal's tasks", func(t *testing.T) {
		for _, limit := range []int{1, 2, 3, len(want) - 1, len(want), len(want) + 1, mapping.MaxListLimit} {
			t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
				got, pages := listAll(t, s, "alice", now, "", limit)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tasks over all pages mismatch (-want +got):\n%s", diff)
				}
				// No empty last page when the tasks fill the pages exactly.
				if wantPages := max((len(want)+limit-1)/limit, 1); pages != wantPages {
					t.Errorf("read %d pages, want %d", pages, wantPages)
				}
			})
		}
	})

	t.Run("each task as Get returns it", func(t *testing.T) {
		got, _ := listAll(t, s, "alice", now, "", 2)
		for _, task := range got {
			assertStored(t, s, task, now)
		}
	})

	t.Run("other principals", func(t *testing.T) {
		tests := []struct {
			principal string
			want      []*mapping.Task
		}{
			{"bob", newestFirst(bob...)},
			{"Alice", []*mapping.Task{aliceCase}},
			{"carol", nil},
			{"", nil},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%q", tt.principal), func(t *testing.T) {
				got, _ := listAll(t, s, tt.principal, now, "", 2)
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("tasks mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("principal without tasks", func(t *testing.T) {
		tasks, next, err := s.ListByPrincipal(t.Context(), "carol", now, nil, 2)
		if err != nil || len(tasks) != 0 || next != nil {
			t.Errorf("ListByPrincipal(carol) = %v, %v, %v; want no tasks, a nil cursor and no error", keysOf(tasks), next, err)
		}
	})

	t.Run("expiry follows now", func(t *testing.T) {
		// Before its expiry the task that expires at now is listed; at and
		// after a task's ExpiresAt it no longer is.
		earlier := now.Add(-time.Millisecond)
		got, _ := listAll(t, s, "alice", earlier, "", 2)
		if diff := cmp.Diff(newestFirst(append(slices.Clone(alice), expiresNow)...), got); diff != "" {
			t.Errorf("tasks a millisecond before now mismatch (-want +got):\n%s", diff)
		}
		got, _ = listAll(t, s, "alice", at(3*time.Hour), "", 2)
		if diff := cmp.Diff([]*mapping.Task{full}, got); diff != "" {
			t.Errorf("tasks after the others expired mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("cursor past the end", func(t *testing.T) {
		oldest := want[len(want)-1]
		tasks, next, err := s.ListByPrincipal(t.Context(), "alice", now, mapping.CursorOf(oldest), 2)
		if err != nil || len(tasks) != 0 || next != nil {
			t.Errorf("ListByPrincipal after the oldest task = %v, %v, %v; want no tasks, a nil cursor and no error", keysOf(tasks), next, err)
		}
	})

	t.Run("limit out of range", func(t *testing.T) {
		for _, limit := range []int{0, -1, mapping.MaxListLimit + 1} {
			tasks, next, err := s.ListByPrincipal(t.Context(), "alice", now, nil, limit)
			if err == nil {
				t.Errorf("ListByPrincipal(limit %d) = %v, %v; want an error", limit, keysOf(tasks), next)
			}
		}
	})

	t.Run("bad cursor", func(t *testing.T) {
		p := listPage(t, s, "alice", now, "", 2)
		good := p.next.Encode()
		for _, bad := range []string{"x", good[:len(good)-2], good + "AA", "%%%"} {
			if c, err := mapping.ParseCursor(bad); !errors.Is(err, mapping.ErrBadCursor) {
				t.Errorf("ParseCursor(%q) = %+v, %v; want ErrBadCursor", bad, c, err)
			}
		}
	})
}

// testListByPrincipalTies checks that tasks created in the same millisecond
// are ordered by key and split across pages without loss.
func testListByPrincipalTies(t *testing.T, h Harness) {
	now := at(time.Minute)
	var tied []*mapping.Task
	for i := range 5 {
		task := newTask(fmt.Sprintf("tied-%d", i), "alice")
		tied = append(tied, task) // all created at(0)
	}
	newer := newTask("newer", "alice")
	lifetime(newer, at(time.Millisecond), at(time.Hour))
	older := newTask("older", "alice")
	lifetime(older, at(-time.Millisecond), at(time.Hour))
	all := append(slices.Clone(tied), newer, older)

	s := h.Open(t)
	mustCreate(t, s, all...)
	for _, limit := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got, _ := listAll(t, s, "alice", now, "", limit)
			if diff := cmp.Diff(keysOf(newestFirst(all...)), keysOf(got)); diff != "" {
				t.Errorf("order mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// testListByPrincipalConcurrentChanges checks that writes between two page
// reads neither repeat nor skip a task on the later pages: new tasks are
// newer than the cursor, a task that turns terminal keeps its place, and
// purging expired tasks moves nothing.
func testListByPrincipalConcurrentChanges(t *testing.T, h Harness) {
	now := at(30 * time.Minute)
	var tasks []*mapping.Task
	for minute := 1; minute <= 8; minute++ {
		task := newTask(fmt.Sprintf("task-%d", minute), "alice")
		lifetime(task, at(time.Duration(minute)*time.Minute), at(2*time.Hour))
		tasks = append(tasks, task)
	}
	soon := newTask("expires-soon", "alice")
	lifetime(soon, at(30*time.Second), now.Add(time.Minute))
	s := h.Open(t)
	mustCreate(t, s, tasks...)
	mustCreate(t, s, soon)
	want := newestFirst(tasks...) // task-8 … task-1

	first := listPage(t, s, "alice", now, "", 3)
	if diff := cmp.Diff(keysOf(want[:3]), keysOf(first.tasks)); diff != "" {
		t.Fatalf("first page mismatch (-want +got):\n%s", diff)
	}

	// Between the reads: new tasks (one at the very time of the cursor's
	// task, with keys before and after it), a task further down the list
	// turns terminal, and the soon-expiring one expires and is purged.
	for i := range 4 {
		task := newTask(fmt.Sprintf("new-%d", i), "alice")
		lifetime(task, at(time.Duration(20+i)*time.Minute), at(2*time.Hour))
		mustCreate(t, s, task)
	}
	// Of the ones created at the cursor's time, those with a greater key
	// come after it: they are new, and are listed.
	last := first.tasks[len(first.tasks)-1]
	var sameTimeAfter []*mapping.Task
	for i := range 6 {
		task := newTask(fmt.Sprintf("same-time-%d", i), "alice")
		lifetime(task, last.CreatedAt, at(2*time.Hour))
		mustCreate(t, s, task)
		if bytes.Compare(task.Key[:], last.Key[:]) > 0 {
			sameTimeAfter = append(sameTimeAfter, task)
		}
	}
	turning := mustGet(t, s, want[4].Key, "alice", now)
	turning.Phase, turning.Status = mapping.PhaseDone, mapping.StatusCompleted
	if err := s.Update(t.Context(), turning); err != nil {
		t.Fatalf("Update: %v", err)
	}
	later := now.Add(2 * time.Minute)
	if _, err := s.PurgeExpired(t.Context(), later); err != nil {
		t.Fatalf("PurgeExpired: %v", err)
	}

	rest, _ := listAll(t, s, "alice", later, first.next.Encode(), 3)
	older := slices.Clone(want[3:])
	older[1] = turning
	wantRest := append(newestFirst(sameTimeAfter...), older...)
	if diff := cmp.Diff(wantRest, rest); diff != "" {
		t.Errorf("later pages mismatch (-want +got):\n%s", diff)
	}
}
