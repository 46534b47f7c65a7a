package jsonvalue

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Error messages of SyntaxError. They are constants so that the hot paths
// return them without allocating.
const (
	msgEOF        = "unexpected end of JSON input"
	msgToken      = "unexpected character"
	msgTrailing   = "unexpected character after JSON value"
	msgControl    = "control character in string"
	msgEscape     = "bad escape sequence in string"
	msgUTF8       = "invalid UTF-8"
	msgNumber     = "malformed number"
	msgUnterminal = "unterminated string"
)

const hexDigits = "0123456789abcdef"

// plainASCII reports the bytes that JSON.stringify copies unchanged and that
// need no check in a JSON string: printable ASCII other than '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialMask flags, in the high bit of each byte, the bytes of x that end a
// run of plain ASCII: controls, '"', '\\' and bytes >= 0x80. A byte below 0x20
// borrows in x-0x20, a '"' or '\\' byte borrows in (x^c)-1, and a byte >= 0x80
// has its high bit set (in x, and so in the two xors); a borrow only runs
// upward, so the lowest flagged byte is always a true one.
func specialMask(x uint64) uint64 {
	return ((x - ones*0x20) | x | ((x ^ ones*'"') - ones) | ((x ^ ones*'\\') - ones)) & highs
}

// utf8Seq returns the length of the valid UTF-8 sequence that starts at
// s[i] (a byte >= 0x80), or 0 if there is none.
func utf8Seq(s []byte, i int) int {
	c := s[i]
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			return 2
		}
		return 0
	case c < 0xF0:
		if i+2 >= len(s) {
			return 0
		}
		c1, c2 := s[i+1], s[i+2]
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
		if c1 < lo || c1 > hi || c2&0xC0 != 0x80 {
			return 0
		}
		return 3
	case c < 0xF5:
		if i+3 >= len(s) {
			return 0
		}
		c1, c2, c3 := s[i+1], s[i+2], s[i+3]
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
		if c1 < lo || c1 > hi || c2&0xC0 != 0x80 || c3&0xC0 != 0x80 {
			return 0
		}
		return 4
	}
	return 0
}

// appendEscapedASCII appends the code unit u (< 0x80) as JSON.stringify
// prints it.
func appendEscapedASCII(dst []byte, u byte) []byte {
	switch u {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if u < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[u>>4], hexDigits[u&0xF])
	}
	return append(dst, u)
}

