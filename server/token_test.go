package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

// The surfaces' token: made once, mode 0600 in a directory of mode 0700, the same every time
// after; a file or directory another user could read or replace is refused, naming the fix.
func TestSurfaceToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	token, err := server.SurfaceToken(dir)
	if err != nil || len(token) != 64 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Fatalf("token %q, %v", token, err)
	}
	path := filepath.Join(dir, server.TokenFileName)
	for p, mode := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %04o", p, info.Mode(), err, mode)
		}
	}
	if again, err := server.SurfaceToken(dir); err != nil || again != token {
		t.Errorf("again: %q %v, want the same token", again, err)
	}
	refused := func(what, want string) {
		t.Helper()
		_, err := server.SurfaceToken(dir)
		var fe *platform.FieldError
		if !errors.As(err, &fe) || fe.Field != "DataDir" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a DataDir mistake saying %q", what, err, want)
		}
	}
	os.Chmod(path, 0o640)
	refused("a token file its group may read", "is readable by its group or others (mode 0640): anyone who reads it controls the dashboard; chmod 600 "+path)
	os.Chmod(path, 0o600)
	os.Chmod(dir, 0o770)
	refused("a directory its group may write", "chmod go-w "+dir)
	os.Chmod(dir, 0o700)
	os.WriteFile(path, []byte("short"), 0o600)
	refused("a file without a token", "holds no token of 64 hex characters")
	os.Remove(path)
	os.Symlink("/etc/passwd", path)
	if _, err := server.SurfaceToken(dir); err == nil {
		t.Error("a token file that is a symbolic link was followed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to make files another user owns")
	}
	os.Remove(path)
	server.SurfaceToken(dir)
	os.Chown(path, 65534, 65534)
	refused("another user's token file", "belongs to uid 65534")
	link := filepath.Join(t.TempDir(), "theirs")
	os.Symlink(dir, link)
	os.Lchown(link, 65534, 65534)
	if _, err := server.SurfaceToken(link); err == nil || !strings.Contains(err.Error(), "is a symbolic link that belongs to uid 65534") {
		t.Errorf("a directory through another user's link: %v", err)
	}
}
