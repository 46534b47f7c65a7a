package jsonvalue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", `""`},
		{"plain", "hello world", `"hello world"`},
		{"long plain", strings.Repeat("abcdefgh", 5), `"` + strings.Repeat("abcdefgh", 5) + `"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"controls after a long run", "abcdefghijklmnop\x1e", `"abcdefghijklmnop\u001e"`},
		{"slash, DEL, html", "/\x7f<>&'", `"/` + "\x7f" + `<>&'"`},
		{"line separators stay raw", "\u2028\u2029", "\"\u2028\u2029\""},
		{"CJK and emoji", "队列😀", `"队列😀"`},
		{"BOM stays", "\ufeffx", "\"\ufeffx\""},
		{"invalid byte", "a\xffb", "\"a\uFFFDb\""},
		{"lone continuation", "\x80\x80", "\"\uFFFD\uFFFD\""},
		{"truncated sequence is one U+FFFD", "\xe4\xb8x", "\"\uFFFDx\""},
		{"truncated 4-byte sequence", "\xf0\x9f\x98", "\"\uFFFD\""},
		{"overlong", "\xc0\x80", "\"\uFFFD\uFFFD\""},
		{"UTF-8 surrogate", "\xed\xa0\x80", "\"\uFFFD\uFFFD\uFFFD\""},
		{"above U+10FFFF", "\xf4\x90\x80\x80", "\"\uFFFD\uFFFD\uFFFD\uFFFD\""},
		{"invalid inside a long ASCII run", "abcdefghij\xffklmnopqrst", "\"abcdefghij\uFFFDklmnopqrst\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendString([]byte("dst:"), tt.in)
			if want := "dst:" + tt.want; string(got) != want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.in, got, want)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		tok  string
		want string
		ok   bool
	}{
		{`""`, "", true},
		{`"abc"`, "abc", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t", true},
		{`"\u0000\u001f"`, "\x00\x1f", true},
		{`"队列😀"`, "队列😀", true},
		{"\"\u2028\"", "\u2028", true},
		{`"\ud800"`, "", false},
		{`"x\udfff"`, "", false},
		{`"\\ud800"`, `\ud800`, true}, // an escaped backslash, not a surrogate
		// Any valid JSON string token, normalized or not.
		{`"\/\u0041\u00e9\ud83d\ude00"`, "/Aé😀", true},
		{`"\ud83d\u0041"`, "", false},
		// Not string tokens.
		{``, "", false},
		{`"`, "", false},
		{`abc`, "", false},
		{`"a"b"`, "", false},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{`"\"`, "", false},
		{"\"a\nb\"", "", false},
	}
	for _, tt := range tests {
		got, ok := Unquote([]byte(tt.tok))
		if got != tt.want || ok != tt.ok {
			t.Errorf("Unquote(%s) = %q, %v; want %q, %v", tt.tok, got, ok, tt.want, tt.ok)
		}
	}
}

func TestElements(t *testing.T) {
	tests := []struct {
		norm string
		want []string
	}{
		{`[]`, nil},
		{`[1]`, []string{`1`}},
		{`[1,"a",null,true,-0.5,1e+21]`, []string{`1`, `"a"`, `null`, `true`, `-0.5`, `1e+21`}},
		{`[[1,2],{"a":[3]},[]]`, []string{`[1,2]`, `{"a":[3]}`, `[]`}},
		{`["],[","\"]","\\",{"body":1}]`, []string{`"],["`, `"\"]"`, `"\\"`, `{"body":1}`}},
		{`{"a":1}`, nil},
		{`"[1,2]"`, nil},
		{`1`, nil},
		{``, nil},
		// Not normalized: unspecified, but it ends without panicking.
		{`[`, nil},
		{`[1,`, []string{`1`}},
		{`["abc`, []string{`"abc`}},
	}
	for _, tt := range tests {
		got := slices.Collect(func(yield func(string) bool) {
			for e := range Elements([]byte(tt.norm)) {
				if !yield(string(e)) {
					return
				}
			}
		})
		if !slices.Equal(got, tt.want) {
			t.Errorf("Elements(%s) = %q, want %q", tt.norm, got, tt.want)
		}
	}
	// Stopping early.
	for e := range Elements([]byte(`[1,2,3]`)) {
		if string(e) != "1" {
			t.Errorf("first element %q", e)
		}
		break
	}
}

