//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package connlimit

import "syscall"

// OpenFileLimit returns the process's limit on open file descriptors (the
// soft RLIMIT_NOFILE, which the Go runtime raises to the hard limit at
// start), and whether it could be read.
func OpenFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
