package bridge

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// TestDecodeCall covers the call decoder without processes: every well-formed shape and
// every malformation, with the exact message.
func TestDecodeCall(t *testing.T) {
	for _, tc := range []struct {
		body  string
		want  call   // when wrong is ""
		wrong string // what is wrong
	}{
		{body: `["读取队列批次"]`, want: call{name: nameReadBatch}},
		{body: ` [ "读取入站事件种类" ] `, want: call{name: nameKind}},
		{body: `["\u8bfb\u53d6\u961f\u5217\u6279\u6b21"]`, want: call{name: nameReadBatch}},
		{body: `["确认队列消息",30]`, want: call{name: nameAck, ints: []int{30}}},
		{body: `["确认队列消息",30.0]`, want: call{name: nameAck, ints: []int{30}}},
		{body: `["确认队列消息",3e1]`, want: call{name: nameAck, ints: []int{30}}},
		{body: `["确认队列消息",300E-1]`, want: call{name: nameAck, ints: []int{30}}},
		{body: `["确认队列消息",-0]`, want: call{name: nameAck, ints: []int{0}}},
		{body: `["确认队列消息",-0.0]`, want: call{name: nameAck, ints: []int{0}}},
		{body: `["确认队列消息",9007199254740992]`, want: call{name: nameAck, ints: []int{1 << 53}}},
		{body: `["确认队列消息",-9007199254740992]`, want: call{name: nameAck, ints: []int{-1 << 53}}},
		{body: `["重试队列消息",1,43200]`, want: call{name: nameRetry, ints: []int{1, 43200}}},
		{body: `["发送队列消息","Q","{\"a\":\"\\u0000\"}",0]`, want: call{name: nameSend, strs: []string{"Q", `{"a":"\u0000"}`}, ints: []int{0}}},
		{body: `["发送队列消息","","\ud83d\ude00 \u2028 \/",1]`, want: call{name: nameSend, strs: []string{"", "😀 \u2028 /"}, ints: []int{1}}},
		{body: `["批量发送队列消息","Q","[]"]`, want: call{name: nameSendBatch, strs: []string{"Q", "[]"}}},
		{body: `["读取队列批次","x","读取队列批次"]`, wrong: "读取队列批次需要 0 个参数，收到 2 个"},

		{body: ``, wrong: badJSON},
		{body: ` `, wrong: badJSON},
		{body: "\ufeff[\"读取队列批次\"]", wrong: badJSON},
		{body: `["读取队列批次",]`, wrong: badJSON},
		{body: `["读取队列批次"]]`, wrong: badJSON},
		{body: "[\"\xff\"]", wrong: badJSON},
		{body: "[\"\x01\"]", wrong: badJSON},
		{body: `['读取队列批次']`, wrong: badJSON},
		{body: `null`, wrong: badNotArray},
		{body: `0`, wrong: badNotArray},
		{body: `{"0":"读取队列批次"}`, wrong: badNotArray},
		{body: `[]`, wrong: badEmpty},
		{body: ` [ ] `, wrong: badEmpty},
		{body: `[0]`, wrong: badNameType},
		{body: `[null,"读取队列批次"]`, wrong: badNameType},
		{body: `[{"$句柄":1}]`, wrong: badNameType},
		{body: `["\udc00"]`, wrong: badNameSurr},
		{body: `["\ud800\u0041"]`, wrong: badNameSurr},
		{body: `["读取队列批次\u0000"]`, wrong: "未知的接口名 读取队列批次\x00"},
		{body: `["ReadBatch"]`, wrong: "未知的接口名 ReadBatch"},
		{body: `[""]`, wrong: "未知的接口名 "},
		{body: `["确认队列消息"]`, wrong: "确认队列消息需要 1 个参数，收到 0 个"},
		{body: `["发送队列消息","Q","1"]`, wrong: "发送队列消息需要 3 个参数，收到 2 个"},
		{body: `["重试队列消息",1,2,3]`, wrong: "重试队列消息需要 2 个参数，收到 3 个"},
		{body: `["确认队列消息",null]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息",true]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息","1"]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息",[1]]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息",{}]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息",0.5]`, wrong: "确认队列消息的第 1 个参数须为整数"},
		{body: `["确认队列消息",1e999]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["确认队列消息",-1e999]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["确认队列消息",[[1]]]`, wrong: badDeep},
		{body: `[[[`, wrong: badDeep},
		{body: `{"a":{"b":{}}}`, wrong: badDeep},
		{body: `["发送队列消息","Q","[[[[[[[[",0]`, want: call{name: nameSend, strs: []string{"Q", "[[[[[[[["}, ints: []int{0}}},
		{body: `["发送队列消息","Q","\"[[[",0]`, want: call{name: nameSend, strs: []string{"Q", `"[[[`}, ints: []int{0}}},
		{body: `["重试队列消息" , 7 ,	30.0 ]`, want: call{name: nameRetry, ints: []int{7, 30}}},
		{body: `["重试队列消息",{"a":1},3]`, wrong: "重试队列消息的第 1 个参数须为整数"},
		{body: `["重试队列消息",{"a":[1,2]},3]`, wrong: badDeep},
		{body: `["重试队列消息",0,1.000001]`, wrong: "重试队列消息的第 2 个参数须为整数"},
		{body: `["确认队列消息",9007199254740994]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["确认队列消息",1e21]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["确认队列消息",-1e308]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["确认队列消息",1e300]`, wrong: "确认队列消息的第 1 个参数超出 ±2^53"},
		{body: `["发送队列消息",1,"1",0]`, wrong: "发送队列消息的第 1 个参数须为字符串"},
		{body: `["发送队列消息","Q",{"a":1},0]`, wrong: "发送队列消息的第 2 个参数须为字符串"},
		{body: `["发送队列消息","Q",null,0]`, wrong: "发送队列消息的第 2 个参数须为字符串"},
		{body: `["发送队列消息","Q","1","0"]`, wrong: "发送队列消息的第 3 个参数须为整数"},
		{body: `["发送队列消息","\ud800","1",0]`, wrong: "发送队列消息的第 1 个参数含有不成对的代理项"},
		{body: `["批量发送队列消息","Q","[{\"body\":\"\udfff\"}]"]`, wrong: "批量发送队列消息的第 2 个参数含有不成对的代理项"},
	} {
		got, wrong := decodeCall([]byte(tc.body))
		switch {
		case wrong != tc.wrong:
			t.Errorf("%s: wrong = %q, want %q", tc.body, wrong, tc.wrong)
		case wrong == "" && (got.name != tc.want.name || !slices.Equal(got.strs, tc.want.strs) || !slices.Equal(got.ints, tc.want.ints)):
			t.Errorf("%s: got %+v, want %+v", tc.body, got, tc.want)
		}
	}
	long := strings.Repeat("é", 65)
	if _, wrong := decodeCall([]byte(`["` + long + `"]`)); wrong != "未知的接口名 "+long[:2*64]+"…" {
		t.Errorf("long name: %q", wrong)
	}
	if _, wrong := decodeCall([]byte(`["` + long[:2*64] + `"]`)); wrong != "未知的接口名 "+long[:2*64] {
		t.Errorf("name of 64 characters: %q", wrong)
	}
}

