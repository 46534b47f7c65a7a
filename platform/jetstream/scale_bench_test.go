package jetstream

// BenchmarkPendingDelayed: many pending delayed messages on one embedded node (docs/delays-at-scale.md
// has the command and the figures). Opt-in: it runs only with DUILIE_BENCH_PENDING set.

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// BenchmarkPendingDelayed enqueues DUILIE_BENCH_PENDING (for example 200000 or 10000000)
// delayed messages of 200 B on one queue, due uniformly between DUILIE_BENCH_LEAST (default
// 5m, so that none falls due while they are enqueued) and DUILIE_BENCH_SPREAD (default 12h) from
// now; reports the enqueue time, the peak RSS (VmHWM),
// the RSS and Go heap after a GC, the data directory's size; closes and reopens the platform
// (restart time: Open until stats count them all again, and the peak RSS of the reopened
// engine); then adds two slices of 10,000 messages to the same queue, due over 10 s from 3 s
// and from 2 min 5 s on (the second held, then moved: hold.go), consumes through the host and
// reports their lateness (due time to the handler's start). Delays under 2 min are scheduled,
// longer ones held, as in production. DUILIE_BENCH_SCHEDULE_ALL=1 schedules every delay (the
// design before hold.go) for comparison. DUILIE_BENCH_AFTER (a duration) keeps consuming that
// much longer, so that buckets of the pending messages fall due and are moved, and reports their
// lateness, logging the RSS and the held counts every 15 s (see scheduleAll for the holding
// knobs). With DUILIE_BENCH_HEAPPROFILE
// set to a path it writes a heap profile there after the enqueue. DUILIE_BENCH_DIR, if set, is
// the parent of the data directory (default: the test's temporary directory, removed after).
//
//	DUILIE_BENCH_PENDING=1000000 go test ./platform/jetstream/ -run '^$' -bench PendingDelayed -benchtime 1x -timeout 2h -v
//
// (-v: without it the testing package keeps only the log's first lines.)
func BenchmarkPendingDelayed(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("DUILIE_BENCH_PENDING"))
	if n <= 0 {
		b.Skip("set DUILIE_BENCH_PENDING to the number of pending delayed messages")
	}
	least, spread := 5*time.Minute, 12*time.Hour
	for name, d := range map[string]*time.Duration{"DUILIE_BENCH_LEAST": &least, "DUILIE_BENCH_SPREAD": &spread} {
		if s := os.Getenv(name); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				b.Fatal(err)
			}
			*d = v
		}
	}
	fixedWorkload(b, func() { pendingDelayed(b, n, least, spread) })
}

