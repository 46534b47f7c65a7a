package jsonvalue

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The four benchmark payloads live in testdata/bench, where node's side of
// the comparison reads them too. They are made by benchPayloads, and
// TestBenchPayloads keeps the files equal to it (rewrite them with -update).

var update = flag.Bool("update", false, "rewrite testdata/bench payloads")

const benchDir = "testdata/bench"

var benchNames = []string{"a_task.json", "b_mixed.json", "c_strings.json", "d_numbers.json"}

// benchPayloads deterministically builds the four payloads.
func benchPayloads() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields(`release render page queue message batch consumer
		deploy version refresh retry delay attempts binding permission platform
		host event value marker nested object array string number boolean`)
	cjk := []string{"队列", "消息", "发送", "批量", "确认", "重试", "延迟", "平台", "宿主", "规范", "文字", "嵌套"}
	emoji := []string{"😀", "🚀", "✅", "🎉", "📦"}
	// sentence makes n words; with mix, some are CJK, emoji or escapes; with
	// escapes, some are ASCII escapes (the text stays ASCII).
	sentence := func(n int, mix, escapes bool) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			switch k := r.IntN(20); {
			case mix && k == 0:
				b.WriteString(emoji[r.IntN(len(emoji))])
			case mix && k < 4:
				b.WriteString(cjk[r.IntN(len(cjk))])
			case (mix || escapes) && k == 4:
				b.WriteString(`\"quoted\"`)
			case (mix || escapes) && k == 5:
				b.WriteString(`line\nbreak\ttab`)
			case mix && k == 6:
				b.WriteString(`\u00e9\u4e2d\ud83d\ude00`)
			default:
				b.WriteString(words[r.IntN(len(words))])
			}
		}
		return b.String()
	}
	out := map[string][]byte{}

	out["a_task.json"] = []byte(`{"kind":"page","url":"/release/x","version":"v8","refresh":true,` +
		`"priority":3,"attempt":1,"tags":["release","render","cdn"],"requestedBy":"ci@duilie.dev",` +
		`"ts":1718000000000,"region":"eu-west","traceId":"4bf92f3577b34da6"}`)

	var b bytes.Buffer
	b.WriteString(`{"id":"msg-000042","kind":"report","title":"`)
	b.WriteString(sentence(12, true, false))
	b.WriteString(`","sections":[`)
	for i := range 16 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"%s","weight":%d,"ratio":%s,"ok":%v,"notes":["%s","%s"],"matrix":[[%d,%d],[%d,%d,%d]],"meta":{"owner":"%s","path":"/a/b/c","empty":null}}`,
			sentence(3, true, false), r.IntN(1000), strconv.FormatFloat(r.Float64(), 'g', 6, 64), r.IntN(2) == 1,
			sentence(6, true, false), sentence(4, true, false), r.IntN(100), r.IntN(100), r.IntN(100), r.IntN(100), r.IntN(100), sentence(2, true, false))
	}
	b.WriteString(`],"footer":"`)
	b.WriteString(sentence(10, true, false))
	b.WriteString(`"}`)
	out["b_mixed.json"] = bytes.Clone(b.Bytes())

	b.Reset()
	b.WriteString(`{"documents":[`)
	for i := 0; b.Len() < 124000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"doc-%05d","title":"%s","body":"%s","summary":"%s","author":"%s"}`,
			i, sentence(6, false, false), sentence(60+r.IntN(60), false, i%4 == 0), sentence(20, false, false), sentence(2, false, false))
	}
	b.WriteString(`]}`)
	out["c_strings.json"] = bytes.Clone(b.Bytes())

	b.Reset()
	b.WriteByte('[')
	for i := 0; b.Len() < 126000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%d,%s,%s,%s,%s]",
			i, 1718000000000+int64(i)*1337,
			strconv.FormatFloat(math.Round(r.Float64()*10000)/100, 'f', -1, 64),
			strconv.FormatFloat(r.NormFloat64()*180, 'g', -1, 64),
			strconv.FormatFloat(r.Float64()*1e-3, 'g', 8, 64),
			strconv.Itoa(r.IntN(2000000)-1000000))
	}
	b.WriteByte(']')
	out["d_numbers.json"] = bytes.Clone(b.Bytes())
	return out
}

func TestBenchPayloads(t *testing.T) {
	want := benchPayloads()
	for _, name := range benchNames {
		file := filepath.Join(benchDir, name)
		if *update {
			if err := os.WriteFile(file, want[name], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s differs from benchPayloads(); rewrite with go test -run TestBenchPayloads -update", file)
		}
		if _, _, err := Append(nil, got); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}

// TestAppendAllocs checks that Append allocates nothing on the payloads when
// dst has room.
func TestAppendAllocs(t *testing.T) {
	for _, name := range benchNames {
		src := loadPayload(t, name)
		dst := make([]byte, 0, 2*len(src))
		if n := testing.AllocsPerRun(10, func() { Append(dst, src) }); n != 0 {
			t.Errorf("%s: %v allocations per Append", name, n)
		}
	}
}

func loadPayload(tb testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join(benchDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func benchAppend(b *testing.B, name string) {
	src := loadPayload(b, name)
	dst := make([]byte, 0, 2*len(src)+64)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		out, _, err := Append(dst[:0], src)
		if err != nil {
			b.Fatal(err)
		}
		dst = out
	}
}

func benchValid(b *testing.B, name string) {
	src := loadPayload(b, name)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(src) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, name := range benchNames {
		b.Run(strings.TrimSuffix(name, ".json"), func(b *testing.B) { benchAppend(b, name) })
	}
}

// BenchmarkTreePath measures the path taken by documents with an object
// whose keys V8 reorders or deduplicates (on top of the one-pass attempt).
func BenchmarkTreePath(b *testing.B) {
	for _, name := range benchNames {
		b.Run(strings.TrimSuffix(name, ".json"), func(b *testing.B) {
			src := loadPayload(b, name)
			dst := make([]byte, 0, 2*len(src)+64)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _, _, _ = appendTree(dst[:0], src)
			}
		})
	}
}

func BenchmarkJSONValid(b *testing.B) {
	for _, name := range benchNames {
		b.Run(strings.TrimSuffix(name, ".json"), func(b *testing.B) { benchValid(b, name) })
	}
}

// TestCompareNode prints, for each payload, the throughput of Append, of
// node's Buffer.from(JSON.stringify(JSON.parse(buf.toString()))) and of
// json.Valid, measured in one run. It runs only when asked:
//
//	DUILIE_COMPARE=1 go test -run TestCompareNode -v ./jsonvalue/
func TestCompareNode(t *testing.T) {
	if os.Getenv("DUILIE_COMPARE") == "" {
		t.Skip("set DUILIE_COMPARE=1 to compare with node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	// node measures one payload per run, between the Go measurements of the
	// payloads, so that all three see about the same load.
	nodeMBs := func(name string) float64 {
		out, err := exec.Command(node, filepath.Join(benchDir, "node_bench.mjs"), benchDir, name).Output()
		if err != nil {
			t.Fatalf("node_bench.mjs: %v", err)
		}
		var r map[string]float64
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("node_bench.mjs printed %q: %v", out, err)
		}
		return r[name]
	}
	mbs := func(r testing.BenchmarkResult) float64 {
		return float64(r.Bytes) * float64(r.N) / r.T.Seconds() / 1e6
	}
	t.Logf("%-16s %8s %8s %8s %10s %9s %12s", "payload", "bytes", "duilie", "node", "json.Valid", "vs node", "allocs/op")
	// The best of three runs, as node_bench.mjs does, to damp the noise of a
	// shared machine.
	best := func(f func(*testing.B)) (mb float64, allocs int64) {
		for range 3 {
			r := testing.Benchmark(f)
			if m := mbs(r); m > mb {
				mb, allocs = m, r.AllocsPerOp()
			}
		}
		return mb, allocs
	}
	for _, name := range benchNames {
		d, allocs := best(func(b *testing.B) { benchAppend(b, name) })
		v, _ := best(func(b *testing.B) { benchValid(b, name) })
		n := nodeMBs(name)
		t.Logf("%-16s %8d %8.0f %8.0f %10.0f %8.2fx %12d", name, len(loadPayload(t, name)), d, n, v, d/n, allocs)
	}
	t.Log("MB/s (10^6 bytes of input per second, best of 3); duilie: Append into a reused buffer")
}
