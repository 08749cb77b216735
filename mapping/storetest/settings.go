package storetest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/jobbridge/jobbridge/mapping"
)

// StateKeeper is the optional store interface of the state key the
// servers on one store share (the key that signs argument collection and
// seals task IDs), for servers started without JOBBRIDGE_STATE_KEY.
type StateKeeper interface {
	// StateKey returns the key kept in the store; on a store without one it
	// keeps generate's key first. Concurrent first calls, from one store or
	// several over the same data, all return the same key.
	StateKey(ctx context.Context, generate func() []byte) ([]byte, error)
}

// RunStateKey is the contract of StateKeeper; the stores that implement
// it run it beside Run, with the same harness.
func RunStateKey(t *testing.T, h Harness) {
	t.Helper()
	keeper := func(t *testing.T, s mapping.Store) StateKeeper {
		k, ok := s.(StateKeeper)
		if !ok {
			t.Fatalf("%T does not keep a state key", s)
		}
		return k
	}
	keyN := func(n int) func() []byte {
		return func() []byte { return bytes.Repeat([]byte{byte(n)}, 32) }
	}
	t.Run("KeptOnce", func(t *testing.T) {
		s := h.Open(t)
		first, err := keeper(t, s).StateKey(t.Context(), keyN(1))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, keyN(1)()) {
			t.Fatalf("first StateKey = %x, want the generated key", first)
		}
		again, err := keeper(t, s).StateKey(t.Context(), keyN(2))
		if err != nil || !bytes.Equal(again, first) {
			t.Errorf("second StateKey = %x, %v; want the kept key %x", again, err, first)
		}
		if h.Reopen == nil {
			return
		}
		s = h.Reopen(t, s)
		after, err := keeper(t, s).StateKey(t.Context(), keyN(3))
		if err != nil || !bytes.Equal(after, first) {
			t.Errorf("StateKey after a restart = %x, %v; want the kept key %x", after, err, first)
		}
	})
	t.Run("ConcurrentFirstCallsAgree", func(t *testing.T) {
		s := h.Open(t)
		stores := []mapping.Store{s}
		if h.Peer != nil {
			stores = append(stores, h.Peer(t, s), h.Peer(t, s))
		}
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				keys[i], errs[i] = keeper(t, stores[i%len(stores)]).StateKey(t.Context(), keyN(10+i))
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("StateKey %d: %v", i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Errorf("StateKey %d = %x, StateKey 0 = %x: the servers disagree", i, keys[i], keys[0])
			}
		}
		if len(keys[0]) != 32 {
			t.Errorf("the kept key has %d bytes, want the 32 generated", len(keys[0]))
		}
	})
}
