//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sqlite

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// holdChildEnv names the store file the child of TestOpenRefusedWhileAnotherProcessHoldsTheFile
// holds.
const holdChildEnv = "JOBBRIDGE_SQLITE_HOLD_CHILD"

// checkInUse checks that err is the refusal of a second server on path,
// held by process pid, telling what to do.
func checkInUse(t *testing.T, err error, path string, pid int) {
	t.Helper()
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open = %v, want an error wrapping ErrInUse", err)
	}
	abs, _ := filepath.Abs(path)
	for _, want := range []string{abs, fmt.Sprintf("pid %d", pid), "serve one process", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenRefusesASecondServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	first, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(t.Context(), path, nil)
	if err == nil {
		_ = second.Close()
		_ = first.Close()
		t.Fatal("a second Open of a file a store holds succeeded")
	}
	checkInUse(t, err, path, os.Getpid())

	// Another path to the same file (through a link to its directory)
	// finds the same lock.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Dir(path), link); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(t.Context(), filepath.Join(link, "tasks.db"), nil); err == nil {
		_ = s.Close()
		t.Error("an Open through a link to the file's directory succeeded")
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openAt(t, path)
	mustCreate(t, again, task("after-close", time.Now()))
}

func TestSharedOpenBesideAServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	server := openAt(t, path)
	now := time.Now().UTC().Truncate(time.Millisecond)
	created := task("task-1", now)
	mustCreate(t, server, created)

	// A tool opens the file while the server holds it, reads the task and
	// records a cancel, which the server then reads.
	tool := openShared(t, path)
	got, err := tool.Get(t.Context(), created.Key, "alice", now)
	if err != nil {
		t.Fatalf("Get through the shared store: %v", err)
	}
	got.CancelRequestedAt, got.CancelBy = &now, mapping.CancelByOperator
	if err := tool.Update(t.Context(), got); err != nil {
		t.Fatalf("Update through the shared store: %v", err)
	}
	seen, err := server.Get(t.Context(), created.Key, "alice", now)
	if err != nil {
		t.Fatal(err)
	}
	if seen.CancelBy != mapping.CancelByOperator || seen.CancelRequestedAt == nil || !seen.CancelRequestedAt.Equal(now) || seen.Version != 1 {
		t.Errorf("the server reads cancel by %q at %v, version %d; want the tool's mark", seen.CancelBy, seen.CancelRequestedAt, seen.Version)
	}
	// The tool holds no lock: a second tool opens too, and the server's
	// lock is still held.
	openShared(t, path)
	if s, err := Open(t.Context(), path, nil); err == nil {
		_ = s.Close()
		t.Error("a second server opened beside a server and two tools")
	}
}

func TestSharedOpenWithoutAServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	// A tool on a new file creates the schema, as a server would, and
	// holds no lock afterwards: a server opens beside it.
	tool := openShared(t, path)
	mustCreate(t, tool, task("by-tool", time.Now()))
	server := openAt(t, path)
	if _, err := server.Get(t.Context(), mapping.KeyOf("by-tool"), "alice", time.Now()); err != nil {
		t.Errorf("the server reads the tool's task: %v", err)
	}
}

// TestSharedOpenLeavesAServersSchemaAlone opens a file of an older schema
// whose lock a server holds: the tool neither migrates it under the server
// nor writes to it.
func TestSharedOpenLeavesAServersSchemaAlone(t *testing.T) {
	path, db := dbBefore(t, "0009_jobs_deliveries.sql")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	lock, _, err := lockFile(path + lockSuffix)
	if err != nil || lock == nil {
		t.Fatalf("taking the lock as an older server: %v", err)
	}
	defer releaseLock(lock)

	s, err := Open(t.Context(), path, &Options{Shared: true})
	if err == nil {
		_ = s.Close()
		t.Fatal("a shared Open of an older schema a server holds succeeded")
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), "not this build's") || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want one naming the schema and the server (%s)", err, want)
	}
	check, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if got := queryInts(t, check, `SELECT max(version) FROM schema_migrations`); got[0] != 8 {
		t.Errorf("schema version after the refused Open = %d, want 8 (untouched)", got[0])
	}
}

func TestOpenRefusedWhileAnotherProcessHoldsTheFile(t *testing.T) {
	if path := os.Getenv(holdChildEnv); path != "" {
		holdUntilEOF(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOpenRefusedWhileAnotherProcessHoldsTheFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("the child said %q, %v; want open", line, err)
	}

	s, err := Open(t.Context(), path, nil)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a file another process holds succeeded")
	}
	checkInUse(t, err, path, cmd.Process.Pid)
	if !strings.Contains(err.Error(), "another jobbridge process") {
		t.Errorf("error %q does not say another process holds the file", err)
	}
	// A tool opens beside it.
	openShared(t, path)

	// Once the child has closed its store, the file is free.
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
	openAt(t, path)
}

// holdUntilEOF is the child of TestOpenRefusedWhileAnotherProcessHoldsTheFile:
// it opens the store at path, says "open", and closes it when its input
// ends.
func holdUntilEOF(t *testing.T, path string) {
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
