//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting. It reports false
// (and no error) when another open file description holds it: another
// process, or another Open in this one, since flock locks belong to the
// open file, not to the process.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
}

// unlock releases the lock tryLock took (closing f would too).
func unlock(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return nil
}
