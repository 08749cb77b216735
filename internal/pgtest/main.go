package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// shared is the server of the test package, started by the first Shared call
// and stopped by Main. It is package state because TestMain and the tests
// have no other way to hand it over.
var shared struct {
	mu      sync.Mutex
	inMain  bool // Main is running the tests
	started bool // a start was attempted; srv or err is set
	srv     *Server
	err     error
}

// Main runs the tests of a package that uses Shared and then stops the shared
// server, if one was started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.inMain = false
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping PostgreSQL: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		shared.srv = nil
	}
	os.Exit(code)
}

// Shared returns the package's server, starting it on the first call. It
// fails t if the package's TestMain does not call Main or if the server
// cannot start, and skips t if PostgreSQL is not installed and
// JOBBRIDGE_SKIP_POSTGRES=1 is set.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("pgtest.Shared: the package's TestMain must call pgtest.Main")
	}
	if !shared.started {
		shared.started = true
		// Not t's context: the server outlives t.
		shared.srv, shared.err = StartServer(context.WithoutCancel(t.Context()))
		if shared.err == nil {
			fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL %s on %s\n", shared.srv.Version(), shared.srv.Addr())
		}
	}
	return require(t, shared.srv, shared.err)
}
