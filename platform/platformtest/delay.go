package platformtest

import (
	"fmt"
	"testing"
	"time"
)

// Delays: a message delayed at send time, alone or in a batch, is delivered no earlier than it
// is due, and soon after.

// Send delays are honoured: delivered no earlier than due, and no later than due + 1 s +
// max_batch_timeout.
func testSendDelaysHonoured(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	cc := config(queueName)
	cc.MaxBatchTimeout = 200 * time.Millisecond
	c := e.consume(cc, nil)
	sentAt := map[string]time.Time{}
	for _, d := range []int{3, 1, 2} {
		sentAt[fmt.Sprint(d)] = time.Now()
		if err := e.send(fmt.Sprint(d), d); err != nil {
			t.Fatal(err)
		}
	}
	e.mustSend(`0`)
	got := map[string]bool{}
	for len(got) < 4 {
		s := c.next(6 * time.Second)
		for _, m := range s.batch.Messages {
			got[string(m.Body)] = true
			if m.Attempts != 1 {
				t.Errorf("delayed message %s has attempts %d", m.Body, m.Attempts)
			}
			if string(m.Body) == "0" {
				continue
			}
			var d int
			fmt.Sscan(string(m.Body), &d)
			due := time.UnixMilli(m.Timestamp).Add(time.Duration(d) * time.Second)
			if s.at.Before(due.Add(-time.Millisecond)) {
				t.Errorf("delay %d s: delivered %v early", d, due.Sub(s.at))
			}
			if late := s.at.Sub(sentAt[string(m.Body)].Add(time.Duration(d) * time.Second)); late > time.Second+cc.MaxBatchTimeout {
				t.Errorf("delay %d s: delivered %v late", d, late)
			}
		}
	}
}

// Item delays in a batch are honoured one by one.
func testBatchDelaysHonoured(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	c := e.consume(config(queueName), nil)
	sent := time.Now()
	if err := e.sendBatch(`[{"body":"later","delaySeconds":2},{"body":"now"}]`); err != nil {
		t.Fatal(err)
	}
	now := c.next(3 * time.Second)
	if len(now.batch.Messages) != 1 || string(now.batch.Messages[0].Body) != `"now"` || now.at.Sub(sent) > time.Second {
		t.Fatalf("first delivery %+v after %v", now.batch, now.at.Sub(sent))
	}
	later := c.next(4 * time.Second)
	m := later.batch.Messages[0]
	if string(m.Body) != `"later"` || later.at.Before(time.UnixMilli(m.Timestamp).Add(2*time.Second-time.Millisecond)) || later.at.Sub(sent) > 3*time.Second {
		t.Errorf("delayed item %s delivered %v after sending", m.Body, later.at.Sub(sent))
	}
}
