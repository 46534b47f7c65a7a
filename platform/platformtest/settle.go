package platformtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
)

// Settling: the host's decisions of SPEC §7 carried out. Acked messages stay acked, retried ones
// come back after their delay with attempts + 1, a failed event's messages come back, the first
// call on a message wins, and exhausted retries end in the dead-letter queue or a drop.

// Row 10: ack 0, retry 1 with 30 s, leave 2: the platform gets ack and retry({delaySeconds:30})
// and nothing for the third. Observed through delivery with a 1 s retry as well.
func testRow10AckRetryLeave(t *testing.T, hn Harness) {
	for _, delay := range []int{30, 1} {
		t.Run(fmt.Sprint("retry", delay), func(t *testing.T) {
			e := newEnv(t, hn)
			if err := e.sendBatch(`[{"body":0},{"body":1},{"body":2}]`); err != nil {
				t.Fatal(err)
			}
			cc := batched(3)
			var ended time.Time
			c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
				if b.Messages[0].Attempts > 1 {
					return nil
				}
				if err := duilie.Ack(ev, 0); err != nil {
					return err
				}
				if err := duilie.Retry(ev, 1, delay); err != nil {
					return err
				}
				ended = time.Now()
				return nil
			})
			first := c.next(10 * time.Second)
			ids := first.batch.Messages
			e.eventuallyCalls(`sendBatch([{"body":0,"contentType":"json"},{"body":1,"contentType":"json"},{"body":2,"contentType":"json"}])`,
				"ack("+ids[0].ID+")", "retry("+ids[1].ID+`, {"delaySeconds":`+fmt.Sprint(delay)+`})`)
			if delay == 30 {
				e.eventuallyStats("one delayed retry", func(s platform.QueueStats) bool { return s.Delayed == 1 })
				return
			}
			again := c.next(10 * time.Second)
			if len(again.batch.Messages) != 1 || again.batch.Messages[0].ID != ids[1].ID || again.batch.Messages[0].Attempts != 2 {
				t.Fatalf("redelivered %+v, want only message 1 with attempts 2", again.batch)
			}
			if early := ended.Add(time.Duration(delay) * time.Second).Sub(again.at); early > 0 {
				t.Errorf("retried message delivered %v before its delay", early)
			}
			c.none(500 * time.Millisecond)
		})
	}
}

// Row 12: an uncaught failure is handed to the platform, and the batch comes back with
// attempts + 1.
func testRow12UncaughtFailure(t *testing.T, hn Harness) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, hn)
			if err := e.sendBatch(`[{"body":"a"},{"body":"b"}]`); err != nil {
				t.Fatal(err)
			}
			cc := batched(2)
			c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
				if b.Messages[0].Attempts == 1 {
					if how == "panic" {
						panic("render failed")
					}
					return errors.New("render failed")
				}
				return nil
			})
			first, second := c.next(10*time.Second), c.next(10*time.Second)
			if len(first.batch.Messages) != 2 || len(second.batch.Messages) != 2 {
				t.Fatalf("batches %+v, %+v", first.batch, second.batch)
			}
			// A platform may redeliver in another order: match by id.
			again := map[string]messageText{}
			for _, m := range second.batch.Messages {
				again[m.ID] = m
			}
			for _, f := range first.batch.Messages {
				s := again[f.ID]
				if s.Attempts != f.Attempts+1 || s.Timestamp != f.Timestamp || string(s.Body) != string(f.Body) {
					t.Errorf("message %s: first %+v, again %+v", f.ID, f, s)
				}
			}
			c.none(300 * time.Millisecond)
		})
	}
}

// An explicit ack is final even when the event fails.
func testAckFinalWhenEventFails(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if err := e.sendBatch(`[{"body":0},{"body":1},{"body":2}]`); err != nil {
		t.Fatal(err)
	}
	cc := batched(3)
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
		if b.Messages[0].Attempts > 1 {
			return nil
		}
		_ = duilie.Ack(ev, 0)
		_ = duilie.Ack(ev, 2)
		return errors.New("failed after acking 0 and 2")
	})
	first := c.next(10 * time.Second)
	again := c.next(10 * time.Second)
	if len(again.batch.Messages) != 1 || again.batch.Messages[0].ID != first.batch.Messages[1].ID || again.batch.Messages[0].Attempts != 2 {
		t.Fatalf("after the failure got %+v, want only message 1 with attempts 2", again.batch)
	}
	c.none(300 * time.Millisecond)
}

