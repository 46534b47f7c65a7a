package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// A Go service embeds the running host: it sends from its own code and consumes in-process.
func Example() {
	done := make(chan string)
	srv, err := server.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		// Zero settings are the defaults; deliver each batch without waiting for it to fill.
		Consumers: []server.ConsumerConfig{{Queue: "tasks", MaxBatchTimeout: server.NoBatchTimeout}},
		Program: &duilie.Program{Queue: func(ev *duilie.Event) error {
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

	err = srv.Client().Do(context.Background(), func(ev *duilie.Event) error {
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

// Observers receive a report of every event, send and settlement: what the server's log lines,
// the demo's table and the metrics are made from.
func Example_observers() {
	queueEvents := make(chan *server.EventReport, 1)
	consumer := server.DefaultConsumerConfig("tasks") // 3 retries
	consumer.MaxBatchTimeout = server.NoBatchTimeout  // deliver at once, not after 5 s
	srv, err := server.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Consumers:   []server.ConsumerConfig{consumer},
		Program: &duilie.Program{Queue: func(ev *duilie.Event) error {
			return duilie.Retry(ev, 0, 30)
		}},
		Platform: &memory.Config{},
		Logger:   slog.New(slog.DiscardHandler),
		Observers: []server.Observer{func(r server.Report) {
			switch r := r.(type) {
			case *server.SendReport:
				fmt.Printf("send to %s: %d message, %d bytes, err %v\n", r.Queue, r.Messages, r.Bytes, r.Err)
			case *server.EventReport:
				if r.Kind == host.QueueEvent {
					queueEvents <- r
				}
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	_ = srv.Client().Do(context.Background(), func(ev *duilie.Event) error {
		return duilie.Send(ev, "TASKS", `{ "url": "/x" }`, 0)
	})
	select {
	case r := <-queueEvents:
		m := r.Messages[0]
		fmt.Printf("queue event on %s: %s, batch of %d\n", r.Queue, r.Outcome, r.Batch)
		fmt.Printf("message: attempts %d, retry(%d) asked, redelivered after %v\n", m.Attempts, m.Call.DelaySeconds, m.Action.Delay)
	case <-time.After(5 * time.Second):
		fmt.Println("not consumed")
	}
	// Output:
	// send to tasks: 1 message, 12 bytes, err <nil>
	// queue event on tasks: ok, batch of 1
	// message: attempts 1, retry(30) asked, redelivered after 30s
}
