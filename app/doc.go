// Package app runs a Go program on duilie's host, in-process: the program's own binary gets
// duilie's whole command line (serve, send, send-batch, queues, check), and serve runs the
// program's handlers once per event where duilie serve would run app.command.
//
// The events, the interface's functions and the outcomes are the same as for a program run
// through the bridge: a queue event per batch, a fetch event per HTTP request to app.listen,
// one time limit per event, and a handler that returns an error, panics or is aborted
// fails its event (its messages are delivered again, a fetch event answers 500). The
// configuration is the same duilie.toml, minus app.command.
//
// # A program
//
//	func main() {
//		app.Main(duilie.Program{
//			Queue: func(ev *duilie.Event) error {
//				b, err := duilie.ReadBatchOf[Task](ev)
//				if err != nil {
//					return err
//				}
//				for i, m := range b.Messages {
//					… // handle m.Body, then duilie.Ack(ev, i) or duilie.Retry(ev, i, 30)
//				}
//				return nil
//			},
//		})
//	}
//
// Then `go run . serve --config duilie.toml` runs it, and `go run . send --binding PAGE_QUEUE`
// sends to it, whether or not the serve runs. examples/page-go is a complete program.
//
// # The same program as a Cloudflare Worker
//
// Built for js/wasm (duilie worker build ./path/to/program), Main hands the handlers to
// package workers instead: the Worker's queue handler runs Program.Queue once per
// MessageBatch and its fetch handler runs Program.Fetch once per request, with the same
// interface, checks, messages and aborts, and permissions and bindings from the same
// duilie.toml. The command line (Run) exists only in native builds. docs/workers.md has the
// details and what a handler may not do inside a Worker.
//
// # Logging on both
//
// A logger made with NewLogHandler writes text lines to stderr natively, beside duilie
// serve's own, and to the Worker's console by level in a Worker (console.info for INFO,
// console.error for ERROR, …), as log/slog's default logger does there.
//
// A Go handler runs on the host's goroutines, so unlike a program per event it could keep
// state between events; the interface assumes it does not (a fresh instance per event), and
// handlers that keep none can move between the two ways of running unchanged. A handler still
// running at its time limit cannot be stopped: its event fails at once, and every later call
// of the interface's functions in it returns the abort.
package app
