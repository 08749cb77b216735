package sqlite

import (
	"testing"

	"github.com/jobbridge/jobbridge/mapping"
	"github.com/jobbridge/jobbridge/mapping/storetest"
)

func TestIdempotencyContract(t *testing.T) {
	storetest.RunIdempotency(t, storetest.Harness{
		Open: func(t *testing.T) mapping.Store { return openTemp(t) },
		Reopen: func(t *testing.T, old mapping.Store) mapping.Store {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openAt(t, s.path)
		},
	})
}
