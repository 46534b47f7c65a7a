package bridge

import (
	"errors"
	"fmt"
	"net/http"
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

// MaxCallDepth is the deepest nesting a call may have. A well-formed call is one array of
// scalars (depth 1); an argument that is itself an array or an object (depth 2) gets the
// message of the argument's type. Anything deeper is refused while the call is being read,
// before it is parsed or even held whole (桥接调用无效：调用嵌套超过 2 层).
const MaxCallDepth = 2

// What is wrong with a malformed call, after AbortMalformed. Those with a %s start with the
// interface name; %d is a 1-based argument position (the name is not counted) or a count.
const (
	badTooBig     = "调用超过 64 MiB"
	badDeep       = "调用嵌套超过 2 层"
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
// Strings are taken from the normalized text; integers are judged on the call's own decimal
// text, which normalization would round to a double.
func decodeCall(body []byte) (call, string) {
	var c call
	var depth depthGuard
	if !depth.feed(body) {
		return c, badDeep
	}
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
	raw := rawElements(body, len(elems))
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
			n, bad := integer(raw[i+1])
			if bad != "" {
				return c, fmt.Sprintf(bad, name, i+1)
			}
			c.ints = append(c.ints, n)
		}
	}
	return c, ""
}

// integer judges a JSON number token as written, digit by digit, never through a double: its
// value must be integral (1.0 and 1e1 are, 1.0000000000000000001 and 1e-400 are not) and
// within ±2^53 (9007199254740993, 1e400 and a 5000-digit integer are not). A value beyond
// ±2^53 is out of range whether or not it is integral. Anything that is not a number is not an
// integer.
func integer(tok []byte) (int, string) {
	neg := len(tok) > 0 && tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	// The number is digits × 10^exp, digits without leading or trailing zeros.
	intEnd := 0
	for intEnd < len(tok) && isDigit(tok[intEnd]) {
		intEnd++
	}
	if intEnd == 0 {
		return 0, badArgInteger // not a number: a string, a literal, an array or an object
	}
	digits := make([]byte, 0, 20)
	digits = append(digits, tok[:intEnd]...)
	rest := tok[intEnd:]
	exp := 0
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		digits = append(digits, rest[1:j]...)
		exp = -(j - 1)
		rest = rest[j:]
	}
	if len(rest) > 0 && (rest[0] == 'e' || rest[0] == 'E') {
		exp = addExponent(exp, rest[1:])
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if len(digits) == 0 {
		return 0, "" // 0, -0, 0.000, 0e99
	}
	// 2^53 has 16 digits: a value whose integral part has more is out of range.
	intDigits := len(digits) + exp
	if intDigits > 16 {
		return 0, badArgRange
	}
	var v uint64
	for i := range max(intDigits, 0) {
		d := uint64(0)
		if i < len(digits) {
			d = uint64(digits[i] - '0')
		}
		v = v*10 + d
	}
	fraction := exp < 0
	if v > maxSafeInteger || v == maxSafeInteger && fraction {
		return 0, badArgRange
	}
	if fraction {
		return 0, badArgInteger
	}
	if neg {
		return -int(v), ""
	}
	return int(v), ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// addExponent adds a JSON exponent ([+-]digits) to exp, saturating far beyond any digit count
// a call can hold.
func addExponent(exp int, e []byte) int {
	neg := len(e) > 0 && e[0] == '-'
	if len(e) > 0 && (e[0] == '-' || e[0] == '+') {
		e = e[1:]
	}
	const limit = 1 << 40 // more than MaxCallBytes digits either way
	n := 0
	for _, c := range e {
		if !isDigit(c) || n > limit {
			break
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return exp - n
	}
	return exp + n
}

// rawElements returns the top-level elements of body, a JSON array of n elements that has
// been checked already, as written (whitespace around them trimmed). An element nests at most
// once more (MaxCallDepth), so one level of brackets is skipped over.
func rawElements(body []byte, n int) [][]byte {
	out := make([][]byte, 0, n)
	i := 0
	for body[i] != '[' {
		i++
	}
	i++
	depth, inString, start := 0, false, i
	for ; i < len(body); i++ {
		c := body[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		case c == ',' || c == ']':
			out = append(out, trimSpace(body[start:i]))
			if c == ']' {
				return out
			}
			start = i + 1
		}
	}
	return out
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// depthGuard follows the nesting of a call's bytes as they arrive, brackets inside strings
// not counted, and says as soon as it passes MaxCallDepth. It is not a parser: on text that is
// not JSON it only counts, and the parser later says what is wrong.
type depthGuard struct {
	depth    int
	inString bool
	escaped  bool
}

// feed follows b and reports whether the nesting has stayed within MaxCallDepth.
func (g *depthGuard) feed(b []byte) bool {
	for _, c := range b {
		switch {
		case g.escaped:
			g.escaped = false
		case g.inString:
			if c == '\\' {
				g.escaped = true
			} else if c == '"' {
				g.inString = false
			}
		case c == '"':
			g.inString = true
		case c == '[' || c == '{':
			if g.depth++; g.depth > MaxCallDepth {
				return false
			}
		case c == ']' || c == '}':
			g.depth = max(g.depth-1, 0)
		}
	}
	return true
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
		return http.StatusInternalServerError, event.AbortWith(ev, &event.Abort{Reason: err.Error()}).Error()
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
		return http.StatusInternalServerError, event.AbortWith(ev, event.BadCall.With(bad, "")).Error()
	}
	return invoke(ev, c)
}
