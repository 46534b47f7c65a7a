//go:build linux

package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// TestTooManyOpenFiles runs a queue event in a child process (this test binary again) whose
// file descriptors are used up: the program cannot be started, and that is the host's failure
// (a *host.StartError, too many open files), not a failed attempt: the message is released
// with its attempts unchanged.
func TestTooManyOpenFiles(t *testing.T) {
	if os.Getenv("BRIDGE_TEST_EMFILE") != "" {
		emfileChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTooManyOpenFiles$")
	cmd.Env = append(os.Environ(), "BRIDGE_TEST_EMFILE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if want := "not_started release attempts=1 too many open files\n"; !strings.Contains(string(out), want) {
		t.Errorf("child said:\n%s\nwant %q", out, want)
	}
}

// emfileChild prints how the event ended, what the host resolved for its message and why.
func emfileChild() {
	plat := memory.New(memory.Options{})
	h, err := host.New(host.Config{Platform: plat, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	br, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	prog := &Runner{Command: []string{"true"}, Bridge: br, Logger: slog.New(slog.DiscardHandler)}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic(err)
	}
	// Room for what is open now and one more: the program's first pipe cannot be made.
	lim := syscall.Rlimit{Cur: uint64(len(fds) + 1), Max: uint64(len(fds) + 1)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		panic(err)
	}
	ds := []platform.Delivery{{Message: platform.Message{ID: "m", Attempts: 1, Body: []byte("1"), ContentType: platform.JSON}}}
	s, failure := h.RunBatch(context.Background(), host.DefaultConsumerConfig("q"), ds, prog.Queue)
	var se *host.StartError
	action := map[platform.ActionKind]string{platform.Release: "release"}[s.Messages[0].Action.Kind]
	fmt.Printf("%s %s attempts=%d %v\n", host.OutcomeOf(failure), action, s.Messages[0].Attempts,
		map[bool]string{true: "too many open files"}[errors.As(failure, &se) && errors.Is(failure, syscall.EMFILE)])
}
