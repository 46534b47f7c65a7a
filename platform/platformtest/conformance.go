package platformtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
)

// RunConformanceTests runs the whole suite against the platforms a harness makes. Subtests run
// in parallel; the slowest wait a few seconds for delays.
func RunConformanceTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	ctx := context.Background()
	hn, err := newHarness(ctx, t)
	if err != nil {
		t.Fatalf("making harness: %v", err)
	}
	t.Cleanup(hn.Close)
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"Row01SendSameValue", testRow01SendSameValue},
		{"Row02DelayBounds", testRow02DelayBounds},
		{"Row04BodySize", testRow04BodySize},
		{"Row05BatchCounts", testRow05BatchCounts},
		{"Row07BodiesRestored", testRow07BodiesRestored},
		{"Row09ReadBatchOfThree", testRow09ReadBatchOfThree},
		{"Row10AckRetryLeave", testRow10AckRetryLeave},
		{"Row12UncaughtFailure", testRow12UncaughtFailure},
		{"ForeignBodies", testForeignBodies},
		{"AckFinalWhenEventFails", testAckFinalWhenEventFails},
		{"FirstCallWins", testFirstCallWins},
		{"RetryDelayDefault", testRetryDelayDefault},
		{"FailedEventUsesRetryDelay", testFailedEventUsesRetryDelay},
		{"RetriesThenDeadLetter", testRetriesThenDeadLetter},
		{"ExplicitRetriesCount", testExplicitRetriesCount},
		{"RetriesThenDrop", testRetriesThenDrop},
		{"SendDelaysHonoured", testSendDelaysHonoured},
		{"BatchDelaysHonoured", testBatchDelaysHonoured},
		{"BatchSizeAndTimeout", testBatchSizeAndTimeout},
		{"ConcurrentEvents", testConcurrentEvents},
		{"Stats", testStats},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, hn)
		})
	}
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

const pageTask = `{"kind":"page","url":"/release/x","version":"v8","refresh":true}`

// Row 1: the platform's send gets the same value, options exactly {"contentType":"json"}.
func testRow01SendSameValue(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	before := time.Now().UnixMilli()
	e.mustSend(pageTask)
	after := time.Now().UnixMilli()
	e.wantCalls(`send(` + pageTask + `, {"contentType":"json"})`)
	m := e.consume(config(queueName), nil).next(10 * time.Second).batch.Messages[0]
	if string(m.Body) != pageTask {
		t.Errorf("delivered body %s, want %s", m.Body, pageTask)
	}
	if !idPattern.MatchString(m.ID) || m.Attempts != 1 || m.Timestamp < before || m.Timestamp > after {
		t.Errorf("delivered id %q attempts %d timestamp %d, want 32 hex, 1, within [%d, %d]", m.ID, m.Attempts, m.Timestamp, before, after)
	}
}

// Row 2: delays 30 and 43200 reach the platform and hold the messages back. (The refused
// delays, -1 and 43201, are the interface's: TestConformanceRowsRefused in package duilie.)
func testRow02DelayBounds(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	for _, d := range []int{30, 43200} {
		if err := e.send(`1`, d); err != nil {
			t.Fatalf("delay %d: %v", d, err)
		}
	}
	e.wantCalls(`send(1, {"contentType":"json","delaySeconds":30})`, `send(1, {"contentType":"json","delaySeconds":43200})`)
	eventually(t, 10*time.Second, "two delayed messages", func() bool {
		s := e.stats(queueName)
		return s.Delayed == 2 && s.Ready == 0
	})
	e.consume(config(queueName), nil).none(300 * time.Millisecond)
}

// Row 4: a body of exactly 128000 bytes is stored and delivered whole. (One byte more is the
// interface's exception.)
func testRow04BodySize(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	exact := `"` + strings.Repeat("a", 127998) + `"`
	e.mustSend(exact)
	e.wantCalls(`send(` + exact + `, {"contentType":"json"})`)
	m := e.consume(config(queueName), nil).next(10 * time.Second).batch.Messages[0]
	if string(m.Body) != exact {
		t.Errorf("128000-byte body came back as %d bytes", len(m.Body))
	}
}

