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
		{"Row03MarkersAndInvalid", testRow03MarkersAndInvalid},
		{"Row04BodySize", testRow04BodySize},
		{"Row05BatchCounts", testRow05BatchCounts},
		{"Row06BatchItemShape", testRow06BatchItemShape},
		{"Row07BodiesRestored", testRow07BodiesRestored},
		{"Row08PlatformRejects", testRow08PlatformRejects},
		{"Row09ReadBatchOfThree", testRow09ReadBatchOfThree},
		{"Row10AckRetryLeave", testRow10AckRetryLeave},
		{"Row11IndexAndDelayBounds", testRow11IndexAndDelayBounds},
		{"Row12UncaughtFailure", testRow12UncaughtFailure},
		{"Row13ConsumerFunctionsInFetch", testRow13ConsumerFunctionsInFetch},
		{"SendCheckOrder", testSendCheckOrder},
		{"BatchCheckOrder", testBatchCheckOrder},
		{"BindingAborts", testBindingAborts},
		{"AbortFailsQueueEvent", testAbortFailsQueueEvent},
		{"TimeLimit", testTimeLimit},
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

// Row 2: delays 30 and 43200 reach the platform; -1 and 43201 are exceptions with no call.
func testRow02DelayBounds(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	for _, d := range []int{-1, 43201} {
		wantException(t, e.send(`1`, d), "延迟秒数须在 0 至 43200 之间")
	}
	e.wantCalls()
	e.wantEmpty()
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

// Row 3: host markers (raw or escaped), a non-finite number and broken JSON are exceptions.
func testRow03MarkersAndInvalid(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	for body, msg := range map[string]string{
		`{"$句柄":"1"}`:          "消息体含有不属于 JSON 的值或宿主专用记号",
		`{"\u0024句柄":"1"}`:     "消息体含有不属于 JSON 的值或宿主专用记号",
		`1e999`:                "消息体含有不属于 JSON 的值或宿主专用记号",
		`{`:                    "消息体不是有效的 JSON 文字",
		`{"$未定义":null}`:        "消息体含有不属于 JSON 的值或宿主专用记号",
		`[{"a":{"$大整数":"1"}}]`: "消息体含有不属于 JSON 的值或宿主专用记号",
		`{"x":1,"$数字":"NaN"}`:  "消息体含有不属于 JSON 的值或宿主专用记号",
		`[-1e400]`:             "消息体含有不属于 JSON 的值或宿主专用记号",
	} {
		wantException(t, e.send(body, 0), msg)
	}
	e.wantCalls()
	e.wantEmpty()
	// Look-alikes are ordinary JSON.
	e.mustSend(`{"$":1,"$x":2,"$ 句柄":3,"s":"{\"$句柄\":1}"}`)
	m := e.consume(config(queueName), nil).next(10 * time.Second).batch.Messages[0]
	if want := `{"$":1,"$x":2,"$ 句柄":3,"s":"{\"$句柄\":1}"}`; string(m.Body) != want {
		t.Errorf("body %s, want %s", m.Body, want)
	}
}

// Row 4: a body of exactly 128000 bytes is sent; one byte more is an exception.
func testRow04BodySize(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	exact := `"` + strings.Repeat("a", 127998) + `"`
	wantException(t, e.send(exact+" ", 0), "消息体超过 128000 字节")
	e.wantCalls()
	e.mustSend(exact)
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

// Row 5: batches of 1 and 100 items are sent; 0 and 101 are exceptions, nothing sent.
func testRow05BatchCounts(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	wantException(t, e.sendBatch(items(0)), "批量消息不得为空")
	wantException(t, e.sendBatch(items(101)), "批量消息不得超过 100 条")
	e.wantCalls()
	e.wantEmpty()
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

// Row 6: an item with contentType, without body, or with delaySeconds 1.5 is an exception.
func testRow06BatchItemShape(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	wantException(t, e.sendBatch(`[{"body":1},{"body":2,"contentType":"json"}]`), "批量消息项只允许 body 与 delaySeconds 两个字段")
	wantException(t, e.sendBatch(`[{"body":1},{"delaySeconds":1}]`), "批量消息项缺少 body")
	wantException(t, e.sendBatch(`[{"body":1,"delaySeconds":1.5}]`), "批量消息项的 delaySeconds 须为 0 至 43200 的整数")
	e.wantCalls()
	e.wantEmpty()
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

// Row 8: a platform refusing with "Queue is full" gives 队列发送失败：Queue is full.
func testRow08PlatformRejects(t *testing.T, hn Harness) {
	r, ok := hn.(Rejecter)
	if !ok {
		t.Skip("this harness cannot make its platform refuse sends")
	}
	e := newEnv(t, hn)
	r.RejectSends(e.p, queueName, "Queue is full")
	wantException(t, e.send(`1`, 0), "队列发送失败：Queue is full")
	wantException(t, e.sendBatch(`[{"body":1}]`), "队列批量发送失败：Queue is full")
	for _, msg := range []string{"", "引号\"与\n换行", "  spaces  "} {
		r.RejectSends(e.p, queueName, msg)
		wantException(t, e.send(`1`, 0), "队列发送失败："+msg)
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

// Row 11: ack index = count or -1 and retry delays -1 or 43201 are exceptions, with no call.
func testRow11IndexAndDelayBounds(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`"only"`)
	errs := make(chan []error, 1)
	c := e.consume(config(queueName), func(ev *host.Event, b batchText) error {
		errs <- []error{
			duilie.Ack(ev, 1), duilie.Ack(ev, -1),
			duilie.Retry(ev, 1, 0), duilie.Retry(ev, -1, 5),
			duilie.Retry(ev, 0, -1), duilie.Retry(ev, 0, 43201),
			duilie.Retry(ev, 5, -1), // the index is checked first
		}
		return nil
	})
	c.next(10 * time.Second)
	got := <-errs
	for i, msg := range []string{"队列消息序号越界", "队列消息序号越界", "队列消息序号越界", "队列消息序号越界",
		"延迟秒数须在 0 至 43200 之间", "延迟秒数须在 0 至 43200 之间", "队列消息序号越界"} {
		wantException(t, got[i], msg)
	}
	e.eventuallyCalls(`send("only", {"contentType":"json"})`)
	c.none(300 * time.Millisecond) // the message succeeded: the event ended normally
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

// Row 13: consumer functions in a fetch event are the catchable 当前事件不是队列事件.
func testRow13ConsumerFunctionsInFetch(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	var errs []error
	err := e.produce(func(ev *host.Event) error {
		if ev.Kind() != host.FetchEvent {
			t.Errorf("kind %q", ev.Kind())
		}
		_, err := duilie.ReadBatch(ev)
		errs = append(errs, err, duilie.Ack(ev, 0), duilie.Retry(ev, 0, 0))
		return nil
	})
	if err != nil {
		t.Fatalf("the fetch event failed: %v", err)
	}
	for _, err := range errs {
		wantException(t, err, "当前事件不是队列事件")
	}
}

// nested returns a body nested n levels deep around inner.
func nested(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

// The checks of SPEC §3 run in order, the first failure wins, and nothing reaches the platform.
func testSendCheckOrder(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	big := `"` + strings.Repeat("x", 128000) + `"`
	grows := "[" + strings.TrimSuffix(strings.Repeat("1e21,", 25000), ",") + "]" // 125001 bytes in, 150001 out
	cases := []struct {
		name, binding, body string
		delay               int
		want                string
		abort               bool
	}{
		{"empty binding first", "", "{", -1, "队列绑定名不得为空", false},
		{"delay before size", binding, big, 43201, "延迟秒数须在 0 至 43200 之间", false},
		{"size before syntax", binding, big[:128001] + "{", 0, "消息体超过 128000 字节", false},
		{"syntax", binding, `{"a":}`, 0, "消息体不是有效的 JSON 文字", false},
		{"bom", binding, "\ufeff1", 0, "消息体不是有效的 JSON 文字", false},
		{"invalid utf-8", binding, "\"\xff\"", 0, "消息体不是有效的 JSON 文字", false},
		{"nesting over 32 before marker", binding, nested(33, `{"$句柄":1}`), 0, "消息体嵌套超过 24 层", false},
		{"marker before nesting over 24", binding, nested(25, `{"$句柄":1}`), 0, "消息体含有不属于 JSON 的值或宿主专用记号", false},
		{"nesting 25", binding, nested(25, "1"), 0, "消息体嵌套超过 24 层", false},
		{"normalized size", binding, grows, 0, "消息体超过 128000 字节", false},
		{"checks before a forbidden binding", forbidden, "{", 0, "消息体不是有效的 JSON 文字", false},
		{"checks before an unbound binding", unbound, nested(25, "1"), 0, "消息体嵌套超过 24 层", false},
		{"forbidden binding", forbidden, "1", 0, "未授权的QUEUE绑定：SECRET", true},
		{"unbound binding", unbound, "1", 0, "绑定不存在：GHOST", true},
	}
	for _, c := range cases {
		var err error
		_ = e.produce(func(ev *host.Event) error { err = duilie.Send(ev, c.binding, c.body, c.delay); return nil })
		if c.abort {
			wantAbort(t, err, c.want)
		} else {
			wantException(t, err, c.want)
		}
	}
	e.wantCalls()
	e.wantEmpty()
	// Nesting and markers are judged on the parsed value: overwritten members are gone.
	e.mustSend(`{"a":1e999,"a":1}`, `{"a":`+nested(40, "0")+`,"a":1}`, nested(24, "1"))
	ms := e.consume(config(queueName), nil).messages(3, 10*time.Second)
	for i, want := range []string{`{"a":1}`, `{"a":1}`, nested(24, "1")} {
		if string(ms[i].Body) != want {
			t.Errorf("body %d: %s, want %s", i, ms[i].Body, want)
		}
	}
}

// The checks of SPEC §4 run in order, the first failure wins, and nothing is sent.
func testBatchCheckOrder(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	item := func(body string) string { return `{"body":` + body + `}` }
	arr := func(items ...string) string { return "[" + strings.Join(items, ",") + "]" }
	s100k := `"` + strings.Repeat("y", 99998) + `"`
	s128k := `"` + strings.Repeat("z", 127999) + `"` // 128001 bytes
	cases := []struct{ name, binding, text, want string }{
		{"empty binding", "", "{", "队列绑定名不得为空"},
		{"size", binding, arr(item(`"` + strings.Repeat("w", 1048576) + `"`)), "批量消息文字超过 1 MiB"},
		{"syntax", binding, `[{"body":1},]`, "批量消息不是有效的 JSON 文字"},
		{"nesting over 32", binding, arr(item(nested(31, `{"$句柄":1}`))), "批量消息嵌套超过 24 层"},
		{"marker", binding, arr(item(`{"\u0024数字":"1"}`)), "批量消息含有不属于 JSON 的值或宿主专用记号"},
		{"marker outside a body", binding, `[{"body":1,"$句柄":1}]`, "批量消息含有不属于 JSON 的值或宿主专用记号"},
		{"body nesting 25", binding, arr(item(nested(25, "1"))), "批量消息嵌套超过 24 层"},
		{"not an array", binding, item("1"), "批量消息须为 JSON 数组"},
		{"empty", binding, `[]`, "批量消息不得为空"},
		{"count before items", binding, "[" + strings.TrimSuffix(strings.Repeat("1,", 101), ",") + "]", "批量消息不得超过 100 条"},
		{"not an object", binding, arr(item("1"), "[1]"), "批量消息的每一项须为 JSON 对象"},
		{"no body", binding, arr(`{"Body":1}`), "批量消息项缺少 body"},
		{"no body before stray key", binding, arr(`{"contentType":"json"}`), "批量消息项缺少 body"},
		{"stray key before delay", binding, arr(`{"delaySeconds":1.5,"body":1,"x":1}`), "批量消息项只允许 body 与 delaySeconds 两个字段"},
		{"delay before body size", binding, arr(`{"body":` + s128k + `,"delaySeconds":-1}`), "批量消息项的 delaySeconds 须为 0 至 43200 的整数"},
		{"items in order", binding, arr(item("1"), `{"body":1,"delaySeconds":"5"}`, "2"), "批量消息项的 delaySeconds 须为 0 至 43200 的整数"},
		{"body size", binding, arr(item(s128k)), "批量消息体超过 128000 字节"},
		{"sum", binding, arr(item(s100k), item(s100k), item(s100k)), "批量消息体合计超过 256000 字节"},
		{"checks before a forbidden binding", forbidden, `[]`, "批量消息不得为空"},
	}
	for _, d := range []string{"1.5", `"5"`, "null", "true", "[5]", "-1", "43201", "1e21", "{}"} {
		cases = append(cases, struct{ name, binding, text, want string }{"delay " + d, binding, arr(`{"body":1,"delaySeconds":` + d + `}`), "批量消息项的 delaySeconds 须为 0 至 43200 的整数"})
	}
	for _, c := range cases {
		var err error
		_ = e.produce(func(ev *host.Event) error { err = duilie.SendBatch(ev, c.binding, c.text); return nil })
		wantException(t, err, c.want)
	}
	var err error
	_ = e.produce(func(ev *host.Event) error { err = duilie.SendBatch(ev, forbidden, arr(item("1"))); return nil })
	wantAbort(t, err, "未授权的QUEUE绑定：SECRET")
	_ = e.produce(func(ev *host.Event) error { err = duilie.SendBatch(ev, unbound, arr(item("1"))); return nil })
	wantAbort(t, err, "绑定不存在：GHOST")
	e.wantCalls()
	e.wantEmpty()

	// Accepted: 1e1 is 10, -0 is 0, a delay of 0 is no delay, bodies keep their order.
	if err := e.sendBatch(`[{"delaySeconds":0,"body":"a"},{"body":"b","delaySeconds":-0},{"body":"c","delaySeconds":1e1},{"body":` + nested(24, "1") + `}]`); err != nil {
		t.Fatal(err)
	}
	e.wantCalls(`sendBatch([{"body":"a","contentType":"json"},{"body":"b","contentType":"json"},{"body":"c","contentType":"json","delaySeconds":10},{"body":` + nested(24, "1") + `,"contentType":"json"}])`)
}

// Unpermitted and unconfigured bindings abort; the event then fails whatever the program
// returns, and every later call returns the same abort.
func testBindingAborts(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	var later []error
	failure := e.produce(func(ev *host.Event) error {
		first := duilie.Send(ev, forbidden, "1", 0)
		_, readErr := duilie.ReadBatch(ev)
		later = append(later, first, duilie.Send(ev, binding, "1", 0), duilie.SendBatch(ev, binding, `[{"body":1}]`), readErr, duilie.Ack(ev, 0))
		return nil // the program swallows the abort: the event fails all the same
	})
	wantAbort(t, failure, "未授权的QUEUE绑定：SECRET")
	for _, err := range later {
		wantAbort(t, err, "未授权的QUEUE绑定：SECRET")
	}
	failure = e.produce(func(ev *host.Event) error { return duilie.Send(ev, unbound, "1", 0) })
	wantAbort(t, failure, "绑定不存在：GHOST")
	e.wantCalls()
	e.wantEmpty()
}

// An abort in a queue event fails it: its unacked messages come back.
func testAbortFailsQueueEvent(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	if err := e.sendBatch(`[{"body":"acked"},{"body":"left"}]`); err != nil {
		t.Fatal(err)
	}
	cc := batched(2)
	c := e.consume(cc, func(ev *host.Event, b batchText) error {
		if b.Messages[0].Attempts > 1 {
			return nil
		}
		_ = duilie.Ack(ev, 0)
		_ = duilie.Send(ev, forbidden, "1", 0)
		return nil
	})
	first := c.next(10 * time.Second)
	again := c.next(10 * time.Second)
	if len(again.batch.Messages) != 1 || again.batch.Messages[0].ID != first.batch.Messages[1].ID || again.batch.Messages[0].Attempts != 2 {
		t.Fatalf("after the abort got %+v, want only the unacked message with attempts 2", again.batch)
	}
}

// Past the time limit an event is aborted with 执行超过时限 and fails; later calls return the
// abort.
func testTimeLimit(t *testing.T, hn Harness) {
	e := newEnv(t, hn, withTimeLimit(300*time.Millisecond))
	e.mustSend(`"slow"`)
	late := make(chan error, 1)
	c := e.consume(config(queueName), func(ev *host.Event, b batchText) error {
		if b.Messages[0].Attempts == 1 {
			<-ev.Context().Done()
			time.Sleep(50 * time.Millisecond)
			late <- duilie.Ack(ev, 0)
		}
		return nil
	})
	// The first handler outlives its event, so the redelivery may be reported before it.
	first, again := c.next(10*time.Second), c.next(10*time.Second)
	if first.batch.Messages[0].Attempts > again.batch.Messages[0].Attempts {
		first, again = again, first
	}
	wantAbort(t, <-late, "执行超过时限")
	if again.batch.Messages[0].ID != first.batch.Messages[0].ID || again.batch.Messages[0].Attempts != 2 {
		t.Fatalf("after the time limit got %+v", again.batch)
	}
	if d := again.at.Sub(first.at); d < 300*time.Millisecond {
		t.Errorf("redelivered %v after the first delivery, before the time limit", d)
	}
	failure := e.produce(func(ev *host.Event) error { <-ev.Context().Done(); return nil })
	wantAbort(t, failure, "执行超过时限")
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
