package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// duilie worker build's exit statuses, as docs/workers.md lists them: 64 for a usage error,
// 70 when go cannot build a program of it, 78 for a configuration mistake, 74 when the output
// cannot be written. None of them writes a file. (A successful build is the Workers tests'.)
func TestWorkerBuildExitStatuses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(badConfig, []byte("[[queues.consumers]]\nqueue = \"q\"\nmax_batch_size = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no program", []string{"worker", "build"}, exitUsage,
			"duilie: worker build needs one PROGRAM, such as ./examples/page-go\nRun 'duilie worker build --help' for usage.\n"},
		{"two programs", []string{"worker", "build", "./a", "./b"}, exitUsage, "worker build needs one PROGRAM"},
		{"no subcommand", []string{"worker"}, exitUsage, "worker needs a subcommand: build"},
		{"not a program", []string{"worker", "build", "--out", out, "github.com/duilie/duilie/jsonvalue"}, exitSoftware,
			"duilie: github.com/duilie/duilie/jsonvalue is package jsonvalue, not a program (package main calling app.Main)\n"},
		{"a configuration mistake", []string{"worker", "build", "--out", out, "--config", badConfig, "github.com/duilie/duilie/examples/page-go"}, exitConfig,
			badConfig + ": queues.consumers[0].max_batch_size = 0: must be 1–100\n"},
		{"an output that is a file", []string{"worker", "build", "--out", aFile, "github.com/duilie/duilie/examples/page-go"}, exitIOErr,
			"duilie: mkdir " + aFile + ": not a directory\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), Options{}, c.args, nil, &stdout, &stderr)
			if code != c.code || stdout.Len() != 0 || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout.String(), stderr.String(), c.code, c.stderr)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed build left %s: %v", out, err)
	}
}
