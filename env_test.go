package duilie_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// The deployment the interface's tests run in.
const (
	binding   = "TASKS"  // permitted and configured
	forbidden = "SECRET" // configured, not permitted
	unbound   = "GHOST"  // permitted, not configured
)

var quiet = slog.New(slog.DiscardHandler)

// deployment is a host on an in-memory platform that records every call it receives.
type deployment struct {
	p    *memory.Platform
	h    *host.Host
	seen int // calls already asserted
}

func newDeployment(t *testing.T, timeLimit time.Duration) *deployment {
	t.Helper()
	p := memory.New(memory.Options{Record: true})
	t.Cleanup(func() { p.Close() })
	h, err := host.New(host.Config{
		Platform:    p,
		Permissions: server.Permissions{Queue: []string{binding, unbound}},
		Bindings:    map[string]string{binding: "tasks", forbidden: "secret"},
		TimeLimit:   timeLimit,
		Logger:      quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{p: p, h: h}
}

// run runs fn as a fetch event and returns the event's failure.
func (d *deployment) run(fn duilie.Handler) error { return d.h.Do(context.Background(), fn) }

// send returns Send's error in a fetch event of its own.
func (d *deployment) send(binding, body string, delay int) error {
	var err error
	_ = d.run(func(ev *duilie.Event) error { err = duilie.Send(ev, binding, body, delay); return nil })
	return err
}

// sendBatch returns SendBatch's error in a fetch event of its own.
func (d *deployment) sendBatch(binding, items string) error {
	var err error
	_ = d.run(func(ev *duilie.Event) error { err = duilie.SendBatch(ev, binding, items); return nil })
	return err
}

// wantCalls asserts the calls the platform has received since the last wantCalls, exactly.
func (d *deployment) wantCalls(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	for _, c := range d.p.Calls()[d.seen:] {
		got = append(got, c.String())
	}
	d.seen += len(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("platform calls:\n got %q\nwant %q", got, want)
	}
}

// wantException asserts err is an *Exception with exactly msg, and no abort.
func wantException(t *testing.T, err error, msg string) {
	t.Helper()
	var ex *duilie.Exception
	if !errors.As(err, &ex) || ex.Message != msg {
		t.Fatalf("got error %#v (%v), want exception %q", err, err, msg)
	}
	var ab *duilie.Abort
	if errors.As(err, &ab) {
		t.Fatalf("an exception must not also be an abort: %v", err)
	}
}

// wantAbort asserts err is an *Abort with exactly reason, and no exception.
func wantAbort(t *testing.T, err error, reason string) {
	t.Helper()
	var ab *duilie.Abort
	if !errors.As(err, &ab) || ab.Reason != reason {
		t.Fatalf("got error %#v (%v), want abort %q", err, err, reason)
	}
	var ex *duilie.Exception
	if errors.As(err, &ex) {
		t.Fatalf("an abort must not also be an exception: %v", err)
	}
}

// nested returns inner nested n arrays deep.
func nested(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}
