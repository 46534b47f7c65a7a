package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/duilie/duilie"
)

// TestHelpGolden pins every command's --help, each with an example, for duilie and for an
// in-process program's binary.
func TestHelpGolden(t *testing.T) {
	for _, c := range []struct {
		golden string
		opts   Options
		args   []string
	}{
		{"duilie", Options{}, nil},
		{"check", Options{}, []string{"check"}},
		{"serve", Options{}, []string{"serve"}},
		{"send", Options{}, []string{"send"}},
		{"send-batch", Options{}, []string{"send-batch"}},
		{"queues", Options{}, []string{"queues"}},
		{"demo", Options{}, []string{"demo"}},
		{"worker", Options{}, []string{"worker"}},
		{"worker-build", Options{}, []string{"worker", "build"}},
		{"bench", Options{}, []string{"bench"}},
		{"peek", Options{}, []string{"peek"}},
		{"replay", Options{}, []string{"replay"}},
		{"purge", Options{}, []string{"purge"}},
		{"delete", Options{}, []string{"delete"}},
		{"pause", Options{}, []string{"pause"}},
		{"resume", Options{}, []string{"resume"}},
		{"dashboard", Options{}, []string{"dashboard"}},
		{"program", Options{Name: "page-go", Program: &duilie.Program{}}, nil},
		{"program-serve", Options{Name: "page-go", Program: &duilie.Program{}}, []string{"serve"}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), c.opts, append(c.args, "--help"), nil, &stdout, &stderr)
			if code != 0 || stderr.Len() != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), "\nExamples:\n") {
				t.Errorf("no example in:\n%s", stdout.String())
			}
			golden(t, "help/"+c.golden+".golden", stdout.String())
		})
	}
}

// An in-process program's binary has no demo; duilie has.
func TestProgramHasNoDemo(t *testing.T) {
	var stderr bytes.Buffer
	code := Run(context.Background(), Options{Name: "page-go", Program: &duilie.Program{}}, []string{"demo"}, nil, &bytes.Buffer{}, &stderr)
	if code != exitUsage || stderr.String() != "page-go: unknown command \"demo\" for \"page-go\"\nRun 'page-go --help' for usage.\n" {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
