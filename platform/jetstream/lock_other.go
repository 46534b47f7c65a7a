//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package jetstream

import (
	"errors"
	"os"
)

func tryLock(f *os.File) error {
	return errors.New("jetstream: locking the data directory is not supported on this system")
}
