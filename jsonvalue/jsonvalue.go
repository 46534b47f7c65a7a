package jsonvalue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
)

// Stats describes the parsed value, after duplicate keys are resolved
// (SPEC §5.5): a member overwritten by a later duplicate counts for nothing.
type Stats struct {
	// Depth is the deepest nesting: each array or object is one level, a
	// scalar is 0, and [[1]] is 2.
	Depth int
	// Marker reports an object that has one of the four host-marker keys
	// ($句柄, $未定义, $大整数, $数字, judged after unescaping) at any position,
	// or a number that overflowed to ±Infinity (1e999), which is printed as
	// null.
	Marker bool
}

// ErrSyntax is the error that every syntax error of Append matches with
// errors.Is: the input is not a JSON text.
var ErrSyntax = errors.New("not a JSON text")

// SyntaxError reports where and why Append rejected its input.
type SyntaxError struct {
	Offset int    // byte offset in the input
	Msg    string // what was wrong there
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsonvalue: %s at offset %d", e.Msg, e.Offset)
}

// Is reports whether target is ErrSyntax.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// Append parses src as JSON.parse does and appends JSON.stringify's text of
// the value to dst. On a syntax error it returns dst unchanged (same length)
// and a *SyntaxError, which matches ErrSyntax; an input over 256 MiB is
// refused the same way. src must not overlap the spare capacity of dst.
func Append(dst, src []byte) ([]byte, Stats, error) {
	if len(src) > maxInput {
		return dst, Stats{}, &SyntaxError{Offset: maxInput, Msg: "input over 256 MiB"}
	}
	out, st, off, msg, reorder := appendFast(dst, src)
	if reorder {
		out, st, off, msg = appendTree(out[:len(dst)], src)
	}
	if msg != "" {
		return dst, Stats{}, &SyntaxError{Offset: off, Msg: msg}
	}
	return out, st, nil
}

// maxInput bounds the input so that every offset into the output, which can
// be five times longer ("1e20" is "100000000000000000000"), fits in an int32.
// V8 cannot even hold a string of 512 Mi characters.
const maxInput = 256 << 20

// isWS reports JSON whitespace: space, tab, LF, CR and nothing else.
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(src []byte, i int) int {
	for i < len(src) && isWS(src[i]) {
		i++
	}
	return i
}

// markerKey reports whether the normalized key token k (with its quotes) is
// one of the four host-marker keys.
func markerKey(k []byte) bool {
	if len(k) < 3 || k[1] != '$' {
		return false
	}
	switch string(k) {
	case `"$句柄"`, `"$未定义"`, `"$大整数"`, `"$数字"`:
		return true
	}
	return false
}

