// Command page-go is the page-task consumer as a Go program on duilie's host: its handlers
// (package pagetask) run in-process, once per event, and the binary has duilie's whole command
// line. From the repository's root:
//
//	go run ./examples/page-go serve --config examples/page-go/duilie.toml
//	echo '{"kind":"page","url":"/release/x","version":"v8"}' |
//	    go run ./examples/page-go send --binding PAGE_QUEUE --config examples/page-go/duilie.toml
//	curl -d '{"kind":"page","url":"/release/y","version":"v8"}' http://127.0.0.1:8788/tasks
//
// PAGE_VERSION sets the current version (default v8); tasks of another version are stale.
// cloudflare/duilie.toml runs the same program on Cloudflare Queues (docs/cloudflare.md), and
// duilie worker build makes it a Cloudflare Worker (docs/workers.md), whose console gets its
// lines by level: completions at info, retries at warn.
package main

import (
	"log/slog"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
	"github.com/duilie/duilie/examples/pagetask"
)

func main() {
	consumer := &pagetask.Consumer{Logger: slog.New(app.NewLogHandler(nil))}
	app.Main(duilie.Program{Queue: consumer.Queue, Fetch: pagetask.Fetch})
}
