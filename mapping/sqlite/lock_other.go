//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package sqlite

import "os"

// tryLock always succeeds: this system has no flock, and the store does not
// detect a second process here. Run one jobbridge server per SQLite file.
func tryLock(*os.File) (bool, error) { return true, nil }

// unlock does nothing.
func unlock(*os.File) error { return nil }
