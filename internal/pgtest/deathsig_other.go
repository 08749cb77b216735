//go:build !linux

package pgtest

import "syscall"

// setParentDeathSignal does nothing: only Linux can signal a child when its
// parent dies. A killed test run may leave its server running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
