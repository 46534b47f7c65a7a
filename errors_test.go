package duilie_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/duilie/duilie"
)

// Every exception and abort of SPEC §9 is an exported value whose text is the spec's, byte for
// byte, and errors.Is tells each from every other, whatever follows a message's fixed part.
func TestErrorValues(t *testing.T) {
	exceptions := []*duilie.Exception{
		duilie.ErrEmptyBinding, duilie.ErrDelayRange, duilie.ErrBodyTooLarge, duilie.ErrBodyNotJSON,
		duilie.ErrBodyTooDeep, duilie.ErrBodyHostOnly, duilie.ErrSendFailed, duilie.ErrBatchTooLarge,
		duilie.ErrBatchNotJSON, duilie.ErrBatchTooDeep, duilie.ErrBatchHostOnly, duilie.ErrBatchNotArray,
		duilie.ErrBatchEmpty, duilie.ErrBatchTooMany, duilie.ErrItemNotObject, duilie.ErrItemNoBody,
		duilie.ErrItemExtraKey, duilie.ErrItemDelay, duilie.ErrItemBodyTooLarge, duilie.ErrBatchBodiesTooLarge,
		duilie.ErrBatchSendFailed, duilie.ErrNotQueueEvent, duilie.ErrIndexRange, duilie.ErrMessageNotJSON,
	}
	// SPEC §9's catalogue, in its order; <…> is what follows the fixed part.
	catalogue := "队列绑定名不得为空 · 延迟秒数须在 0 至 43200 之间 · 消息体超过 128000 字节 · " +
		"消息体不是有效的 JSON 文字 · 消息体嵌套超过 24 层 · 消息体含有不属于 JSON 的值或宿主专用记号 · " +
		"队列发送失败：<platform> · 批量消息文字超过 1 MiB · 批量消息不是有效的 JSON 文字 · " +
		"批量消息嵌套超过 24 层 · 批量消息含有不属于 JSON 的值或宿主专用记号 · 批量消息须为 JSON 数组 · " +
		"批量消息不得为空 · 批量消息不得超过 100 条 · 批量消息的每一项须为 JSON 对象 · 批量消息项缺少 body · " +
		"批量消息项只允许 body 与 delaySeconds 两个字段 · 批量消息项的 delaySeconds 须为 0 至 43200 的整数 · " +
		"批量消息体超过 128000 字节 · 批量消息体合计超过 256000 字节 · 队列批量发送失败：<platform> · " +
		"当前事件不是队列事件 · 队列消息序号越界 · 队列消息正文不是 JSON 值：序号 <i>"
	want := strings.Split(catalogue, " · ")
	if len(want) != len(exceptions) {
		t.Fatalf("%d exceptions, the catalogue has %d", len(exceptions), len(want))
	}
	codes := map[string]bool{}
	for i, ex := range exceptions {
		fixed, _, _ := strings.Cut(want[i], "<")
		if ex.Message != fixed || ex.Error() != fixed {
			t.Errorf("exception %d is %q, the spec says %q", i, ex.Message, want[i])
		}
		if ex.Code == "" || codes[ex.Code] {
			t.Errorf("exception %q: code %q is empty or used twice", ex.Message, ex.Code)
		}
		codes[ex.Code] = true
		for j, other := range exceptions {
			if errors.Is(ex, other) != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", ex.Message, other.Message, i != j)
			}
		}
	}

	aborts := []struct {
		abort *duilie.Abort
		text  string
	}{
		{duilie.ErrNotPermitted, "未授权的QUEUE绑定："}, {duilie.ErrNoBinding, "绑定不存在："},
		{duilie.ErrResultTooDeep, "宿主结果嵌套过深"}, {duilie.ErrTimeLimit, "执行超过时限"},
		{duilie.ErrBadBridgeCall, "桥接调用无效："},
	}
	for i, a := range aborts {
		if a.abort.Reason != a.text || a.abort.Code == "" {
			t.Errorf("abort %q (code %q), the spec says %q", a.abort.Reason, a.abort.Code, a.text)
		}
		for j, b := range aborts {
			if errors.Is(a.abort, b.abort) != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", a.abort.Reason, b.abort.Reason, i != j)
			}
		}
		// An exception and an abort of the same code are still told apart.
		var ex, abort error = &duilie.Exception{Message: "x", Code: a.abort.Code}, a.abort
		if errors.Is(ex, a.abort) || errors.Is(abort, ex) {
			t.Errorf("an exception and the abort %q are told apart", a.text)
		}
	}
}

