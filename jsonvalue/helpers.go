package jsonvalue

import (
	"bytes"
	"iter"
	"unicode/utf8"
)

// The helpers below read normalized text (the output of Append), which has
// no whitespace, so they only need to find where each value ends. On other
// input their results are unspecified, but they never panic and always end.

// skipString returns the offset just after the string token at b[i] (a '"').
//
// It looks for each quote with bytes.IndexByte (vectorized: bodies are mostly long plain runs)
// and takes the first one after an even run of backslashes, which is the one a scan pairing
// each backslash with the byte after it would stop at.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		q += i
		k := q
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return len(b)
}

// skipValue returns the offset just after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '[', '{':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '[', '{':
				depth++
			case ']', '}':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != ']' && b[i] != '}' {
		i++
	}
	return i
}

// Elements yields the elements of the normalized array norm as sub-slices
// of norm, in order. It yields nothing if norm is not an array.
func Elements(norm []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if len(norm) < 2 || norm[0] != '[' || norm[1] == ']' {
			return
		}
		for i := 1; i < len(norm); i++ {
			e := skipValue(norm, i)
			if !yield(norm[i:e]) || e >= len(norm) || norm[e] != ',' {
				return
			}
			i = e
		}
	}
}

// Members yields the members of the normalized object norm in order: each
// key token (with its quotes, as normalized; see Unquote) and the value, as
// sub-slices of norm. It yields nothing if norm is not an object.
func Members(norm []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		if len(norm) < 2 || norm[0] != '{' || norm[1] == '}' {
			return
		}
		for i := 1; i < len(norm) && norm[i] == '"'; i++ {
			k := skipString(norm, i)
			if k >= len(norm) || norm[k] != ':' {
				return
			}
			e := skipValue(norm, k+1)
			if !yield(norm[i:k], norm[k+1:e]) || e >= len(norm) || norm[e] != ',' {
				return
			}
			i = e
		}
	}
}

// Unquote decodes a string token of normalized text (its quotes included).
// ok is false if tok is not a string token or if the string holds a lone
// surrogate (printed as \udxxx), which a Go string cannot carry. It also
// decodes any other JSON escape, so it accepts every valid JSON string token.
func Unquote(tok []byte) (s string, ok bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", false
	}
	body := tok[1 : len(tok)-1]
	esc := -1
	for i, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			esc = i
			break
		}
	}
	if esc < 0 {
		return string(body), true
	}
	out := make([]byte, esc, len(body))
	copy(out, body)
	for i := esc; i < len(body); {
		c := body[i]
		if c == '"' || c < 0x20 {
			return "", false
		}
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", false
		}
		switch body[i+1] {
		case '"', '\\', '/':
			out = append(out, body[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u, ok := hex4(body, i+2)
			if !ok {
				return "", false
			}
			i += 6
			if u >= 0xD800 && u < 0xDC00 {
				lo, ok := hex4(body, i+2)
				if i+1 >= len(body) || body[i] != '\\' || body[i+1] != 'u' || !ok || lo < 0xDC00 || lo >= 0xE000 {
					return "", false
				}
				u = 0x10000 + (u-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			} else if u >= 0xDC00 && u < 0xE000 {
				return "", false
			}
			out = utf8.AppendRune(out, u)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}
