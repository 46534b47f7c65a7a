package jetstream

// Benchmarks of the embedded engine; docs/jetstream.md has the command and the numbers.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

const (
	benchProducers = 32
	benchBatch     = 100
)

// benchBody is a 200-byte JSON text.
var benchBody = `{"kind":"page","url":"/release/x","pad":"` + strings.Repeat("x", 200-len(`{"kind":"page","url":"/release/x","pad":""}`)) + `"}`

// BenchmarkEndToEnd sends b.N messages of 200 B and consumes them in batches of up to 100, once
// through duilie (duilie.Send from 32 concurrent producers → host consumer → a Go program →
// implicit ack, confirmed) and once with raw nats.go doing the same work on the same server (32
// producers publishing with js.Publish, a pull consumer, msg.Ack per message). It reports both
// rates and duilie's share of the raw rate.
func BenchmarkEndToEnd(b *testing.B) {
	p := open(b, Config{})
	n := b.N
	b.ResetTimer()
	raw := rawEndToEnd(b, p, n)
	ours := duilieEndToEnd(b, p, n)
	b.StopTimer()
	b.ReportMetric(raw, "raw-msgs/s")
	b.ReportMetric(ours, "duilie-msgs/s")
	b.ReportMetric(100*ours/raw, "duilie-%-of-raw")
}

