package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/mapping"
)

// RunIdempotency runs the contract of mapping.IdempotencyStore; the stores
// that Harness.Open returns must implement it. Each case opens a fresh
// store.
func RunIdempotency(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	t.Run("ClaimFreeKey", func(t *testing.T) { testClaimFreeKey(t, h) })
	t.Run("ClaimHeldKey", func(t *testing.T) { testClaimHeldKey(t, h) })
	t.Run("KeysArePerPrincipal", func(t *testing.T) { testKeysArePerPrincipal(t, h) })
	t.Run("ExpiredKeyIsFree", func(t *testing.T) { testExpiredKeyIsFree(t, h) })
	t.Run("ReplaceNamedTask", func(t *testing.T) { testReplaceNamedTask(t, h) })
	t.Run("Release", func(t *testing.T) { testReleaseKey(t, h) })
	t.Run("Purge", func(t *testing.T) { testPurgeKeys(t, h) })
	t.Run("ConcurrentClaims", func(t *testing.T) {
		s := h.Open(t)
		testConcurrentClaims(t, []mapping.Store{s})
	})
	if h.Peer != nil {
		t.Run("ConcurrentClaimsAcrossPeers", func(t *testing.T) {
			s := h.Open(t)
			testConcurrentClaims(t, []mapping.Store{s, h.Peer(t, s)})
		})
	}
	if h.Reopen != nil {
		t.Run("SurvivesReopen", func(t *testing.T) {
			s := h.Open(t)
			rec := keyRecord("alice", "deploy-42", "task-1")
			mustClaim(t, s, rec, nil, at(0))
			s = h.Reopen(t, s)
			got, err := idem(t, s).ClaimIdempotencyKey(t.Context(), keyRecord("alice", "deploy-42", "task-2"), nil, at(time.Minute))
			if err != nil {
				t.Fatalf("ClaimIdempotencyKey after reopen: %v", err)
			}
			if got == nil || got.TaskKey != rec.TaskKey {
				t.Fatalf("after reopen, the key named %v, want the first task", got)
			}
		})
	}
}

func idem(t *testing.T, s mapping.Store) mapping.IdempotencyStore {
	t.Helper()
	is, ok := s.(mapping.IdempotencyStore)
	if !ok {
		t.Fatalf("%T does not implement mapping.IdempotencyStore", s)
	}
	return is
}

// keyRecord is the row binding principal's key to the task taskID, claimed
// at at(0) and expiring an hour later, with a window of ten minutes.
func keyRecord(principal, key, taskID string) *mapping.IdempotencyRecord {
	return &mapping.IdempotencyRecord{
		Principal:  principal,
		KeyHash:    mapping.IdempotencyKeyOf(key),
		ArgsDigest: "digest-of-" + key,
		TaskKey:    mapping.KeyOf(taskID),
		SealedID:   []byte("sealed " + taskID),
		CreatedAt:  at(0),
		ExpiresAt:  at(time.Hour),
		Window:     10 * time.Minute,
	}
}

func mustClaim(t *testing.T, s mapping.Store, rec *mapping.IdempotencyRecord, replace *mapping.Key, now time.Time) {
	t.Helper()
	held, err := idem(t, s).ClaimIdempotencyKey(t.Context(), rec, replace, now)
	if err != nil {
		t.Fatalf("ClaimIdempotencyKey: %v", err)
	}
	if held != nil {
		t.Fatalf("ClaimIdempotencyKey of a free key: held by task %x", held.TaskKey[:4])
	}
}

func testClaimFreeKey(t *testing.T, h Harness) {
	s := h.Open(t)
	rec := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, rec, nil, at(0))
	got, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", rec.KeyHash, at(time.Minute))
	if err != nil {
		t.Fatalf("GetIdempotencyKey: %v", err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("stored row differs (-claimed +read):\n%s", diff)
	}
}

func testClaimHeldKey(t *testing.T, h Harness) {
	s := h.Open(t)
	first := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, first, nil, at(0))
	second := keyRecord("alice", "deploy-42", "task-2")
	second.ArgsDigest = "other arguments"
	held, err := idem(t, s).ClaimIdempotencyKey(t.Context(), second, nil, at(time.Minute))
	if err != nil {
		t.Fatalf("ClaimIdempotencyKey: %v", err)
	}
	if diff := cmp.Diff(first, held); diff != "" {
		t.Errorf("a claim of a held key must return the holder (-want +got):\n%s", diff)
	}
	// The loser changed nothing.
	got, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", first.KeyHash, at(time.Minute))
	if err != nil || got.TaskKey != first.TaskKey || got.ArgsDigest != first.ArgsDigest {
		t.Errorf("after a lost claim the key names %v (err %v), want the first task", got, err)
	}
	// A replace naming another task than the holder's takes nothing over.
	wrong := mapping.KeyOf("task-9")
	held, err = idem(t, s).ClaimIdempotencyKey(t.Context(), second, &wrong, at(time.Minute))
	if err != nil || held == nil || held.TaskKey != first.TaskKey {
		t.Errorf("claim replacing a task the key does not name: held %v, err %v; want the first task", held, err)
	}
}