// For repeated calls on one message the first call wins.
func testFirstCallWins(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if err := e.sendBatch(`[{"body":"ack first"},{"body":"retry first"}]`); err != nil {
		t.Fatal(err)
	}
	cc := batched(2)
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
		if b.Messages[0].Attempts > 1 || len(b.Messages) == 1 {
			return nil
		}
		for _, err := range []error{duilie.Ack(ev, 0), duilie.Retry(ev, 0, 0), duilie.Retry(ev, 1, 0), duilie.Ack(ev, 1), duilie.Retry(ev, 1, 5)} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	first := c.next(10 * time.Second)
	e.eventuallyCalls(`sendBatch([{"body":"ack first","contentType":"json"},{"body":"retry first","contentType":"json"}])`,
		"ack("+first.batch.Messages[0].ID+")", "retry("+first.batch.Messages[1].ID+")")
	again := c.next(10 * time.Second)
	if len(again.batch.Messages) != 1 || string(again.batch.Messages[0].Body) != `"retry first"` {
		t.Fatalf("got %+v, want only the message retried first", again.batch)
	}
	if d := again.at.Sub(first.at); d > 3*time.Second {
		t.Errorf("a retry with no delay came back after %v: the later retry's 5 s delay was applied", d)
	}
	c.none(300 * time.Millisecond)
}

// retry() with no delay, and a failed event, wait for the consumer's retry_delay.
func testRetryDelay(t *testing.T, hn Harness) {
	for _, how := range []string{"retry()", "failed event"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, hn)
			e.needHostRetries()
			e.mustSend(`"again"`)
			cc := config(queueName)
			cc.RetryDelay = time.Second
			var ended time.Time
			c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
				if b.Messages[0].Attempts > 1 {
					return nil
				}
				ended = time.Now()
				if how == "retry()" {
					return duilie.Retry(ev, 0, 0)
				}
				return errors.New("fail once")
			})
			c.next(10 * time.Second)
			again := c.next(10 * time.Second)
			// Never early; the upper bound only tells retry_delay from an ack wait (30 s and more)
			// on a loaded machine.
			if d := again.at.Sub(ended); d < time.Second || d > 5*time.Second {
				t.Errorf("%s with retry_delay 1s came back after %v", how, d)
			}
			if how == "retry()" {
				e.eventuallyCalls(`send("again", {"contentType":"json"})`, "retry("+again.batch.Messages[0].ID+")")
			}
		})
	}
}

// A message that fails max_retries + 1 times moves to the dead-letter queue with its id,
// timestamp and body, attempts starting again at 1.
func testRetriesThenDeadLetter(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.needHostRetries()
	body := `{"poison":"毒","n":[1,2.5,"\u2028"]}`
	e.mustSend(body)
	cc := config(queueName)
	cc.MaxRetries, cc.DeadLetterQueue = 2, dlqName
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error { return errors.New("always fails") })
	var attempts []int
	var first messageText
	for range 3 {
		m := c.next(10 * time.Second).batch.Messages[0]
		if first.ID == "" {
			first = m
		}
		attempts = append(attempts, m.Attempts)
	}
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Errorf("attempts %v, want [1 2 3]", attempts)
	}
	dead := e.consume(config(dlqName), nil).next(10 * time.Second)
	m := dead.batch.Messages[0]
	if dead.batch.Queue != dlqName || m.ID != first.ID || m.Timestamp != first.Timestamp || string(m.Body) != string(first.Body) || m.Attempts != 1 {
		t.Errorf("dead-lettered %+v from %+v", dead.batch, first)
	}
	c.none(500 * time.Millisecond)
}

// Explicit retries count toward max_retries as failures do.
func testExplicitRetriesCount(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.needHostRetries()
	e.mustSend(`"retry me"`)
	cc := config(queueName)
	cc.MaxRetries, cc.DeadLetterQueue = 1, dlqName
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error { return duilie.Retry(ev, 0, 0) })
	a, b := c.next(5*time.Second), c.next(5*time.Second)
	if a.batch.Messages[0].Attempts != 1 || b.batch.Messages[0].Attempts != 2 {
		t.Errorf("attempts %d, %d", a.batch.Messages[0].Attempts, b.batch.Messages[0].Attempts)
	}
	dead := e.consume(config(dlqName), nil).next(10 * time.Second)
	if dead.batch.Messages[0].ID != a.batch.Messages[0].ID {
		t.Errorf("dead-letter queue got %+v", dead.batch)
	}
	c.none(300 * time.Millisecond)
}

// Without a dead-letter queue, an exhausted message is deleted.
func testRetriesThenDrop(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.needHostRetries()
	e.mustSend(`"doomed"`)
	cc := config(queueName)
	cc.MaxRetries = 1
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error { return errors.New("always fails") })
	c.next(10 * time.Second)
	if m := c.next(10 * time.Second).batch.Messages[0]; m.Attempts != 2 {
		t.Errorf("attempts %d", m.Attempts)
	}
	c.none(500 * time.Millisecond)
	e.eventuallyEmpty()
}
