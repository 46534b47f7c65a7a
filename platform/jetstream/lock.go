package jetstream

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Files the driver keeps beside the engine's own (which live in <data dir>/jetstream).
const (
	lockFileName  = "LOCK"       // flocked by the process that runs the engine; holds its pid
	serveFileName = "serve.json" // {url, token, pid} of a serving engine, mode 0600
)

var errLocked = errors.New("data directory is locked by another process")

// dirLock is an exclusive lock on a data directory, held by the process that runs the embedded
// engine on it.
type dirLock struct {
	dir      string
	f        *os.File
	recorded bool // serve.json was written by this process
}

// errUnsafe marks a data directory, LOCK or serve.json that another user owns or may write.
var errUnsafe = errors.New("not private to this user")

// unsafeError is why a data directory cannot be trusted (see private).
type unsafeError struct{ err error }

func (e *unsafeError) Error() string        { return e.err.Error() }
func (e *unsafeError) Is(target error) bool { return target == errUnsafe }

// lockDataDir creates dir (mode 0700) if needed and locks it. The directory and its LOCK must
// be private to this user (see private), and so must every symbolic link on the way to it (see
// linksPrivate). A serve record left by a holder that has gone (killed, say) is stale once the
// lock is free, and is removed.
func lockDataDir(dir string) (*dirLock, error) {
	if err := linksPrivate(dir); err != nil {
		return nil, &unsafeError{err}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if err := private(dir, info); err != nil {
		return nil, &unsafeError{err}
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return nil, err
	}
	if info, err := f.Stat(); err != nil {
		f.Close()
		return nil, err
	} else if err := private(path, info); err != nil {
		f.Close()
		return nil, &unsafeError{err}
	}
	if err := tryLock(f); err != nil {
		f.Close()
		return nil, err
	}
	// The pid is only for messages; the lock itself is the flock.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	_ = os.Remove(filepath.Join(dir, serveFileName))
	return &dirLock{dir: dir, f: f}, nil
}

// serveRecord tells local commands where a serving engine listens.
type serveRecord struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// record writes the serve record atomically, readable only by the owner since the token
// grants full access.
func (l *dirLock) record(r serveRecord) error {
	if err := writeJSON(l.dir, serveFileName, r); err != nil {
		return err
	}
	l.recorded = true
	return nil
}

// writeJSON writes v to name in dir atomically (a temporary file, then a rename), readable by
// its owner only.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// release removes the serve record, then drops the lock.
func (l *dirLock) release() error {
	if l.recorded {
		_ = os.Remove(filepath.Join(l.dir, serveFileName))
	}
	return l.f.Close()
}

// readServeRecord reads the record of the engine serving dir, which must be private to this
// user (see private): a record another user could write would hand them the commands' messages.
func readServeRecord(dir string) (serveRecord, error) {
	var r serveRecord
	path := filepath.Join(dir, serveFileName)
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return r, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return r, err
	}
	if err := private(path, info); err != nil {
		return r, &unsafeError{err}
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	if r.URL == "" {
		return r, errors.New("serve record has no url")
	}
	return r, nil
}

// lockHolder returns the pid recorded by the lock's holder, or 0.
func lockHolder(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, lockFileName))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
