//go:build js && wasm

package app

import (
	"log/slog"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/workers"
)

// Main runs p as a Cloudflare Worker's handlers (see package workers) and never returns: in a
// program built for js/wasm by duilie worker build, the Worker's queue handler runs p.Queue and
// its fetch handler runs p.Fetch, once per event.
func Main(p duilie.Program) {
	workers.Serve(p)
}

// NewLogHandler returns the handler of a logger a program makes itself: in a Worker, the
// Worker's console by level (workers.NewConsoleHandler); natively, a text handler on stderr.
func NewLogHandler(opts *slog.HandlerOptions) slog.Handler {
	return workers.NewConsoleHandler(opts)
}
