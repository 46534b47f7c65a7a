//go:build !(js && wasm)

package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/cli"
)

// Main runs the command line of os.Args with p in-process, and exits with the status
// `duilie` would (SPEC §13: 0 success, 1 exception, 2 abort, 64 usage, 78 configuration,
// 69–74 other failures). SIGINT and SIGTERM shut serve down gracefully; a second one ends the
// process at once.
func Main(p duilie.Program) {
	os.Exit(cli.MainWith(options(p), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Run runs the command line args (without the program's name) with p in-process and returns
// the exit status. serve runs until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, p duilie.Program, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, options(p), args, stdin, stdout, stderr)
}

// NewLogHandler returns the handler of a logger a program makes itself: natively, a text
// handler on stderr, where duilie serve writes its own lines; in a Worker, the Worker's console
// by level (workers.NewConsoleHandler). opts may be nil.
func NewLogHandler(opts *slog.HandlerOptions) slog.Handler {
	return slog.NewTextHandler(os.Stderr, opts)
}

func options(p duilie.Program) cli.Options {
	return cli.Options{
		Name:    filepath.Base(os.Args[0]),
		Program: &p,
	}
}
