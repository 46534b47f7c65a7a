//go:build !(js && wasm)

package app_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
)

// A Go program with a queue handler, run by the host in-process. The message is sent with the
// program's own send command before serve starts: it waits in the engine's data directory.
// Here the handler stops the serve after one batch; a real program runs until SIGINT or
// SIGTERM, as app.Main does.
func Example() {
	dir, _ := os.MkdirTemp("", "app-example-")
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "duilie.toml")
	os.WriteFile(config, []byte(`
[permissions]
QUEUE = ["PAGE_QUEUE"]
[[queues.producers]]
binding = "PAGE_QUEUE"
queue = "page-render"
[[queues.consumers]]
queue = "page-render"
max_batch_timeout = 0
`), 0o644)

	type task struct {
		URL string `json:"url"`
	}
	ctx, stop := context.WithCancel(context.Background())
	program := duilie.Program{
		Queue: func(ev *duilie.Event) error {
			defer stop()
			b, err := duilie.ReadBatchOf[task](ev)
			if err != nil {
				return err
			}
			for i, m := range b.Messages {
				fmt.Printf("%s: render %s (attempt %d)\n", b.Queue, m.Body.URL, m.Attempts)
				if err := duilie.Ack(ev, i); err != nil {
					return err
				}
			}
			return nil
		},
	}

	code := app.Run(ctx, program, []string{"send", "--binding", "PAGE_QUEUE", "--config", config},
		strings.NewReader(`{"url": "/release/x"}`), os.Stdout, os.Stderr)
	fmt.Println("send:", code)
	code = app.Run(ctx, program, []string{"serve", "--config", config}, nil, os.Stdout, io.Discard)
	fmt.Println("serve:", code)
	// Output:
	// send: 0
	// page-render: render /release/x (attempt 1)
	// serve: 0
}
