package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/server"
)

// benchOptions are bench's flags.
type benchOptions struct {
	configPath    string
	producers     int
	batch         int
	size          int
	count         int
	duration      time.Duration
	consumerBatch int
	concurrency   int
	delayed       float64
	delay         int
	sync          string
	json          bool
	compareRaw    bool
	prefill       bool
	cpuProfile    string
}

func newBench() *cobra.Command {
	o := benchOptions{}
	c := &cobra.Command{
		Use:                   "bench [flags]",
		DisableFlagsInUseLine: true,
		Short:                 "Measure sending and consuming on the configured platform, or on a temporary engine",
		Long: `bench measures what duilie does with many messages, as nats bench does for NATS: producers
send messages through the interface (发送队列消息, or 批量发送队列消息 with --batch N > 1), each
producer one fetch event, while a consumer runs a Go program in-process that reads each batch
and returns (an implicit ack, confirmed by the engine). With --config it runs on the configured
platform, in a queue of its own that it deletes afterwards; without, on the embedded engine in
a temporary directory (removed at the end).

It shows progress on stderr, then a table: the send rate (messages accepted per second while
producing), the end-to-end rate (messages settled per second, from the first send to the last
settlement), latency percentiles of the send call (one Send, or one SendBatch) and of enqueue →
handler start as the host reports it (for delayed messages, due time → handler start), the
CPU time of this process per message (user + system, getrusage; the embedded engine runs in
this process) and the process's peak RSS so far.

--compare-raw then does the same work with raw nats.go on the same server, each in a stream of
its own: producers with synchronous js.Publish (one acknowledgement waited for per message),
and with PublishAsync (a window of 4096 acknowledgements; with --batch N, waiting for the N
acknowledgements of each batch), consumed by a pull consumer that acks each message without
waiting for a confirmation; and prints duilie's rates as a share of each.`,
		Example: `  duilie bench                                # 100,000 messages of 200 B, 32 producers, Send
  duilie bench --batch 100 --compare-raw      # SendBatch of 100 beside raw nats.go
  duilie bench --duration 30s --delayed 0.1 --config duilie.toml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			return runBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVar(&o.configPath, "config", "", "configuration file whose platform to measure (default: a temporary embedded engine)")
	f.IntVar(&o.producers, "producers", 32, "concurrent producers, each one event")
	f.IntVar(&o.batch, "batch", 1, "messages per send: 0 or 1 Send, 2–100 SendBatch")
	f.IntVar(&o.size, "size", 200, "body size in bytes (a JSON string), 2–128000")
	f.IntVar(&o.count, "count", 100_000, "messages to send (ignored with --duration)")
	f.DurationVar(&o.duration, "duration", 0, "send for this long instead of --count messages")
	f.IntVar(&o.consumerBatch, "consumer-batch", 100, "the consumer's max_batch_size, 1–100")
	f.IntVar(&o.concurrency, "concurrency", 4, "the consumer's max_concurrency, 1–250")
	f.Float64Var(&o.delayed, "delayed", 0, "fraction of messages sent with a delay, 0–1")
	f.IntVar(&o.delay, "delay", 1, "the delay of delayed messages, in seconds (1–43200)")
	f.StringVar(&o.sync, "sync", "", `"always" to fsync every write (embedded engine); default: the configured sync, or "interval"`)
	f.BoolVar(&o.json, "json", false, "print the results as JSON instead of a table")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the duilie run to this file (go tool pprof reads it)")
	f.BoolVar(&o.prefill, "prefill", false, "send everything first, then start the consumer (measures consuming alone)")
	f.BoolVar(&o.compareRaw, "compare-raw", false, "also run raw nats.go doing the same work on the same server (jetstream platform)")
	return c
}

func (o *benchOptions) check(cmd *cobra.Command) error {
	switch {
	case o.producers < 1 || o.producers > 10_000:
		return usageErr("--producers must be 1–10000")
	case o.batch < 0 || o.batch > 100:
		return usageErr("--batch must be 0–100 (0 or 1: Send; more: SendBatch)")
	case o.size < 2 || o.size > 128_000:
		return usageErr("--size must be 2–128000 bytes")
	case o.batch > 1 && o.batch*o.size > 256_000:
		return usageErr("--batch × --size must be at most 256000 bytes (a batch's limit)")
	case o.duration < 0:
		return usageErr("--duration must not be negative")
	case o.duration == 0 && o.count < 1:
		return usageErr("--count must be at least 1")
	case o.consumerBatch < 1 || o.consumerBatch > 100:
		return usageErr("--consumer-batch must be 1–100")
	case o.concurrency < 1 || o.concurrency > 250:
		return usageErr("--concurrency must be 1–250")
	case o.delayed < 0 || o.delayed > 1:
		return usageErr("--delayed must be a fraction 0–1")
	case o.delay < 1 || o.delay > 43200:
		return usageErr("--delay must be 1–43200 seconds")
	case o.sync != "" && o.sync != jetstream.SyncAlways && o.sync != jetstream.SyncInterval:
		return usageErr(`--sync must be "always" or "interval"`)
	}
	if o.duration > 0 && cmd.Flags().Changed("count") {
		return usageErr("--count and --duration exclude each other")
	}
	if o.batch == 0 {
		o.batch = 1
	}
	return nil
}

// benchRun is what one run measured.
type benchRun struct {
	Name           string          `json:"name"`
	Messages       int             `json:"messages"`
	SendSeconds    float64         `json:"send_seconds"`
	SendRate       float64         `json:"send_msgs_per_s"`
	EndToEndSecs   float64         `json:"end_to_end_seconds"`
	EndToEndRate   float64         `json:"end_to_end_msgs_per_s"`
	ConsumeRate    float64         `json:"consume_msgs_per_s"`        // from the consumer's start to the last settlement
	SendLatency    *benchLatency   `json:"send_call_latency_ms"`      // per Send or SendBatch call
	Latency        *benchLatency   `json:"enqueue_to_handler_ms"`     // immediate messages
	Lateness       *benchLatency   `json:"delayed_due_to_handler_ms"` // delayed messages
	CPUPerMessage  float64         `json:"cpu_us_per_msg"`            // user + system
	PeakRSS        int64           `json:"peak_rss_bytes"`            // the process's, so far
	Ratio          map[string]any  `json:"share_of_raw,omitempty"`    // duilie's rates over each raw run's
	Redelivered    int             `json:"redelivered,omitempty"`     // deliveries beyond the first
	SendCalls      int             `json:"send_calls"`                // Send or SendBatch calls
	Note           string          `json:"note,omitempty"`            // how the run differs
	lat, late, snd []time.Duration // what the percentiles are of
}

// benchLatency is a set of latency percentiles, in milliseconds.
type benchLatency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func latencyOf(ds []time.Duration) *benchLatency {
	if len(ds) == 0 {
		return nil
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &benchLatency{N: len(s), P50: ms(percentile(s, 50)), P90: ms(percentile(s, 90)),
		P99: ms(percentile(s, 99)), Max: ms(s[len(s)-1])}
}

// benchResult is bench's output: the settings and every run.
type benchResult struct {
	Platform      string     `json:"platform"`
	Producers     int        `json:"producers"`
	Batch         int        `json:"batch"`
	Size          int        `json:"size"`
	Count         int        `json:"count,omitempty"`
	Duration      string     `json:"duration,omitempty"`
	ConsumerBatch int        `json:"consumer_batch"`
	Concurrency   int        `json:"concurrency"`
	Delayed       float64    `json:"delayed"`
	Delay         int        `json:"delay_seconds"`
	Prefill       bool       `json:"prefill"`
	Sync          string     `json:"sync,omitempty"`
	CPUs          int        `json:"cpus"`
	Runs          []benchRun `json:"runs"`
}

// benchQueueBinding is the binding bench's producers send with.
const benchQueueBinding = "BENCH"

func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	var cfg *server.Config
	var err error
	desc := "embedded engine in a temporary directory"
	if o.configPath != "" {
		if cfg, err = server.LoadConfig(o.configPath); err != nil {
			return err
		}
		desc = "configured platform (" + o.configPath + ")"
	} else {
		dir, err := os.MkdirTemp("", "duilie-bench-")
		if err != nil {
			return &exitError{exitIOErr, fmt.Errorf("temporary directory: %w", err)}
		}
		defer os.RemoveAll(dir)
		cfg = &server.Config{Platform: &jetstream.Config{DataDir: dir}}
	}
	sync := o.sync
	if jc, ok := cfg.Platform.(*jetstream.Config); ok {
		if sync != "" {
			c := *jc
			c.Sync = sync
			cfg.Platform = &c
		} else if sync = jc.Sync; sync == "" && jc.URL == "" {
			sync = jetstream.SyncInterval
		}
	} else if sync != "" {
		return usageErr("--sync applies to the jetstream platform only")
	}
	p, err := openPlatform(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	js, _ := p.(*jetstream.Platform)
	if o.compareRaw && js == nil {
		return usageErr("--compare-raw needs the jetstream platform (the embedded engine or a NATS cluster)")
	}
	if js != nil && js.Attached() {
		desc += ", attached to the running serve"
	}

	res := &benchResult{Platform: desc, Producers: o.producers, Batch: o.batch, Size: o.size,
		ConsumerBatch: o.consumerBatch, Concurrency: o.concurrency, Delayed: o.delayed, Delay: o.delay, Prefill: o.prefill,
		Sync: sync, CPUs: runtime.NumCPU()}
	if o.duration > 0 {
		res.Duration = o.duration.String()
	} else {
		res.Count = o.count
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return &exitError{exitIOErr, err}
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return &exitError{exitIOErr, err}
		}
	}
	ours, err := benchDuilie(ctx, o, p, stderr)
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	res.Runs = append(res.Runs, *ours)
	if o.compareRaw {
		// The raw runs send as many messages as duilie did, so that the stores hold the same.
		for _, async := range []bool{false, true} {
			r, err := benchRaw(ctx, o, js, ours.Messages, async, stderr)
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, *r)
		}
		ratio := map[string]any{}
		for _, r := range res.Runs[1:] {
			ratio[r.Name] = map[string]float64{
				"send":       round3(ours.SendRate / r.SendRate),
				"end_to_end": round3(ours.EndToEndRate / r.EndToEndRate),
				"consume":    round3(ours.ConsumeRate / r.ConsumeRate),
			}
		}
		res.Runs[0].Ratio = ratio
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprint(stdout, res.table())
	return nil
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// benchBody is a JSON string of exactly size bytes.
func benchBody(size int) string { return `"` + strings.Repeat("x", size-2) + `"` }

// delayedAt says whether message k (0-based) is one of the delayed fraction: spread evenly.
func delayedAt(k int, fraction float64) bool {
	return fraction > 0 && int(float64(k+1)*fraction) > int(float64(k)*fraction)
}

// benchPlan hands out work to producers: messages by count, or until a deadline.
type benchPlan struct {
	count    int
	deadline time.Time
	next     atomic.Int64
}

// take claims up to n messages; it returns the first one's index and how many were claimed.
func (pl *benchPlan) take(n int) (int, int) {
	if !pl.deadline.IsZero() {
		if time.Now().After(pl.deadline) {
			return 0, 0
		}
		return int(pl.next.Add(int64(n))) - n, n
	}
	end := int(pl.next.Add(int64(n)))
	first := end - n
	if first >= pl.count {
		return 0, 0
	}
	return first, min(end, pl.count) - first
}

// benchMeter counts what a run did, for its progress and its results.
type benchMeter struct {
	sent, settled, redelivered atomic.Int64
	target                     atomic.Int64 // messages to settle, once known; 0 before
	lastSettled                atomic.Int64 // when the last message was settled, Unix ns
	reached                    chan struct{}
	delayed                    sync.Map // ids of delayed messages the program saw

	mu             sync.Mutex
	lat, late, snd []time.Duration
}

func newBenchMeter() *benchMeter { return &benchMeter{reached: make(chan struct{}, 1)} }

// settle counts n settled messages.
func (m *benchMeter) settle(n int64) {
	m.lastSettled.Store(time.Now().UnixNano())
	if t := m.target.Load(); m.settled.Add(n) >= t && t > 0 {
		select {
		case m.reached <- struct{}{}:
		default:
		}
	}
}

func (m *benchMeter) sendCall(d time.Duration) {
	m.mu.Lock()
	m.snd = append(m.snd, d)
	m.mu.Unlock()
}

func benchDuilie(ctx context.Context, o benchOptions, p platform.Platform, stderr io.Writer) (*benchRun, error) {
	queue := "bench"
	if o.configPath != "" {
		queue = "duilie-bench-" + randomHex(4)
	}
	if _, err := p.Queue(ctx, queue); err != nil {
		return nil, unavailable(fmt.Errorf("queue %s: %w", queue, err))
	}
	if op, ok := p.(platform.Operator); ok && o.configPath != "" {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = op.DeleteQueue(cctx, queue)
		}()
	}
	m := newBenchMeter()
	h, err := host.New(host.Config{
		Platform:    p,
		Permissions: host.Permissions{Queue: []string{benchQueueBinding}},
		Bindings:    map[string]string{benchQueueBinding: queue},
		TimeLimit:   host.MaxTimeLimit,
		Logger:      slog.New(slog.DiscardHandler),
		Observer: func(r host.Report) {
			er, ok := r.(*host.EventReport)
			if !ok || er.Kind != host.QueueEvent {
				return
			}
			m.mu.Lock()
			for _, mr := range er.Messages {
				switch {
				case mr.Attempts > 1:
					m.redelivered.Add(1)
					continue
				case mr.Action.Kind != platform.Done:
					continue
				}
				if _, delayed := m.delayed.LoadAndDelete(mr.ID); delayed {
					m.late = append(m.late, mr.Lag)
				} else {
					m.lat = append(m.lat, mr.Lag)
				}
			}
			m.mu.Unlock()
			m.settle(int64(er.Batch))
		},
	})
	if err != nil {
		return nil, &exitError{exitSoftware, err}
	}
	// A delayed message's body starts with "d", so that the program can tell the observer
	// which lags are a delayed message's lateness.
	body := benchBody(o.size)
	dbody := `"d` + body[2:]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := host.DefaultConsumerConfig(queue)
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = o.consumerBatch, 10*time.Millisecond, o.concurrency
	cc.MaxRetries = 0
	consumed := make(chan error, 1)
	// The program reads its batch, as every program does; it decodes the bodies only to tell
	// delayed messages apart (raw consumers decode nothing).
	program := func(ev *host.Event) error {
		if o.delayed == 0 {
			_, err := duilie.ReadBatch(ev)
			return err
		}
		b, err := duilie.ReadBatchOf[string](ev)
		if err != nil {
			return err
		}
		for _, msg := range b.Messages {
			if strings.HasPrefix(msg.Body, "d") {
				m.delayed.Store(msg.ID, true)
			}
		}
		return nil
	}
	var consumeStart time.Time
	startConsumer := func() {
		consumeStart = time.Now()
		go func() { consumed <- h.Consume(ctx, cc, program) }()
	}
	if !o.prefill {
		startConsumer()
	}

	pl := &benchPlan{count: o.count}
	cpu0 := cpuTime()
	start := time.Now()
	if o.duration > 0 {
		pl.deadline = start.Add(o.duration)
	}
	progress := newBenchProgress(stderr, "duilie", o)
	stopProgress := progress.run(m, pl)
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for range o.producers {
		wg.Go(func() {
			err := h.Run(ctx, func(ev *host.Event) error {
				for {
					first, n := pl.take(o.batch)
					if n == 0 {
						return nil
					}
					var err error
					t0 := time.Now()
					if o.batch <= 1 {
						b, d := body, 0
						if delayedAt(first, o.delayed) {
							b, d = dbody, o.delay
						}
						err = duilie.Send(ev, benchQueueBinding, b, d)
					} else {
						var sb strings.Builder
						sb.WriteByte('[')
						for k := first; k < first+n; k++ {
							if k > first {
								sb.WriteByte(',')
							}
							if delayedAt(k, o.delayed) {
								fmt.Fprintf(&sb, `{"body":%s,"delaySeconds":%d}`, dbody, o.delay)
							} else {
								sb.WriteString(`{"body":` + body + `}`)
							}
						}
						sb.WriteByte(']')
						err = duilie.SendBatch(ev, benchQueueBinding, sb.String())
					}
					if err != nil {
						return err
					}
					m.sendCall(time.Since(t0))
					m.sent.Add(int64(n))
				}
			})
			if err != nil {
				sendErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	sendTook := time.Since(start)
	if e := sendErr.Load(); e != nil {
		stopProgress()
		return nil, &exitError{exitUnavailable, fmt.Errorf("bench: sending: %w", *e)}
	}
	if o.prefill {
		startConsumer()
	}
	total := m.sent.Load()
	err = waitSettled(ctx, m, total, consumed, o)
	stopProgress()
	if err != nil {
		return nil, err
	}
	cancel()
	<-consumed
	return m.result("duilie", start, consumeStart, sendTook, cpu0), nil
}

// result is what m measured of a run that started at start, took sendTook to send, and began
// with the process's CPU time at cpu0.
func (m *benchMeter) result(name string, start, consumeStart time.Time, sendTook, cpu0 time.Duration) *benchRun {
	total := m.sent.Load()
	e2e := time.Unix(0, m.lastSettled.Load()).Sub(start)
	consume := time.Unix(0, m.lastSettled.Load()).Sub(consumeStart)
	r := &benchRun{Name: name, Messages: int(total), SendSeconds: sendTook.Seconds(),
		SendRate: float64(total) / sendTook.Seconds(), EndToEndSecs: e2e.Seconds(),
		EndToEndRate: float64(total) / e2e.Seconds(), ConsumeRate: float64(total) / consume.Seconds(), Redelivered: int(m.redelivered.Load()),
		CPUPerMessage: float64((cpuTime() - cpu0).Microseconds()) / float64(max(total, 1)),
		PeakRSS:       ownPeakRSS()}
	m.mu.Lock()
	r.SendCalls = len(m.snd)
	r.SendLatency, r.Latency, r.Lateness = latencyOf(m.snd), latencyOf(m.lat), latencyOf(m.late)
	m.mu.Unlock()
	return r
}

// waitSettled waits until total messages have been settled, failing after a minute (and the
// delay) without progress.
func waitSettled(ctx context.Context, m *benchMeter, total int64, consumed <-chan error, o benchOptions) error {
	m.target.Store(max(total, 1))
	stall := time.Minute + time.Duration(o.delay)*time.Second
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		n := m.settled.Load()
		if n >= total {
			return nil
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > stall {
			return &exitError{exitUnavailable, fmt.Errorf("bench: no message settled for %v, at %d of %d", stall, n, total)}
		}
		select {
		case <-ctx.Done():
			return &exitError{130, errors.New("bench interrupted")}
		case err := <-consumed:
			return &exitError{exitUnavailable, fmt.Errorf("bench: the consumer stopped at %d of %d: %v", n, total, err)}
		case <-m.reached:
		case <-tick.C:
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Raw runs' names, as bench prints them and as share_of_raw keys them.
const (
	rawSync  = "raw js.Publish"
	rawAsync = "raw PublishAsync"
)

// benchRaw does what the duilie run did with raw nats.go on the same server, in a stream of its
// own (file storage, work-queue retention, the queue's replicas), with n messages of the same
// size: producers publish each message synchronously (async false), or asynchronously with a
// window of 4096 (waiting for each batch's acknowledgements with --batch N > 1); a pull consumer
// acks each message without waiting for a confirmation. Delays are not part of it.
func benchRaw(ctx context.Context, o benchOptions, p *jetstream.Platform, n int, async bool, stderr io.Writer) (*benchRun, error) {
	name := rawSync
	if async {
		name = rawAsync
	}
	fail := func(err error) (*benchRun, error) {
		return nil, &exitError{exitUnavailable, fmt.Errorf("bench: %s: %w", name, err)}
	}
	nc, err := p.Dial()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return fail(err)
	}
	id := randomHex(4)
	subject := "bench-raw." + id
	st, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "BENCH_RAW_" + id, Subjects: []string{subject},
		Retention: natsjs.WorkQueuePolicy, Storage: natsjs.FileStorage, Replicas: p.Replicas()})
	if err != nil {
		return fail(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(cctx, "BENCH_RAW_"+id)
	}()
	cons, err := st.CreateConsumer(ctx, natsjs.ConsumerConfig{Durable: "raw", AckPolicy: natsjs.AckExplicitPolicy, MaxAckPending: -1})
	if err != nil {
		return fail(err)
	}
	m := newBenchMeter()
	handle := func(msg natsjs.Msg) {
		if t, err := strconv.ParseInt(msg.Headers().Get("Bench-Time"), 10, 64); err == nil {
			lag := time.Since(time.Unix(0, t))
			m.mu.Lock()
			m.lat = append(m.lat, lag)
			m.mu.Unlock()
		}
		_ = msg.Ack()
		m.settle(1)
	}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	var consumeStart time.Time
	startConsumer := func() error {
		consumeStart = time.Now()
		cc, err := cons.Consume(handle, natsjs.PullMaxMessages(o.consumerBatch*o.concurrency))
		if err != nil {
			return err
		}
		stops = append(stops, cc.Stop)
		return nil
	}
	if !o.prefill {
		if err := startConsumer(); err != nil {
			return fail(err)
		}
	}

	body := []byte(benchBody(o.size))
	msgOf := func() *nats.Msg {
		h := nats.Header{"Bench-Time": []string{strconv.FormatInt(time.Now().UnixNano(), 10)}}
		return &nats.Msg{Subject: subject, Header: h, Data: body}
	}
	pl := &benchPlan{count: n}
	progress := newBenchProgress(stderr, name, benchOptions{count: n})
	stopProgress := progress.run(m, pl)
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for range o.producers {
		wg.Go(func() {
			var err error
			switch {
			case !async:
				err = rawSyncProducer(ctx, js, pl, m, msgOf)
			case o.batch > 1:
				err = rawBatchProducer(ctx, nc, pl, m, msgOf, o.batch)
			default:
				err = rawWindowProducer(ctx, nc, pl, m, msgOf)
			}
			if err != nil {
				sendErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	sendTook := time.Since(start)
	if e := sendErr.Load(); e != nil {
		stopProgress()
		return fail(*e)
	}
	if o.prefill {
		if err := startConsumer(); err != nil {
			stopProgress()
			return fail(err)
		}
	}
	err = waitSettled(ctx, m, m.sent.Load(), make(chan error), o)
	stopProgress()
	if err != nil {
		return nil, err
	}
	r := m.result(name, start, consumeStart, sendTook, cpu0)
	if async && o.batch <= 1 {
		r.Note = "no send-call latency: a window of 4096 publishes in flight"
	}
	return r, nil
}

func rawSyncProducer(ctx context.Context, js natsjs.JetStream, pl *benchPlan, m *benchMeter, msgOf func() *nats.Msg) error {
	for {
		if _, n := pl.take(1); n == 0 {
			return nil
		}
		t0 := time.Now()
		if _, err := js.PublishMsg(ctx, msgOf()); err != nil {
			return err
		}
		m.sendCall(time.Since(t0))
		m.sent.Add(1)
	}
}

// rawBatchProducer publishes batch messages at once and waits for their acknowledgements.
func rawBatchProducer(ctx context.Context, nc *nats.Conn, pl *benchPlan, m *benchMeter, msgOf func() *nats.Msg, batch int) error {
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	fs := make([]natsjs.PubAckFuture, 0, batch)
	for {
		_, n := pl.take(batch)
		if n == 0 {
			return nil
		}
		t0 := time.Now()
		fs = fs[:0]
		for range n {
			f, err := js.PublishMsgAsync(msgOf(), natsjs.WithStallWait(time.Minute))
			if err != nil {
				return err
			}
			fs = append(fs, f)
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
		m.sendCall(time.Since(t0))
		m.sent.Add(int64(n))
	}
}

// rawWindowProducer publishes with up to 4096 acknowledgements outstanding.
func rawWindowProducer(ctx context.Context, nc *nats.Conn, pl *benchPlan, m *benchMeter, msgOf func() *nats.Msg) error {
	var failed atomic.Pointer[error]
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(4096),
		natsjs.WithPublishAsyncErrHandler(func(_ natsjs.JetStream, _ *nats.Msg, err error) { failed.CompareAndSwap(nil, &err) }))
	if err != nil {
		return err
	}
	for {
		if _, n := pl.take(1); n == 0 {
			break
		}
		// A full window waits for room, as long as the run may stall.
		if _, err := js.PublishMsgAsync(msgOf(), natsjs.WithStallWait(time.Minute)); err != nil {
			return err
		}
		m.sent.Add(1)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// benchProgress shows a run's progress on stderr: a bar on a terminal, a line a second otherwise.
type benchProgress struct {
	w     io.Writer
	name  string
	total int // 0 with a duration
	bar   *progressbar.ProgressBar
}

func newBenchProgress(w io.Writer, name string, o benchOptions) *benchProgress {
	p := &benchProgress{w: w, name: name}
	if o.duration == 0 {
		p.total = o.count
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		max := p.total
		if max == 0 {
			max = -1
		}
		p.bar = progressbar.NewOptions(max,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("settled"),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	return p
}

func (p *benchProgress) line(m *benchMeter) string {
	return fmt.Sprintf("%s: sent %d · settled %d", p.name, m.sent.Load(), m.settled.Load())
}

// run updates the progress until the returned function is called.
func (p *benchProgress) run(m *benchMeter, _ *benchPlan) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		every := time.Second
		if p.bar != nil {
			every = 100 * time.Millisecond
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if p.bar != nil {
					p.bar.Describe(p.line(m))
					_ = p.bar.Set64(m.settled.Load())
					_ = p.bar.Finish()
					fmt.Fprintln(p.w)
				} else {
					fmt.Fprintf(p.w, "%5.1fs  %s\n", time.Since(start).Seconds(), p.line(m))
				}
				return
			case <-tick.C:
				if p.bar != nil {
					p.bar.Describe(p.line(m))
					_ = p.bar.Set64(m.settled.Load())
				} else {
					fmt.Fprintf(p.w, "%5.1fs  %s\n", time.Since(start).Seconds(), p.line(m))
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-ended }) }
}

// table is bench's report for people.
func (r *benchResult) table() string {
	var b strings.Builder
	mode := "Send"
	if r.Batch > 1 {
		mode = fmt.Sprintf("SendBatch of %d", r.Batch)
	}
	amount := fmt.Sprintf("%d messages", r.Count)
	if r.Duration != "" {
		amount = "messages for " + r.Duration
	}
	fmt.Fprintf(&b, "duilie bench: %s", r.Platform)
	if r.Sync != "" {
		fmt.Fprintf(&b, ", sync %s", r.Sync)
	}
	fmt.Fprintf(&b, ", %d CPUs\n", r.CPUs)
	fmt.Fprintf(&b, "  %s of %d B, %d producers, %s; consumer batches of up to %d, %d at once", amount, r.Size, r.Producers, mode, r.ConsumerBatch, r.Concurrency)
	if r.Delayed > 0 {
		fmt.Fprintf(&b, "; %.0f%% delayed %d s", 100*r.Delayed, r.Delay)
	}
	if r.Prefill {
		b.WriteString("; the consumer started once all were sent")
	}
	b.WriteString("\n\n")
	ms := func(l *benchLatency, f func(*benchLatency) float64) string {
		if l == nil {
			return "-"
		}
		return fmtLatency(time.Duration(f(l) * float64(time.Millisecond)))
	}
	p50 := func(l *benchLatency) float64 { return l.P50 }
	p99 := func(l *benchLatency) float64 { return l.P99 }
	rows := [][]string{{"run", "messages", "send msgs/s", "end-to-end msgs/s", "consume msgs/s", "send call p50", "send call p99", "enqueue→handler p50", "enqueue→handler p99", "CPU/msg", "peak RSS"}}
	for _, run := range r.Runs {
		rows = append(rows, []string{run.Name, itoa(run.Messages), fmtRate(run.SendRate), fmtRate(run.EndToEndRate), fmtRate(run.ConsumeRate),
			ms(run.SendLatency, p50), ms(run.SendLatency, p99), ms(run.Latency, p50), ms(run.Latency, p99),
			fmt.Sprintf("%.0fµs", run.CPUPerMessage), fmt.Sprintf("%.0f MB", float64(run.PeakRSS)/1e6)})
	}
	b.WriteString(table(rows, 1))
	ours := r.Runs[0]
	if l := ours.Lateness; l != nil {
		fmt.Fprintf(&b, "\ndelayed messages (%d): due time → handler start p50 %s, p99 %s, max %s\n", l.N,
			ms(l, p50), ms(l, p99), ms(l, func(l *benchLatency) float64 { return l.Max }))
	}
	if ours.Redelivered > 0 {
		fmt.Fprintf(&b, "\n%d deliveries were redeliveries\n", ours.Redelivered)
	}
	if len(r.Runs) > 1 {
		b.WriteString("\n")
		for _, raw := range r.Runs[1:] {
			fmt.Fprintf(&b, "duilie / %s: send %.0f%%, end to end %.0f%%, consume %.0f%%\n", raw.Name,
				100*ours.SendRate/raw.SendRate, 100*ours.EndToEndRate/raw.EndToEndRate, 100*ours.ConsumeRate/raw.ConsumeRate)
		}
		b.WriteString("(raw runs send no delayed messages; their consumer acks without waiting for a confirmation)\n")
	}
	b.WriteString("CPU/msg is this process's user + system time (the embedded engine runs in it); peak RSS is the process's peak so far.\n")
	return b.String()
}

func fmtRate(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
