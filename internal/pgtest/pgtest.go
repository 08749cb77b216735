// Package pgtest runs throwaway PostgreSQL servers for tests: a real server,
// not a mock, started from the machine's PostgreSQL binaries in a temporary
// directory and removed afterwards.
//
// A test package shares one server and gives each test a fresh database:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.Shared(t).NewDatabase(t) // postgres://postgres@127.0.0.1:port/name
//		...
//	}
//
// The server starts on the first call to [Shared] (a package whose tests do
// not run, for example under -run, starts nothing) and stops when [Main]
// returns. [Start] starts a server of a test's own instead.
//
// # Binaries
//
// The newest /usr/lib/postgresql/*/bin (Debian's layout) that holds initdb
// and postgres is used, or else the directory of initdb on PATH. When there
// is none, tests that need a server FAIL: a suite that silently skipped its
// database tests would pass without testing anything. Only with the
// environment variable JOBBRIDGE_SKIP_POSTGRES=1 do they skip instead; CI
// never sets it (it installs the postgresql package). The version used is
// printed to standard error when the shared server starts.
//
// # The server
//
// initdb runs with trust authentication and the C locale in a temporary
// directory; postgres listens on a free port of 127.0.0.1 and on a unix
// socket in the same directory, with fsync and synchronous commit off (a test
// server needs no durability across power loss). PostgreSQL refuses to run as
// root, so when the tests run as root both initdb and postgres run as the
// "postgres" OS user, which then owns the temporary directory. postgres runs
// as a child of the test process and, on Linux, is told to shut down if the
// test process dies, so that a killed or timed-out test leaves no server
// behind; the next start removes the directories such servers left. Every
// connection string names the superuser "postgres".
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SkipEnv is the environment variable that, set to "1", turns the failure of
// a test that needs a server on a machine without PostgreSQL into a skip.
const SkipEnv = "JOBBRIDGE_SKIP_POSTGRES"

// ErrNotInstalled is returned (wrapped) when no PostgreSQL binaries are found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries not found")

// superuser is the role initdb creates and every connection uses.
const superuser = "postgres"

const (
	// startTimeout bounds initdb and the wait for the server to accept
	// connections.
	startTimeout = 2 * time.Minute
	// stopTimeout is how long Stop waits for a fast shutdown before killing
	// the server.
	stopTimeout = 30 * time.Second
	// portAttempts is how often StartServer picks another port when the one
	// it chose was taken before the server bound it.
	portAttempts = 5
)

// Server is a running throwaway PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	binDir  string
	root    string // temporary directory: data, socket and log
	port    int
	version string
	// versionNum is server_version_num, such as 150018.
	versionNum int

	cmd    *exec.Cmd
	exited chan struct{} // closed when the server process has exited

	mu  sync.Mutex // guards seq
	seq int

	stopOnce sync.Once
	stopErr  error
}

// Start starts a server for t alone and stops it when t ends. It fails t if
// the server cannot start, or skips t if PostgreSQL is not installed and
// JOBBRIDGE_SKIP_POSTGRES=1 is set.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer(t.Context())
	s = require(t, s, err)
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	t.Logf("PostgreSQL %s on %s", s.Version(), s.Addr())
	return s
}

// require returns s if err is nil and otherwise ends t: with a skip when
// PostgreSQL is not installed and SkipEnv is "1", with a failure otherwise.
func require(t testing.TB, s *Server, err error) *Server {
	t.Helper()
	if err == nil {
		return s
	}
	if errors.Is(err, ErrNotInstalled) && os.Getenv(SkipEnv) == "1" {
		t.Skipf("skipping: %v (%s=1)", err, SkipEnv)
	}
	t.Fatalf("starting PostgreSQL: %v", err)
	return nil
}

// StartServer initialises a database cluster in a new temporary directory
// and starts a server on it. ctx bounds the start only. The caller must Stop
// the server. If PostgreSQL is not installed the error wraps ErrNotInstalled.
func StartServer(ctx context.Context) (*Server, error) {
	binDir, err := findBinaries(debianBinGlob, exec.LookPath)
	if err != nil {
		return nil, err
	}
	run, err := runAs()
	if err != nil {
		return nil, err
	}
	removeStale(os.TempDir(), time.Now())
	root, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating server directory: %w", err)
	}
	s := &Server{binDir: binDir, root: root}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(root)
		}
	}()
	if err := run.prepare(root); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.initdb(ctx, run); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err := s.start(ctx, run)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			return nil, err
		}
	}
	if err := s.readVersion(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	ok = true
	return s, nil
}

// initdb creates the database cluster in root/data.
func (s *Server) initdb(ctx context.Context, run *runner) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "initdb"),
		"--pgdata", s.dataDir(),
		"--username", superuser,
		"--auth", "trust",
		"--encoding", "UTF8",
		"--locale", "C",
		"--no-sync",
	)
	cmd.Dir = s.root
	cmd.Env = serverEnv()
	cmd.SysProcAttr = run.attr(false)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("running initdb: %w\n%s", err, out)
	}
	return nil
}