// TestIntegerLimits pins the integer bounds. Integer arguments are judged on their decimal
// text (SPEC §13): a double would take 2^53+1 for 2^53 and 1.0000000000000000001 for 1.
func TestIntegerLimits(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want int
		bad  string
	}{
		{"9007199254740992", 1 << 53, ""},
		{"-9007199254740992", -1 << 53, ""},
		{"9007199254740991", 1<<53 - 1, ""},
		{"9007199254740993", 0, badArgRange}, // 2^53+1: a double rounds it to 2^53
		{"-9007199254740993", 0, badArgRange},
		{"9007199254740992.5", 0, badArgRange},
		{"9007199254740992.0000", 1 << 53, ""},
		{"900719925474099.2e1", 1 << 53, ""},
		{"0.9007199254740993e16", 0, badArgRange},
		{"9007199254740994", 0, badArgRange},
		{"1e400", 0, badArgRange},
		{"-1e400", 0, badArgRange},
		{"1" + strings.Repeat("0", 5000), 0, badArgRange},
		{strings.Repeat("9", 5000), 0, badArgRange},
		{"1e99999999999999999999999", 0, badArgRange},
		{"1.0000000000000000001", 0, badArgInteger}, // a double rounds it to 1
		{"1e-400", 0, badArgInteger},                // a double rounds it to 0
		{"1e-99999999999999999999999", 0, badArgInteger},
		{"0.5", 0, badArgInteger},
		{"1.5", 0, badArgInteger},
		{"0", 0, ""},
		{"-0", 0, ""},
		{"-0.0", 0, ""},
		{"0e400", 0, ""},
		{"0.000e-400", 0, ""},
		{"30", 30, ""},
		{"30.0", 30, ""},
		{"3e1", 30, ""},
		{"3E+1", 30, ""},
		{"300E-1", 30, ""},
		{"0.3e2", 30, ""},
		{"43200", 43200, ""},
		{"-1", -1, ""},
		{"1" + strings.Repeat("0", 15), 1e15, ""},
		{"null", 0, badArgInteger},
		{`"1"`, 0, badArgInteger},
		{"[1]", 0, badArgInteger},
		{"", 0, badArgInteger},
		{"-", 0, badArgInteger},
	} {
		got, bad := integer([]byte(tc.tok))
		if got != tc.want || bad != tc.bad {
			t.Errorf("integer(%s) = %d, %q; want %d, %q", tc.tok, got, bad, tc.want, tc.bad)
		}
	}
	if maxSafeInteger != math.Exp2(53) {
		t.Error("maxSafeInteger is not 2^53")
	}
}

