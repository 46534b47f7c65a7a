package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are added to the checked-in seeds of testdata/fuzz.
var fuzzSeeds = []string{
	`{"kind":"page","url":"/release/x","version":"v8","refresh":true}`,
	`{"b":1,"1":2,"a":3,"0":4,"b":5,"4294967295":6,"4294967294":7}`,
	`[1e21,1e-7,-0,0.000001,12345678901234567890,1e999,1e-400]`,
	`"\ud800\udc00\udbff\u2028\u001f\/"`,
	`{"a":{"$句柄":1},"a":[[[1]]]}`,
	`{"\u0024句柄":1}`,
}

func FuzzAppend(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dst := []byte("dst")
		out, st, err := Append(dst, src)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not match ErrSyntax", err)
			}
			if !bytes.Equal(out, dst) {
				t.Fatalf("dst changed on error: %q", out)
			}
			// What the stdlib's strict grammar accepts, with valid UTF-8, is JSON.
			if json.Valid(src) && utf8.Valid(src) {
				t.Fatalf("rejected valid JSON %q: %v", src, err)
			}
			return
		}
		if !json.Valid(src) || !utf8.Valid(src) {
			t.Fatalf("accepted %q, which is not JSON", src)
		}
		if !bytes.Equal(out[:3], dst) {
			t.Fatalf("prefix changed: %q", out)
		}
		norm := out[3:]
		if !json.Valid(norm) || !utf8.Valid(norm) {
			t.Fatalf("output %q of %q is not valid JSON", norm, src)
		}
		// Normalized text normalizes to itself with the same Stats, except
		// that an overflowed number (a marker) was printed as null.
		again, st2, err := Append(nil, norm)
		if st2.Marker != st.Marker && !st2.Marker && bytes.Contains(norm, []byte("null")) {
			st2.Marker = true
		}
		if err != nil || !bytes.Equal(again, norm) || st2 != st {
			t.Fatalf("not idempotent: %q -> %q %+v -> %q %+v %v", src, norm, st, again, st2, err)
		}
		// The one-pass path and the tree path agree whenever both apply.
		fast, fst, _, msg, reorder := appendFast(nil, src)
		tree, tst, _, tmsg := appendTree(nil, src)
		if tmsg != "" || !bytes.Equal(tree, norm) || tst != st {
			t.Fatalf("tree path: %q %+v %q, want %q %+v", tree, tst, tmsg, norm, st)
		}
		if !reorder && (msg != "" || !bytes.Equal(fast, norm) || fst != st) {
			t.Fatalf("fast path: %q %+v %q, want %q %+v", fast, fst, msg, norm, st)
		}
	})
}

// FuzzHelpers checks that Elements, Members and Unquote take normalized text
// apart so that it reassembles, and never panic on any input.
func FuzzHelpers(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[[1,2],{"a":"],[","b":{"c":[]}},"\"",-0.5,null]`))
	f.Add([]byte(`{"\\":"\\\"","\ud800":1,"":{},"x":[{}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		// Never panic and always end, on anything.
		for range Elements(src) {
		}
		for range Members(src) {
		}
		Unquote(src)

		norm, _, err := Append(nil, src)
		if err != nil {
			return
		}
		checkParts(t, norm)
	})
}

// checkParts takes the normalized value norm apart and checks every part.
func checkParts(t *testing.T, norm []byte) {
	t.Helper()
	var re []byte
	switch norm[0] {
	case '[':
		re = append(re, '[')
		for e := range Elements(norm) {
			if len(re) > 1 {
				re = append(re, ',')
			}
			re = append(re, e...)
			checkNormalized(t, e)
		}
		re = append(re, ']')
	case '{':
		re = append(re, '{')
		for k, v := range Members(norm) {
			if len(re) > 1 {
				re = append(re, ',')
			}
			re = append(append(append(re, k...), ':'), v...)
			checkNormalized(t, k)
			checkNormalized(t, v)
		}
		re = append(re, '}')
	case '"':
		s, ok := Unquote(norm)
		if ok == loneSurrogate(norm) {
			t.Fatalf("Unquote(%q) ok = %v", norm, ok)
		}
		if ok {
			if back := AppendString(nil, s); !bytes.Equal(back, norm) {
				t.Fatalf("AppendString(Unquote(%q)) = %q", norm, back)
			}
		}
		return
	default:
		for range Elements(norm) {
			t.Fatalf("Elements(%q) yields", norm)
		}
		return
	}
	if !bytes.Equal(re, norm) {
		t.Fatalf("parts of %q reassemble to %q", norm, re)
	}
}

// checkNormalized checks that a part of normalized text is normalized text
// itself, and takes it apart in turn.
func checkNormalized(t *testing.T, part []byte) {
	t.Helper()
	again, _, err := Append(nil, part)
	if err != nil || !bytes.Equal(again, part) {
		t.Fatalf("part %q normalizes to %q, %v", part, again, err)
	}
	checkParts(t, part)
}

// loneSurrogate reports a \udxxx escape in a normalized string token.
func loneSurrogate(tok []byte) bool {
	for i := 0; i+2 < len(tok); i++ {
		if tok[i] == '\\' {
			if tok[i+1] == 'u' && tok[i+2] == 'd' {
				return true
			}
			i++
		}
	}
	return false
}

// FuzzNumber checks the number paths that skip strconv.ParseFloat (numbers
// printed as written, Clinger's exact conversion) against it.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5", "123456789012345", "1234567890123456", "0.000001", "1e22", "1e23",
		"9007199254740993", "1.7976931348623157e308", "5e-324", "0.1e-21", "123.456e-7", "100e-2", "1e21"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || !json.Valid([]byte(s)) ||
			strings.ContainsAny(s, " \t\r\n") {
			return
		}
		got, _, err := Append(nil, []byte(s))
		if err != nil {
			t.Fatalf("Append(%q): %v", s, err)
		}
		x, _ := strconv.ParseFloat(s, 64)
		want := []byte("null")
		if !math.IsInf(x, 0) {
			want = appendJSNumber(nil, x)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
	})
}
