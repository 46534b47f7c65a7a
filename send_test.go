package duilie_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// The checks of SPEC §3 run in order, the first failure wins, and nothing reaches the platform;
// a binding aborts only once the body has passed every check (§8.2).
func TestSendCheckOrder(t *testing.T) {
	big := `"` + strings.Repeat("x", 128000) + `"`
	grows := "[" + strings.TrimSuffix(strings.Repeat("1e21,", 25000), ",") + "]" // 125001 bytes in, 150001 out
	for _, c := range []struct {
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
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDeployment(t, 0)
			err := d.send(c.binding, c.body, c.delay)
			if c.abort {
				wantAbort(t, err, c.want)
			} else {
				wantException(t, err, c.want)
			}
			d.wantCalls(t)
		})
	}
}

// Nesting and markers are judged on the parsed value (SPEC §5.5): overwritten members are gone,
// and the platform receives the normalized text.
func TestSendParsedValue(t *testing.T) {
	d := newDeployment(t, 0)
	for _, body := range []string{`{"a":1e999,"a":1}`, `{"a":` + nested(40, "0") + `,"a":1}`, nested(24, "1"), ` { "b" : 1E2 , "a" : -0 } `} {
		if err := d.send(binding, body, 0); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	d.wantCalls(t, `send({"a":1}, {"contentType":"json"})`, `send({"a":1}, {"contentType":"json"})`,
		`send(`+nested(24, "1")+`, {"contentType":"json"})`, `send({"b":100,"a":0}, {"contentType":"json"})`)
}

// The checks of SPEC §4 run in order, the first failure wins, and nothing is sent; a binding
// aborts only once the batch has passed every check.
func TestBatchCheckOrder(t *testing.T) {
	item := func(body string) string { return `{"body":` + body + `}` }
	arr := func(items ...string) string { return "[" + strings.Join(items, ",") + "]" }
	s100k := `"` + strings.Repeat("y", 99998) + `"`
	s128k := `"` + strings.Repeat("z", 127999) + `"` // 128001 bytes
	type check struct{ name, binding, text, want string }
	cases := []check{
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
		{"checks before an unbound binding", unbound, arr(`{}`), "批量消息项缺少 body"},
	}
	for _, delay := range []string{"1.5", `"5"`, "null", "true", "[5]", "-1", "43201", "1e21", "{}"} {
		cases = append(cases, check{"delay " + delay, binding, arr(`{"body":1,"delaySeconds":` + delay + `}`), "批量消息项的 delaySeconds 须为 0 至 43200 的整数"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDeployment(t, 0)
			wantException(t, d.sendBatch(c.binding, c.text), c.want)
			d.wantCalls(t)
		})
	}
	t.Run("bindings abort last", func(t *testing.T) {
		d := newDeployment(t, 0)
		wantAbort(t, d.sendBatch(forbidden, arr(item("1"))), "未授权的QUEUE绑定：SECRET")
		wantAbort(t, d.sendBatch(unbound, arr(item("1"))), "绑定不存在：GHOST")
		d.wantCalls(t)
	})
	t.Run("accepted", func(t *testing.T) {
		// 1e1 is 10, -0 is 0, a delay of 0 is no delay, bodies keep their order and bytes.
		d := newDeployment(t, 0)
		err := d.sendBatch(binding, `[{"delaySeconds":0,"body":"a"},{"body":"b","delaySeconds":-0},{"body":"c","delaySeconds":1e1},{"body":`+nested(24, "1")+`},{"body":{"x":"],["}}]`)
		if err != nil {
			t.Fatal(err)
		}
		d.wantCalls(t, `sendBatch([{"body":"a","contentType":"json"},{"body":"b","contentType":"json"},{"body":"c","contentType":"json","delaySeconds":10},{"body":`+nested(24, "1")+`,"contentType":"json"},{"body":{"x":"],["},"contentType":"json"}])`)
	})
}

// items returns a sendBatch text of n items with bodies 0..n-1.
func items(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"body":%d}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// The rows of SPEC §12 whose cases the interface refuses: each is an exception, and the platform
// is not called. (The rows' accepted cases are the platform's to store: package platformtest.)
func TestConformanceRowsRefused(t *testing.T) {
	type refusal struct {
		row   string
		batch bool
		text  string
		delay int
		want  string
	}
	for _, r := range []refusal{
		{"02 delay -1", false, "1", -1, "延迟秒数须在 0 至 43200 之间"},
		{"02 delay 43201", false, "1", 43201, "延迟秒数须在 0 至 43200 之间"},
		{"03 marker", false, `{"$句柄":"1"}`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 escaped marker", false, `{"\u0024句柄":"1"}`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 1e999", false, `1e999`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 broken", false, `{`, 0, "消息体不是有效的 JSON 文字"},
		{"03 other markers", false, `{"$未定义":null}`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 nested marker", false, `[{"a":{"$大整数":"1"}}]`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 marker not first", false, `{"x":1,"$数字":"NaN"}`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"03 -infinity", false, `[-1e400]`, 0, "消息体含有不属于 JSON 的值或宿主专用记号"},
		{"04 128001 bytes", false, `"` + strings.Repeat("a", 127998) + `" `, 0, "消息体超过 128000 字节"},
		{"05 0 items", true, items(0), 0, "批量消息不得为空"},
		{"05 101 items", true, items(101), 0, "批量消息不得超过 100 条"},
		{"06 contentType", true, `[{"body":1},{"body":2,"contentType":"json"}]`, 0, "批量消息项只允许 body 与 delaySeconds 两个字段"},
		{"06 no body", true, `[{"body":1},{"delaySeconds":1}]`, 0, "批量消息项缺少 body"},
		{"06 delaySeconds 1.5", true, `[{"body":1,"delaySeconds":1.5}]`, 0, "批量消息项的 delaySeconds 须为 0 至 43200 的整数"},
	} {
		t.Run("row "+r.row, func(t *testing.T) {
			d := newDeployment(t, 0)
			if r.batch {
				wantException(t, d.sendBatch(binding, r.text), r.want)
			} else {
				wantException(t, d.send(binding, r.text, r.delay), r.want)
			}
			d.wantCalls(t)
		})
	}
	// Look-alikes of markers are ordinary JSON.
	d := newDeployment(t, 0)
	lookAlike := `{"$":1,"$x":2,"$ 句柄":3,"s":"{\"$句柄\":1}"}`
	if err := d.send(binding, lookAlike, 0); err != nil {
		t.Fatal(err)
	}
	d.wantCalls(t, `send(`+lookAlike+`, {"contentType":"json"})`)
}

// SPEC §12 row 8: a platform refusing with "Queue is full" gives 队列发送失败：Queue is full; the
// platform's message is kept verbatim, whatever it holds.
func TestRow08PlatformRejects(t *testing.T) {
	d := newDeployment(t, 0)
	for _, msg := range []string{"Queue is full", "", "引号\"与\n换行", "  spaces  "} {
		d.p.RejectSends("tasks", msg)
		wantException(t, d.send(binding, `1`, 0), "队列发送失败："+msg)
		wantException(t, d.sendBatch(binding, `[{"body":1}]`), "队列批量发送失败："+msg)
	}
	// The event goes on: a refusal is catchable.
	d.p.Accept("tasks")
	if err := d.run(func(ev *duilie.Event) error {
		d.p.RejectSends("tasks", "Queue is full")
		_ = duilie.Send(ev, binding, `1`, 0)
		d.p.Accept("tasks")
		return duilie.Send(ev, binding, `2`, 0)
	}); err != nil {
		t.Fatalf("the event failed after a caught refusal: %v", err)
	}
}

// unreachable is a platform that cannot provide its queues.
type unreachable struct{ *memory.Platform }

func (unreachable) Queue(ctx context.Context, name string) (platform.Queue, error) {
	return nil, errors.New("engine unreachable")
}

// A platform that cannot provide a configured queue is a platform failure, an exception, not
// a deployment error.
func TestQueueUnavailable(t *testing.T) {
	h, _ := host.New(host.Config{Platform: unreachable{memory.New(memory.Options{})},
		Permissions: server.Permissions{Queue: []string{"B"}}, Bindings: map[string]string{"B": "q"}})
	var errs []error
	failure := h.Do(context.Background(), func(ev *duilie.Event) error {
		errs = append(errs, duilie.Send(ev, "B", "1", 0), duilie.SendBatch(ev, "B", `[{"body":1}]`))
		return nil
	})
	if failure != nil {
		t.Fatalf("the event failed: %v", failure)
	}
	for i, want := range []string{"队列发送失败：engine unreachable", "队列批量发送失败：engine unreachable"} {
		wantException(t, errs[i], want)
	}
}

// A message a Go value encodes to is checked and normalized like any body.
func TestSendValue(t *testing.T) {
	d := newDeployment(t, 0)
	var errs []error
	d.run(func(ev *duilie.Event) error {
		errs = append(errs,
			duilie.SendValue(ev, binding, map[string]any{"b": "<&>\u2028", "a": 1.0, "1": nil}, 5),
			duilie.SendValue(ev, binding, map[string]any{"$句柄": 1}, 0),
			duilie.SendValue(ev, binding, make(chan int), 0),
		)
		return nil
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	wantException(t, errs[1], "消息体含有不属于 JSON 的值或宿主专用记号")
	var ex *duilie.Exception
	if errs[2] == nil || errors.As(errs[2], &ex) {
		t.Errorf("unencodable value: %v", errs[2])
	}
	d.wantCalls(t, `send({"1":null,"a":1,"b":"<&>`+"\u2028"+`"}, {"contentType":"json","delaySeconds":5})`)
}