func testKeysArePerPrincipal(t *testing.T, h Harness) {
	s := h.Open(t)
	alice := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, alice, nil, at(0))
	// Bob's key of the same name is his own.
	mustClaim(t, s, keyRecord("bob", "deploy-42", "task-2"), nil, at(0))
	if _, err := idem(t, s).GetIdempotencyKey(t.Context(), "carol", alice.KeyHash, at(0)); !errors.Is(err, mapping.ErrNotFound) {
		t.Errorf("another principal's read of a key: err %v, want ErrNotFound", err)
	}
	got, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", alice.KeyHash, at(0))
	if err != nil || got.TaskKey != alice.TaskKey {
		t.Errorf("alice's key names %v (err %v) after bob claimed his, want her task", got, err)
	}
}

func testExpiredKeyIsFree(t *testing.T, h Harness) {
	s := h.Open(t)
	first := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, first, nil, at(0))
	if _, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", first.KeyHash, at(time.Hour)); !errors.Is(err, mapping.ErrNotFound) {
		t.Errorf("read of a key at its expiry: err %v, want ErrNotFound", err)
	}
	second := keyRecord("alice", "deploy-42", "task-2")
	second.CreatedAt, second.ExpiresAt = at(time.Hour), at(2*time.Hour)
	mustClaim(t, s, second, nil, at(time.Hour))
	got, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", first.KeyHash, at(time.Hour))
	if err != nil || got.TaskKey != second.TaskKey {
		t.Errorf("after taking an expired key over it names %v (err %v), want the new task", got, err)
	}
}

func testReplaceNamedTask(t *testing.T, h Harness) {
	s := h.Open(t)
	first := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, first, nil, at(0))
	second := keyRecord("alice", "deploy-42", "task-2")
	mustClaim(t, s, second, &first.TaskKey, at(time.Minute))
	// A second replace of the same old task finds the new holder.
	third := keyRecord("alice", "deploy-42", "task-3")
	held, err := idem(t, s).ClaimIdempotencyKey(t.Context(), third, &first.TaskKey, at(time.Minute))
	if err != nil || held == nil || held.TaskKey != second.TaskKey {
		t.Errorf("a replace that lost the race: held %v, err %v; want the task that won", held, err)
	}
}

func testReleaseKey(t *testing.T, h Harness) {
	s := h.Open(t)
	rec := keyRecord("alice", "deploy-42", "task-1")
	mustClaim(t, s, rec, nil, at(0))
	ok, err := idem(t, s).ReleaseIdempotencyKey(t.Context(), "alice", rec.KeyHash, mapping.KeyOf("task-9"))
	if err != nil || ok {
		t.Errorf("release naming another task: %v, %v; want false, nil", ok, err)
	}
	ok, err = idem(t, s).ReleaseIdempotencyKey(t.Context(), "bob", rec.KeyHash, rec.TaskKey)
	if err != nil || ok {
		t.Errorf("release by another principal: %v, %v; want false, nil", ok, err)
	}
	ok, err = idem(t, s).ReleaseIdempotencyKey(t.Context(), "alice", rec.KeyHash, rec.TaskKey)
	if err != nil || !ok {
		t.Fatalf("release of the holder: %v, %v; want true, nil", ok, err)
	}
	if _, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", rec.KeyHash, at(0)); !errors.Is(err, mapping.ErrNotFound) {
		t.Errorf("read of a released key: err %v, want ErrNotFound", err)
	}
	mustClaim(t, s, keyRecord("alice", "deploy-42", "task-2"), nil, at(0))
}

func testPurgeKeys(t *testing.T, h Harness) {
	s := h.Open(t)
	short := keyRecord("alice", "a", "task-1")
	short.ExpiresAt = at(time.Minute)
	long := keyRecord("alice", "b", "task-2")
	mustClaim(t, s, short, nil, at(0))
	mustClaim(t, s, long, nil, at(0))
	n, err := idem(t, s).PurgeIdempotencyKeys(t.Context(), at(time.Minute))
	if err != nil || n != 1 {
		t.Errorf("PurgeIdempotencyKeys: %d, %v; want 1, nil", n, err)
	}
	if _, err := idem(t, s).GetIdempotencyKey(t.Context(), "alice", long.KeyHash, at(time.Minute)); err != nil {
		t.Errorf("the unexpired key after a purge: %v", err)
	}
}

// testConcurrentClaims races claims of one key with different tasks
// through the given stores: exactly one wins, and every loser is told the
// winner.
func testConcurrentClaims(t *testing.T, stores []mapping.Store) {
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []mapping.Key
		told    []mapping.Key
	)
	for i := range n {
		wg.Go(func() {
			rec := keyRecord("alice", "deploy-42", fmt.Sprintf("task-%d", i))
			held, err := idem(t, stores[i%len(stores)]).ClaimIdempotencyKey(t.Context(), rec, nil, at(0))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("claim %d: %v", i, err)
			case held == nil:
				winners = append(winners, rec.TaskKey)
			default:
				told = append(told, held.TaskKey)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent claims of one key won, want 1", len(winners), n)
	}
	for _, k := range told {
		if k != winners[0] {
			t.Errorf("a losing claim was told task %x, want the winner %x", k[:4], winners[0][:4])
		}
	}
}
