package jetstream

import (
	"os"

	privatefs "github.com/duilie/duilie/internal/private"
)

// private reports why info, the file or directory at path, cannot be trusted as part of a data
// directory, or nil: it must belong to the user running duilie, and neither its group nor
// others may write it (internal/private). Otherwise another user could hold its lock and
// record a serve of their own, and local commands would hand them every message they send.
func private(path string, info os.FileInfo) error { return privatefs.Owned(path, info) }

// noFollow opens a file without following a final symbolic link.
const noFollow = privatefs.NoFollow

// linksPrivate reports why a symbolic link on the way to dir cannot be trusted, or nil
// (internal/private).
func linksPrivate(dir string) error { return privatefs.Links(dir) }
