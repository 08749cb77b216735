//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package connlimit

// OpenFileLimit reports that the limit on open files is not known on this
// system.
func OpenFileLimit() (uint64, bool) { return 0, false }
