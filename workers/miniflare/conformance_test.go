package miniflare_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestConformance runs the seed's conformance table (SPEC §12) against the conformance program
// built as a Worker: a producer Worker whose PAGE_QUEUE binding is recorded and passed on to the
// real local queue conf-q, and a consumer Worker, the same build, consuming conf-q. Rows are
// numbered as in the table.
func TestConformance(t *testing.T) {
	needMiniflare(t)
	dir := worker(t, "./testdata/conformance")
	h := startHarness(t, spec{Workers: []workerSpec{
		{Name: "producer", Dir: dir, Record: "PAGE_QUEUE", Drop: []string{"ABSENT"}, Vars: map[string]string{"GREETING": "你好"}},
		{Name: "consumer", Dir: dir, Consume: true},
		{Name: "queue-only", Dir: dir, Vars: map[string]string{"HANDLERS": "queue"}},
		{Name: "fetch-only", Dir: dir, Vars: map[string]string{"HANDLERS": "fetch"}},
	}})
	t.Run("1 send: the same value, options exactly contentType json", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		c.want(c.send("PAGE_QUEUE", 0, `{"kind":"page", "url":"/release/x","version":"v8","refresh":true}`), 200, "ok")
		cs := c.calls()
		if len(cs) != 1 || cs[0] != (call{Op: "send", Args: 2, Body: `{"kind":"page","url":"/release/x","version":"v8","refresh":true}`, Options: `{"contentType":"json"}`}) {
			t.Fatalf("calls = %+v", cs)
		}
		// The real queue delivers the same value to the consumer Worker, in a queue event.
		c.waitLog("CONSUMED queue {", `"body":{"kind":"page","url":"/release/x","version":"v8","refresh":true}}`)
	})

	t.Run("2 delays 30 and 43200 reach the options; -1 and 43201 throw", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		c.want(c.send("PAGE_QUEUE", 30, `1`), 200, "ok")
		c.want(c.send("PAGE_QUEUE", 43200, `2`), 200, "ok")
		cs := c.calls()
		if len(cs) != 2 || cs[0].Options != `{"contentType":"json","delaySeconds":30}` || cs[1].Options != `{"contentType":"json","delaySeconds":43200}` {
			t.Fatalf("calls = %+v", cs)
		}
		c.reset()
		c.want(c.send("PAGE_QUEUE", -1, `1`), 400, "延迟秒数须在 0 至 43200 之间")
		c.want(c.send("PAGE_QUEUE", 43201, `1`), 400, "延迟秒数须在 0 至 43200 之间")
		c.noCalls()
	})

	t.Run("3 host markers, 1e999 and bad JSON throw before send", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		for body, msg := range map[string]string{
			`{"$句柄":"1"}`:      "消息体含有不属于 JSON 的值或宿主专用记号",
			`{"\u0024句柄":"1"}`: "消息体含有不属于 JSON 的值或宿主专用记号",
			`1e999`:            "消息体含有不属于 JSON 的值或宿主专用记号",
			`{`:                "消息体不是有效的 JSON 文字",
			`[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]`: "消息体嵌套超过 24 层",
		} {
			c.want(c.send("PAGE_QUEUE", 0, body), 400, msg)
		}
		c.noCalls()
	})

	t.Run("4 a body of exactly 128000 bytes is sent; one more throws", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		body := `"` + strings.Repeat("x", 127998) + `"`
		c.want(c.send("PAGE_QUEUE", 0, body), 200, "ok")
		if cs := c.calls(); len(cs) != 1 || cs[0].Body != body {
			t.Fatalf("%d calls", len(cs))
		}
		c.reset()
		c.want(c.send("PAGE_QUEUE", 0, `"`+strings.Repeat("x", 127999)+`"`), 400, "消息体超过 128000 字节")
		c.noCalls()
	})

	t.Run("5 batches of 1 and 100 are sent; 0 and 101 throw", func(t *testing.T) {
		c := conf{h.with(t)}
		items := func(n int) string {
			parts := make([]string, n)
			for i := range parts {
				parts[i] = fmt.Sprintf(`{"body":%d}`, i)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		sent := func(n int) string {
			parts := make([]string, n)
			for i := range parts {
				parts[i] = fmt.Sprintf(`{"body":%d,"contentType":"json"}`, i)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		c.reset()
		c.want(c.sendBatch("PAGE_QUEUE", items(1)), 200, "ok")
		c.want(c.sendBatch("PAGE_QUEUE", items(100)), 200, "ok")
		cs := c.calls()
		if len(cs) != 2 || cs[0] != (call{Op: "sendBatch", Args: 1, Items: sent(1)}) || cs[1].Items != sent(100) {
			t.Fatalf("calls = %+v", cs)
		}
		c.reset()
		c.want(c.sendBatch("PAGE_QUEUE", items(0)), 400, "批量消息不得为空")
		c.want(c.sendBatch("PAGE_QUEUE", items(101)), 400, "批量消息不得超过 100 条")
		c.noCalls()
	})

	t.Run("6 items with contentType, without body, or delaySeconds 1.5 throw", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":1},{"body":2,"contentType":"json"}]`), 400, "批量消息项只允许 body 与 delaySeconds 两个字段")
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":1},{"delaySeconds":1}]`), 400, "批量消息项缺少 body")
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":1},{"body":2,"delaySeconds":1.5}]`), 400, "批量消息项的 delaySeconds 须为 0 至 43200 的整数")
		c.noCalls()
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":1,"delaySeconds":1e1},{"body":2,"delaySeconds":0}]`), 200, "ok")
		if cs := c.calls(); len(cs) != 1 || cs[0].Items != `[{"body":1,"contentType":"json","delaySeconds":10},{"body":2,"contentType":"json"}]` {
			t.Fatalf("calls = %+v", cs)
		}
	})

	t.Run("7 bodies with ],[, {\"body\":1}, quotes and backslashes arrive byte for byte", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":"],["},{"body":{"body":1}},{"body":"q\"b\\s"}]`), 200, "ok")
		cs := c.calls()
		if len(cs) != 1 || cs[0].Items != `[{"body":"],[","contentType":"json"},{"body":{"body":1},"contentType":"json"},{"body":"q\"b\\s","contentType":"json"}]` {
			t.Fatalf("calls = %+v", cs)
		}
	})

	t.Run("8 a platform that rejects: its message, verbatim", func(t *testing.T) {
		c := conf{h.with(t)}
		c.failWith("Queue is full")
		defer c.failWith("")
		c.want(c.send("PAGE_QUEUE", 0, `1`), 400, "队列发送失败：Queue is full")
		c.want(c.sendBatch("PAGE_QUEUE", `[{"body":1}]`), 400, "队列批量发送失败：Queue is full")
	})

	t.Run("9 a batch of three reads in order with ids, attempts and ms timestamps", func(t *testing.T) {
		c := conf{h.with(t)}
		r := c.queue("consumer", "read",
			message{ID: "a1", Timestamp: 1700000000123, Attempts: 1, Body: map[string]any{"x": 1}},
			message{ID: "a2", Timestamp: 1700000000456, Attempts: 2, Body: "s"},
			message{ID: "a3", Timestamp: 1700000000789, Attempts: 5, Body: []any{1, nil, true}})
		c.waitLog(`READ {"queue":"read","messages":[{"id":"a1","attempts":1,"timestamp":1700000000123,"body":{"x":1}},` +
			`{"id":"a2","attempts":2,"timestamp":1700000000456,"body":"s"},{"id":"a3","attempts":5,"timestamp":1700000000789,"body":[1,null,true]}]}`)
		if r.Outcome != "ok" || r.AckAll || r.RetryBatch.Retry || len(r.ExplicitAcks) != 0 || len(r.RetryMessages) != 0 {
			t.Fatalf("reading acked or retried: %+v", r)
		}
	})

	t.Run("10 ack 0, retry 1 (30 s), nothing for 2", func(t *testing.T) {
		c := conf{h.with(t)}
		r := c.queue("consumer", "settle",
			message{ID: "s1", Timestamp: 1, Attempts: 1, Body: 1},
			message{ID: "s2", Timestamp: 1, Attempts: 1, Body: 2},
			message{ID: "s3", Timestamp: 1, Attempts: 1, Body: 3})
		if r.Outcome != "ok" || r.AckAll || len(r.ExplicitAcks) != 1 || r.ExplicitAcks[0] != "s1" ||
			len(r.RetryMessages) != 1 || r.RetryMessages[0].MsgID != "s2" || r.RetryMessages[0].DelaySeconds == nil || *r.RetryMessages[0].DelaySeconds != 30 {
			t.Fatalf("result = %+v", r)
		}
		r = c.queue("consumer", "retry0", message{ID: "r1", Timestamp: 1, Attempts: 1, Body: 1})
		if len(r.RetryMessages) != 1 || r.RetryMessages[0].MsgID != "r1" || r.RetryMessages[0].DelaySeconds != nil {
			t.Fatalf("retry with delay 0 is not retry() without options: %+v", r)
		}
	})

	t.Run("11 index and delay out of range throw; no call reaches the message", func(t *testing.T) {
		c := conf{h.with(t)}
		r := c.queue("consumer", "bad-index", message{ID: "b1", Timestamp: 1, Attempts: 1, Body: 1})
		c.waitLog("BAD-INDEX b1 exception: 队列消息序号越界|exception: 队列消息序号越界|exception: 延迟秒数须在 0 至 43200 之间|exception: 延迟秒数须在 0 至 43200 之间")
		if r.Outcome != "ok" || len(r.ExplicitAcks) != 0 || len(r.RetryMessages) != 0 {
			t.Fatalf("result = %+v", r)
		}
	})

	t.Run("12 an uncaught failure: Miniflare redelivers with attempts + 1", func(t *testing.T) {
		c := conf{h.with(t)}
		c.want(c.send("PAGE_QUEUE", 0, `{"fail_until":2,"tag":"row12"}`), 200, "ok")
		c.waitLog("CONSUMED ", `"attempts":1,`, `"body":{"fail_until":2,"tag":"row12"}`)
		c.waitLog("(debug) queue event ", "queue=conf-q", "outcome=failed", "fails until attempt 2")
		c.waitLog("CONSUMED ", `"attempts":2,`, `"body":{"fail_until":2,"tag":"row12"}`)
		// Dispatched, the failed event is workerd's exception outcome.
		if r := c.queue("consumer", "conf-q", message{ID: "f1", Timestamp: 1, Attempts: 1, Body: map[string]any{"fail_until": 9}}); r.Outcome != "exception" {
			t.Fatalf("result = %+v", r)
		}
	})

	t.Run("an acked message of a failed event: ack() reaches it before the handler throws; Miniflare redelivers it anyway", func(t *testing.T) {
		c := conf{h.with(t)}
		// Dispatched: workerd records the ack of k1 although the event failed (SPEC §7 rule 1,
		// which Cloudflare honours), and nothing for k2, which Cloudflare retries.
		r := c.queue("consumer", "conf-q",
			message{ID: "k1", Timestamp: 1, Attempts: 1, Body: map[string]any{"fail_until": 9, "ack": true}},
			message{ID: "k2", Timestamp: 1, Attempts: 1, Body: 2})
		if r.Outcome != "exception" || r.AckAll || len(r.ExplicitAcks) != 1 || r.ExplicitAcks[0] != "k1" || len(r.RetryMessages) != 0 {
			t.Fatalf("result = %+v", r)
		}
		// On a real local queue, Miniflare delivers the acked message again (docs/workers.md,
		// "Where Miniflare differs from Cloudflare"): if this starts failing, Miniflare has
		// changed and the docs must say so.
		c.want(c.send("PAGE_QUEUE", 0, `{"fail_until":2,"ack":true,"tag":"acked-fail"}`), 200, "ok")
		c.waitLog("CONSUMED ", `"attempts":1,`, `"tag":"acked-fail"`)
		c.waitLog("CONSUMED ", `"attempts":2,`, `"tag":"acked-fail"`)
	})

	t.Run("13 consumer functions in a fetch event throw 当前事件不是队列事件", func(t *testing.T) {
		c := conf{h.with(t)}
		c.want(c.fetch("producer", "POST", "/consume", ""), 200,
			"fetch|exception: 当前事件不是队列事件|exception: 当前事件不是队列事件|exception: 当前事件不是队列事件")
	})

	t.Run("bindings and permissions abort as on duilie serve: the handler throws the abort", func(t *testing.T) {
		c := conf{h.with(t)}
		c.reset()
		c.rejected(c.send("UNPERMITTED", 0, `1`), "未授权的QUEUE绑定：UNPERMITTED")
		c.rejected(c.send("NOT_CONFIGURED", 0, `1`), "绑定不存在：NOT_CONFIGURED")
		c.rejected(c.sendBatch("UNPERMITTED", `[{"body":1}]`), "未授权的QUEUE绑定：UNPERMITTED")
		// The body's checks come first; an empty binding is the program's mistake.
		c.want(c.send("UNPERMITTED", 0, `{`), 400, "消息体不是有效的 JSON 文字")
		c.want(c.send("", 0, `1`), 400, "队列绑定名不得为空")
		// Configured in duilie.toml, missing from the Worker's env: the env is the deployment.
		c.rejected(c.send("ABSENT", 0, `1`), "绑定不存在：ABSENT")
		c.noCalls()
		c.waitLog("(debug) fetch event ", "path=/send", "status=500", "outcome=aborted", "err=未授权的QUEUE绑定：UNPERMITTED")
		c.waitLog("(debug) fetch event ", "path=/send", "status=500", "outcome=aborted", "err=绑定不存在：ABSENT")
		// In a queue event too, whatever the handler returns.
		if r := c.queue("consumer", "abort", message{ID: "ab1", Timestamp: 1, Attempts: 1, Body: 1}); r.Outcome != "exception" {
			t.Fatalf("result = %+v", r)
		}
		c.waitLog("(debug) queue event ", "queue=abort", "outcome=aborted", "err=未授权的QUEUE绑定：UNPERMITTED")
	})

	t.Run("bodies that are not JSON values (SPEC §6)", func(t *testing.T) {
		c := conf{h.with(t)}
		foreign := []string{"date", "map", "bytes", "undefined", "nan", "bigint", "cycle"}
		for i, f := range foreign {
			id := fmt.Sprintf("n%d", i)
			r := c.queue("consumer", "read", message{ID: id, Timestamp: 1, Attempts: 1, Body: 1}, message{ID: id + "b", Timestamp: 1, Attempts: 1, Foreign: f})
			if r.Outcome != "exception" {
				t.Fatalf("%s: result = %+v", f, r)
			}
		}
		c.waitLogs(len(foreign), "READ exception: 队列消息正文不是 JSON 值：序号 1")
		// A foreign JSON producer's marker object, and nesting beyond what the host carries.
		c.queue("consumer", "read", message{ID: "m1", Timestamp: 1, Attempts: 1, Body: map[string]any{"$句柄": 1}})
		c.waitLog("READ exception: 队列消息正文不是 JSON 值：序号 0")
		deep := func(n int) any {
			var v any = 1
			for range n - 1 {
				v = []any{v}
			}
			return []any{v}
		}
		c.queue("consumer", "read", message{ID: "d33", Timestamp: 1, Attempts: 1, Body: deep(33)})
		c.waitLog("READ abort: 宿主结果嵌套过深")
		if r := c.queue("consumer", "read", message{ID: "d32", Timestamp: 1, Attempts: 1, Body: deep(32)}); r.Outcome != "ok" {
			t.Fatalf("32 levels are readable: %+v", r)
		}
	})

	t.Run("the time limit aborts the event", func(t *testing.T) {
		c := conf{h.with(t)}
		r := c.queue("consumer", "sleep", message{ID: "z1", Timestamp: 1, Attempts: 1, Body: 1})
		if r.Outcome != "exception" || len(r.ExplicitAcks) != 0 {
			t.Fatalf("result = %+v", r)
		}
		c.waitLog("(debug) queue event ", "queue=sleep", "outcome=aborted", "err=执行超过时限")
	})

	t.Run("a failed fetch event throws: 500; a program that exited starts again", func(t *testing.T) {
		c := conf{h.with(t)}
		c.rejected(c.fetch("producer", "GET", "/panic", ""), "panic: on purpose")
		c.waitLog("(debug) fetch event ", "path=/panic", "status=500", "outcome=failed", "err=\"panic: on purpose\"")
		if r := c.fetch("producer", "GET", "/exit", ""); r.status != 500 {
			t.Fatalf("GET /exit = %d %q", r.status, r.body)
		}
		c.want(c.fetch("producer", "GET", "/env?name=GREETING", ""), 200, "你好")
	})

	t.Run("the fetch handler gets the request and gives its response", func(t *testing.T) {
		c := conf{h.with(t)}
		r := c.fetch("producer", "PUT", "/request?q=1&r=%E9%98%9F", "体", "X-Test", "yes")
		if r.status != 201 || r.body != `PUT worker /request?q=1&r=%E9%98%9F yes 3 "体"` || r.header.Get("X-Echo") != "a, b" {
			t.Fatalf("got %d %q %v", r.status, r.body, r.header)
		}
	})

	t.Run("a program without a handler", func(t *testing.T) {
		c := conf{h.with(t)}
		c.want(c.fetch("queue-only", "GET", "/env", ""), 404, "this program has no fetch handler (Program.Fetch)\n")
		if r := c.queue("fetch-only", "read", message{ID: "h1", Timestamp: 1, Attempts: 1, Body: 1}); r.Outcome != "exception" {
			t.Fatalf("result = %+v", r)
		}
	})

	t.Run("the program's console: stdout at log, stderr at error, log/slog by level", func(t *testing.T) {
		c := conf{h.with(t)}
		c.want(c.fetch("producer", "GET", "/log", ""), 200, "logged")
		for _, l := range []string{"(log) OUT line", "(error) ERR line", "(info) by log", "(info) an info k=1",
			"(warn) a warning k=2", `(error) an error k=3 err="two words"`, "(debug) own debug event=fetch k=4",
			"(log) OUT without a newline"} {
			if got := c.waitLog(l); got != l {
				t.Errorf("line %q, want %q", got, l)
			}
		}
		c.waitLog("(debug) fetch event ", "path=/log", "status=200", "outcome=ok")
		for _, l := range c.logs() {
			if strings.Contains(l, "hidden debug") {
				t.Errorf("the default logger wrote a debug line: %q", l)
			}
		}
	})

	t.Run("the Worker's string bindings are the program's environment", func(t *testing.T) {
		c := conf{h.with(t)}
		c.want(c.fetch("producer", "GET", "/env?name=GREETING", ""), 200, "你好")
	})
}

// conf is the conformance Worker's harness, for one subtest.
type conf struct{ *harness }

func (c conf) send(binding string, delay int, body string) reply {
	c.t.Helper()
	return c.fetch("producer", "POST", fmt.Sprintf("/send?binding=%s&delay=%d", binding, delay), body)
}

func (c conf) sendBatch(binding, items string) reply {
	c.t.Helper()
	return c.fetch("producer", "POST", "/send-batch?binding="+binding, items)
}

// rejected checks that the fetch handler threw an Error of msg: workerd answers 500 with
// Miniflare's page of the error, its stack first.
func (c conf) rejected(got reply, msg string) {
	c.t.Helper()
	if got.status != 500 || got.body != "Error: "+msg && !strings.HasPrefix(got.body, "Error: "+msg+"\n") {
		c.t.Fatalf("got %d %q, want 500 and the Error %q", got.status, got.body, msg)
	}
}

func (c conf) want(got reply, status int, body string) {
	c.t.Helper()
	if got.status != status || got.body != body {
		c.t.Fatalf("got %d %q, want %d %q", got.status, got.body, status, body)
	}
}

// noCalls checks that the recording binding was not called since the last reset.
func (c conf) noCalls() {
	c.t.Helper()
	if cs := c.calls(); len(cs) != 0 {
		c.t.Fatalf("the platform was called: %+v", cs)
	}
}
