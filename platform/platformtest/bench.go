package platformtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// benchBody is a 200-byte JSON text, already normalized.
var benchBody = `{"kind":"page","url":"/release/x","pad":"` + strings.Repeat("x", 200-len(`{"kind":"page","url":"/release/x","pad":""}`)) + `"}`

// RunBenchmarks measures three kinds of work on a platform through the interface, each beside
// its baseline, the same work done through the platform contract alone (what the interface
// costs on top of the platform), in one run:
//
//   - Send: b.N calls of 发送队列消息 with a 200-byte body from one event, one after another,
//     beside b.N Queue.Send calls.
//   - SendBatch100: b.N calls of 批量发送队列消息 with 100 such bodies, beside Queue.SendBatch.
//   - RoundTrip: b.N messages sent one by one while a consumer (batches of up to 100, one at a
//     time) reads each batch in a Go handler that acks it implicitly, until the last is
//     settled; beside the same with Queue.Send, Consumer.Receive and Consumer.Settle.
//
// Each side runs on a platform of its own, and the two take turns (four each, in alternating
// order) so that drift in a shared machine's speed falls on both. Each reports msgs/s (through
// the interface), contract-msgs/s and %-of-contract (the first as a share of the second); ns/op
// is the interface's time per operation: a message, or a batch for SendBatch100. A driver runs
// it from its test file:
//
//	func BenchmarkPlatform(b *testing.B) { platformtest.RunBenchmarks(b, newHarness) }
//
// and go test -run '^$' -bench Platform ./platform/<driver>/ runs it.
func RunBenchmarks(b *testing.B, newHarness HarnessMaker) {
	ctx := context.Background()
	hn, err := newHarness(ctx, b)
	if err != nil {
		b.Fatalf("making harness: %v", err)
	}
	b.Cleanup(hn.Close)
	for _, bm := range []struct {
		name     string
		perOp    int                                      // messages per operation
		ours     func(b *testing.B, w *benchWorld, n int) // through the interface
		contract func(b *testing.B, w *benchWorld, n int) // the baseline
	}{
		{"Send", 1, benchSend, benchSendContract},
		{"SendBatch100", 100, benchSendBatch, benchSendBatchContract},
		{"RoundTrip", 1, benchRoundTrip, benchRoundTripContract},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.StopTimer() // making platforms is not the work measured
			w := [2]*benchWorld{newBenchWorld(b, hn), newBenchWorld(b, hn)}
			fns := [2]func(*testing.B, *benchWorld, int){bm.ours, bm.contract}
			var took [2]time.Duration
			b.ResetTimer()
			// The two sides take turns, in alternating order, on platforms of their own, so that
			// neither pays for what the other left behind and both see the same machine.
			for r := range benchRounds {
				n := b.N / benchRounds
				if r < b.N%benchRounds {
					n++
				}
				if n == 0 {
					continue
				}
				for _, side := range [2]int{r % 2, 1 - r%2} {
					if side == 0 {
						b.StartTimer()
					}
					start := time.Now()
					fns[side](b, w[side], n)
					took[side] += time.Since(start)
					b.StopTimer()
				}
			}
			msgs := float64(b.N * bm.perOp)
			b.ReportMetric(msgs/took[0].Seconds(), "msgs/s")
			b.ReportMetric(msgs/took[1].Seconds(), "contract-msgs/s")
			b.ReportMetric(100*took[1].Seconds()/took[0].Seconds(), "%-of-contract")
		})
	}
}

// benchRounds is how many turns each side of a comparison takes.
const benchRounds = 4

// benchWorld is one benchmark's platform, with a host whose binding B names queue "bench".
type benchWorld struct {
	ctx      context.Context
	p        platform.Platform
	h        *host.Host
	settled  atomic.Int64  // messages of events that ended, settled
	progress chan struct{} // a signal after every event
}

const benchQueue = "bench"

