package jetstream

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// BenchmarkBrowse reads a queue of 10,000 messages of 200 B on the embedded engine, a page of
// 100 and the whole queue, two ways side by side: Browse (batched direct gets, what duilie
// does) and the baseline a client without them has, one stream message get per message
// (nats.go Stream.GetMsg by next subject). Run:
//
//	go test ./platform/jetstream -run '^$' -bench Browse -benchtime 20x
func BenchmarkBrowse(b *testing.B) {
	ctx := context.Background()
	p, err := Open(ctx, Config{DataDir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	q, err := p.queue(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	const total = 10000
	items := make([]platform.BatchItem, 100)
	for i := range items {
		items[i] = platform.BatchItem{Body: []byte(benchBody), ContentType: platform.JSON}
	}
	for range total / len(items) {
		if err := q.SendBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	st, err := p.js.Stream(ctx, streamName("bench"))
	if err != nil {
		b.Fatal(err)
	}
	oneByOne := func(n int) int {
		got, seq := 0, uint64(1)
		for got < n {
			m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(readySubject("bench")))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			got, seq = got+1, m.Sequence+1
		}
		return got
	}
	browse := func(n int) int {
		got, cursor := 0, ""
		for got < n {
			page, err := p.Browse(ctx, "bench", platform.BrowseOptions{Limit: min(n-got, platform.MaxBrowseLimit), Cursor: cursor})
			if err != nil {
				b.Fatal(err)
			}
			got += len(page.Messages)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		return got
	}
	for _, n := range []int{100, total} {
		for _, way := range []struct {
			name string
			read func(int) int
		}{{"batched", browse}, {"one-by-one", oneByOne}} {
			b.Run(way.name+"/"+map[int]string{100: "page100", total: "all10k"}[n], func(b *testing.B) {
				for b.Loop() {
					if got := way.read(n); got != n {
						b.Fatalf("read %d messages, want %d", got, n)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
