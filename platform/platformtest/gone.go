package platformtest

import (
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
)

// Removed means removed (platform.Starter, gone.go): once Purge or Delete has returned, no
// message it removed is delivered, not from a batch still filling, nor again after an event
// that had it retries it; and Purge counts them all.

// starter skips the test unless the platform's consumers are Starters.
func (e *env) starter() {
	e.t.Helper()
	e.operator()
	c, err := e.p.Consume(e.ctx, queueName, platform.ConsumerOptions{MaxBatchSize: 1, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		e.t.Fatalf("Consume: %v", err)
	}
	_, ok := c.(platform.Starter)
	_ = c.Close()
	if !ok {
		e.t.Skip("the platform's consumers cannot leave out of a batch what an operator removed (platform.Starter)")
	}
}

// filling consumes the test's queue in batches of 10 that fill for 3 s.
func (e *env) filling() *consumer {
	cc := config(queueName)
	cc.MaxBatchSize, cc.MaxBatchTimeout = 10, 3*time.Second
	return e.consume(cc, nil)
}

// Three messages received for a batch that is still filling are purged: Purge counts them, and
// the batch starts without them.
func testPurgeFillingBatch(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.starter()
	c := e.filling()
	e.mustSend(`1`, `2`, `3`)
	e.waitListed(queueName, platform.InFlight, 3) // received, the batch filling
	if n, err := e.operator().Purge(e.ctx, queueName); err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3", n, err)
	}
	e.mustSend(`"after"`)
	if ms := c.messages(1, 15*time.Second); len(ms) != 1 || string(ms[0].Body) != `"after"` {
		t.Errorf("delivered %+v, want only the message sent after the purge", ms)
	}
	c.none(time.Second)
}

// A message received for a batch that is still filling is deleted: the batch starts without it.
func testDeleteFillingBatch(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.starter()
	c := e.filling()
	e.mustSend(`1`, `2`, `3`)
	pulled := e.waitListed(queueName, platform.InFlight, 3)
	if err := e.operator().Delete(e.ctx, queueName, pulled[1].ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	ms := c.messages(2, 15*time.Second)
	if len(ms) != 2 || string(ms[0].Body) != `1` || string(ms[1].Body) != `3` {
		t.Errorf("delivered %+v, want 1 and 3", ms)
	}
	c.none(time.Second)
}

// A message purged, or deleted, while its event runs is not stored again when the event then
// retries it.
func testRemovedWhileRunning(t *testing.T, hn Harness) {
	for _, how := range []string{"purge", "delete"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, hn)
			e.starter()
			started, release := make(chan string, 1), make(chan struct{})
			cc := config(queueName)
			cc.MaxBatchSize = 1
			c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
				if string(b.Messages[0].Body) != `"held"` {
					return nil
				}
				started <- b.Messages[0].ID
				<-release
				return duilie.Retry(ev, 0, 0)
			})
			e.mustSend(`"held"`)
			var id string
			select {
			case id = <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("no event within 10 s")
			}
			var err error
			if how == "purge" {
				var n int64
				if n, err = e.operator().Purge(e.ctx, queueName); err == nil && n != 1 {
					t.Errorf("Purge = %d, want 1", n)
				}
			} else {
				err = e.operator().Delete(e.ctx, queueName, id)
			}
			if err != nil {
				t.Fatal(err)
			}
			close(release)
			c.next(10 * time.Second) // the event that retried it
			e.mustSend(`"after"`)
			if ms := c.messages(1, 15*time.Second); len(ms) != 1 || string(ms[0].Body) != `"after"` {
				t.Errorf("delivered %+v, want only the message sent after the %s", ms, how)
			}
			c.none(time.Second)
			if s := e.stats(queueName); s.Ready+s.Delayed+s.InFlight != 0 {
				t.Errorf("stats %+v, want nothing left", s)
			}
		})
	}
}
