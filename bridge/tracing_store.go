package bridge

import (
	"context"
	"sync"

	"github.com/jobbridge/jobbridge/mapping"
)

// tracedStore wraps the bridge's (metered) store and turns the rows the
// bridge writes into task lifecycle events: task.created, task.submitted
// (the job reference is recorded) and task.state_changed. It adds no store
// access of its own.
type tracedStore struct {
	mapping.Store
	b *Bridge

	mu sync.Mutex
	// submitting are the tasks this process created or moved into the
	// submitting phase and has not yet seen submitted (bounded like the
	// live-task tracker).
	submitting map[mapping.Key]struct{}
}

// traceStore wraps s, keeping the optional interfaces the bridge discovers
// by type assertion (liveClaimer, ownerReleaser) exactly as s has them.
func traceStore(s mapping.Store, b *Bridge) mapping.Store {
	base := &tracedStore{Store: s, b: b, submitting: map[mapping.Key]struct{}{}}
	claimer, isClaimer := s.(liveClaimer)
	releaser, isReleaser := s.(ownerReleaser)
	switch {
	case isClaimer && isReleaser:
		return &tracedSharedStore{tracedStore: base, liveClaimer: claimer, ownerReleaser: releaser}
	case isClaimer:
		return &tracedClaimerStore{tracedStore: base, liveClaimer: claimer}
	case isReleaser:
		return &tracedReleaserStore{tracedStore: base, ownerReleaser: releaser}
	}
	return base
}

func (s *tracedStore) Create(ctx context.Context, t *mapping.Task, limits mapping.CreateLimits) error {
	err := s.Store.Create(ctx, t, limits)
	if err == nil {
		s.b.taskEvent(ctx, "task.created", t, attrState.String(string(t.Status)))
		s.watch(t)
	}
	return err
}

func (s *tracedStore) Update(ctx context.Context, t *mapping.Task) error {
	from, _ := s.b.metrics.live.state(t.Key)
	err := s.Store.Update(ctx, t)
	if err != nil {
		return err
	}
	if s.submitted(t) {
		s.b.taskEvent(ctx, "task.submitted", t)
	}
	if from != "" && from != t.Status {
		s.b.taskEvent(ctx, "task.state_changed", t, attrFromState.String(string(from)), attrState.String(string(t.Status)))
	}
	return nil
}

// watch remembers a task in the submitting phase.
func (s *tracedStore) watch(t *mapping.Task) {
	if t.Phase != mapping.PhaseSubmitting {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.submitting) < maxTrackedLive {
		s.submitting[t.Key] = struct{}{}
	}
}

// submitted reports whether the row t, just written, ends a submission this
// process watched.
func (s *tracedStore) submitted(t *mapping.Task) bool {
	if t.Phase == mapping.PhaseSubmitting {
		s.watch(t)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, watched := s.submitting[t.Key]
	if !watched {
		return false
	}
	if t.Phase == mapping.PhaseSubmitted || t.Status.Terminal() {
		delete(s.submitting, t.Key)
	}
	return t.Phase == mapping.PhaseSubmitted
}

// tracedClaimerStore, tracedReleaserStore and tracedSharedStore are
// tracedStore for stores with the optional interfaces.
type (
	tracedClaimerStore struct {
		*tracedStore
		liveClaimer
	}
	tracedReleaserStore struct {
		*tracedStore
		ownerReleaser
	}
	tracedSharedStore struct {
		*tracedStore
		liveClaimer
		ownerReleaser
	}
)

var (
	_ liveClaimer   = (*tracedClaimerStore)(nil)
	_ ownerReleaser = (*tracedReleaserStore)(nil)
	_ liveClaimer   = (*tracedSharedStore)(nil)
	_ ownerReleaser = (*tracedSharedStore)(nil)
)
