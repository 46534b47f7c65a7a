package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

// A program the host cannot start (here an executable whose mode was taken away after serve
// checked it; in the field too many open files, an argument list too long) is the host's
// failure, not the program's: the batch's messages are released with their attempts unchanged,
// the consumer backs off, and once the program can start the message arrives at attempts 1.
func TestProgramCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "app")
	if err := os.Symlink(mustAbs(t, "testdata/app.py"), filepath.Join(dir, "app.py")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexec python3 \"$(dirname \"$0\")/app.py\" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, _, rep, _ := programServer(t, func(cfg *server.Config) {
		cfg.Command = []string{"./app", cfg.Command[2]}
		cfg.Dir = dir
		cfg.Consumers[0].MaxRetries = 2
	})
	if err := os.Chmod(prog, 0o644); err != nil { // no longer executable: exec fails
		t.Fatal(err)
	}
	if err := srv.Client().Do(context.Background(), func(ev *duilie.Event) error { return duilie.Send(ev, "TASKS", `"m"`, 0) }); err != nil {
		t.Fatal(err)
	}
	// More failed starts than max_retries + 1 would allow, had each counted as an attempt.
	waitUntil(t, 30*time.Second, "four events whose program did not start", func() bool {
		n := 0
		for _, e := range rep.all() {
			if e.Kind == host.QueueEvent && e.Err != nil {
				n++
			}
		}
		return n >= 4
	})
	var starts []time.Time
	for _, e := range rep.all() {
		if e.Kind != host.QueueEvent {
			continue
		}
		starts = append(starts, e.Start)
		if len(e.Messages) != 1 || e.Messages[0].Attempts != 1 || e.Messages[0].Action.Kind != platform.Release {
			t.Errorf("a batch whose program did not start: %+v (err %v)", e.Messages, e.Err)
		}
	}
	// The consumer backs off between failed starts: 0.1 s, 0.2 s, 0.4 s …
	for i := 2; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 150*time.Millisecond {
			t.Errorf("start %d came %v after the one before: no backoff", i, gap)
		}
	}
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the message acked", func() bool { return rep.acked() == 1 })
	for _, e := range rep.all() {
		if e.Err == nil && len(e.Messages) == 1 && e.Messages[0].Attempts != 1 {
			t.Errorf("delivered to a program that ran with attempts %d, want 1", e.Messages[0].Attempts)
		}
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// [app] max_output_bytes reaches the program runner: output beyond it is dropped with one line.
func TestMaxOutputBytes(t *testing.T) {
	t.Parallel()
	srv, _, _, log := programServer(t, func(cfg *server.Config) {
		cfg.Command = []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x >&2"}
		cfg.MaxOutputBytes = 1000
	})
	if err := srv.Client().Do(context.Background(), func(ev *duilie.Event) error { return duilie.Send(ev, "TASKS", `"m"`, 0) }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the over-limit line", func() bool {
		return strings.Contains(log.String(), `level=WARN msg="program output over its limit: the rest is dropped" event=`) &&
			strings.Contains(log.String(), `stream=stderr limit=1000 dropped_bytes=99000`)
	})
}
