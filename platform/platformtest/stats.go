package platformtest

import (
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
)

// Stats counts ready, delayed and in-flight messages.
func testStats(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if _, ok := e.p.(platform.Stater); !ok {
		t.Skip(noStats)
	}
	e.backlogOK = true
	e.mustSend(`1`, `2`)
	if err := e.send(`3`, 600); err != nil {
		t.Fatal(err)
	}
	if backlog(e.allStats(t)) {
		testBacklog(t, e)
		return
	}
	e.pollStats(t, "2 ready, 1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 2 && s.Delayed == 1 && s.InFlight == 0
	})
	release := make(chan struct{})
	e.consume(batched(2), func(ev *duilie.Event, b batchText) error { <-release; return nil })
	e.pollStats(t, "2 in flight, 1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 2
	})
	close(release)
	e.pollStats(t, "1 delayed", func(s platform.QueueStats) bool {
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 0
	})
}

// backlog reports whether the platform counts only unacknowledged messages (QueueStats.Backlog).
func backlog(all []platform.QueueStats) bool {
	for _, s := range all {
		if s.Backlog != nil {
			return true
		}
	}
	return false
}

// testBacklog is the Stats test on a platform that counts only unacknowledged messages: ready,
// delayed and in flight alike, until they are acked.
func testBacklog(t *testing.T, e *env) {
	is := func(n int64) func(platform.QueueStats) bool {
		return func(s platform.QueueStats) bool { return s.Backlog != nil && *s.Backlog == n }
	}
	e.pollStats(t, "a backlog of 3", is(3))
	release := make(chan struct{})
	e.consume(batched(2), func(ev *duilie.Event, b batchText) error { <-release; return nil })
	time.Sleep(300 * time.Millisecond) // the two ready ones are in flight by now, and still counted
	e.pollStats(t, "a backlog of 3 with 2 in flight", is(3))
	close(release)
	e.pollStats(t, "a backlog of 1", is(1))
}
