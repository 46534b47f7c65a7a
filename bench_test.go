package duilie_test

import (
	"strings"
	"testing"

	"github.com/duilie/duilie"
)

// BenchmarkCheckBatch: checking a batch of 100 messages of 200 B, as duilie bench's producers
// send it, is part of every SendBatch's cost (docs/bench.md).
func BenchmarkCheckBatch(b *testing.B) {
	item := `{"body":"` + strings.Repeat("x", 198) + `"}`
	text := []byte("[" + strings.Repeat(item+",", 99) + item + "]")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := duilie.CheckBatch(text); err != nil {
			b.Fatal(err)
		}
	}
}
