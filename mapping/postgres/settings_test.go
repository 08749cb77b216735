package postgres

import (
	"sync"
	"testing"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

func TestStateKeyContract(t *testing.T) {
	var dsns sync.Map // *Store → its connection string
	dsnOf := func(t *testing.T, s mapping.Store) string {
		dsn, ok := dsns.Load(s)
		if !ok {
			t.Fatal("a store the harness did not open")
		}
		return dsn.(string)
	}
	storetest.RunStateKey(t, storetest.Harness{
		Open: func(t *testing.T) mapping.Store {
			dsn := newDatabase(t)
			s := openAt(t, dsn)
			dsns.Store(s, dsn)
			return s
		},
		Reopen: func(t *testing.T, old mapping.Store) mapping.Store {
			dsn := dsnOf(t, old)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, dsn)
		},
		Peer: func(t *testing.T, s mapping.Store) mapping.Store { return openAt(t, dsnOf(t, s)) },
	})
}
