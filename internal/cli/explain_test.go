package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// For people (a terminal, or DUILIE_EXPLAIN=1), an exception or abort is followed by its code,
// an English gloss and where it failed: the byte of a syntax error, a batch item's index, the
// bindings that are permitted and the one meant. The spec's message stays the first line, byte
// for byte; without DUILIE_EXPLAIN, on a pipe, it is stderr's only line.
func TestExplained(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 2000)
	var out strings.Builder
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{`{"kind":"page",}`, []string{"check"}},
		{`[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]`, []string{"check"}},
		{`{"$句柄":1}`, []string{"check"}},
		{"1", []string{"check", "--delay", "43201"}},
		{`[{"body":1},{"body":2,"delaySeconds":1.5}]`, []string{"check", "--batch"}},
		{`[{"body":1},{"bodi":2}]`, []string{"check", "--batch"}},
		{`1`, []string{"send", "--binding", "JOB", "--config", cfg}},
		{`1`, []string{"send", "--binding", "UNSET", "--config", cfg}},
		{`1`, []string{"send", "--binding", "", "--config", cfg}},
	} {
		r := runDuilie(t, c.stdin, []string{"DUILIE_EXPLAIN=1"}, c.args...)
		plain := runDuilie(t, c.stdin, []string{"DUILIE_EXPLAIN=0"}, c.args...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if plain.stderr != first+"\n" || plain.code != r.code {
			t.Errorf("%v: plain stderr %q, want the message alone, %q", c.args, plain.stderr, first+"\n")
		}
		args := strings.ReplaceAll(strings.Join(c.args, " "), cfg, "duilie.toml")
		fmt.Fprintf(&out, "$ echo '%s' | duilie %s    # exit %d\n%s\n", c.stdin, args, r.code, r.stderr)
	}
	golden(t, "explain.golden", out.String())
}

// A signal that cuts a command short is named as such (exit 130), not reported as whatever the
// work in progress answered: here send waiting for a data directory another process holds.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 2000)
	holder := exec.Command(duilieBinary(t), "bench", "--config", cfg, "--duration", "30s")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	lock := filepath.Join(filepath.Dir(cfg), ".duilie")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(lock); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("bench did not open the data directory")
		}
	}
	time.Sleep(500 * time.Millisecond) // it holds the lock once the engine is up
	send := exec.Command(duilieBinary(t), "send", "--binding", "JOBS", "--config", cfg)
	send.Stdin = strings.NewReader("1")
	var stderr strings.Builder
	send.Stderr = &stderr
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // waiting for the lock, up to 5 s
	_ = send.Process.Signal(os.Interrupt)
	err := send.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.HasPrefix(stderr.String(), "duilie: interrupted: ") {
		t.Errorf("send interrupted: %v, stderr %q; want exit 130 and duilie: interrupted: …", err, stderr.String())
	}
}
