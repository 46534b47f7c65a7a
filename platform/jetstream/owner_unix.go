//go:build unix

package jetstream

import (
	"fmt"
	"os"
	"syscall"
)

// private reports why info, the file or directory at path, cannot be trusted as part of a data
// directory, or nil: it must belong to the user running duilie, and neither its group nor
// others may write it, as ssh refuses a key others could have replaced. Otherwise another user
// could hold its lock and record a serve of their own, and local commands would hand them
// every message they send.
func private(path string, info os.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): another user could read or replace what duilie keeps there; use a data_dir of your own, or chown it", path, st.Uid, uid)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by its group or others (mode %04o): another user could replace what duilie keeps there; chmod go-w %s", path, perm, path)
	}
	return nil
}

// noFollow opens a file without following a final symbolic link.
const noFollow = syscall.O_NOFOLLOW
