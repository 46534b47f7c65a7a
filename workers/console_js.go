//go:build js && wasm

package workers

import (
	"fmt"
	"log/slog"
	"os"
	"syscall/js"
)

// In a Worker, log/slog's default logger (and with it package log's) writes to the console by
// level. A program may set another after this, in its main.
func init() {
	slog.SetDefault(slog.New(NewConsoleHandler(nil)))
}

// NewConsoleHandler returns a slog.Handler that writes each record to the Worker's console,
// on console.debug, info, warn or error by its level (DEBUG, INFO, WARN, ERROR and the levels
// between them), as one line: the message followed by its attributes as slog.TextHandler
// writes them, without a time or a level, which the console records itself. opts may be nil;
// its Level defaults to INFO, and its ReplaceAttr sees the attributes only.
//
// It is the default logger's handler in a Worker; a program that makes its own logger uses it
// (or app.NewLogHandler, which is it in a Worker and a text handler on stderr natively).
func NewConsoleHandler(opts *slog.HandlerOptions) slog.Handler {
	return newConsoleHandler(opts, func(level slog.Level, line string) {
		console(consoleMethod(level), line)
	})
}

// console calls console[method](line); without a console, the line goes to stderr.
func console(method, line string) {
	defer func() {
		if recover() != nil {
			fmt.Fprintln(os.Stderr, line)
		}
	}()
	js.Global().Get("console").Call(method, line)
}
