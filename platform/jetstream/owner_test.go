//go:build unix

package jetstream

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/duilie/duilie/platform"
)

// nobody is the uid of "another user" in these tests.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making files another user owns needs root")
	}
}

// openRefused opens dir and expects it refused as a data directory setting, naming path and
// saying how to mend it.
func openRefused(t *testing.T, dir, path, fix string) {
	t.Helper()
	_, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	var fe *platform.FieldError
	if !errors.As(err, &fe) || fe.Field != "DataDir" || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("open of %s: %v; want a DataDir mistake naming %s and %q", dir, err, path, fix)
	}
}

// A data directory is created 0700, whatever the umask lets through.
func TestDataDirCreatedPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	p := open(t, Config{DataDir: dir})
	p.Close()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if info, err := os.Stat(d); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want mode 0700", d, info.Mode(), err)
		}
	}
}

// A data directory that group or others may write is refused, as ssh refuses a loose key:
// another user could capture it.
func TestDataDirWritableByOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	openRefused(t, dir, dir, "chmod go-w "+dir)
	if _, err := os.Stat(filepath.Join(dir, lockFileName)); err == nil {
		t.Error("a LOCK was made in a directory that was refused")
	}
	// A LOCK that others may write, in a private directory.
	dir = t.TempDir()
	lock := filepath.Join(dir, lockFileName)
	os.WriteFile(lock, nil, 0o666)
	os.Chmod(lock, 0o666)
	openRefused(t, dir, lock, "chmod go-w "+lock)
}

// A data directory, LOCK or serve.json that another user owns is refused.
func TestDataDirOwnedByAnother(t *testing.T) {
	needRoot(t)
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	openRefused(t, dir, dir, "uid 65534")

	dir = t.TempDir()
	lock := filepath.Join(dir, lockFileName)
	os.WriteFile(lock, nil, 0o600)
	os.Chown(lock, nobody, nobody)
	openRefused(t, dir, lock, "uid 65534")
}

// The capture of the issue: another user pre-created the data directory (in a shared
// temporary directory, say), holds its LOCK and wrote a serve.json pointing at their own
// server. A local command refuses it, and never connects there.
func TestDataDirCaptured(t *testing.T) {
	needRoot(t)
	t.Parallel()
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	var connected atomic.Int32
	go func() {
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			connected.Add(1)
			c.Close()
		}
	}()
	for _, tc := range []struct {
		name  string
		setup func(dir, rec string)
		path  func(dir, rec string) string
		fix   string
	}{
		{"their directory", func(dir, rec string) { os.Chown(dir, nobody, nobody); os.Chmod(dir, 0o755) },
			func(dir, rec string) string { return dir }, "uid 65534"},
		{"their serve.json", func(dir, rec string) { os.Chown(rec, nobody, nobody) },
			func(dir, rec string) string { return rec }, "uid 65534"},
		{"a serve.json others may write", func(dir, rec string) { os.Chmod(rec, 0o622) },
			func(dir, rec string) string { return rec }, "chmod go-w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := lockDataDir(dir) // held for the other user's fake server
			if err != nil {
				t.Fatal(err)
			}
			defer l.f.Close()
			if err := l.record(serveRecord{URL: "nats://" + fake.Addr().String(), Token: "theirs", PID: 1}); err != nil {
				t.Fatal(err)
			}
			rec := filepath.Join(dir, serveFileName)
			tc.setup(dir, rec)
			openRefused(t, dir, tc.path(dir, rec), tc.fix)
		})
	}
	if n := connected.Load(); n != 0 {
		t.Errorf("connected %d times to the other user's server", n)
	}
}

// A data directory reached through a symbolic link another user owns is refused, wherever the
// link is on the way (the directory itself, a directory above it, a link a link points to):
// its owner could point it at a directory of their own. Links of this user or of root are
// followed.
func TestDataDirThroughAnothersLink(t *testing.T) {
	needRoot(t)
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string, uid int) string {
		path := filepath.Join(base, name)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	theirs := link("theirs", real, nobody)
	openRefused(t, theirs, theirs, "is a symbolic link that belongs to uid 65534")
	openRefused(t, filepath.Join(theirs, "sub"), theirs, "name the real directory in data_dir")
	mine := link("mine", "theirs/sub", 0) // relative, through theirs
	openRefused(t, mine, theirs, "uid 65534")
	if _, err := os.Stat(filepath.Join(real, "sub")); err == nil {
		t.Error("a directory was made through the other user's link")
	}
	ours := link("ours", "real", 0)
	p := open(t, Config{DataDir: filepath.Join(ours, "..", "ours", "d")})
	p.Close()
	if _, err := os.Stat(filepath.Join(real, "d", lockFileName)); err != nil {
		t.Errorf("through a link of this user's: %v", err)
	}
}
