package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverUser is the OS user initdb and postgres run as when the tests run as
// root, which PostgreSQL refuses.
const serverUser = "postgres"

// runner says as whom initdb and postgres run.
type runner struct {
	// cred is nil to run them as the test process's user, or the
	// credentials of serverUser.
	cred *syscall.Credential
}

// runAs returns the runner for this process: as itself, or as serverUser
// when it is root.
func runAs() (*runner, error) {
	if os.Geteuid() != 0 {
		return &runner{}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as the %q OS user: %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", serverUser, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", serverUser, u.Gid, err)
	}
	return &runner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}, nil
}

// prepare makes root (a new directory) the server's: mode 0700, owned by
// the user the server runs as, who must be able to reach it.
func (r *runner) prepare(root string) error {
	if err := os.Chmod(root, 0o700); err != nil {
		return fmt.Errorf("preparing server directory: %w", err)
	}
	if r.cred == nil {
		return nil
	}
	if err := reachable(filepath.Dir(root), r.cred); err != nil {
		return fmt.Errorf("preparing server directory %s: %w; set TMPDIR to a directory the %s user can reach", root, err, serverUser)
	}
	if err := os.Chown(root, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
		return fmt.Errorf("preparing server directory: %w", err)
	}
	return nil
}

// reachable checks that the user of cred may search dir and every directory
// above it.
func reachable(dir string, cred *syscall.Credential) error {
	for {
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			return fmt.Errorf("checking %s: %w", dir, err)
		}
		perm := st.Mode & 0o777
		ok := perm&0o001 != 0 ||
			st.Uid == cred.Uid && perm&0o100 != 0 ||
			st.Gid == cred.Gid && perm&0o010 != 0
		if !ok {
			return errors.New("the directory " + dir + " is not searchable by the server's user")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// attr returns the process attributes of initdb (server false) or postgres
// (server true).
func (r *runner) attr(server bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Credential: r.cred}
	if server {
		setParentDeathSignal(a)
	}
	return a
}
