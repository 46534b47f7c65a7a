package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
)

// The embedded engine: open a data directory, send, receive and settle.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "duilie-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	p, err := jetstream.Open(ctx, jetstream.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	q, _ := p.Queue(ctx, "page-render")
	_ = q.Send(ctx, []byte(`{"url":"/release/x"}`), platform.SendOptions{ContentType: platform.JSON})

	c, _ := p.Consume(ctx, "page-render", platform.ConsumerOptions{MaxBatchSize: 10, MaxConcurrency: 1, AckWait: time.Minute})
	defer c.Close()
	ds, _ := c.Receive(ctx, 10)
	fmt.Printf("%s attempts=%d\n", ds[0].Body, ds[0].Attempts)
	_ = c.Settle(ctx, platform.Settlement{Queue: "page-render", Messages: []platform.Resolution{
		{Delivery: ds[0], Action: platform.Action{Kind: platform.Done}},
	}})
	stats, _ := p.Stats(ctx)
	fmt.Printf("%+v\n", stats)
	// Output:
	// {"url":"/release/x"} attempts=1
	// [{Queue:page-render Ready:0 Delayed:0 InFlight:0 Paused:false Lost:0 Damage: Backlog:<nil>}]
}
