package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/duilie/duilie/platform"
)

// A serving process finishes, at its sweeps, a batch whose sender stopped after storing its
// envelope (a local command attached to the serve, killed half-way), once the envelope is
// staleBatch old; until then it leaves it to its sender.
func TestSweepFinishesStaleBatch(t *testing.T) {
	sweepEvery = 50 * time.Millisecond
	defer func() { sweepEvery = time.Minute; staleBatch.Store(int64(30 * time.Second)) }()
	log := &syncBuffer{}
	p := open(t, Config{Serve: true, Logger: slog.New(slog.NewTextHandler(log, nil))})
	q := queueOf(t, p, "q")
	items := make([]platform.BatchItem, 10)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
	}
	testHookFanOut = func(i int, m *nats.Msg) error {
		if i == 4 {
			return errors.New("stopped")
		}
		return nil
	}
	err := q.SendBatch(context.Background(), items)
	testHookFanOut = nil
	if err == nil {
		t.Fatal("the stopped batch succeeded")
	}
	time.Sleep(300 * time.Millisecond) // several sweeps: the envelope is younger than staleBatch
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 4})
	staleBatch.Store(int64(100 * time.Millisecond))
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 10})
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(log.String(), "are complete now\" batches=1") {
			return fmt.Errorf("not logged:\n%s", log)
		}
		return nil
	})
}
