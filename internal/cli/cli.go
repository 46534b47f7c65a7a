// Package cli is duilie's command line. cmd/duilie only calls Main, and package app gives a Go
// program the same command line with its handlers in-process, so every command is one
// implementation, testable in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/buildinfo"
	"github.com/duilie/duilie/server"
)

// Exit statuses (SPEC §13, sysexits.h).
const (
	exitOK          = 0
	exitException   = 1  // a catchable exception
	exitAbort       = 2  // a host abort
	exitUsage       = 64 // EX_USAGE
	exitUnavailable = 69 // EX_UNAVAILABLE: the engine, a cluster or an address cannot be had
	exitSoftware    = 70 // EX_SOFTWARE: a failure inside duilie
	exitIOErr       = 74 // EX_IOERR: reading stdin or writing stdout failed; stored data was lost
	exitConfig      = 78 // EX_CONFIG
	// exitInterrupted: SIGINT or SIGTERM ended a command (not serve, which shuts down
	// gracefully and exits 0), as shells report an interrupted program (128 + SIGINT).
	exitInterrupted = 130
)

// exitError carries an exit status and the message to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, a...)}
}

func unavailable(err error) error { return &exitError{exitUnavailable, err} }

// Options shape the command line.
type Options struct {
	// Name is the command's name in help and messages; "" means "duilie".
	Name string
	// Program, when set, runs in-process per event instead of app.command, and the command
	// line has no demo.
	Program *duilie.Program
}

// Main runs duilie's command line with args (without the program name) and returns the exit
// status. SIGINT and SIGTERM cancel the run: serve then shuts down gracefully, and a second
// signal kills every running program's process group and ends the process at once.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainWith(Options{}, args, stdin, stdout, stderr)
}

// MainWith is Main for a command line shaped by opts.
func MainWith(opts Options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer close(sigs) // after Stop: no signal is sent on it any more, and the watcher ends
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := &lastResort{}
	ctx = context.WithValue(ctx, lastResortKey{}, last)
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		cancel()
		sig, ok := <-sigs
		if !ok {
			return
		}
		last.run()
		dieBy(sig)
	}()
	return Run(ctx, opts, args, stdin, stdout, stderr)
}

// lastResort holds what a second signal must do before the process ends.
type lastResort struct {
	mu  sync.Mutex
	fns []func()
}

type lastResortKey struct{}

// onSecondSignal has fn run when a second SIGINT or SIGTERM ends the process (MainWith), for
// example to kill the programs a serve runs, so none outlives it.
func onSecondSignal(ctx context.Context, fn func()) {
	if l, ok := ctx.Value(lastResortKey{}).(*lastResort); ok {
		l.mu.Lock()
		l.fns = append(l.fns, fn)
		l.mu.Unlock()
	}
}

func (l *lastResort) run() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns {
		fn()
	}
}

// Run runs the command line until it is done or ctx ends (serve then shuts down gracefully),
// and returns the exit status.
func Run(ctx context.Context, opts Options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if opts.Name == "" {
		opts.Name = "duilie"
	}
	root := newRoot(opts)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := status(err)
	if ctx.Err() != nil && code != exitException && code != exitAbort {
		// A signal ended the command: say so, whatever the work it cut short answered.
		code, err = exitInterrupted, fmt.Errorf("interrupted: %w", err)
	}
	fmt.Fprintln(stderr, message(opts.Name, cmd.CommandPath(), err, code))
	if explaining(stderr) {
		if e := explain(err); e != "" {
			fmt.Fprintln(stderr, e)
		}
	}
	return code
}

// explaining reports whether to explain an exception or abort after its message: for people,
// on a terminal, or when DUILIE_EXPLAIN=1 asks; never when DUILIE_EXPLAIN=0. Scripts reading
// stderr get the spec's message alone, and one newline (SPEC §13).
func explaining(stderr io.Writer) bool {
	switch os.Getenv("DUILIE_EXPLAIN") {
	case "1":
		return true
	case "0":
		return false
	}
	f, ok := stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// explain is the English line for people under an exception's or abort's message: its code,
// its gloss and what more there is to say, such as "  not_permitted: the binding is not
// permitted …; permitted: PAGE_QUEUE; did you mean PAGE_QUEUE?". "" for any other error.
func explain(err error) string {
	code, gloss, detail, ok := duilie.Explain(err)
	if !ok {
		return ""
	}
	line := "  " + code + ": " + gloss
	if detail != "" {
		line += "; " + detail
	}
	return line
}

// status maps an error to its exit status: the interface's exceptions and aborts, and errors
// that chose their own.
func status(err error) int {
	var ex *duilie.Exception
	var ab *duilie.Abort
	var xe *exitError
	var ce *server.ConfigError
	switch {
	case errors.As(err, &xe):
		return xe.code
	case errors.As(err, &ce):
		return exitConfig
	case errors.As(err, &ab):
		return exitAbort
	case errors.As(err, &ex):
		return exitException
	default:
		return exitUsage // cobra's own errors: unknown commands and flags
	}
}

// message is what to print: an exception's or abort's message alone, verbatim (scripts compare
// it), otherwise the error prefixed with the command's name; a usage error points to the help
// of the command it was made with (path: "duilie send").
func message(name, path string, err error, code int) string {
	switch code {
	case exitException, exitAbort:
		return err.Error()
	case exitUsage:
		return name + ": " + err.Error() + "\nRun '" + path + " --help' for usage."
	case exitConfig:
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			return ce.Error() // every line names the file
		}
	}
	return name + ": " + err.Error()
}

func newRoot(opts Options) *cobra.Command {
	root := &cobra.Command{
		Use:   opts.Name,
		Short: "A host for the message-queue interface 消息队列 0.1.0",
		Long: `duilie runs programs that send JSON messages to queues and consume them in batches,
on an embedded durable queue engine (NATS JetStream) or a NATS cluster. Programs in any
language run once per event and call the interface over a private HTTP bridge; Go programs
can run in-process.

Exit status: 0 success, 1 a catchable exception, 2 a host abort (the message on stderr),
64 a usage error, 78 a configuration error, 69 the engine or an address is unavailable,
70 an internal failure, 74 an I/O error (also: queues found messages lost).`,
		Example:       rootExample(opts),
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(newCheck(), newServe(opts), newSend(opts), newSendBatch(opts), newQueues(opts))
	root.AddCommand(newPeek(opts), newReplay(opts), newPurge(opts), newDelete(opts), newPause(opts, false), newPause(opts, true))
	root.AddCommand(newDashboard(opts))
	if opts.Program == nil {
		root.AddCommand(newDemo(), newWorker(), newBench())
	}
	return root
}

func rootExample(opts Options) string {
	if opts.Program != nil {
		n := opts.Name
		return `  ` + n + ` serve                        # runs this program per event, reading ./duilie.toml
  echo '{"kind":"page","url":"/x","version":"v8"}' | ` + n + ` send --binding PAGE_QUEUE
  ` + n + ` queues`
	}
	return `  duilie demo
  duilie serve --config examples/page-python/duilie.toml
  echo '{"kind":"page","url":"/x","version":"v8"}' | duilie send --binding PAGE_QUEUE --config examples/page-python/duilie.toml
  duilie queues --config examples/page-python/duilie.toml`
}