// The errors the functions return are those values: a platform's refusal is ErrSendFailed with
// the platform's message after it, an unpermitted binding ErrNotPermitted with its name.
func TestErrorsIs(t *testing.T) {
	d := newDeployment(t, 0)
	var ack error
	_ = d.run(func(ev *duilie.Event) error { ack = duilie.Ack(ev, 0); return nil })
	d.p.RejectSends("tasks", "Queue is full")
	for _, c := range []struct {
		err  error
		want error
		text string
	}{
		{d.send("", "1", 0), duilie.ErrEmptyBinding, "队列绑定名不得为空"},
		{d.send(binding, "{", 0), duilie.ErrBodyNotJSON, "消息体不是有效的 JSON 文字"},
		{d.sendBatch(binding, `[]`), duilie.ErrBatchEmpty, "批量消息不得为空"},
		{ack, duilie.ErrNotQueueEvent, "当前事件不是队列事件"},
		{d.send(binding, "1", 0), duilie.ErrSendFailed, "队列发送失败：Queue is full"},
		{d.sendBatch(binding, `[{"body":1}]`), duilie.ErrBatchSendFailed, "队列批量发送失败：Queue is full"},
		{d.send(forbidden, "1", 0), duilie.ErrNotPermitted, "未授权的QUEUE绑定：SECRET"},
		{d.send(unbound, "1", 0), duilie.ErrNoBinding, "绑定不存在：GHOST"},
	} {
		if !errors.Is(c.err, c.want) || c.err.Error() != c.text {
			t.Errorf("%v: want errors.Is %q and the text %q", c.err, c.want, c.text)
		}
	}
}

// docs/interface.md lists every exception and abort with its code and meaning, as the code has
// them: a message changed in one place and not the other fails here.
func TestInterfaceDoc(t *testing.T) {
	doc, err := os.ReadFile("docs/interface.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(text, code, gloss, name string, open bool) string {
		more := ""
		if open {
			more = "…"
		}
		return fmt.Sprintf("| `%s`%s | `%s` | `duilie.%s` | %s |", text, more, code, name, gloss)
	}
	open := func(s string) bool { return strings.HasSuffix(s, "：") || strings.HasSuffix(s, "序号 ") }
	want := map[string]*duilie.Exception{
		"ErrEmptyBinding": duilie.ErrEmptyBinding, "ErrDelayRange": duilie.ErrDelayRange, "ErrBodyTooLarge": duilie.ErrBodyTooLarge,
		"ErrBodyNotJSON": duilie.ErrBodyNotJSON, "ErrBodyTooDeep": duilie.ErrBodyTooDeep, "ErrBodyHostOnly": duilie.ErrBodyHostOnly,
		"ErrSendFailed": duilie.ErrSendFailed, "ErrBatchTooLarge": duilie.ErrBatchTooLarge, "ErrBatchNotJSON": duilie.ErrBatchNotJSON,
		"ErrBatchTooDeep": duilie.ErrBatchTooDeep, "ErrBatchHostOnly": duilie.ErrBatchHostOnly, "ErrBatchNotArray": duilie.ErrBatchNotArray,
		"ErrBatchEmpty": duilie.ErrBatchEmpty, "ErrBatchTooMany": duilie.ErrBatchTooMany, "ErrItemNotObject": duilie.ErrItemNotObject,
		"ErrItemNoBody": duilie.ErrItemNoBody, "ErrItemExtraKey": duilie.ErrItemExtraKey, "ErrItemDelay": duilie.ErrItemDelay,
		"ErrItemBodyTooLarge": duilie.ErrItemBodyTooLarge, "ErrBatchBodiesTooLarge": duilie.ErrBatchBodiesTooLarge,
		"ErrBatchSendFailed": duilie.ErrBatchSendFailed, "ErrNotQueueEvent": duilie.ErrNotQueueEvent,
		"ErrIndexRange": duilie.ErrIndexRange, "ErrMessageNotJSON": duilie.ErrMessageNotJSON,
	}
	for name, ex := range want {
		if r := row(ex.Message, ex.Code, ex.Gloss, name, open(ex.Message)); !strings.Contains(string(doc), r+"\n") {
			t.Errorf("docs/interface.md lacks the row\n%s", r)
		}
	}
	for name, a := range map[string]*duilie.Abort{"ErrNotPermitted": duilie.ErrNotPermitted, "ErrNoBinding": duilie.ErrNoBinding,
		"ErrTimeLimit": duilie.ErrTimeLimit, "ErrResultTooDeep": duilie.ErrResultTooDeep, "ErrBadBridgeCall": duilie.ErrBadBridgeCall} {
		if r := row(a.Reason, a.Code, a.Gloss, name, open(a.Reason)); !strings.Contains(string(doc), r+"\n") {
			t.Errorf("docs/interface.md lacks the row\n%s", r)
		}
	}
}
