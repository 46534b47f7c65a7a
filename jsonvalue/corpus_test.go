package jsonvalue

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The golden corpus is written by V8 itself: testdata/gen/v8corpus.mjs.

const corpusDir = "testdata/corpus"

type corpusCase struct {
	Name   string  `json:"name"`
	In     *string `json:"in"`
	In64   []byte  `json:"in64"`
	Out    *string `json:"out"`
	Depth  int     `json:"depth"`
	Marker bool    `json:"marker"`
}

func (c *corpusCase) input() []byte {
	if c.In != nil {
		return []byte(*c.In)
	}
	return c.In64
}

func readGzip(t testing.TB, file string) []byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return b
}

func readCorpus(t testing.TB, file string) []corpusCase {
	t.Helper()
	var cases []corpusCase
	dec := json.NewDecoder(bytes.NewReader(readGzip(t, filepath.Join(corpusDir, file))))
	for dec.More() {
		var c corpusCase
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", file)
	}
	return cases
}

func short(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q...(%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// TestCorpus compares Append with V8 on every case of the corpus, byte for
// byte: output, error or not, Depth and Marker.
func TestCorpus(t *testing.T) {
	cases := readCorpus(t, "cases.jsonl.gz")
	prefix := []byte("prefix:")
	var buf []byte
	failed := 0
	for _, c := range cases {
		in := c.input()
		buf = append(buf[:0], prefix...)
		out, st, err := Append(buf, in)
		buf = out
		msg := ""
		switch {
		case c.Out == nil && err == nil:
			msg = fmt.Sprintf("accepted %s as %s; V8 rejects it", short(in), short(out[len(prefix):]))
		case c.Out == nil && !errors.Is(err, ErrSyntax):
			msg = fmt.Sprintf("error %v does not match ErrSyntax", err)
		case c.Out == nil && !bytes.Equal(out, prefix):
			msg = fmt.Sprintf("dst changed on error: %s", short(out))
		case c.Out != nil && err != nil:
			msg = fmt.Sprintf("rejected %s: %v; V8 gives %s", short(in), err, short([]byte(*c.Out)))
		case c.Out != nil && !bytes.Equal(out[len(prefix):], []byte(*c.Out)):
			msg = fmt.Sprintf("input %s\n got  %s\n want %s", short(in), short(out[len(prefix):]), short([]byte(*c.Out)))
		case c.Out != nil && !bytes.Equal(out[:len(prefix)], prefix):
			msg = "prefix changed"
		case c.Out != nil && (st.Depth != c.Depth || st.Marker != c.Marker):
			msg = fmt.Sprintf("input %s: stats %+v, want {Depth:%d Marker:%v}", short(in), st, c.Depth, c.Marker)
		}
		if msg != "" {
			t.Errorf("%s: %s", c.Name, msg)
			if failed++; failed > 30 {
				t.Fatal("too many failures")
			}
		}
	}
	t.Logf("%d cases", len(cases))
}

// TestCorpusAppendString compares AppendString with JSON.stringify of the
// string node decodes from the same bytes.
func TestCorpusAppendString(t *testing.T) {
	for _, c := range readCorpus(t, "strings.jsonl.gz") {
		got := AppendString([]byte("x"), string(c.In64))
		if want := "x" + *c.Out; string(got) != want {
			t.Errorf("%s: AppendString(%q) = %s, want %s", c.Name, c.In64, got[1:], want[1:])
		}
	}
}

// TestCorpusLive runs the generator and checks that it reproduces the
// checked-in corpus, so that the corpus is what V8 says today.
func TestCorpusLive(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the checked-in corpus is not regenerated")
	}
	if testing.Short() {
		t.Skip("-short: not running node")
	}
	dir := t.TempDir()
	cmd := exec.Command(node, "testdata/gen/v8corpus.mjs", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	for _, file := range []string{"cases.jsonl.gz", "strings.jsonl.gz"} {
		want := readGzip(t, filepath.Join(corpusDir, file))
		got := readGzip(t, filepath.Join(dir, file))
		if bytes.Equal(got, want) {
			continue
		}
		gs, ws := bufio.NewScanner(bytes.NewReader(got)), bufio.NewScanner(bytes.NewReader(want))
		gs.Buffer(nil, 64<<20)
		ws.Buffer(nil, 64<<20)
		for line := 1; ; line++ {
			g, w := gs.Scan(), ws.Scan()
			if !g || !w {
				t.Errorf("%s: regenerated corpus differs in length at line %d; regenerate with: node jsonvalue/testdata/gen/v8corpus.mjs jsonvalue/testdata/corpus", file, line)
				break
			}
			if !bytes.Equal(gs.Bytes(), ws.Bytes()) {
				t.Errorf("%s: line %d differs from the checked-in corpus:\n got  %s\n want %s", file, line, short(gs.Bytes()), short(ws.Bytes()))
				break
			}
		}
	}
}
