package memory_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// Testing a consumer: hand it a batch, run it as one queue event, and look at what the platform
// was told. With Miniflare set, a failed event would redeliver the acked message too.
func Example() {
	p := memory.New(memory.Options{Record: true})
	h, _ := host.New(host.Config{Platform: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// The program under test: acks what it can render, retries the rest in 30 s.
	program := func(ev *duilie.Event) error {
		b, err := duilie.ReadBatchOf[struct{ URL string }](ev)
		if err != nil {
			return err
		}
		for i, m := range b.Messages {
			if m.Body.URL == "" {
				if err := duilie.Retry(ev, i, 30); err != nil {
					return err
				}
				continue
			}
			if err := duilie.Ack(ev, i); err != nil {
				return err
			}
		}
		return errors.New("the event fails, but explicit calls stand")
	}

	p.Put("pages",
		platform.Message{ID: "m1", Timestamp: 1700000000000, Body: []byte(`{"URL":"/a"}`), ContentType: platform.JSON},
		platform.Message{ID: "m2", Timestamp: 1700000000000, Body: []byte(`{}`), ContentType: platform.JSON})
	c, _ := p.Consume(context.Background(), "pages", platform.ConsumerOptions{})
	ds, _ := c.Receive(context.Background(), 10)
	s, err := h.RunBatch(context.Background(), server.DefaultConsumerConfig("pages"), ds, program)
	_ = c.Settle(context.Background(), s)

	fmt.Println("event:", err)
	for _, call := range p.Calls() {
		fmt.Println(call)
	}
	a := p.Settlements()[0].Messages[1].Action
	fmt.Println("m2 comes back in", a.Delay.Round(time.Second))
	// Output:
	// event: the event fails, but explicit calls stand
	// ack(m1)
	// retry(m2, {"delaySeconds":30})
	// m2 comes back in 30s
}
