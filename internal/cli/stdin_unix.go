//go:build unix

package cli

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// stdinClosed reports whether in is a standard input that was closed when this process started.
// Go's runtime opens /dev/null in place of a closed descriptor 0, 1 or 2, for reading and
// writing (runtime/fds_unix.go); a shell's < /dev/null opens it for reading only. So a stdin
// that is /dev/null open for both was closed (or was given as <>/dev/null, which reads the same).
func stdinClosed(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok || f != os.Stdin {
		return false
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_ACCMODE != unix.O_RDWR {
		return false
	}
	var st, null unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Stat(os.DevNull, &null) != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == null.Rdev
}
