//go:build unix

// Package private holds the checks that keep what duilie stores on this machine to the user who
// runs it: a data directory and the files in it (the lock, serve.json, the surfaces' token)
// must belong to that user and be writable by no one else, and so must every symbolic link on
// the way to them. Otherwise another local user could capture them.
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Owned reports why info, the file or directory at path, cannot be trusted as part of a data
// directory, or nil: it must belong to the user running duilie, and neither its group nor
// others may write it, as ssh refuses a key others could have replaced. Otherwise another user
// could hold its lock and record a serve of their own, and local commands would hand them
// every message they send.
func Owned(path string, info os.FileInfo) error {
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

// NoFollow opens a file without following a final symbolic link.
const NoFollow = syscall.O_NOFOLLOW

// maxLinks bounds the symbolic links followed in one path, as the kernel's ELOOP does.
const maxLinks = 40

// Links reports why a symbolic link on the way to dir cannot be trusted, or nil. It
// resolves dir as the kernel does, component by component, and each link met on the way (in
// dir itself or in a link's target) must belong to the user running duilie or to root: the
// owner of a link can point it elsewhere at any time, to a directory of their own, and a
// directory checked once would then not be the one used. Components that do not exist yet
// are created as directories, not links, and end the walk.
func Links(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	uid := uint32(os.Geteuid())
	pending := strings.Split(abs, string(filepath.Separator))
	cur, links := string(filepath.Separator), 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		info, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid != uid && st.Uid != 0 {
			return fmt.Errorf("%s is a symbolic link that belongs to uid %d, not to you (uid %d) or root: its owner could point it at a directory of their own; name the real directory in data_dir", next, st.Uid, uid)
		}
		if links++; links > maxLinks {
			return fmt.Errorf("%s: too many levels of symbolic links", dir)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		pending = append(strings.Split(target, string(filepath.Separator)), pending...)
	}
	return nil
}
