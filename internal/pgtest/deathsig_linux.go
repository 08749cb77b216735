package pgtest

import "syscall"

// setParentDeathSignal asks the kernel to send postgres SIGQUIT (immediate
// shutdown) if the test process dies without stopping it, so that a killed
// or timed-out test run leaves no server behind.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGQUIT }
