package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// exampleConfig is a configuration as duilie.toml writes it, its data directory a temporary one.
func exampleConfig() (*server.Config, func()) {
	dir, err := os.MkdirTemp("", "duilie-example-")
	if err != nil {
		panic(err)
	}
	cfg, err := server.ParseConfig("duilie.toml", dir, []byte(`
[permissions]
QUEUE = ["TASKS"]
[[queues.producers]]
binding = "TASKS"
queue = "tasks"
[[queues.consumers]]
queue = "tasks"
dead_letter_queue = "tasks-dead"
`))
	if err != nil {
		panic(err)
	}
	return cfg, func() { os.RemoveAll(dir) }
}

// A command that does not serve reaches the platform through a client, as duilie send and
// duilie queues do: every configured queue is listed, before anything was sent to it.
func ExampleOpen() {
	cfg, cleanup := exampleConfig()
	defer cleanup()
	ctx := context.Background()
	c, err := server.Open(ctx, *cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.Send(ctx, "TASKS", `{"url": "/a"}`, 0); err != nil {
		panic(err)
	}
	// The interface's checks and messages, as a program gets them.
	err = c.Send(ctx, "TASKS", `{"url":`, 0)
	fmt.Println(err, errors.Is(err, duilie.ErrBodyNotJSON))
	qs, err := c.Queues(ctx)
	if err != nil {
		panic(err)
	}
	for _, q := range qs {
		fmt.Printf("%s ready=%d dead_letter_queue=%q sources=%v\n", q.Queue, q.Ready, q.DeadLetterQueue, q.Sources)
	}
	// Output:
	// 消息体不是有效的 JSON 文字 true
	// tasks ready=1 dead_letter_queue="tasks-dead" sources=[]
	// tasks-dead ready=0 dead_letter_queue="" sources=[tasks]
}

// Peek lists a queue's messages without taking them, each rendered once for every surface.
func ExampleClient_Peek() {
	cfg, cleanup := exampleConfig()
	defer cleanup()
	ctx := context.Background()
	c, _ := server.Open(ctx, *cfg)
	defer c.Close()
	_ = c.SendBatch(ctx, "TASKS", `[{"body":{"url":"/a"}},{"body":"later","delaySeconds":60}]`)
	page, err := c.Peek(ctx, "tasks", server.PeekOptions{})
	if err != nil {
		panic(err)
	}
	for _, m := range page.Messages {
		fmt.Println(m.State, m.ContentType, string(m.Body))
	}
	_, err = c.Peek(ctx, "tasks", server.PeekOptions{State: "gone"})
	fmt.Println(errors.Is(err, server.ErrInvalid))
	// Output:
	// ready json {"url":"/a"}
	// delayed json "later"
	// true
}

// Replay sends a dead-letter queue's messages back to the queue whose consumer names it, each
// with attempts from 1; purge deletes every message of a queue.
func ExampleClient_Replay() {
	cfg, cleanup := exampleConfig()
	defer cleanup()
	ctx := context.Background()
	c, _ := server.Open(ctx, *cfg)
	defer c.Close()
	_ = c.Push(ctx, "tasks-dead", server.PushMessage{Body: []byte(`{"url":"/failed"}`), ContentType: "json"})
	r, err := c.Replay(ctx, "tasks-dead", server.ReplayOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("replayed", r.Messages, "to", r.To)
	n, err := c.Purge(ctx, "tasks")
	fmt.Println("purged", n, err)
	// Output:
	// replayed 1 to tasks
	// purged 1 <nil>
}

// Pause stops delivery (sends are still accepted) until Resume, across restarts.
func ExampleClient_Pause() {
	cfg, cleanup := exampleConfig()
	defer cleanup()
	ctx := context.Background()
	c, _ := server.Open(ctx, *cfg)
	defer c.Close()
	if err := c.Pause(ctx, "tasks"); err != nil {
		panic(err)
	}
	qs, _ := c.Queues(ctx)
	fmt.Println(qs[0].Queue, "paused:", qs[0].Paused)
	if err := c.Resume(ctx, "tasks"); err != nil {
		panic(err)
	}
	qs, _ = c.Queues(ctx)
	fmt.Println(qs[0].Queue, "paused:", qs[0].Paused)
	// Output:
	// tasks paused: true
	// tasks paused: false
}

// A Go program can consume without serving: Consume runs the queue's consumer in this
// process, one event per batch, until its context ends.
func ExampleClient_Consume() {
	cfg, cleanup := exampleConfig()
	defer cleanup()
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	c, _ := server.Open(ctx, *cfg)
	defer c.Close()
	_ = c.Send(ctx, "TASKS", `{"url":"/a"}`, 0)
	err := c.Consume(ctx, server.ConsumerConfig{Queue: "tasks", MaxBatchTimeout: server.NoBatchTimeout}, func(ev *duilie.Event) error {
		defer stop() // one batch is enough here
		b, err := duilie.ReadBatchOf[struct{ URL string }](ev)
		if err != nil {
			return err
		}
		fmt.Println(b.Queue, b.Messages[0].Body.URL, "attempt", b.Messages[0].Attempts)
		return nil
	})
	fmt.Println("consumer stopped:", err)
	// Output:
	// tasks /a attempt 1
	// consumer stopped: <nil>
}

// A running server's client is the same door, with the server's observers: each operation is
// reported, as events are.
func ExampleServer_Client() {
	srv, err := server.New(server.Config{
		Bindings: map[string]string{"TASKS": "tasks"},
		Platform: &memory.Config{},
		Logger:   slog.New(slog.DiscardHandler),
		Observers: []server.Observer{func(r server.Report) {
			if op, ok := r.(*server.OperationReport); ok {
				fmt.Println("operation:", op.Op, op.Queue, op.Messages, op.Err)
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Shutdown(ctx)
	c := srv.Client()
	_ = c.Send(ctx, "TASKS", `1`, 0)
	_, _ = c.Purge(ctx, "tasks")
	// Output:
	// operation: purge tasks 1 <nil>
}

// Attach serves an HTTP surface of one's own beside the server's events, on a listener bounded
// as every listener of the server is; Subscribe gives it the server's reports.
func ExampleServer_Attach() {
	srv, err := server.New(server.Config{Bindings: map[string]string{"TASKS": "tasks"}, Platform: &memory.Config{},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	var sends atomic.Int64
	_ = srv.Subscribe(func(r server.Report) {
		if s, ok := r.(*server.SendReport); ok && s.Err == nil {
			sends.Add(int64(s.Messages))
		}
	})
	status, err := srv.Attach(server.Surface{Name: "a status page", Addr: "127.0.0.1:0",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "sent:", sends.Load()) })})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Shutdown(ctx)
	_ = srv.Client().Send(ctx, "TASKS", `{"url":"/a"}`, 0)
	resp, err := http.Get("http://" + status.Addr() + "/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, " ", string(body))
	// Output:
	// 200 OK sent: 1
}
