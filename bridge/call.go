package bridge

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/jsonvalue"
)

// The six interface names a program may call (SPEC §2).
const (
	nameSend      = "发送队列消息"
	nameSendBatch = "批量发送队列消息"
	nameReadBatch = "读取队列批次"
	nameAck       = "确认队列消息"
	nameRetry     = "重试队列消息"
	nameKind      = "读取入站事件种类"
)

// signatures gives each name's argument types, in order: 's' a string, 'i' an integer.
var signatures = map[string]string{
	nameSend:      "ssi",
	nameSendBatch: "ss",
	nameReadBatch: "",
	nameAck:       "i",
	nameRetry:     "ii",
	nameKind:      "",
}

// MaxCallBytes is the largest request body a bridge call may have: 64 MiB. The largest call
// the interface can take is 批量发送队列消息 with 1 MiB of items text, which as a JSON string
// grows to at most 6 MiB (every byte a control character escaped as \u00xx). Up to the cap an
// oversized input gets the interface's own exception, as a direct call would (消息体超过
// 128000 字节, 批量消息文字超过 1 MiB: a 400); only a call beyond it is malformed
// (桥接调用无效：调用超过 64 MiB).
const MaxCallBytes = 64 << 20

// maxSafeInteger bounds integer arguments: a JSON number with an integral value v, |v| ≤ 2^53.
const maxSafeInteger = 1 << 53

// AbortMalformed starts the abort reason of every malformed call; what is wrong follows it.
const AbortMalformed = "桥接调用无效："

// What is wrong with a malformed call, after AbortMalformed. Those with a %s start with the
// interface name; %d is a 1-based argument position (the name is not counted) or a count.
const (
	badTooBig     = "调用超过 64 MiB"
	badJSON       = "调用不是有效的 JSON 文字"
	badNotArray   = "调用须为 JSON 数组"
	badEmpty      = "调用数组为空"
	badNameType   = "接口名须为字符串"
	badNameSurr   = "接口名含有不成对的代理项"
	badName       = "未知的接口名 %s"
	badArgCount   = "%s需要 %d 个参数，收到 %d 个"
	badArgString  = "%s的第 %d 个参数须为字符串"
	badArgSurr    = "%s的第 %d 个参数含有不成对的代理项"
	badArgInteger = "%s的第 %d 个参数须为整数"
	badArgRange   = "%s的第 %d 个参数超出 ±2^53"
)

// maxNameRunes is how much of an unknown name a malformed-call message quotes.
const maxNameRunes = 64

// call is a decoded bridge call: an interface name and its arguments, in the order of its
// signature.
type call struct {
	name string
	strs []string
	ints []int
}

// decodeCall decodes a request body ["<name>", args…] with duilie's own JSON decoder. On a
// malformed call it returns what is wrong, the part of the abort reason after AbortMalformed.
func decodeCall(body []byte) (call, string) {
	var c call
	norm, _, err := jsonvalue.Append(make([]byte, 0, len(body)), body)
	if err != nil {
		return c, badJSON
	}
	if norm[0] != '[' {
		return c, badNotArray
	}
	var elems [][]byte
	for e := range jsonvalue.Elements(norm) {
		elems = append(elems, e)
	}
	if len(elems) == 0 {
		return c, badEmpty
	}
	if elems[0][0] != '"' {
		return c, badNameType
	}
	name, ok := jsonvalue.Unquote(elems[0])
	if !ok {
		return c, badNameSurr
	}
	sig, ok := signatures[name]
	if !ok {
		return c, fmt.Sprintf(badName, shorten(name))
	}
	c.name = name
	args := elems[1:]
	if len(args) != len(sig) {
		return c, fmt.Sprintf(badArgCount, name, len(sig), len(args))
	}
	for i, a := range args {
		switch sig[i] {
		case 's':
			if a[0] != '"' {
				return c, fmt.Sprintf(badArgString, name, i+1)
			}
			s, ok := jsonvalue.Unquote(a)
			if !ok {
				return c, fmt.Sprintf(badArgSurr, name, i+1)
			}
			c.strs = append(c.strs, s)
		case 'i':
			n, bad := integer(a)
			if bad != "" {
				return c, fmt.Sprintf(bad, name, i+1)
			}
			c.ints = append(c.ints, n)
		}
	}
	return c, ""
}

// integer reads a normalized JSON number with an integral value within ±2^53. Numbers that
// overflow to ±Infinity are normalized to null, so they are not integers.
func integer(tok []byte) (int, string) {
	if tok[0] != '-' && (tok[0] < '0' || tok[0] > '9') {
		return 0, badArgInteger
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, badArgInteger
	case math.Abs(f) > maxSafeInteger:
		return 0, badArgRange
	case f != math.Trunc(f):
		return 0, badArgInteger
	}
	v := int64(f)
	if int64(int(v)) != v { // a 32-bit int: any value this big is out of every range anyway
		if v < 0 {
			return math.MinInt, ""
		}
		return math.MaxInt, ""
	}
	return int(v), ""
}

// shorten cuts s to maxNameRunes characters, marking the cut with an ellipsis.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= maxNameRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxNameRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// invoke runs a well-formed call on ev and maps its outcome to a reply: 200 with the result,
// 400 with an exception's message, 500 with the event's abort.
func invoke(ev *duilie.Event, c call) (int, string) {
	var result string
	var err error
	switch c.name {
	case nameSend:
		err = duilie.Send(ev, c.strs[0], c.strs[1], c.ints[0])
	case nameSendBatch:
		err = duilie.SendBatch(ev, c.strs[0], c.strs[1])
	case nameReadBatch:
		result, err = duilie.ReadBatch(ev)
	case nameAck:
		err = duilie.Ack(ev, c.ints[0])
	case nameRetry:
		err = duilie.Retry(ev, c.ints[0], c.ints[1])
	case nameKind:
		result = string(ev.Kind())
	}
	var ex *duilie.Exception
	var ab *duilie.Abort
	switch {
	case err == nil:
		return http.StatusOK, result
	case errors.As(err, &ab):
		return http.StatusInternalServerError, ab.Reason
	case errors.As(err, &ex):
		return http.StatusBadRequest, ex.Message
	default:
		// The interface returns nothing else; should it ever, the program cannot go on.
		return http.StatusInternalServerError, event.AbortWith(ev, err.Error()).Error()
	}
}

// handle answers one bridge call body on ev, and counts it on the event for the host's report.
// A malformed call aborts the event.
func handle(ev *duilie.Event, body []byte) (status int, text string) {
	c, bad := decodeCall(body)
	defer func() { event.NoteBridgeCall(ev, c.name, status) }() // c.name is "" when the call names no interface function
	if err := ev.Err(); err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	if bad != "" {
		return http.StatusInternalServerError, event.AbortWith(ev, AbortMalformed+bad).Error()
	}
	return invoke(ev, c)
}