// FuzzCall feeds any body to the decoder and to a real queue event's handler. It must never
// panic; a decoded call has a known name and the right number of arguments; every reply is
// 200, 400 or 500 with valid UTF-8; a 500 leaves the event aborted with the reply as reason,
// and a malformed call is always a 500 starting with 桥接调用无效：.
func FuzzCall(f *testing.F) {
	for _, s := range []string{
		`["读取队列批次"]`, `["读取入站事件种类"]`, `["确认队列消息",0]`, `["重试队列消息",1,30]`,
		`["发送队列消息","Q","{\"a\":1}",0]`, `["发送队列消息","X","1",0]`,
		`["批量发送队列消息","Q","[{\"body\":1,\"delaySeconds\":1e1}]"]`, `["确认队列消息",9007199254740993]`,
		`[]`, `{}`, `["\ud800"]`, `["发送队列消息","Q","\udc00",0]`, "[\"\xff\"]", `[[[[[[[[[[`,
	} {
		f.Add([]byte(s))
	}
	plat := memory.New(memory.Options{})
	defer plat.Close()
	plat.RejectSends("out", "Queue is full") // keep the fuzzer's sends from piling up
	h, err := host.New(host.Config{Platform: plat, Permissions: testPermissions, Bindings: testBindings})
	if err != nil {
		f.Fatal(err)
	}
	msgs := []platform.Delivery{
		{Message: platform.Message{ID: "a", Attempts: 1, Timestamp: 1, Body: []byte(`{"x":1}`), ContentType: platform.JSON}},
		{Message: platform.Message{ID: "b", Attempts: 2, Timestamp: 2, Body: []byte("text"), ContentType: platform.Text}},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, wrong := decodeCall(body)
		if wrong == "" {
			sig, ok := signatures[c.name]
			if !ok || len(c.strs) != strings.Count(sig, "s") || len(c.ints) != strings.Count(sig, "i") {
				t.Fatalf("%q decoded to %+v", body, c)
			}
			for _, n := range c.ints {
				if n > maxSafeInteger || n < -maxSafeInteger {
					t.Fatalf("%q: integer %d beyond 2^53", body, n)
				}
			}
		}
		_, _ = h.RunBatch(context.Background(), host.DefaultConsumerConfig("in"), msgs, func(ev *duilie.Event) error {
			status, text := handle(ev, body)
			if !utf8.ValidString(text) {
				t.Fatalf("%q: reply %q is not UTF-8", body, text)
			}
			switch status {
			case 200, 400:
				if wrong != "" {
					t.Fatalf("%q is malformed (%s) but got %d", body, wrong, status)
				}
			case 500:
				if ev.Err() == nil || ev.Err().Error() != text {
					t.Fatalf("%q: 500 %q but the event's abort is %v", body, text, ev.Err())
				}
				if wrong != "" && text != event.BadCall.Reason+wrong {
					t.Fatalf("%q: 500 %q, want %q", body, text, event.BadCall.Reason+wrong)
				}
			default:
				t.Fatalf("%q: status %d", body, status)
			}
			return nil
		})
	})
}
