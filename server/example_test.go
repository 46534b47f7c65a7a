package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// A Go service embeds the running host: it sends from its own code and consumes in-process.
func Example() {
	done := make(chan string)
	srv, err := server.New(server.Config{
		Permissions: host.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Consumers:   []host.ConsumerConfig{{Queue: "tasks", MaxBatchSize: 10, MaxConcurrency: 1}},
		Program: &server.Program{Queue: func(ev *duilie.Event) error {
			b, err := duilie.ReadBatchOf[struct{ URL string }](ev)
			if err != nil {
				return err
			}
			for _, m := range b.Messages {
				done <- fmt.Sprintf("%s, attempt %d", m.Body.URL, m.Attempts)
			}
			return nil // every message without a call succeeds
		}},
		Platform: &memory.Config{}, // nil: the embedded engine in .duilie
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	err = srv.Do(context.Background(), func(ev *duilie.Event) error {
		return duilie.Send(ev, "TASKS", `{"URL":"/release/x"}`, 0)
	})
	fmt.Println("sent:", err)
	select {
	case d := <-done:
		fmt.Println("done:", d)
	case <-time.After(5 * time.Second):
		fmt.Println("not consumed")
	}
	// Output:
	// sent: <nil>
	// done: /release/x, attempt 1
}

// Reading duilie.toml gives the same configuration duilie serve runs.
func ExampleParseConfig() {
	cfg, err := server.ParseConfig("duilie.toml", "/srv/app", []byte(`
[permissions]
QUEUE = ["PAGE_QUEUE"]
[[queues.producers]]
binding = "PAGE_QUEUE"
queue = "page-render"
[[queues.consumers]]
queue = "page-render"
max_batch_size = 0
`))
	fmt.Println(cfg, err)
	// Output:
	// <nil> duilie.toml: queues.consumers[0].max_batch_size = 0: must be 1–100
}
