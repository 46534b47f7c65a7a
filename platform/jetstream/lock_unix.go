//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package jetstream

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive, non-blocking flock on f. It reports errLocked when another
// process holds it. The kernel drops the lock when the process exits, however it exits.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