// items returns a sendBatch text of n items with bodies 0..n-1.
func items(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"body":%d}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Row 5: batches of 1 and 100 items are stored and delivered. (0 and 101 items are the
// interface's exceptions.)
func testRow05BatchCounts(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	for _, n := range []int{1, 100} {
		if err := e.sendBatch(items(n)); err != nil {
			t.Fatalf("batch of %d: %v", n, err)
		}
	}
	if calls, ok := e.calls(); ok {
		if len(calls) != 2 || calls[0] != `sendBatch([{"body":0,"contentType":"json"}])` || !strings.HasPrefix(calls[1], `sendBatch([{"body":0,"contentType":"json"},{"body":1,"contentType":"json"},`) {
			t.Fatalf("calls %q", calls)
		}
	}
	ms := e.consume(config(queueName), nil).messages(101, 10*time.Second)
	counts := map[string]int{}
	for _, m := range ms {
		counts[string(m.Body)]++
	}
	if counts["0"] != 2 || counts["99"] != 1 || len(counts) != 100 {
		t.Errorf("delivered bodies %v", counts)
	}
}

// Row 7: bodies that look like batch syntax come back byte for byte, never split.
func testRow07BodiesRestored(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	bodies := []string{`"],["`, `{"body":1}`, `"say \"hi\" \\ back\\\\slash"`, `[["],[",{"body":"],["}]]`, `"\u2028\ud800"`}
	var b strings.Builder
	b.WriteString("[")
	for i, body := range bodies {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"body":` + body + `}`)
	}
	b.WriteString("]")
	if err := e.sendBatch(b.String()); err != nil {
		t.Fatal(err)
	}
	want := []string{`"],["`, `{"body":1}`, `"say \"hi\" \\ back\\\\slash"`, `[["],[",{"body":"],["}]]`, "\"\u2028\\ud800\""}
	if _, ok := e.calls(); ok {
		wantCall := `sendBatch([`
		for i, w := range want {
			if i > 0 {
				wantCall += ","
			}
			wantCall += `{"body":` + w + `,"contentType":"json"}`
		}
		e.wantCalls(wantCall + `])`)
	}
	cc := batched(len(want))
	ms := e.consume(cc, nil).messages(len(want), 10*time.Second)
	for i, m := range ms {
		if string(m.Body) != want[i] {
			t.Errorf("body %d: got %s, want %s", i, m.Body, want[i])
		}
	}
}

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
	c := e.consume(cc, func(ev *host.Event, _ batchText) error {
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
	e.wantCalls(`sendBatch([{"body":{"n":0},"contentType":"json"},{"body":[1],"contentType":"json"},{"body":"two","contentType":"json"}])`)
	c.none(300 * time.Millisecond)
}

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
			c := e.consume(cc, func(ev *host.Event, b batchText) error {
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
				eventually(t, 10*time.Second, "one delayed retry", func() bool { return e.stats(queueName).Delayed == 1 })
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

// eventuallyCalls waits for the recorded calls to be exactly want (settling happens after the
// event ends).
func (e *env) eventuallyCalls(want ...string) {
	e.t.Helper()
	if _, ok := e.calls(); !ok {
		return
	}
	eventually(e.t, 5*time.Second, fmt.Sprintf("platform calls %q", want), func() bool {
		got, _ := e.calls()
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
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
			c := e.consume(cc, func(ev *host.Event, b batchText) error {
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

// nested returns a body nested n levels deep around inner.
func nested(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

// Bodies written by foreign producers that are not JSON values are reported at the first bad
// index; text reads as a JSON string.
func testForeignBodies(t *testing.T, hn Harness) {
	inj, ok := hn.(Injector)
	if !ok {
		t.Skip("this harness cannot place foreign messages on its platform")
	}
	for _, tc := range []struct {
		name string
		msgs []platform.Message
		want string // exception message, or the bodies joined by ","
	}{
		{"text", []platform.Message{{Body: []byte("a \"quoted\"\n\u2028 文字"), ContentType: platform.Text}, {Body: []byte(`{"b":1}`), ContentType: platform.JSON}}, `"a \"quoted\"\n` + "\u2028" + ` 文字",{"b":1}`},
		{"bytes", []platform.Message{{Body: []byte("1"), ContentType: platform.JSON}, {Body: []byte{0, 1}, ContentType: platform.Bytes}}, "队列消息正文不是 JSON 值：序号 1"},
		{"v8", []platform.Message{{Body: []byte{0xff, 0x0f}, ContentType: platform.V8}}, "队列消息正文不是 JSON 值：序号 0"},
		{"bad json", []platform.Message{{Body: []byte("{"), ContentType: platform.JSON}}, "队列消息正文不是 JSON 值：序号 0"},
		{"marker", []platform.Message{{Body: []byte("1"), ContentType: platform.JSON}, {Body: []byte("2"), ContentType: platform.JSON}, {Body: []byte(`[{"$句柄":1}]`), ContentType: platform.JSON}}, "队列消息正文不是 JSON 值：序号 2"},
		{"infinity", []platform.Message{{Body: []byte(`{"n":1e999}`), ContentType: platform.JSON}}, "队列消息正文不是 JSON 值：序号 0"},
		{"32 levels", []platform.Message{{Body: []byte(nested(32, "0")), ContentType: platform.JSON}}, nested(32, "0")},
		{"33 levels abort", []platform.Message{{Body: []byte("1"), ContentType: platform.JSON}, {Body: []byte(nested(33, "0")), ContentType: platform.JSON}}, "宿主结果嵌套过深"},
		{"normalized", []platform.Message{{Body: []byte(` { "b" : 1E2 , "a" : -0 } `), ContentType: platform.JSON}}, `{"b":100,"a":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, hn)
			inj.Inject(e.p, queueName, tc.msgs...)
			cc := batched(len(tc.msgs))
			got := make(chan string, 10)
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			go func() {
				_ = e.h.Consume(ctx, cc, func(ev *host.Event) error {
					text, err := duilie.ReadBatch(ev)
					if err != nil {
						got <- err.Error()
						return nil // caught: the batch succeeds
					}
					got <- text
					return nil
				})
			}()
			var text string
			select {
			case text = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("no event")
			}
			if strings.HasPrefix(tc.want, "队列") || strings.HasPrefix(tc.want, "宿主") {
				if text != tc.want {
					t.Fatalf("got %q, want exception %q", text, tc.want)
				}
				return
			}
			var b batchText
			if err := json.Unmarshal([]byte(text), &b); err != nil {
				t.Fatalf("ReadBatch gave %q: %v", text, err)
			}
			var bodies []string
			for _, m := range b.Messages {
				bodies = append(bodies, string(m.Body))
			}
			if got := strings.Join(bodies, ","); got != tc.want {
				t.Errorf("bodies %s, want %s", got, tc.want)
			}
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
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
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
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
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

// retry() with no delay waits for the consumer's retry_delay.
func testRetryDelayDefault(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`"again"`)
	cc := config(queueName)
	cc.RetryDelay = time.Second
	var ended time.Time
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
		if b.Messages[0].Attempts == 1 {
			_ = duilie.Retry(ev, 0, 0)
			ended = time.Now()
		}
		return nil
	})
	c.next(10 * time.Second)
	again := c.next(10 * time.Second)
	if d := again.at.Sub(ended); d < time.Second || d > 2*time.Second+cc.MaxBatchTimeout {
		t.Errorf("retry() with retry_delay 1s came back after %v", d)
	}
	e.eventuallyCalls(`send("again", {"contentType":"json"})`, "retry("+again.batch.Messages[0].ID+")")
}

