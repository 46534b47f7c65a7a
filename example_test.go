package duilie_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// A producer sends from any event: here a fetch event (an HTTP request, say). Bindings the host
// permits and configures name queues; a failed check is an exception the program can handle.
func ExampleSend() {
	p := memory.New(memory.Options{Record: true})
	h, _ := host.New(host.Config{
		Platform:    p,
		Permissions: server.Permissions{Queue: []string{"PAGE_QUEUE"}},
		Bindings:    map[string]string{"PAGE_QUEUE": "page-render"},
	})
	_ = h.Do(context.Background(), func(ev *duilie.Event) error {
		if err := duilie.Send(ev, "PAGE_QUEUE", `{"kind":"page", "url":"/release/x", "n":1E2}`, 0); err != nil {
			return err
		}
		err := duilie.Send(ev, "PAGE_QUEUE", `{"kind":`, 0)
		var ex *duilie.Exception
		if errors.As(err, &ex) {
			fmt.Println("caught:", ex.Message)
		}
		return duilie.SendValue(ev, "PAGE_QUEUE", map[string]string{"kind": "release"}, 30)
	})
	for _, c := range p.Calls() {
		fmt.Println(c)
	}
	// Output:
	// caught: 消息体不是有效的 JSON 文字
	// send({"kind":"page","url":"/release/x","n":100}, {"contentType":"json"})
	// send({"kind":"release"}, {"contentType":"json","delaySeconds":30})
}

// A consumer reads its batch in a queue event and acks or retries each message. A message with
// no call succeeds when the handler returns nil.
func ExampleReadBatchOf() {
	type task struct {
		Kind string `json:"kind"`
		URL  string `json:"url"`
	}
	p := memory.New(memory.Options{})
	h, _ := host.New(host.Config{
		Platform:    p,
		Permissions: server.Permissions{Queue: []string{"PAGE_QUEUE"}},
		Bindings:    map[string]string{"PAGE_QUEUE": "page-render"},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	_ = h.Do(context.Background(), func(ev *duilie.Event) error {
		return duilie.SendBatch(ev, "PAGE_QUEUE", `[{"body":{"kind":"page","url":"/a"}},{"body":{"kind":"page","url":"/b"}}]`)
	})

	ctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	cc := server.DefaultConsumerConfig("page-render")
	cc.MaxBatchSize = 2
	_ = h.Consume(ctx, cc, func(ev *duilie.Event) error {
		defer stop() // one batch is enough for the example
		b, err := duilie.ReadBatchOf[task](ev)
		if err != nil {
			return err
		}
		for i, m := range b.Messages {
			fmt.Printf("%s %s attempt %d\n", b.Queue, m.Body.URL, m.Attempts)
			if m.Body.URL == "/b" {
				if err := duilie.Retry(ev, i, 30); err != nil {
					return err
				}
				continue
			}
			if err := duilie.Ack(ev, i); err != nil {
				return err
			}
		}
		return nil
	})
	s, _ := p.Stats(context.Background())
	fmt.Printf("%s: %d ready, %d delayed\n", s[0].Queue, s[0].Ready, s[0].Delayed)
	// Output:
	// page-render /a attempt 1
	// page-render /b attempt 1
	// page-render: 0 ready, 1 delayed
}

// ReadBatch gives the batch as the JSON text every host returns.
func ExampleReadBatch() {
	h, _ := host.New(host.Config{Platform: memory.New(memory.Options{})})
	_ = h.Do(context.Background(), func(ev *duilie.Event) error {
		_, err := duilie.ReadBatch(ev)
		fmt.Println(err)
		return nil
	})
	// Output:
	// 当前事件不是队列事件
}
