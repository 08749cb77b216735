package main

import (
	"testing"

	"github.com/jobbridge/jobbridge/internal/pgtest"
)

// TestMain lets the replica test share one throwaway PostgreSQL server,
// started on first use and stopped after the package's tests.
func TestMain(m *testing.M) { pgtest.Main(m) }