// A failed event redelivers after the consumer's retry_delay.
func testFailedEventUsesRetryDelay(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`"again"`)
	cc := config(queueName)
	cc.RetryDelay = time.Second
	var ended time.Time
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
		if b.Messages[0].Attempts == 1 {
			ended = time.Now()
			return errors.New("fail once")
		}
		return nil
	})
	c.next(10 * time.Second)
	again := c.next(10 * time.Second)
	if d := again.at.Sub(ended); d < time.Second || d > 2*time.Second {
		t.Errorf("failed event with retry_delay 1s came back after %v", d)
	}
}

// A message that fails max_retries + 1 times moves to the dead-letter queue with its id,
// timestamp and body, attempts starting again at 1.
func testRetriesThenDeadLetter(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	body := `{"poison":"毒","n":[1,2.5,"\u2028"]}`
	e.mustSend(body)
	cc := config(queueName)
	cc.MaxRetries, cc.DeadLetterQueue = 2, dlqName
	c := e.consume(cc, func(ev *host.Event, b batchText) error { return errors.New("always fails") })
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
	e.mustSend(`"retry me"`)
	cc := config(queueName)
	cc.MaxRetries, cc.DeadLetterQueue = 1, dlqName
	c := e.consume(cc, func(ev *host.Event, b batchText) error { return duilie.Retry(ev, 0, 0) })
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
	e.mustSend(`"doomed"`)
	cc := config(queueName)
	cc.MaxRetries = 1
	c := e.consume(cc, func(ev *host.Event, b batchText) error { return errors.New("always fails") })
	c.next(10 * time.Second)
	if m := c.next(10 * time.Second).batch.Messages[0]; m.Attempts != 2 {
		t.Errorf("attempts %d", m.Attempts)
	}
	c.none(500 * time.Millisecond)
	eventually(t, 10*time.Second, "the platform holds nothing", func() bool {
		s := e.stats(queueName)
		return s.Ready+s.Delayed+s.InFlight == 0
	})
	e.wantEmpty()
}

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