func duilieEndToEnd(b *testing.B, p *Platform, n int) float64 {
	h, err := host.New(host.Config{Platform: p, Permissions: host.Permissions{Queue: []string{"B"}},
		Bindings: map[string]string{"B": "bench"}, TimeLimit: host.MaxTimeLimit, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	queueOf(b, p, "bench")
	var seen atomic.Int64
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc := host.DefaultConsumerConfig("bench")
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = benchBatch, 10*time.Millisecond, 4
	consumed := make(chan error, 1)
	go func() {
		consumed <- h.Consume(ctx, cc, func(ev *duilie.Event) error {
			text, err := duilie.ReadBatch(ev)
			if err != nil {
				return err
			}
			k := int64(strings.Count(text, `"id":`))
			if seen.Add(k) >= int64(n) {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return nil // implicit ack of the whole batch
		})
	}()
	start := time.Now()
	// Each producer is one program (a fetch event) sending its share.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchProducers {
		wg.Go(func() {
			err := h.Do(ctx, func(ev *duilie.Event) error {
				for next.Add(1) <= int64(n) {
					if err := duilie.Send(ev, "B", benchBody, 0); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	<-done
	elapsed := time.Since(start)
	cancel()
	<-consumed
	return float64(n) / elapsed.Seconds()
}

// produce runs send(i) for i in [0, n) on benchProducers goroutines.
func produce(n int, send func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchProducers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := send(i); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
}

func rawEndToEnd(b *testing.B, p *Platform, n int) float64 {
	nc, err := nats.Connect("", nats.InProcessServer(p.srv))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if seen.Add(1) == int64(n) {
			close(done)
		}
	}, jetstream.PullMaxMessages(2*benchBatch))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	body := []byte(benchBody)
	start := time.Now()
	produce(n, func(int) error { _, err := js.Publish(ctx, "raw", body); return err })
	<-done
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkSend measures sends through the platform (what duilie.Send does after its checks):
// the latency of one producer's sends, and the rate of 32 concurrent producers, on the embedded
// engine with sync = "interval" and "always", and on a 3-node in-process cluster with R3 streams.
func BenchmarkSend(b *testing.B) {
	for _, tc := range []struct {
		name string
		make func(b *testing.B) *Platform
	}{
		{"interval", func(b *testing.B) *Platform { return open(b, Config{}) }},
		{"always", func(b *testing.B) *Platform { return open(b, Config{Sync: SyncAlways}) }},
		{"cluster-r3", func(b *testing.B) *Platform {
			return open(b, Config{URL: startCluster(b, 1).url(0), Replicas: 3})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := tc.make(b)
			q := queueOf(b, p, "bench")
			ctx := context.Background()
			opts := platform.SendOptions{ContentType: platform.JSON}
			body := []byte(benchBody)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if err := q.Send(ctx, body, opts); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			start := time.Now()
			produce(b.N, func(int) error { return q.Send(ctx, body, opts) })
			rate := float64(b.N) / time.Since(start).Seconds()
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds()), "p99.9-µs")
			b.ReportMetric(rate, "sends/s-32-producers")
		})
	}
}

// fixedWorkload runs a benchmark's workload once, whatever b.N: its size is fixed (n messages
// due over a window, n pending), so -benchtime Nx, which sets the message count of the package's
// other benchmarks, must not repeat it N times. The testing package calls a benchmark that uses
// b.Loop only once; the iterations after the first are empty, and ns/op, which they would make
// meaningless, is suppressed: what counts is the metrics run reports.
func fixedWorkload(b *testing.B, run func()) {
	for first := true; b.Loop(); first = false {
		if first {
			run()
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDelayedLateness enqueues delayed messages due uniformly over a window (all pending
// before the first is due), consumes them through the host with max_batch_timeout 0, and reports
// how late each arrived in the program: 10k over 10 s, and, with DUILIE_BENCH_LONG=1, 100k over
// 60 s and 200k over 120 s. Delays are any duration here (the interface's are whole seconds) so that due times spread
// evenly.
func BenchmarkDelayedLateness(b *testing.B) {
	cases := []struct {
		n      int
		window time.Duration
	}{{10_000, 10 * time.Second}}
	if os.Getenv("DUILIE_BENCH_LONG") == "1" {
		cases = append(cases, struct {
			n      int
			window time.Duration
		}{100_000, 60 * time.Second}, struct {
			n      int
			window time.Duration
		}{200_000, 120 * time.Second})
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%dk-over-%v", tc.n/1000, tc.window), func(b *testing.B) {
			fixedWorkload(b, func() { lateness(b, tc.n, tc.window) })
		})
	}
}

func lateness(b *testing.B, n int, window time.Duration) {
	p := open(b, Config{})
	q, err := p.queue(context.Background(), "late")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	late := make([]time.Duration, 0, n)
	done := make(chan struct{})
	// The host reports each message's lag: from its due time to its handler's start.
	observe := func(r host.Report) {
		er, ok := r.(*host.EventReport)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range er.Messages {
			late = append(late, m.Lag)
		}
		if len(late) == n {
			close(done)
		}
	}
	h, err := host.New(host.Config{Platform: p, TimeLimit: host.MaxTimeLimit, Logger: quiet, Observer: observe})
	if err != nil {
		b.Fatal(err)
	}
	lead := time.Second + time.Duration(n)*100*time.Microsecond // time to enqueue them all
	first := time.Now().Add(lead)
	for range n {
		due := first.Add(time.Duration(rand.Int64N(int64(window))))
		m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()},
			strconv.AppendInt(nil, due.UnixNano(), 10), time.Until(due))
		if _, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("enqueueing took over a minute")
	}
	if time.Now().After(first) {
		b.Fatalf("enqueueing %d took longer than the %v allowed", n, lead)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc := host.DefaultConsumerConfig("late")
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = 100, host.NoBatchTimeout, 4
	go h.Consume(ctx, cc, func(ev *duilie.Event) error { return nil })
	select {
	case <-done:
	case <-time.After(lead + window + time.Minute):
		b.Fatalf("only %d of %d delayed messages arrived", len(late), n)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(late)
	b.ReportMetric(float64(late[0].Milliseconds()), "min-ms")
	b.ReportMetric(float64(late[len(late)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(late[len(late)-1].Milliseconds()), "max-ms")
}

// BenchmarkPendingHeap measures the heap (the embedded server's included: it runs in this
// process) that 100k pending delayed messages hold, per message.
func BenchmarkPendingHeap(b *testing.B) {
	const n = 100_000
	fixedWorkload(b, func() {
		p := open(b, Config{})
		q, err := p.queue(context.Background(), "heap")
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()},
				[]byte(benchBody), time.Hour+time.Duration(i)*time.Millisecond)
			if _, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		<-p.js.PublishAsyncComplete()
		eventually(b, 10*time.Second, func() error {
			if st := stats(b, p); len(st) != 1 || st[0].Delayed != n {
				return fmt.Errorf("stats %+v, want %d pending", st, n)
			}
			return nil
		})
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/pending")
		p.Close()
	})
}

// BenchmarkBatchDesigns weighs ways to store a batch of 100 all or nothing, sending only (the
// consumer side is the same for all three), 32 producers, b.N batches of 100 × 200 B each, the
// designs taking turns on one engine:
//
//   - atomic: JetStream's atomic batch (what duilie did before batch.go): the messages with
//     Nats-Batch-Id and Nats-Batch-Sequence, the last one committing and asking for the reply;
//   - envelope: Queue.SendBatch, the batch stored first as one message on a subject no
//     consumer reads (the commit point), then its messages published in a pipeline with
//     deduplication ids, then the envelope deleted (batch.go);
//   - pipelined: the messages published in a pipeline with deduplication ids and nothing else
//     (not all or nothing: a failure in the middle leaves part of the batch).
//
// It reports each design's msgs/s.
func BenchmarkBatchDesigns(b *testing.B) {
	p := open(b, Config{})
	q, err := p.queue(context.Background(), "designs")
	if err != nil {
		b.Fatal(err)
	}
	st, err := p.js.Stream(context.Background(), streamName("designs"))
	if err != nil {
		b.Fatal(err)
	}
	items := make([]platform.BatchItem, benchBatch)
	for i := range items {
		items[i] = platform.BatchItem{Body: []byte(benchBody), ContentType: platform.JSON}
	}
	build := func(id string) []*nats.Msg {
		ms := make([]*nats.Msg, len(items))
		now := time.Now().UnixMilli()
		for i, it := range items {
			ms[i] = q.message(envelope{id: platform.NewMessageID(), time: now, ctype: it.ContentType}, it.Body, 0)
			ms[i].Header[hdrMsgID] = []string{id + "." + strconv.Itoa(i)}
		}
		return ms
	}
	pipeline := func(ctx context.Context, ms []*nats.Msg) error {
		fs := make([]jetstream.PubAckFuture, len(ms))
		for i, m := range ms {
			f, err := p.js.PublishMsgAsync(m)
			if err != nil {
				return err
			}
			fs[i] = f
		}
		for _, f := range fs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	designs := []struct {
		name string
		send func(ctx context.Context) error
	}{
		{"atomic", func(ctx context.Context) error {
			ms := build(platform.NewMessageID())
			id := nuid.Next()
			for i, m := range ms {
				delete(m.Header, hdrMsgID)
				m.Header["Nats-Batch-Id"] = []string{id}
				m.Header["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
			}
			commit := ms[len(ms)-1]
			commit.Header["Nats-Batch-Commit"] = []string{"1"}
			for _, m := range ms[:len(ms)-1] {
				if err := p.nc.PublishMsg(m); err != nil {
					return err
				}
			}
			r, err := p.nc.RequestMsgWithContext(ctx, commit)
			if err != nil {
				return err
			}
			if !strings.Contains(string(r.Data), `"count":100`) {
				return fmt.Errorf("batch not stored: %s", r.Data)
			}
			return nil
		}},
		{"envelope", func(ctx context.Context) error { return q.SendBatch(ctx, items) }},
		{"pipelined", func(ctx context.Context) error { return pipeline(ctx, build(platform.NewMessageID())) }},
	}
	took := make([]time.Duration, len(designs))
	ctx := context.Background()
	b.ResetTimer()
	for round := range 2 {
		for i := range designs {
			d := designs[(i+round)%len(designs)]
			start := time.Now()
			produce(max(b.N/2, 1), func(int) error { return d.send(ctx) })
			took[(i+round)%len(designs)] += time.Since(start)
			if err := st.Purge(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	for i, d := range designs {
		b.ReportMetric(float64(2*max(b.N/2, 1)*benchBatch)/took[i].Seconds(), d.name+"-msgs/s")
	}
}

// BenchmarkSendParts splits the cost of Queue.Send (issue 10, item 1): 32 producers publish b.N
// messages of 200 B synchronously, twice each, the parts taking turns on one engine, to a plain
// work-queue stream, to it with duilie's headers (Duilie-Id, -Time, -Type), to a queue's stream
// (duilie's stream configuration: schedules, atomic publish and TTLs allowed, a two-minute
// duplicate window) without headers, and through Queue.Send (headers, the disk-space check, the
// acknowledgement bounded at 5 s). It reports each rate.
func BenchmarkSendParts(b *testing.B) {
	p := open(b, Config{})
	ctx := context.Background()
	q, err := p.queue(ctx, "parts")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	body := []byte(benchBody)
	parts := []struct {
		name string
		send func() error
	}{
		{"plain", func() error { _, err := p.js.Publish(ctx, "plain", body); return err }},
		{"plain+headers", func() error {
			m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()}, body, 0)
			m.Subject = "plain"
			_, err := p.js.PublishMsg(ctx, m)
			return err
		}},
		{"queue-stream", func() error { _, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: q.ready, Data: body}); return err }},
		{"Queue.Send", func() error { return q.Send(ctx, body, platform.SendOptions{ContentType: platform.JSON}) }},
	}
	took := make([]time.Duration, len(parts))
	b.ResetTimer()
	for range 2 {
		for i, part := range parts {
			start := time.Now()
			produce(b.N, func(int) error { return part.send() })
			took[i] += time.Since(start)
		}
	}
	b.StopTimer()
	for i, part := range parts {
		b.ReportMetric(float64(2*b.N)/took[i].Seconds(), part.name+"-msgs/s")
	}
}
