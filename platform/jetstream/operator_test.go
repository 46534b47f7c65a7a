package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// A command attached to a serving engine lists the serve's deliveries in flight with their
// delivery time and attempts, which only the serve knows: it asks the serve.
func TestInFlightSeenFromAnotherProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	serve, err := Open(ctx, Config{DataDir: dir, Serve: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	q, err := serve.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, []byte(`"held"`), platform.SendOptions{ContentType: platform.JSON}); err != nil {
		t.Fatal(err)
	}
	c, err := serve.Consume(ctx, "jobs", platform.ConsumerOptions{MaxBatchSize: 1, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := time.Now().UnixMilli()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()

	cmd, err := Open(ctx, Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Close()
	if !cmd.Attached() {
		t.Fatal("the command did not attach to the serve")
	}
	page, err := cmd.Browse(ctx, "jobs", platform.BrowseOptions{State: platform.InFlight})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("Browse: %+v, %v", page, err)
	}
	m := page.Messages[0]
	if m.ID != ds[0].ID || m.Attempts != 1 || m.Delivered < before || m.Delivered > after {
		t.Errorf("in flight, seen from the command: %+v; want id %s, attempts 1, delivered within [%d, %d]", m, ds[0].ID, before, after)
	}
	// Settled, it is no longer in flight for anyone.
	if err := c.Settle(ctx, platform.Settlement{Queue: "jobs", Messages: []platform.Resolution{{Delivery: ds[0], Action: platform.Action{Kind: platform.Done}}}}); err != nil {
		t.Fatal(err)
	}
	if page, err := cmd.Browse(ctx, "jobs", platform.BrowseOptions{}); err != nil || len(page.Messages) != 0 {
		t.Errorf("after the ack: %+v, %v", page, err)
	}
}