func TestMembers(t *testing.T) {
	tests := []struct {
		norm string
		want []string // key, value, key, value...
	}{
		{`{}`, nil},
		{`{"a":1}`, []string{`"a"`, `1`}},
		{`{"0":[1,{"x":"}"}],"a\"b":{"c":null},"":""}`, []string{`"0"`, `[1,{"x":"}"}]`, `"a\"b"`, `{"c":null}`, `""`, `""`}},
		{`{"\\":"\\\"","$句柄":true}`, []string{`"\\"`, `"\\\""`, `"$句柄"`, `true`}},
		{`[1]`, nil},
		{`"x"`, nil},
		{`{1:2}`, nil},
		{`{"a"`, nil},
		{`{"a":`, []string{`"a"`, ``}},
	}
	for _, tt := range tests {
		var got []string
		for k, v := range Members([]byte(tt.norm)) {
			got = append(got, string(k), string(v))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Members(%s) = %q, want %q", tt.norm, got, tt.want)
		}
	}
	for k := range Members([]byte(`{"a":1,"b":2}`)) {
		if string(k) != `"a"` {
			t.Errorf("first key %q", k)
		}
		break
	}
}

func TestAppendErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
	}{
		{``, 0},
		{`[1,]`, 3},
		{`{"a":1,}`, 7},
		{`01`, 1},
		{"\"a\x01\"", 2},
		{"\"a\xff\"", 2},
		{`[1] x`, 4},
		{"\ufeff1", 0},
	}
	for _, tt := range tests {
		dst := []byte("keep")
		out, st, err := Append(dst, []byte(tt.in))
		var se *SyntaxError
		if !errors.Is(err, ErrSyntax) || !errors.As(err, &se) {
			t.Errorf("Append(%q): error %v, want a *SyntaxError matching ErrSyntax", tt.in, err)
			continue
		}
		if se.Offset != tt.offset {
			t.Errorf("Append(%q): offset %d, want %d (%v)", tt.in, se.Offset, tt.offset, err)
		}
		if string(out) != "keep" || st != (Stats{}) {
			t.Errorf("Append(%q) = %q, %+v on error", tt.in, out, st)
		}
	}
}

// TestDeep checks nesting far beyond what recursion could take, on both
// paths, and that every value is still checked at that depth.
func TestDeep(t *testing.T) {
	const d = 500000
	in := strings.Repeat("[", d) + strings.Repeat("]", d)
	out, st, err := Append(nil, []byte(in))
	if err != nil || string(out) != in || st.Depth != d {
		t.Fatalf("depth %d arrays: %v, depth %d", d, err, st.Depth)
	}
	// Objects with a duplicate key take the tree path.
	in = strings.Repeat(`{"a":1,"a":`, d/2) + "[1e999]" + strings.Repeat("}", d/2)
	want := strings.Repeat(`{"a":`, d/2) + "[null]" + strings.Repeat("}", d/2)
	out, st, err = Append(nil, []byte(in))
	if err != nil || string(out) != want || st.Depth != d/2+1 || !st.Marker {
		t.Fatalf("deep duplicate objects: %v, %+v", err, st)
	}
	if _, _, err := Append(nil, []byte(strings.Repeat("[", d))); !errors.Is(err, ErrSyntax) {
		t.Fatalf("unclosed: %v", err)
	}
}

