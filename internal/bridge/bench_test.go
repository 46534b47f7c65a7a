package bridge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// BenchmarkScriptConsumer measures bridge throughput: messages per second consumed by
// testdata/consumer.py, a Python program run once per batch of 100 that reads its batch and
// acks each message with its own call (101 bridge calls per event), then exits 0. One op is one
// batch; msgs/s is the number to read. The ack=implicit variants only read the batch (one call)
// and let exit 0 succeed every message, which shows what the process start costs. Run it with
//
//	go test -run '^$' -bench ScriptConsumer -benchtime 50x ./bridge/
func BenchmarkScriptConsumer(b *testing.B) {
	for _, v := range []struct {
		ack  string
		conc int
	}{{"each", 1}, {"each", 4}, {"implicit", 1}} {
		b.Run(fmt.Sprintf("ack=%s/concurrency=%d", v.ack, v.conc), func(b *testing.B) {
			e := newEnv(b, 0)
			p := &Runner{Command: []string{e.python, filepath.Join(testdata, "consumer.py")}, Dir: testdata, Bridge: e.bridge, Logger: e.log}
			if v.ack == "implicit" {
				p.Env = []string{"ACK=none"}
			}
			conc := v.conc
			cc := host.DefaultConsumerConfig("bench")
			cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = 100, host.NoBatchTimeout, conc
			total := b.N * 100
			msgs := make([]platform.Message, total)
			for i := range msgs {
				msgs[i] = platform.Message{ID: fmt.Sprint(i), Timestamp: 1, Attempts: 1, Body: []byte(`{"kind":"page","url":"/release/x","version":"v8"}`), ContentType: platform.JSON}
			}
			e.plat.Put("bench", msgs...)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() { done <- e.host.Consume(ctx, cc, p.Queue) }()
			settled, acked := 0, 0
			for settled < total {
				time.Sleep(2 * time.Millisecond)
				settled, acked = 0, 0
				for _, s := range e.plat.Settlements() {
					for _, r := range s.Messages {
						settled++
						if r.Call.Kind == platform.AckCall {
							acked++
						}
					}
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if v.ack == "each" && acked != total {
				b.Fatalf("%d of %d messages acked", acked, total)
			}
			b.ReportMetric(float64(total)/elapsed.Seconds(), "msgs/s")
		})
	}
}

// BenchmarkBridgeCall measures one bridge call (确认队列消息) over a kept-alive connection from
// this process: the bridge's own share of a script's call.
func BenchmarkBridgeCall(b *testing.B) {
	plat := memory.New(memory.Options{})
	defer plat.Close()
	h, err := host.New(host.Config{Platform: plat, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ds := []platform.Delivery{{Message: platform.Message{ID: "a", Attempts: 1, Body: []byte("1"), ContentType: platform.JSON}}}
	_, _ = h.RunBatch(context.Background(), host.DefaultConsumerConfig("in"), ds, func(ev *duilie.Event) error {
		url, closeURL := s.Open(ev, nil)
		defer closeURL()
		body := []byte(`["确认队列消息",0]`)
		for b.Loop() {
			resp, err := http.Post(url, "", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
		return nil
	})
}
