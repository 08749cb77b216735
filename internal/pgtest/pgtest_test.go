package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// helperEnv makes the test binary a helper process that starts a server,
// prints its address and directory, and waits to be killed.
const helperEnv = "PGTEST_HELPER_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		helperMain()
		return
	}
	Main(m)
}

// helperMain is the helper process of TestKilledTestProcessLeavesNoServer.
func helperMain() {
	s, err := StartServer(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("%s %s\n", s.Addr(), s.root)
	select {} // until killed
}

// query runs query in the database at dsn and returns its single column.
func query[T any](t *testing.T, dsn, query string, args ...any) []T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return vs
}

// exec runs stmt in the database at dsn.
func execSQL(t *testing.T, dsn, stmt string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func TestSharedServer(t *testing.T) {
	s := Shared(t)
	if again := Shared(t); again != s {
		t.Errorf("second Shared call returned another server")
	}
	if diff := cmp.Diff([]string{s.Version()}, query[string](t, s.DSN(), `SHOW server_version`)); diff != "" {
		t.Errorf("Version mismatch (-Version +server):\n%s", diff)
	}
	if diff := cmp.Diff([]string{s.DataDir()}, query[string](t, s.DSN(), `SHOW data_directory`)); diff != "" {
		t.Errorf("DataDir mismatch (-DataDir +server):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"off"}, query[string](t, s.DSN(), `SHOW fsync`)); diff != "" {
		t.Errorf("fsync mismatch (-want +got):\n%s", diff)
	}
	host, _, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Errorf("Addr = %q, want a 127.0.0.1 address", s.Addr())
	}

	// The server runs as the postgres OS user when the tests run as root,
	// and as the tests' user otherwise.
	wantUID := os.Geteuid()
	if wantUID == 0 {
		u, err := user.Lookup(serverUser)
		if err != nil {
			t.Fatal(err)
		}
		if wantUID, err = strconv.Atoi(u.Uid); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.DataDir(), &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != wantUID {
		t.Errorf("data directory owned by uid %d, want %d", st.Uid, wantUID)
	}
}

func TestNewDatabase(t *testing.T) {
	s := Shared(t)
	var names []string
	for _, table := range []string{"first", "second"} {
		t.Run(table, func(t *testing.T) {
			dsn := s.NewDatabase(t)
			names = append(names, query[string](t, dsn, `SELECT current_database()`)...)
			execSQL(t, dsn, `CREATE TABLE `+table+` (x int)`)
			// Each database starts empty: the other test's table is not here.
			got := query[string](t, dsn, `SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'`)
			if diff := cmp.Diff([]string{table}, got); diff != "" {
				t.Errorf("tables mismatch (-want +got):\n%s", diff)
			}
			// A connection left open when the test ends does not keep the
			// database from being dropped.
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn // closed by the drop
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases = %q, want two different ones", names)
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "t") || !strings.Contains(name, "testnewdatabase") {
			t.Errorf("database name %q does not name the test", name)
		}
	}
	left := query[string](t, s.DSN(), `SELECT datname::text FROM pg_database WHERE datname = ANY($1)`, names)
	if len(left) != 0 {
		t.Errorf("databases %q still exist after their tests ended", left)
	}
}

func TestNextName(t *testing.T) {
	s := &Server{}
	tests := []struct {
		test, want string
	}{
		{"TestStore/CreateThenGet/every_field_set", "t1_teststore_createthenget_every_field_set"},
		{"Test\"Quoted\"/ünïcode/#01", "t2_test_quoted_n_code_01"},
		{strings.Repeat("TestLong/", 20), "t3_testlong_testlong_testlong_testlong_testlong_testlong_testlo"},
		{strings.Repeat("a", 59) + "/b", "t4_" + strings.Repeat("a", 59)},
	}
	for _, tt := range tests {
		got := s.nextName(tt.test)
		if got != tt.want {
			t.Errorf("nextName(%q) = %q, want %q", tt.test, got, tt.want)
		}
		if len(got) > 63 {
			t.Errorf("nextName(%q) has %d bytes, more than PostgreSQL's 63", tt.test, len(got))
		}
	}
}

func TestStartAndStop(t *testing.T) {
	s := Start(t)
	dsn := s.DSN()
	if got := query[int](t, dsn, `SELECT 1`); len(got) != 1 {
		t.Fatalf("SELECT 1 = %v", got)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !isExited(s.exited) {
		t.Error("server process still running after Stop")
	}
	if _, err := os.Stat(s.root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server directory after Stop: %v, want it removed", err)
	}
	if conn, err := pgx.Connect(t.Context(), dsn); err == nil {
		conn.Close(t.Context())
		t.Error("server accepts connections after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
}

// TestKilledTestProcessLeavesNoServer kills a test process that started a
// server without stopping it: the server shuts down too.
func TestKilledTestProcessLeavesNoServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux signals a child when its parent dies")
	}
	Shared(t) // fail or skip like the other tests when PostgreSQL is missing

	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("reading the helper's server address: %v", err)
	}
	addr, root, _ := strings.Cut(strings.TrimSpace(line), " ")
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	dsn := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
	if got := query[int](t, dsn, `SELECT 1`); len(got) != 1 {
		t.Fatalf("helper's server: SELECT 1 = %v", got)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Wait (as long as the test may run) for the server to go away.
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conn.Close()
		select {
		case <-t.Context().Done():
			t.Fatal("the server still accepts connections after its test process was killed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := os.Stat(filepath.Join(root, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("postmaster.pid after the server went away: %v, want it removed by a clean shutdown", err)
	}
}

func TestFindBinaries(t *testing.T) {
	// install creates dir with the given executables.
	install := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name string
		// lib lists the versions under lib/postgresql/<v>/bin with the
		// executables each has; path are the executables of a PATH dir.
		lib  map[string][]string
		path []string
		// want is the chosen directory relative to the temp dir, "" for
		// ErrNotInstalled.
		want string
	}{
		{
			name: "one version",
			lib:  map[string][]string{"15": {"initdb", "postgres", "pg_ctl"}},
			want: "lib/postgresql/15/bin",
		},
		{
			name: "newest version, compared as numbers",
			lib: map[string][]string{
				"9.6": {"initdb", "postgres"},
				"15":  {"initdb", "postgres"},
				"13":  {"initdb", "postgres"},
			},
			want: "lib/postgresql/15/bin",
		},
		{
			name: "newest complete version",
			lib: map[string][]string{
				"15": {"initdb", "postgres"},
				"16": {"psql"}, // client only
			},
			want: "lib/postgresql/15/bin",
		},
		{
			name: "PATH when the Debian layout has none",
			lib:  map[string][]string{"16": {"psql"}},
			path: []string{"initdb", "postgres"},
			want: "path",
		},
		{
			name: "initdb on PATH without postgres",
			path: []string{"initdb"},
		},
		{
			name: "nothing installed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			for v, names := range tt.lib {
				install(t, filepath.Join(tmp, "lib", "postgresql", v, "bin"), names...)
			}
			pathDir := filepath.Join(tmp, "path")
			install(t, pathDir, tt.path...)
			lookPath := func(name string) (string, error) {
				p := filepath.Join(pathDir, name)
				if _, err := os.Stat(p); err != nil {
					return "", exec.ErrNotFound
				}
				return p, nil
			}

			got, err := findBinaries(filepath.Join(tmp, "lib", "postgresql", "*", "bin"), lookPath)
			if tt.want == "" {
				if !errors.Is(err, ErrNotInstalled) {
					t.Fatalf("findBinaries = %q, %v; want ErrNotInstalled", got, err)
				}
				if !strings.Contains(err.Error(), SkipEnv+"=1") {
					t.Errorf("error %q does not say how to skip", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("findBinaries: %v", err)
			}
			if want := filepath.Join(tmp, tt.want); got != want {
				t.Errorf("findBinaries = %q, want %q", got, want)
			}
		})
	}
}

// outcomeTB records how require ended a test.
type outcomeTB struct {
	testing.TB
	outcome string // "", "skip" or "fail"
	msg     string
}

func (r *outcomeTB) Helper() {}

func (r *outcomeTB) Skipf(format string, args ...any) {
	r.outcome, r.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *outcomeTB) Fatalf(format string, args ...any) {
	r.outcome, r.msg = "fail", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRequire(t *testing.T) {
	srv := &Server{}
	missing := fmt.Errorf("%w: none here", ErrNotInstalled)
	broken := errors.New("initdb failed")
	tests := []struct {
		name    string
		err     error
		skipEnv string
		want    string // "" (returns the server), "skip" or "fail"
	}{
		{"started", nil, "", ""},
		{"started, skip allowed", nil, "1", ""},
		{"not installed", missing, "", "fail"},
		{"not installed, skip variable not 1", missing, "true", "fail"},
		{"not installed, skip allowed", missing, "1", "skip"},
		{"failed to start, skip allowed", broken, "1", "fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(SkipEnv, tt.skipEnv)
			rec := &outcomeTB{TB: t}
			var got *Server
			done := make(chan struct{})
			go func() {
				defer close(done)
				got = require(rec, srv, tt.err)
			}()
			<-done
			if rec.outcome != tt.want {
				t.Fatalf("require ended the test with %q (%s), want %q", rec.outcome, rec.msg, tt.want)
			}
			if tt.want == "" && got != srv {
				t.Errorf("require returned %p, want the server %p", got, srv)
			}
			if tt.err != nil && !strings.Contains(rec.msg, tt.err.Error()) {
				t.Errorf("message %q does not carry the error %q", rec.msg, tt.err)
			}
		})
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"15", "15", 0},
		{"9.6", "15", -1},
		{"15", "9.6", 1},
		{"15", "15.0", 0},
		{"15.1", "15", 1},
		{"devel", "9", -1},
	}
	for _, tt := range tests {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	now := time.Now()
	parent := t.TempDir()
	// A process that has exited: its pid names no process (until reused,
	// which the test is too quick for).
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := exited.ProcessState.Pid()

	tests := []struct {
		name    string
		cluster bool   // has data/PG_VERSION
		pidFile string // content of data/postmaster.pid; "" for none
		age     time.Duration
		removed bool
	}{
		{"shut down long ago", true, "", time.Hour, true},
		{"server process gone", true, fmt.Sprintf("%d\n/data\n", deadPID), 0, true},
		{"server running", true, fmt.Sprintf("%d\n/data\n", os.Getpid()), time.Hour, false},
		{"still starting", true, "", time.Second, false},
		{"not a cluster", false, "", time.Hour, false},
		{"unreadable pid file", true, "garbage\n", time.Hour, false},
	}
	for i, tt := range tests {
		root := filepath.Join(parent, fmt.Sprintf("%s%d", dirPrefix, i))
		data := filepath.Join(root, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if tt.cluster {
			if err := os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if tt.pidFile != "" {
			if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(tt.pidFile), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mtime := now.Add(-tt.age)
		if err := os.Chtimes(root, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(parent, "other-dir")
	if err := os.MkdirAll(filepath.Join(other, "data"), 0o700); err != nil {
		t.Fatal(err)
	}

	removeStale(parent, now)

	for i, tt := range tests {
		_, err := os.Stat(filepath.Join(parent, fmt.Sprintf("%s%d", dirPrefix, i)))
		if removed := errors.Is(err, os.ErrNotExist); removed != tt.removed {
			t.Errorf("%s: removed = %t, want %t", tt.name, removed, tt.removed)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory not named %s*: %v, want it kept", dirPrefix, err)
	}
}
