package postgres

import (
	"sync"
	"testing"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

func TestIdempotencyContract(t *testing.T) {
	var dsns sync.Map // *Store → its connection string
	storetest.RunIdempotency(t, storetest.Harness{
		Open: func(t *testing.T) mapping.Store {
			dsn := newDatabase(t)
			s := openAt(t, dsn)
			dsns.Store(s, dsn)
			return s
		},
		Reopen: func(t *testing.T, old mapping.Store) mapping.Store {
			dsn, ok := dsns.Load(old)
			if !ok {
				t.Fatal("Reopen of a store the harness did not open")
			}
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, dsn.(string))
		},
		Peer: func(t *testing.T, s mapping.Store) mapping.Store {
			dsn, ok := dsns.Load(s)
			if !ok {
				t.Fatal("Peer of a store the harness did not open")
			}
			return openAt(t, dsn.(string))
		},
	})
}