// A batch is delivered when max_batch_size messages are ready, or max_batch_timeout after the
// first; never empty.
func testBatchSizeAndTimeout(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if err := e.sendBatch(items(7)); err != nil {
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

// Concurrent events share nothing: each event's calls act on its own batch only.
func testConcurrentEvents(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	const n = 60
	for i := 0; i < n; i += 20 {
		parts := make([]string, 20)
		for j := range parts {
			parts[j] = fmt.Sprintf(`{"body":%d}`, i+j)
		}
		if err := e.sendBatch("[" + strings.Join(parts, ",") + "]"); err != nil {
			t.Fatal(err)
		}
	}
	cc := config(queueName)
	cc.MaxBatchSize, cc.MaxConcurrency = 4, 4
	var mu sync.Mutex
	running, peak := 0, 0
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		time.Sleep(30 * time.Millisecond)
		for i, m := range b.Messages {
			var v int
			fmt.Sscan(string(m.Body), &v)
			if v%2 == 0 || m.Attempts > 1 {
				if err := duilie.Ack(ev, i); err != nil {
					return err
				}
			} else if err := duilie.Retry(ev, i, 0); err != nil {
				return err
			}
		}
		return errors.New("fail the event: acks stand, retries come back")
	})
	ms := c.messages(n+n/2, 20*time.Second)
	c.none(300 * time.Millisecond)
	deliveries := map[string][]int{}
	for _, m := range ms {
		deliveries[string(m.Body)] = append(deliveries[string(m.Body)], m.Attempts)
	}
	for i := range n {
		want := "[1]"
		if i%2 == 1 {
			want = "[1 2]"
		}
		if got := fmt.Sprint(deliveries[fmt.Sprint(i)]); got != want {
			t.Errorf("message %d delivered with attempts %s, want %s", i, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > cc.MaxConcurrency {
		t.Errorf("%d events ran at once, max_concurrency is %d", peak, cc.MaxConcurrency)
	}
	t.Logf("peak concurrency %d", peak)
}

// Stats counts ready, delayed and in-flight messages.
func testStats(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`1`, `2`)
	if err := e.send(`3`, 600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "2 ready, 1 delayed", func() bool {
		s := e.stats(queueName)
		return s.Ready == 2 && s.Delayed == 1 && s.InFlight == 0
	})
	release := make(chan struct{})
	cc := batched(2)
	e.consume(cc, func(ev *host.Event, b batchText) error { <-release; return nil })
	eventually(t, 10*time.Second, "2 in flight, 1 delayed", func() bool {
		s := e.stats(queueName)
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 2
	})
	close(release)
	eventually(t, 10*time.Second, "1 delayed", func() bool {
		s := e.stats(queueName)
		return s.Ready == 0 && s.Delayed == 1 && s.InFlight == 0
	})
}