func newBenchWorld(b *testing.B, hn Harness) *benchWorld {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	p, err := hn.MakePlatform(ctx, b)
	if err != nil {
		b.Fatalf("MakePlatform: %v", err)
	}
	b.Cleanup(func() { _ = p.Close() })
	w := &benchWorld{ctx: ctx, p: p, progress: make(chan struct{}, 1)}
	w.h, err = host.New(host.Config{
		Platform:    p,
		Permissions: host.Permissions{Queue: []string{"B"}},
		Bindings:    map[string]string{"B": benchQueue},
		TimeLimit:   host.MaxTimeLimit,
		Logger:      slog.New(slog.DiscardHandler),
		Observer: func(r host.Report) {
			if er, ok := r.(*host.EventReport); ok && er.Kind == host.QueueEvent {
				w.settled.Add(int64(er.Batch))
				select {
				case w.progress <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Queue(ctx, benchQueue); err != nil {
		b.Fatalf("Queue(%s): %v", benchQueue, err)
	}
	return w
}

// produce runs fn in one event and fails the benchmark if the event fails.
func (w *benchWorld) produce(b *testing.B, fn func(ev *duilie.Event) error) {
	if err := w.h.Do(w.ctx, fn); err != nil {
		b.Fatal(err)
	}
}

func (w *benchWorld) queue(b *testing.B) platform.Queue {
	q, err := w.p.Queue(w.ctx, benchQueue)
	if err != nil {
		b.Fatal(err)
	}
	return q
}

var jsonOpts = platform.SendOptions{ContentType: platform.JSON}

func benchSend(b *testing.B, w *benchWorld, n int) {
	w.produce(b, func(ev *duilie.Event) error {
		for range n {
			if err := duilie.Send(ev, "B", benchBody, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

func benchSendContract(b *testing.B, w *benchWorld, n int) {
	q, body := w.queue(b), []byte(benchBody)
	for range n {
		if err := q.Send(w.ctx, body, jsonOpts); err != nil {
			b.Fatal(err)
		}
	}
}

// batchOf100 is a sendBatch text of 100 bodies, and the items the platform receives for it.
func batchOf100() (string, []platform.BatchItem) {
	text := make([]string, 100)
	its := make([]platform.BatchItem, 100)
	for i := range text {
		text[i] = `{"body":` + benchBody + `}`
		its[i] = platform.BatchItem{Body: []byte(benchBody), ContentType: platform.JSON}
	}
	return "[" + strings.Join(text, ",") + "]", its
}

func benchSendBatch(b *testing.B, w *benchWorld, n int) {
	text, _ := batchOf100()
	w.produce(b, func(ev *duilie.Event) error {
		for range n {
			if err := duilie.SendBatch(ev, "B", text); err != nil {
				return err
			}
		}
		return nil
	})
}

func benchSendBatchContract(b *testing.B, w *benchWorld, n int) {
	q := w.queue(b)
	_, its := batchOf100()
	for range n {
		if err := q.SendBatch(w.ctx, its); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRoundTrip(b *testing.B, w *benchWorld, n int) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	cc := host.DefaultConsumerConfig(benchQueue)
	cc.MaxBatchSize, cc.MaxBatchTimeout = 100, host.NoBatchTimeout
	consumed := make(chan error, 1)
	go func() {
		consumed <- w.h.Consume(ctx, cc, func(ev *duilie.Event) error {
			_, err := duilie.ReadBatch(ev)
			return err // nil: every message of the batch succeeds
		})
	}()
	want := w.settled.Load() + int64(n)
	benchSend(b, w, n)
	w.await(b, want, consumed)
	cancel()
	if err := <-consumed; err != nil {
		b.Fatal(err)
	}
}

// await waits until n messages in all have been settled.
func (w *benchWorld) await(b *testing.B, n int64, consumed <-chan error) {
	stall := time.NewTimer(time.Minute)
	defer stall.Stop()
	for w.settled.Load() < n {
		select {
		case <-w.progress:
			stall.Reset(time.Minute)
		case err := <-consumed:
			b.Fatalf("the consumer stopped after %d of %d messages: %v", w.settled.Load(), n, err)
		case <-stall.C:
			b.Fatalf("no progress for a minute at %d of %d messages", w.settled.Load(), n)
		}
	}
}

func benchRoundTripContract(b *testing.B, w *benchWorld, n int) {
	c, err := w.p.Consume(w.ctx, benchQueue, platform.ConsumerOptions{MaxBatchSize: 100, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		for seen := 0; seen < n; {
			ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
			ds, err := c.Receive(ctx, 100)
			waited := ctx.Err() != nil // a minute without a message, or the benchmark ended
			cancel()
			if err != nil {
				if !waited && !errors.Is(err, platform.ErrClosed) && !platform.IsPermanent(err) {
					// As the host's consumer does: a temporary failure (a cluster electing the
					// new consumer's leader) is asked again.
					time.Sleep(100 * time.Millisecond)
					continue
				}
				done <- fmt.Errorf("after %d of %d messages: %w", seen, n, err)
				return
			}
			s := platform.Settlement{Queue: benchQueue, Messages: make([]platform.Resolution, len(ds))}
			for i, d := range ds {
				s.Messages[i] = platform.Resolution{Delivery: d, Action: platform.Action{Kind: platform.Done}}
			}
			if err := c.Settle(w.ctx, s); err != nil {
				done <- err
				return
			}
			seen += len(ds)
		}
		done <- nil
	}()
	benchSendContract(b, w, n)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
