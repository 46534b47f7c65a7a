package platformtest

import (
	"regexp"
	"testing"
	"time"

	"github.com/duilie/duilie"
)

// Delivering: messages come in order with the platform's ids, attempts and millisecond
// timestamps, in batches that fill to max_batch_size or wait max_batch_timeout.

// Row 9: a batch of three reads back in order with the platform's id, attempts, timestamp and
// body, and reading acks or retries nothing.
func testRow09ReadBatchOfThree(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	before := time.Now().UnixMilli()
	if err := e.sendBatch(`[{"body":{"n":0}},{"body":[1]},{"body":"two"}]`); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	cc := batched(3)
	done := make(chan struct{})
	var texts [2]string
	c := e.consume(cc, func(ev *duilie.Event, _ batchText) error {
		// Read twice: reading changes nothing.
		texts[0], _ = duilie.ReadBatch(ev)
		texts[1], _ = duilie.ReadBatch(ev)
		close(done)
		return nil
	})
	s := c.next(10 * time.Second)
	<-done
	if texts[0] != texts[1] {
		t.Errorf("two reads differ:\n%s\n%s", texts[0], texts[1])
	}
	if s.batch.Queue != queueName || len(s.batch.Messages) != 3 {
		t.Fatalf("batch %+v", s.batch)
	}
	ids := map[string]bool{}
	for i, m := range s.batch.Messages {
		if want := []string{`{"n":0}`, `[1]`, `"two"`}[i]; string(m.Body) != want {
			t.Errorf("message %d body %s, want %s", i, m.Body, want)
		}
		if !idPattern.MatchString(m.ID) || ids[m.ID] || m.Attempts != 1 || m.Timestamp < before || m.Timestamp > after {
			t.Errorf("message %d: id %q attempts %d timestamp %d", i, m.ID, m.Attempts, m.Timestamp)
		}
		ids[m.ID] = true
	}
	wantKeys := regexp.MustCompile(`^\{"queue":"conf-tasks","messages":\[\{"id":"[0-9a-f]{32}","attempts":1,"timestamp":\d+,"body":\{"n":0\}\},\{"id":"[0-9a-f]{32}","attempts":1,"timestamp":\d+,"body":\[1\]\},\{"id":"[0-9a-f]{32}","attempts":1,"timestamp":\d+,"body":"two"\}\]\}$`)
	if !wantKeys.MatchString(texts[0]) {
		t.Errorf("ReadBatch text %s does not have the spec's exact shape", texts[0])
	}
	c.none(300 * time.Millisecond) // the event has been settled: now no call may follow the send
	e.wantCalls(`sendBatch([{"body":{"n":0},"contentType":"json"},{"body":[1],"contentType":"json"},{"body":"two","contentType":"json"}])`)
}

// A batch is delivered when max_batch_size messages are ready, or max_batch_timeout after the
// first; never empty.
func testBatchSizeAndTimeout(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	text, _ := items(7)
	if err := e.sendBatch(text); err != nil {
		t.Fatal(err)
	}
	cc := batched(5)
	c := e.consume(cc, nil)
	full := c.next(10 * time.Second)
	rest := c.next(10 * time.Second)
	if len(full.batch.Messages) != 5 || len(rest.batch.Messages) != 2 {
		t.Fatalf("batch sizes %d, %d, want 5, 2", len(full.batch.Messages), len(rest.batch.Messages))
	}
	if d := rest.at.Sub(full.at); d < 900*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("the partial batch came %v after the full one, want about max_batch_timeout (1s)", d)
	}
	c.none(300 * time.Millisecond)
}
