package pgtest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dirPrefix starts the name of every server directory in os.TempDir().
const dirPrefix = "pgtest-"

// removeStale removes the server directories in parent left behind by test
// processes that were killed before they could stop their server (the
// server itself shuts down with them; see setParentDeathSignal). A directory
// is stale when it holds a database cluster whose server is not running: its
// postmaster.pid is gone, or names a process that no longer exists. A
// directory without postmaster.pid that changed within the last startTimeout
// may belong to a server that is still starting and is left alone. Errors
// are ignored: this is housekeeping.
func removeStale(parent string, now time.Time) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		root := filepath.Join(parent, e.Name())
		if isStale(root, now) {
			_ = os.RemoveAll(root)
		}
	}
}

// isStale reports whether root is a server directory whose server is gone.
func isStale(root string, now time.Time) bool {
	data := filepath.Join(root, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		return false // not a cluster (or not one we can see): not ours to judge
	}
	pidFile, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		fi, err := os.Stat(root)
		return err == nil && now.Sub(fi.ModTime()) > startTimeout
	}
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(pidFile), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