// TestStatsResolved checks Stats on the parsed value: a member overwritten
// by a duplicate key counts for nothing (SPEC §5.5).
func TestStatsResolved(t *testing.T) {
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	tests := []struct {
		in   string
		want Stats
	}{
		{`1`, Stats{}},
		{`[[1]]`, Stats{Depth: 2}},
		{`{"a":1e999,"a":1}`, Stats{Depth: 1}},
		{`{"a":1,"a":1e999}`, Stats{Depth: 1, Marker: true}},
		{`{"a":` + deep + `,"a":1}`, Stats{Depth: 1}},
		{`{"a":1,"a":` + deep + `}`, Stats{Depth: 41}},
		{`{"a":{"$句柄":1},"a":2}`, Stats{Depth: 1}},
		{`{"x":1,"\u0024未定义":2}`, Stats{Depth: 1, Marker: true}},
		{`["$句柄",{"$ 句柄":1}]`, Stats{Depth: 2}},
	}
	for _, tt := range tests {
		_, st, err := Append(nil, []byte(tt.in))
		if err != nil || st != tt.want {
			t.Errorf("Append(%.40s): %+v %v, want %+v", tt.in, st, err, tt.want)
		}
	}
}

// TestBigObjects covers objects past smallObject keys, where the one-pass
// path finds duplicates by hashing and reuses its hash sets.
func TestBigObjects(t *testing.T) {
	obj := func(n int, extra string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra)
		return strings.TrimSuffix(b.String(), ",") + "}"
	}
	distinct := obj(40, "")
	tests := []struct{ in, want string }{
		{"[" + distinct + "," + distinct + "]", "[" + distinct + "," + distinct + "]"},
		{`{"a":` + distinct + `,"b":` + distinct + "}", `{"a":` + distinct + `,"b":` + distinct + "}"},
		{obj(40, `"k3":"x",`), strings.Replace(distinct, `"k3":3`, `"k3":"x"`, 1)},
		{"[" + distinct + "," + obj(40, `"k39":"x",`) + "]", "[" + distinct + "," + strings.Replace(distinct, `"k39":39`, `"k39":"x"`, 1) + "]"},
		{obj(40, `"7":"x",`), `{"7":"x",` + distinct[1:]},
	}
	for _, tt := range tests {
		out, _, err := Append(nil, []byte(tt.in))
		if err != nil || string(out) != tt.want {
			t.Errorf("Append(%.60s...):\n got  %.200s %v\n want %.200s", tt.in, out, err, tt.want)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, _, err := Append(nil, []byte(`[1,]`))
	if got := err.Error(); got != "jsonvalue: unexpected character at offset 3" {
		t.Errorf("Error() = %q", got)
	}
}

// TestSpecialMask checks the word-at-a-time scan of strings against the
// byte table: the lowest flagged byte is the first byte that is not plain.
func TestSpecialMask(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	pool := []byte{0, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	for range 200000 {
		var b [8]byte
		for j := range b {
			if r.IntN(2) == 0 {
				b[j] = pool[r.IntN(len(pool))]
			} else {
				b[j] = byte(r.IntN(256))
			}
		}
		want := 8
		for j, c := range b {
			if !plainASCII[c] {
				want = j
				break
			}
		}
		got := 8
		if m := specialMask(binary.LittleEndian.Uint64(b[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("% x: first special byte %d, want %d", b, got, want)
		}
	}
}

// skipString finds quotes with bytes.IndexByte; it must stop where a scan that pairs each
// backslash with the byte after it stops, on any input (the helpers' promise: never panic,
// always end), not only normalized text.
func TestSkipStringMatchesScan(t *testing.T) {
	scan := func(b []byte, i int) int {
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return len(b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'"', '\\', '\\', 'a', 'b', '\n', 0xe2, 'u'}
	for range 200000 {
		b := make([]byte, rng.IntN(40)+1)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		i := rng.IntN(len(b))
		b[i] = '"'
		if got, want := skipString(b, i), scan(b, i); got != want {
			t.Fatalf("skipString(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
}
