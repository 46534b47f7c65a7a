package platformtest

import (
	"testing"

	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
)

// Stats counts ready, delayed and in-flight messages.
func testStats(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if _, ok := e.p.(platform.Stater); !ok {
		t.Skip(noStats)
	}
	e.mustSend(`1`, `2`)
	if err := e.send(`3`, 600); err != nil {
		t.Fatal(err)
	}
	e.pollStats(t, "2 ready, 1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 2 && s.Delayed == 1 && s.InFlight == 0
	})
	release := make(chan struct{})
	e.consume(batched(2), func(ev *host.Event, b batchText) error { <-release; return nil })
	e.pollStats(t, "2 in flight, 1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 2
	})
	close(release)
	e.pollStats(t, "1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 0
	})
}