// hex4 decodes four hex digits at s[i:i+4]; ok is false if they are not.
func hex4(s []byte, i int) (r rune, ok bool) {
	if i+4 > len(s) {
		return 0, false
	}
	for _, c := range s[i : i+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// appendString normalizes the JSON string token that starts at src[i] (a
// '"') into dst. It returns the offset just after the token, or a message
// and the offset of the error.
func appendString(dst, src []byte, i int) ([]byte, int, string) {
	n := len(src)
	i++
	dst = append(dst, '"')
	for {
		start := i
		for i < n {
			if i+8 <= n {
				m := specialMask(binary.LittleEndian.Uint64(src[i:]))
				if m == 0 {
					i += 8
					continue
				}
				i += bits.TrailingZeros64(m) >> 3
			}
			c := src[i]
			if c >= 0x80 {
				w := utf8Seq(src, i)
				if w == 0 {
					return dst, i, msgUTF8
				}
				i += w
				continue
			}
			if !plainASCII[c] {
				break
			}
			i++
		}
		dst = append(dst, src[start:i]...)
		if i >= n {
			return dst, i, msgUnterminal
		}
		switch c := src[i]; c {
		case '"':
			return append(dst, '"'), i + 1, ""
		case '\\':
			var msg string
			dst, i, msg = appendEscape(dst, src, i)
			if msg != "" {
				return dst, i, msg
			}
		default: // a control character
			return dst, i, msgControl
		}
	}
}

// appendEscape decodes the escape sequence at src[i] (a '\\') and appends it
// as JSON.stringify prints the code unit(s) it stands for.
func appendEscape(dst, src []byte, i int) ([]byte, int, string) {
	if i+1 >= len(src) {
		return dst, len(src), msgUnterminal
	}
	switch src[i+1] {
	case '"':
		return append(dst, '\\', '"'), i + 2, ""
	case '\\':
		return append(dst, '\\', '\\'), i + 2, ""
	case '/':
		return append(dst, '/'), i + 2, ""
	case 'b':
		return append(dst, '\\', 'b'), i + 2, ""
	case 'f':
		return append(dst, '\\', 'f'), i + 2, ""
	case 'n':
		return append(dst, '\\', 'n'), i + 2, ""
	case 'r':
		return append(dst, '\\', 'r'), i + 2, ""
	case 't':
		return append(dst, '\\', 't'), i + 2, ""
	case 'u':
	default:
		return dst, i, msgEscape
	}
	u, ok := hex4(src, i+2)
	if !ok {
		return dst, i, msgEscape
	}
	i += 6
	switch {
	case u < 0x80:
		return appendEscapedASCII(dst, byte(u)), i, ""
	case u >= 0xD800 && u < 0xDC00:
		// A high surrogate joins with an escaped low surrogate right after it.
		if i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
			if lo, ok := hex4(src, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
				return utf8.AppendRune(dst, 0x10000+(u-0xD800)<<10+(lo-0xDC00)), i + 6, ""
			}
		}
		return appendSurrogate(dst, u), i, ""
	case u >= 0xDC00 && u < 0xE000:
		return appendSurrogate(dst, u), i, ""
	}
	return utf8.AppendRune(dst, u), i, ""
}

// appendSurrogate prints a lone surrogate as JSON.stringify does.
func appendSurrogate(dst []byte, u rune) []byte {
	return append(dst, '\\', 'u', 'd', hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
}

// appendNumber normalizes the JSON number that starts at src[i] (a '-' or a
// digit). inf reports a number that overflowed to ±Infinity, which is
// printed as null.
func appendNumber(dst, src []byte, i int) (out []byte, next int, msg string, inf bool) {
	n := len(src)
	start := i
	neg := src[i] == '-'
	if neg {
		i++
	}
	if i >= n {
		return dst, i, msgEOF, false
	}
	intStart := i
	switch c := src[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < n && '0' <= src[i] && src[i] <= '9' {
			i++
		}
	default:
		return dst, i, msgNumber, false
	}
	intDigits := i - intStart
	if i == n || (src[i] != '.' && src[i]|0x20 != 'e') {
		// An integer. Up to 15 digits it is exact and printed as written.
		if intDigits <= 15 {
			if neg && intDigits == 1 && src[intStart] == '0' {
				return append(dst, '0'), i, "", false
			}
			return append(dst, src[start:i]...), i, "", false
		}
		return appendFloat(dst, src[start:i], i)
	}
	plain := true // no exponent
	fracDigits := 0
	if src[i] == '.' {
		i++
		fs := i
		for i < n && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		fracDigits = i - fs
		if fracDigits == 0 {
			if i == n {
				return dst, i, msgEOF, false
			}
			return dst, i, msgNumber, false
		}
	}
	if i < n && src[i]|0x20 == 'e' {
		plain = false
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		es := i
		for i < n && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		if i == es {
			if i == n {
				return dst, i, msgEOF, false
			}
			return dst, i, msgNumber, false
		}
	}
	if plain && src[i-1] != '0' {
		// A decimal with at most 15 significant digits, no trailing zero and
		// a value of at least 1e-6 is the shortest text of its double (any
		// two such decimals are different doubles), and Number::toString
		// prints it without an exponent: as written.
		sig := intDigits + fracDigits
		ok := true
		if src[intStart] == '0' {
			z := 0
			for src[intStart+2+z] == '0' {
				z++
			}
			sig = fracDigits - z
			ok = z <= 5
		}
		if ok && sig <= 15 {
			return append(dst, src[start:i]...), i, "", false
		}
	}
	return appendFloat(dst, src[start:i], i)
}

// appendFloat parses the (grammatically valid) number text and prints it as
// ECMAScript's Number::toString does.
func appendFloat(dst, num []byte, next int) ([]byte, int, string, bool) {
	f, ok := exactFloat(num)
	if !ok {
		f, _ = strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	}
	if math.IsInf(f, 0) {
		return append(dst, "null"...), next, "", true
	}
	return appendJSNumber(dst, f), next, "", false
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactFloat converts the (grammatically valid) number text when its
// significant digits make an integer m < 2^53 and its decimal exponent e is
// within ±22: then m and 10^|e| are exact doubles and one IEEE multiplication
// or division rounds correctly (Clinger's fast path). ok is false otherwise.
func exactFloat(num []byte) (f float64, ok bool) {
	i := 0
	neg := num[0] == '-'
	if neg {
		i++
	}
	var m uint64
	nd, exp := 0, 0
	for ; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
		if m != 0 || num[i] != '0' {
			if nd++; nd > 15 {
				return 0, false
			}
		}
		m = m*10 + uint64(num[i]-'0')
	}
	if i < len(num) && num[i] == '.' {
		for i++; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
			if m != 0 || num[i] != '0' {
				if nd++; nd > 15 {
					return 0, false
				}
			}
			m = m*10 + uint64(num[i]-'0')
			exp--
		}
	}
	if i < len(num) { // an exponent
		i++
		eneg := num[i] == '-'
		if num[i] == '-' || num[i] == '+' {
			i++
		}
		e := 0
		for ; i < len(num); i++ {
			if e = e*10 + int(num[i]-'0'); e > 1000 {
				return 0, false
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	f = float64(m)
	switch {
	case m == 0:
	case exp == 0:
	case exp > 0 && exp <= 22:
		f *= pow10[exp]
	case exp < 0 && exp >= -22:
		f /= pow10[-exp]
	default:
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// appendJSNumber appends a finite f as ECMAScript's Number::toString(10).
func appendJSNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits d1.d2d3...e±x, then ECMAScript's layout.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	j := 0
	for ; j < len(e) && e[j] != 'e'; j++ {
		if e[j] != '.' {
			digits[k] = e[j]
			k++
		}
	}
	exp := 0
	expNeg := e[j+1] == '-'
	for _, c := range e[j+2:] {
		exp = exp*10 + int(c-'0')
	}
	if expNeg {
		exp = -exp
	}
	d := digits[:k]
	nn := exp + 1
	switch {
	case k <= nn && nn <= 21:
		dst = append(dst, d...)
		for range nn - k {
			dst = append(dst, '0')
		}
	case 0 < nn && nn <= 21:
		dst = append(dst, d[:nn]...)
		dst = append(dst, '.')
		dst = append(dst, d[nn:]...)
	case -6 < nn && nn <= 0:
		dst = append(dst, '0', '.')
		for range -nn {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if nn-1 >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
		}
		x := nn - 1
		if x < 0 {
			x = -x
		}
		dst = strconv.AppendInt(dst, int64(x), 10)
	}
	return dst
}

// AppendString appends s as JSON.stringify prints a JavaScript string holding
// it. s is read as UTF-8; each maximal invalid subsequence becomes one U+FFFD,
// as a UTF-8 decoder following the WHATWG Encoding Standard (node's
// Buffer.toString, TextDecoder) replaces it.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	n := len(s)
	i := 0
	for {
		start := i
		for i < n {
			if i+8 <= n {
				x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
					uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
				m := specialMask(x)
				if m == 0 {
					i += 8
					continue
				}
				i += bits.TrailingZeros64(m) >> 3
			}
			c := s[i]
			if c >= 0x80 {
				r, w := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && w == 1 {
					break
				}
				i += w
				continue
			}
			if !plainASCII[c] {
				break
			}
			i++
		}
		dst = append(dst, s[start:i]...)
		if i >= n {
			return append(dst, '"')
		}
		if c := s[i]; c < 0x80 {
			dst = appendEscapedASCII(dst, c)
			i++
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += invalidPrefix(s[i:])
	}
}

// invalidPrefix returns the length of the maximal subpart of an ill-formed
// UTF-8 sequence at the start of s (Unicode 3.9, table 3-8 practice): the
// longest prefix that could start a well-formed sequence, and at least 1.
func invalidPrefix(s string) int {
	c := s[0]
	var lo, hi byte = 0x80, 0xBF
	need := 0
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	i := 1
	for k := 0; k < need && i < len(s); k++ {
		b := s[i]
		if k == 0 {
			if b < lo || b > hi {
				break
			}
		} else if b&0xC0 != 0x80 {
			break
		}
		i++
	}
	return i
}