// errPortTaken reports that the server could not bind its port.
var errPortTaken = errors.New("port taken")

// start starts postgres on a free port and waits until it accepts
// connections. If another process took the port first it returns an error
// wrapping errPortTaken.
func (s *Server) start(ctx context.Context, run *runner) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := s.logPath()
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(filepath.Join(s.binDir, "postgres"),
		"-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.root,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "timezone=UTC",
		"-c", "logging_collector=off",
	)
	cmd.Dir = s.root
	cmd.Env = serverEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = run.attr(true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited, s.port = cmd, exited, port

	if err := s.awaitReady(ctx); err != nil {
		if isExited(exited) {
			log := readLog(logPath)
			if strings.Contains(log, "could not bind") || strings.Contains(log, "could not create any TCP/IP sockets") {
				return fmt.Errorf("starting postgres on port %d: %w", port, errPortTaken)
			}
			return fmt.Errorf("starting postgres: %w; server log:\n%s", err, log)
		}
		_ = s.kill()
		return fmt.Errorf("starting postgres: %w; server log:\n%s", err, readLog(logPath))
	}
	return nil
}

// awaitReady polls until the server accepts a connection, the server exits
// or ctx ends.
func (s *Server) awaitReady(ctx context.Context) error {
	const pollEvery = 20 * time.Millisecond
	for {
		conn, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return errors.New("server exited")
		case <-ctx.Done():
			return fmt.Errorf("waiting for the server: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// readVersion records the server's version.
func (s *Server) readVersion(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(ctx)
	var num string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')`).Scan(&s.version, &num); err != nil {
		return fmt.Errorf("reading the server version: %w", err)
	}
	if s.versionNum, err = strconv.Atoi(num); err != nil {
		return fmt.Errorf("reading the server version: %w", err)
	}
	return nil
}

// Version is the server's version, such as "15.18 (Debian 15.18-0+deb12u1)".
func (s *Server) Version() string { return s.version }

// Addr is the server's TCP address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DataDir is the directory of the server's database cluster.
func (s *Server) DataDir() string { return s.dataDir() }

// DSN is the connection string of the server's "postgres" database.
func (s *Server) DSN() string { return s.DatabaseDSN("postgres") }

// DatabaseDSN is the connection string of the database named name.
func (s *Server) DatabaseDSN(name string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", superuser, s.Addr(), name)
}

// NewDatabase creates an empty database for t, drops it when t ends, and
// returns its connection string. Connections still open when t ends are
// terminated.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := s.nextName(t.Name())
	if err := s.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context is done by now.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), stopTimeout)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			t.Errorf("dropping test database: %v", err)
		}
	})
	return s.DatabaseDSN(name)
}

// nonIdentifier matches what nextName leaves out of a database name.
var nonIdentifier = regexp.MustCompile(`[^a-z0-9]+`)

// nextName returns a new database name made from a sequence number and the
// test's name, within PostgreSQL's 63-byte limit.
func (s *Server) nextName(testName string) string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	name := fmt.Sprintf("t%d_%s", n, strings.Trim(nonIdentifier.ReplaceAllString(strings.ToLower(testName), "_"), "_"))
	return strings.TrimRight(name[:min(len(name), 63)], "_")
}

// CreateDatabase creates an empty database named name.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	stmt := `CREATE DATABASE ` + pgx.Identifier{name}.Sanitize()
	if s.versionNum >= 150000 {
		// Copying the template's files is twice as fast as PostgreSQL 15's
		// default of copying it through the WAL, which only pays off for
		// large templates.
		stmt += ` STRATEGY = FILE_COPY`
	}
	return s.admin(ctx, stmt)
}

// DropDatabase drops the database named name, terminating its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}

// admin runs one statement in the postgres database.
func (s *Server) admin(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// Stop shuts the server down (a fast shutdown, killed if it takes longer than
// 30s) and removes its directory. Later calls return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.cmd != nil && !isExited(s.exited) {
			if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !isExited(s.exited) {
				errs = append(errs, fmt.Errorf("signalling postgres: %w", err))
			}
			select {
			case <-s.exited:
			case <-time.After(stopTimeout):
				errs = append(errs, fmt.Errorf("postgres did not shut down within %v; killed it", stopTimeout))
				_ = s.kill()
			}
		}
		if err := os.RemoveAll(s.root); err != nil {
			errs = append(errs, fmt.Errorf("removing server directory: %w", err))
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// kill kills the server process and waits for it to exit.
func (s *Server) kill() error {
	err := s.cmd.Process.Kill()
	<-s.exited
	return err
}

func (s *Server) dataDir() string { return filepath.Join(s.root, "data") }
func (s *Server) logPath() string { return filepath.Join(s.root, "postgres.log") }

// isExited reports whether ch is closed.
func isExited(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readLog returns the server log, or why it could not be read.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return string(b)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

// serverEnv is the test process's environment without the PG* variables,
// which would otherwise steer initdb and postgres.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}