func pendingDelayed(b *testing.B, n int, least, spread time.Duration) {
	parent := os.Getenv("DUILIE_BENCH_DIR")
	if parent == "" {
		parent = b.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "pending-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := Config{DataDir: dir, Logger: quiet}
	ctx := context.Background()
	resetPeakRSS()
	p, err := Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	scheduleAll(p)
	q, err := p.queue(ctx, "big")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(benchBody)
	start := time.Now()
	for i := range n {
		delay := least + time.Duration(rand.Int64N(int64(spread-least)))
		m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()}, body, delay)
		if _, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
		if i%1_000_000 == 999_999 {
			b.Logf("%d enqueued in %v, RSS %s", i+1, time.Since(start).Round(time.Second), procStatus("VmRSS"))
		}
	}
	<-p.js.PublishAsyncComplete()
	waitDelayed(b, p, n, 10*time.Minute)
	enqueue := time.Since(start)
	peak := procStatus("VmHWM")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := procStatus("VmRSS")
	if path := os.Getenv("DUILIE_BENCH_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	t0 := time.Now()
	p.Close()
	closing := time.Since(t0)
	disk := dirSize(dir)
	b.Logf("%d pending: enqueue %v (%.0f/s), peak RSS %s, after GC RSS %s heap %d MiB, close %v, disk %d MiB",
		n, enqueue.Round(time.Millisecond), float64(n)/enqueue.Seconds(), peak, rss, ms.HeapAlloc>>20, closing.Round(time.Millisecond), disk>>20)

	// Restart.
	runtime.GC()
	resetPeakRSS()
	t0 = time.Now()
	p, err = Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	scheduleAll(p)
	opened := time.Since(t0)
	waitDelayed(b, p, n, 10*time.Minute)
	restart := time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.Logf("restart: Open %v, counted %v, peak RSS %s, after GC RSS %s heap %d MiB",
		opened.Round(time.Millisecond), restart.Round(time.Millisecond), procStatus("VmHWM"), procStatus("VmRSS"), ms.HeapAlloc>>20)

	// Lateness of two slices among the pending: one due within seconds (stored as schedules
	// from the start), one due in about 2 minutes (held, then moved by the mover).
	const soon, window = 10_000, 10 * time.Second
	slicesAt := []time.Duration{3 * time.Second, defaultHolding.after + 5*time.Second}
	q, err = p.queue(ctx, "big")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	late := make([][]time.Duration, len(slicesAt))
	sliceOf := map[string]int{}
	var others []time.Duration // the pending ones that fall due meanwhile
	left := len(slicesAt) * soon
	done := make(chan struct{})
	observe := func(r host.Report) {
		er, ok := r.(*host.EventReport)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range er.Messages {
			if k, ok := sliceOf[m.ID]; ok {
				late[k] = append(late[k], m.Lag)
				if left--; left == 0 {
					close(done)
				}
			} else {
				others = append(others, m.Lag)
			}
		}
	}
	h, err := host.New(host.Config{Platform: p, TimeLimit: host.MaxTimeLimit, Logger: quiet, Observer: observe})
	if err != nil {
		b.Fatal(err)
	}
	sent := time.Now()
	for k, at := range slicesAt {
		first := sent.Add(at)
		for range soon {
			due := first.Add(time.Duration(rand.Int64N(int64(window))))
			id := platform.NewMessageID()
			mu.Lock()
			sliceOf[id] = k
			mu.Unlock()
			m := q.message(envelope{id: id, time: time.Now().UnixMilli()}, body, time.Until(due))
			if _, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	}
	<-p.js.PublishAsyncComplete()
	if time.Since(sent) > slicesAt[0] {
		b.Fatalf("enqueueing the slices took longer than %v", slicesAt[0])
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := host.DefaultConsumerConfig("big")
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = 100, host.NoBatchTimeout, 4
	go h.Consume(cctx, cc, func(ev *duilie.Event) error { return nil })
	select {
	case <-done:
	case <-time.After(slicesAt[len(slicesAt)-1] + window + time.Minute):
		b.Fatalf("%d of the slices' delayed messages did not arrive", left)
	}
	if d, err := time.ParseDuration(os.Getenv("DUILIE_BENCH_AFTER")); err == nil {
		// Keep consuming: buckets of the pending messages fall due and are moved.
		sctx, stop := context.WithCancel(ctx)
		go sampleHeld(sctx, b, p, "big")
		time.Sleep(d)
		stop()
		mu.Lock()
		if l := others; len(l) > 0 {
			slices.Sort(l)
			b.Logf("%d of the pending delivered by the end: lateness min %v p50 %v p99 %v max %v", len(l),
				l[0], l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
		}
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	for k, l := range late {
		slices.Sort(l)
		b.Logf("lateness of %d due over %v from +%v among %d pending: min %v p50 %v p99 %v max %v", soon, window, slicesAt[k], n,
			l[0], l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
		b.ReportMetric(float64(l[0].Milliseconds()), fmt.Sprintf("min-ms-%d", k))
		b.ReportMetric(float64(l[len(l)*99/100].Milliseconds()), fmt.Sprintf("p99-ms-%d", k))
	}
	b.Logf("peak RSS since the restart %s", procStatus("VmHWM"))
	b.ReportMetric(enqueue.Seconds(), "enqueue-s")
	b.ReportMetric(float64(kib(peak))/1024, "peak-RSS-MiB")
	b.ReportMetric(float64(disk>>20), "disk-MiB")
	b.ReportMetric(restart.Seconds(), "restart-s")
}

// scheduleAll makes p schedule every delay, as before hold.go, with DUILIE_BENCH_SCHEDULE_ALL=1.
// DUILIE_BENCH_NEAR_ONLY=1 holds every long delay on minute buckets (no far buckets: the design
// before them); DUILIE_BENCH_FAR_HORIZON (a duration) sets how long before its hour a far bucket
// is held again on minute buckets (default 1h), so that a run can see one fall due.
func scheduleAll(p *Platform) {
	if os.Getenv("DUILIE_BENCH_SCHEDULE_ALL") == "1" {
		p.holding.after = 24 * time.Hour
	}
	if os.Getenv("DUILIE_BENCH_NEAR_ONLY") == "1" {
		p.holding.farBucket = 0
	}
	if d, err := time.ParseDuration(os.Getenv("DUILIE_BENCH_FAR_HORIZON")); err == nil {
		p.holding.farHorizon = d
	}
}

// sampleHeld logs, every 15 s until ctx ends, the RSS, the Go heap and how many messages wait on
// the queue's far and near holding subjects.
func sampleHeld(ctx context.Context, b *testing.B, p *Platform, queue string) {
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		count := func(filter string) uint64 {
			st, err := p.js.Stream(ctx, streamName(queue))
			if err != nil {
				return 0
			}
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
			if err != nil {
				return 0
			}
			var n uint64
			for _, c := range info.State.Subjects {
				n += c
			}
			return n
		}
		b.Logf("%s RSS %s, heap %d MiB; held: far %d, near %d", time.Now().UTC().Format("15:04:05"), procStatus("VmRSS"), ms.HeapAlloc>>20,
			count(farFilter(queue)), count(holdFilter(queue)))
	}
}

// waitDelayed waits until the queue's stats count n messages (delayed ones, or ready: those
// that fell due meanwhile).
func waitDelayed(b *testing.B, p *Platform, n int, limit time.Duration) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := p.queueStats(context.Background(), "big")
		if err == nil && st.Delayed+st.Ready >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("stats %+v (%v) after %v, want %d delayed", st, err, limit, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procStatus returns a line's value of /proc/self/status ("123456 kB"), or "?".
func procStatus(key string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func kib(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return n
}

// resetPeakRSS resets VmHWM to the current RSS (Linux: clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
