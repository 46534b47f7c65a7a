//go:build unix

package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// dieBy ends the process as sig ends a process that does not catch it.
func dieBy(sig os.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	select {} // the signal is on its way
}