// arrayIndex reports whether the normalized key token k is a canonical array
// index ("0" .. "4294967294"), which V8 orders before the other keys.
func arrayIndex(k []byte) (uint32, bool) {
	d := len(k) - 2
	if d < 1 || d > 10 || (k[1] == '0' && d > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range k[1 : len(k)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 4294967294 {
		return 0, false
	}
	return uint32(v), true
}

// smallObject is the number of keys up to which the fast path finds
// duplicates by comparing with every earlier key; past it, by hashing.
const smallObject = 24

type span struct{ start, end int32 }

// keyRec is a key of an open object in the one-pass path: its token in dst
// and a fingerprint (length and first bytes) that rules out most unequal
// keys without reading dst.
type keyRec struct {
	span
	fp uint64
}

func fingerprint(k []byte) uint64 {
	var x uint64
	if len(k) >= 9 {
		x = binary.LittleEndian.Uint64(k[1:9])
	} else {
		for j := len(k) - 1; j >= 1; j-- {
			x = x<<8 | uint64(k[j])
		}
	}
	return x ^ uint64(len(k))*0x9E3779B97F4A7C15
}

type fastFrame struct {
	obj       bool
	sawName   bool   // a key that is not an array index
	haveIndex bool   // an array-index key
	lastIndex uint32 // the greatest array index so far
	keys      int32  // where the object's keys start in the keys stack
	seen      map[uint64]int32
}

var seed = maphash.MakeSeed()

// appendFast normalizes src straight into dst in one pass. It gives up,
// with reorder set, at the first object whose keys V8 would reorder or
// deduplicate: appendTree handles those documents.
func appendFast(dst, src []byte) (out []byte, st Stats, off int, msg string, reorder bool) {
	var frameBuf [16]fastFrame // on the stack: no allocation for common documents
	var keyBuf [32]keyRec
	frames := frameBuf[:0]
	keys := keyBuf[:0]
	var free []map[uint64]int32
	base := len(dst) // key offsets are relative to it, to fit in int32
	n := len(src)
	i := skipWS(src, 0)
	var c byte
	var inf bool

value:
	if i >= n {
		return dst, st, i, msgEOF, false
	}
	c = src[i]
	switch {
	case c == '"':
		dst, i, msg = appendString(dst, src, i)
		if msg != "" {
			return dst, st, i, msg, false
		}
	case c == '-' || ('0' <= c && c <= '9'):
		dst, i, msg, inf = appendNumber(dst, src, i)
		if msg != "" {
			return dst, st, i, msg, false
		}
		if inf {
			st.Marker = true
		}
	case c == '{' || c == '[':
		dst = append(dst, c)
		i = skipWS(src, i+1)
		if i < n && src[i] == c+2 { // '}' or ']'
			dst = append(dst, c+2)
			i++
			if len(frames)+1 > st.Depth {
				st.Depth = len(frames) + 1
			}
			break
		}
		frames = append(frames, fastFrame{obj: c == '{', keys: int32(len(keys))})
		if len(frames) > st.Depth {
			st.Depth = len(frames)
		}
		if c == '{' {
			goto key
		}
		goto value
	case c == 't':
		if !bytes.HasPrefix(src[i:], []byte("true")) {
			return dst, st, i, msgToken, false
		}
		dst = append(dst, "true"...)
		i += 4
	case c == 'f':
		if !bytes.HasPrefix(src[i:], []byte("false")) {
			return dst, st, i, msgToken, false
		}
		dst = append(dst, "false"...)
		i += 5
	case c == 'n':
		if !bytes.HasPrefix(src[i:], []byte("null")) {
			return dst, st, i, msgToken, false
		}
		dst = append(dst, "null"...)
		i += 4
	default:
		return dst, st, i, msgToken, false
	}

next:
	if i < n && isWS(src[i]) {
		i = skipWS(src, i)
	}
	if len(frames) == 0 {
		if i != n {
			return dst, st, i, msgTrailing, false
		}
		return dst, st, 0, "", false
	}
	if i >= n {
		return dst, st, i, msgEOF, false
	}
	c = src[i]
	if f := &frames[len(frames)-1]; f.obj {
		switch c {
		case ',':
			dst = append(dst, ',')
			i = skipWS(src, i+1)
			goto key
		case '}':
			dst = append(dst, '}')
			i++
			if f.seen != nil {
				clear(f.seen)
				free = append(free, f.seen)
			}
			keys = keys[:f.keys]
			frames = frames[:len(frames)-1]
			goto next
		}
	} else {
		switch c {
		case ',':
			dst = append(dst, ',')
			i = skipWS(src, i+1)
			goto value
		case ']':
			dst = append(dst, ']')
			i++
			frames = frames[:len(frames)-1]
			goto next
		}
	}
	return dst, st, i, msgToken, false

key:
	if i >= n {
		return dst, st, i, msgEOF, false
	}
	if src[i] != '"' {
		return dst, st, i, msgToken, false
	}
	{
		ks := len(dst)
		dst, i, msg = appendString(dst, src, i)
		if msg != "" {
			return dst, st, i, msg, false
		}
		k := dst[ks:]
		ks -= base
		f := &frames[len(frames)-1]
		if idx, ok := arrayIndex(k); ok {
			if f.sawName || (f.haveIndex && idx <= f.lastIndex) {
				return dst, st, 0, "", true
			}
			f.haveIndex, f.lastIndex = true, idx
		} else {
			if markerKey(k) {
				st.Marker = true
			}
			f.sawName = true
			fp := fingerprint(k)
			if dup(dst[base:], keys[f.keys:], k, fp, f, &free) {
				return dst, st, 0, "", true
			}
			keys = append(keys, keyRec{span{int32(ks), int32(len(dst) - base)}, fp})
		}
	}
	if i < n && isWS(src[i]) {
		i = skipWS(src, i)
	}
	if i >= n {
		return dst, st, i, msgEOF, false
	}
	if src[i] != ':' {
		return dst, st, i, msgToken, false
	}
	dst = append(dst, ':')
	i = skipWS(src, i+1)
	goto value
}

// dup reports whether key k (the last bytes of out) equals one of the earlier
// keys of its object, and records it in f's hash set once the object is big.
func dup(out []byte, earlier []keyRec, k []byte, fp uint64, f *fastFrame, free *[]map[uint64]int32) bool {
	if len(earlier) < smallObject {
		for _, s := range earlier {
			if s.fp == fp && bytes.Equal(out[s.start:s.end], k) {
				return true
			}
		}
		return false
	}
	if f.seen == nil {
		if l := len(*free); l > 0 {
			f.seen = (*free)[l-1]
			*free = (*free)[:l-1]
		} else {
			f.seen = make(map[uint64]int32, 2*len(earlier))
		}
		for j, s := range earlier {
			f.seen[maphash.Bytes(seed, out[s.start:s.end])] = int32(j)
		}
	}
	h := maphash.Bytes(seed, k)
	if j, ok := f.seen[h]; ok {
		s := earlier[j]
		if bytes.Equal(out[s.start:s.end], k) {
			return true
		}
		// A hash collision: compare with every key.
		for _, s := range earlier {
			if bytes.Equal(out[s.start:s.end], k) {
				return true
			}
		}
	}
	f.seen[h] = int32(len(earlier))
	return false
}
