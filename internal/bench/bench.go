// Package bench measures what duilie does with many messages, for duilie bench: producers
// send through the interface's functions while a consumer runs an in-process program, on the
// configured platform or a temporary embedded engine; beside it, raw nats.go doing the same
// work on the same server, the baseline duilie's rates are judged against. It is the one place
// of the command line that knows the engine by its package, because its baseline does.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"golang.org/x/term"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/server"
)

// Options are what to measure: duilie bench's flags.
type Options struct {
	ConfigPath    string
	Producers     int
	Batch         int
	Size          int
	Count         int
	Duration      time.Duration
	ConsumerBatch int
	Concurrency   int
	Delayed       float64
	Delay         int
	Sync          string
	CompareRaw    bool
	Prefill       bool
	CPUProfile    string
	// Queues, when set, are the queue counts to measure, one run each, in order: each on a
	// fresh engine (or queues of its own), as duilie serve runs them, one configured consumer
	// per queue, the load spread over them (see runQueues). Nil: one queue, without the start
	// and idle measurements.
	Queues []int
	Idle   time.Duration // how long the idle CPU and RSS are measured, with Queues
}

// Measurement is what one run measured.
type Measurement struct {
	Name          string         `json:"name"`
	Messages      int            `json:"messages"`
	SendSeconds   float64        `json:"send_seconds"`
	SendRate      float64        `json:"send_msgs_per_s"`
	EndToEndSecs  float64        `json:"end_to_end_seconds"`
	EndToEndRate  float64        `json:"end_to_end_msgs_per_s"`
	ConsumeRate   float64        `json:"consume_msgs_per_s"`        // from the consumer's start to the last settlement
	SendLatency   *Latency       `json:"send_call_latency_ms"`      // per Send or SendBatch call
	Latency       *Latency       `json:"enqueue_to_handler_ms"`     // immediate messages
	Lateness      *Latency       `json:"delayed_due_to_handler_ms"` // delayed messages
	CPUPerMessage float64        `json:"cpu_us_per_msg"`            // user + system
	PeakRSS       int64          `json:"peak_rss_bytes"`            // the process's, so far
	Ratio         map[string]any `json:"share_of_raw,omitempty"`    // duilie's rates over each raw run's
	Redelivered   int            `json:"redelivered,omitempty"`     // deliveries beyond the first
	SendCalls     int            `json:"send_calls"`                // Send or SendBatch calls
	MaxStall      float64        `json:"max_stall_seconds"`         // the longest time without a settlement while messages waited
	Stalled       bool           `json:"stalled,omitempty"`         // a raw run that stalled in every try: its rates are not a baseline
	Tries         int            `json:"tries,omitempty"`           // raw runs: how many were made to get one that did not stall
	Note          string         `json:"note,omitempty"`            // how the run differs

	// A run over many queues (Options.Queues) has these too.
	Queues         int     `json:"queues,omitempty"`
	StartSeconds   float64 `json:"start_seconds,omitempty"`             // from the server's start until every queue is consumed
	RestartSeconds float64 `json:"restart_seconds,omitempty"`           // the same, started again on the same store
	IdleCPU        float64 `json:"idle_cpu_cores,omitempty"`            // CPU time per second while idle (1 = one core)
	IdleRSS        int64   `json:"idle_rss_bytes,omitempty"`            // resident memory at the end of the idle time
	IdleHeap       int64   `json:"idle_heap_bytes,omitempty"`           // Go heap in use then (the embedded engine's included)
	ShareOfFirst   float64 `json:"end_to_end_share_of_first,omitempty"` // end-to-end rate over the first run's
}

// Latency is a set of latency percentiles, in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func latencyOf(ds []time.Duration) *Latency {
	if len(ds) == 0 {
		return nil
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &Latency{N: len(s), P50: ms(Percentile(s, 50)), P90: ms(Percentile(s, 90)),
		P99: ms(Percentile(s, 99)), Max: ms(s[len(s)-1])}
}

// Result is bench's output: the settings and every run.
type Result struct {
	Platform      string        `json:"platform"`
	Producers     int           `json:"producers"`
	Batch         int           `json:"batch"`
	Size          int           `json:"size"`
	Count         int           `json:"count,omitempty"`
	Duration      string        `json:"duration,omitempty"`
	ConsumerBatch int           `json:"consumer_batch"`
	Concurrency   int           `json:"concurrency"`
	Delayed       float64       `json:"delayed"`
	Delay         int           `json:"delay_seconds"`
	Prefill       bool          `json:"prefill"`
	Sync          string        `json:"sync,omitempty"`
	CPUs          int           `json:"cpus"`
	Idle          string        `json:"idle,omitempty"` // runs over many queues: how long idle was measured
	Runs          []Measurement `json:"runs"`
}

// benchQueueBinding is the binding bench's producers send with.
const benchQueueBinding = "BENCH"

// Run measures o on the platform o.ConfigPath configures, or on a temporary embedded engine,
// with progress on stderr.
func Run(ctx context.Context, o Options, stderr io.Writer) (*Result, error) {
	if o.Queues != nil {
		return runQueues(ctx, o, stderr)
	}
	cfg, desc, remove, err := benchConfig(o)
	if err != nil {
		return nil, err
	}
	defer remove()
	sync, _ := cfg.PlatformSetting("sync")
	c, queue, err := open(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	nc, replicas, natsErr := c.NATS(ctx)
	if o.CompareRaw && natsErr != nil {
		return nil, usageError("--compare-raw needs the jetstream platform (the embedded engine or a NATS cluster): " + natsErr.Error())
	}
	if nc != nil {
		nc.Close()
	}

	res := &Result{Platform: desc, Producers: o.Producers, Batch: o.Batch, Size: o.Size,
		ConsumerBatch: o.ConsumerBatch, Concurrency: o.Concurrency, Delayed: o.Delayed, Delay: o.Delay, Prefill: o.Prefill,
		CPUs: runtime.NumCPU()}
	res.Sync, _ = sync.(string)
	if o.Duration > 0 {
		res.Duration = o.Duration.String()
	} else {
		res.Count = o.Count
	}

	stop, err := profile(o.CPUProfile)
	if err != nil {
		return nil, err
	}
	ours, err := benchDuilie(ctx, o, c, queue, stderr)
	stop()
	if err != nil {
		return nil, err
	}
	res.Runs = append(res.Runs, *ours)
	if o.CompareRaw {
		// The raw runs send as many messages as duilie did, so that the stores hold the same.
		for _, async := range []bool{false, true} {
			file := ""
			if o.CPUProfile != "" {
				file = o.CPUProfile + ".raw-sync"
				if async {
					file = o.CPUProfile + ".raw-async"
				}
			}
			stop, err := profile(file)
			if err != nil {
				return nil, err
			}
			r, err := rawUnstalled(ctx, o, c, replicas, ours.Messages, async, stderr)
			stop()
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, *r)
		}
		ratio := map[string]any{}
		for _, r := range res.Runs[1:] {
			if r.Stalled {
				continue // no baseline: the table says so
			}
			ratio[r.Name] = map[string]float64{
				"send":       round3(ours.SendRate / r.SendRate),
				"end_to_end": round3(ours.EndToEndRate / r.EndToEndRate),
				"consume":    round3(ours.ConsumeRate / r.ConsumeRate),
			}
		}
		res.Runs[0].Ratio = ratio
	}
	return res, nil
}

// benchConfig is the configuration a run measures (o.ConfigPath's, or an embedded engine in a
// temporary directory that remove removes), with o.Sync, and its description.
func benchConfig(o Options) (cfg *server.Config, desc string, remove func(), err error) {
	remove = func() {}
	desc = "embedded engine in a temporary directory"
	if o.ConfigPath != "" {
		if cfg, err = server.LoadConfig(o.ConfigPath); err != nil {
			return nil, "", nil, err
		}
		desc = "configured platform (" + o.ConfigPath + ")"
	} else {
		dir, err := os.MkdirTemp("", "duilie-bench-")
		if err != nil {
			return nil, "", nil, fail(IO, fmt.Errorf("temporary directory: %w", err))
		}
		if cfg, err = server.ParseConfig("(bench)", dir, []byte("[platform]\ndata_dir = \".\"\n")); err != nil {
			os.RemoveAll(dir)
			return nil, "", nil, fail(Software, err)
		}
		remove = func() { os.RemoveAll(dir) }
	}
	if o.Sync != "" {
		if err := cfg.SetPlatform("sync", o.Sync); err != nil {
			remove()
			return nil, "", nil, usageError("--sync " + o.Sync + ": " + err.Error())
		}
	}
	return cfg, desc, remove, nil
}

// profile starts a CPU profile written to file ("" for none) and returns what stops it.
func profile(file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, fail(IO, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fail(IO, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
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
	delayed                    sync.Map     // ids of delayed messages the program saw
	maxStall                   atomic.Int64 // the longest wait without a settlement while messages were sent and unsettled, ns

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

// watch records in m.maxStall the longest time during which messages were sent and not
// settled and none was settled, from now until ctx ends: a consumer that stopped taking
// messages for a while (as nats.go's pull consumer does now and then for about 30 s) shows
// there, and a rate measured across it says nothing of either side.
func (m *benchMeter) watch(ctx context.Context) {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	last, since := m.settled.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n := m.settled.Load()
			if n != last || m.sent.Load() <= n {
				last, since = n, now
				continue
			}
			if d := int64(now.Sub(since)); d > m.maxStall.Load() {
				m.maxStall.Store(d)
			}
		}
	}
}

// stallTick is how often watch looks; stallLimit is the longest pause of a raw run's consumer
// that bench takes for a measurement (a healthy one settles thousands of messages a second).
const (
	stallTick  = 100 * time.Millisecond
	stallLimit = 2 * time.Second
)

func (m *benchMeter) sendCall(d time.Duration) {
	m.mu.Lock()
	m.snd = append(m.snd, d)
	m.mu.Unlock()
}

// open makes bench's client of cfg: the configured platform with a binding of bench's own to
// a queue of its own (created, and deleted when the client closes), an observer that feeds the
// meter once set, and a time limit long enough for any producer.
func open(ctx context.Context, cfg *server.Config, o Options) (*benchClient, string, error) {
	queue := "bench"
	if o.ConfigPath != "" {
		queue = "duilie-bench-" + randomHex(4)
	}
	bc := &benchClient{}
	plain := *cfg // without bench's binding, whose queue it may then delete
	cfg.Permissions = server.Permissions{Queue: []string{benchQueueBinding}}
	cfg.Bindings = map[string]string{benchQueueBinding: queue}
	cfg.TimeLimit = maxTimeLimit
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Observers = []server.Observer{bc.observe}
	c, err := server.Open(ctx, *cfg)
	if err != nil {
		return nil, "", err
	}
	bc.Client = c
	if err := c.CreateQueue(ctx, queue); err != nil {
		c.Close()
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			return nil, "", err
		}
		return nil, "", fail(Unavailable, fmt.Errorf("queue %s: %w", queue, err))
	}
	if o.ConfigPath != "" {
		bc.cleanup = func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := server.Open(cctx, plain); err == nil {
				_ = c.DeleteQueue(cctx, queue)
				_ = c.Close()
			}
		}
	}
	return bc, queue, nil
}

// maxTimeLimit is the longest event time limit: bench's producers each send in one event.
const maxTimeLimit = 900 * time.Second

// benchClient is the client of a bench run, with the meter its observer feeds.
type benchClient struct {
	*server.Client
	cleanup func()
	meter   atomic.Pointer[benchMeter]
	probe   atomic.Pointer[probeMeter] // while a run over many queues starts
}

func (bc *benchClient) Close() error {
	err := bc.Client.Close()
	if bc.cleanup != nil {
		bc.cleanup()
	}
	return err
}

// observe counts the settled messages of queue events.
func (bc *benchClient) observe(r server.Report) {
	m := bc.meter.Load()
	er, ok := r.(*server.EventReport)
	if !ok || er.Kind != duilie.QueueEvent {
		return
	}
	if pm := bc.probe.Load(); pm != nil {
		pm.consumed(er.Queue)
	}
	if m == nil {
		return
	}
	m.mu.Lock()
	for _, mr := range er.Messages {
		switch {
		case mr.Attempts > 1:
			m.redelivered.Add(1)
			continue
		case mr.Result != server.Acked:
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
}

// consumerConfig is bench's consumer of queue: batches of --consumer-batch, filled for 10 ms at
// most, --concurrency at once, no retries.
func consumerConfig(o Options, queue string) server.ConsumerConfig {
	cc := server.DefaultConsumerConfig(queue)
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = o.ConsumerBatch, 10*time.Millisecond, o.Concurrency
	cc.MaxRetries = server.NoRetries
	return cc
}

// program is bench's consumer program. It reads its batch, as every program does; it decodes
// the bodies only to tell delayed messages apart (a delayed message's body starts with "d"),
// for the meter of the run (raw consumers decode nothing).
func (bc *benchClient) program(o Options) duilie.Handler {
	return func(ev *duilie.Event) error {
		if o.Delayed == 0 {
			_, err := duilie.ReadBatch(ev)
			return err
		}
		b, err := duilie.ReadBatchOf[string](ev)
		if err != nil {
			return err
		}
		m := bc.meter.Load()
		for _, msg := range b.Messages {
			if m != nil && strings.HasPrefix(msg.Body, "d") {
				m.delayed.Store(msg.ID, true)
			}
		}
		return nil
	}
}

func benchDuilie(ctx context.Context, o Options, c *benchClient, queue string, stderr io.Writer) (*Measurement, error) {
	m := newBenchMeter()
	c.meter.Store(m)
	defer c.meter.Store(nil)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := consumerConfig(o, queue)
	consumed := make(chan error, 1)
	program := c.program(o)
	var consumeStart time.Time
	startConsumer := func() {
		consumeStart = time.Now()
		go m.watch(ctx)
		go func() { consumed <- c.Consume(ctx, cc, program) }()
	}
	if !o.Prefill {
		startConsumer()
	}

	pl := &benchPlan{count: o.Count}
	cpu0 := cpuTime()
	start := time.Now()
	if o.Duration > 0 {
		pl.deadline = start.Add(o.Duration)
	}
	progress := newBenchProgress(stderr, "duilie", o)
	stopProgress := progress.run(m, pl)
	err := produce(ctx, c.Client, o, pl, m, func(int) string { return benchQueueBinding })
	sendTook := time.Since(start)
	if err != nil {
		stopProgress()
		return nil, fail(Unavailable, fmt.Errorf("bench: sending: %w", err))
	}
	if o.Prefill {
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

// produce runs o.Producers producers, each one fetch event of c, until pl has no more messages:
// Send of each message or SendBatch of o.Batch, to the binding bindingOf names for the index of
// the message (or the batch's first). It returns the first producer's failure.
func produce(ctx context.Context, c *server.Client, o Options, pl *benchPlan, m *benchMeter, bindingOf func(first int) string) error {
	// A delayed message's body starts with "d", so that the program can tell the observer
	// which lags are a delayed message's lateness.
	body := benchBody(o.Size)
	dbody := `"d` + body[2:]
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for range o.Producers {
		wg.Go(func() {
			err := c.Do(ctx, func(ev *duilie.Event) error {
				for {
					first, n := pl.take(o.Batch)
					if n == 0 {
						return nil
					}
					var err error
					t0 := time.Now()
					binding := bindingOf(first)
					if o.Batch <= 1 {
						b, d := body, 0
						if delayedAt(first, o.Delayed) {
							b, d = dbody, o.Delay
						}
						err = duilie.Send(ev, binding, b, d)
					} else {
						// The batch's JSON text, built as a careful program would: in one buffer.
						var sb strings.Builder
						sb.Grow(n * (len(body) + 32))
						sb.WriteByte('[')
						for k := first; k < first+n; k++ {
							if k > first {
								sb.WriteByte(',')
							}
							if delayedAt(k, o.Delayed) {
								sb.WriteString(`{"body":`)
								sb.WriteString(dbody)
								sb.WriteString(`,"delaySeconds":`)
								sb.WriteString(strconv.Itoa(o.Delay))
							} else {
								sb.WriteString(`{"body":`)
								sb.WriteString(body)
							}
							sb.WriteByte('}')
						}
						sb.WriteByte(']')
						err = duilie.SendBatch(ev, binding, sb.String())
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
	if e := sendErr.Load(); e != nil {
		return *e
	}
	return nil
}

// result is what m measured of a run that started at start, took sendTook to send, and began
// with the process's CPU time at cpu0.
func (m *benchMeter) result(name string, start, consumeStart time.Time, sendTook, cpu0 time.Duration) *Measurement {
	total := m.sent.Load()
	e2e := time.Unix(0, m.lastSettled.Load()).Sub(start)
	consume := time.Unix(0, m.lastSettled.Load()).Sub(consumeStart)
	r := &Measurement{Name: name, Messages: int(total), SendSeconds: sendTook.Seconds(),
		SendRate: float64(total) / sendTook.Seconds(), EndToEndSecs: e2e.Seconds(),
		EndToEndRate: float64(total) / e2e.Seconds(), ConsumeRate: float64(total) / consume.Seconds(), Redelivered: int(m.redelivered.Load()),
		CPUPerMessage: float64((cpuTime() - cpu0).Microseconds()) / float64(max(total, 1)),
		PeakRSS:       ownPeakRSS(), MaxStall: round3(time.Duration(m.maxStall.Load()).Seconds())}
	m.mu.Lock()
	r.SendCalls = len(m.snd)
	r.SendLatency, r.Latency, r.Lateness = latencyOf(m.snd), latencyOf(m.lat), latencyOf(m.late)
	m.mu.Unlock()
	return r
}

// waitSettled waits until total messages have been settled, failing after a minute (and the
// delay) without progress.
func waitSettled(ctx context.Context, m *benchMeter, total int64, consumed <-chan error, o Options) error {
	m.target.Store(max(total, 1))
	stall := time.Minute + time.Duration(o.Delay)*time.Second
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
			return fail(Unavailable, fmt.Errorf("bench: no message settled for %v, at %d of %d", stall, n, total))
		}
		select {
		case <-ctx.Done():
			return fail(Interrupted, errors.New("bench interrupted"))
		case err := <-consumed:
			return fail(Unavailable, fmt.Errorf("bench: the consumer stopped at %d of %d: %v", n, total, err))
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

// rawTries is how many times a raw run is made at most when it stalls (stallLimit).
const rawTries = 3

// rawUnstalled makes the raw run until one does not stall, rawTries times at most; the last
// stalled one is returned marked Stalled if none went through.
func rawUnstalled(ctx context.Context, o Options, c *benchClient, replicas, n int, async bool, stderr io.Writer) (*Measurement, error) {
	for try := 1; ; try++ {
		r, err := runRaw(ctx, o, c, replicas, n, async, stderr)
		if err != nil {
			return nil, err
		}
		r.Tries = try
		if r.MaxStall < stallLimit.Seconds() {
			return r, nil
		}
		fmt.Fprintf(stderr, "%s: no message settled for %.1f s while messages waited; ", r.Name, r.MaxStall)
		if try == rawTries {
			fmt.Fprintf(stderr, "it stalled in all %d tries: no baseline\n", try)
			r.Stalled = true
			return r, nil
		}
		fmt.Fprintln(stderr, "running it again")
	}
}

// runRaw is benchRaw; tests replace it.
var runRaw = benchRaw

// benchRaw does what the duilie run did with raw nats.go on the same server, in a stream of its
// own (file storage, work-queue retention, the queue's replicas), with n messages of the same
// size: producers publish each message synchronously (async false), or asynchronously with a
// window of 4096 (waiting for each batch's acknowledgements with --batch N > 1); a pull consumer
// acks each message without waiting for a confirmation. Delays are not part of it.
func benchRaw(ctx context.Context, o Options, c *benchClient, replicas, n int, async bool, stderr io.Writer) (*Measurement, error) {
	name := rawSync
	if async {
		name = rawAsync
	}
	fail := func(err error) (*Measurement, error) {
		return nil, fail(Unavailable, fmt.Errorf("bench: %s: %w", name, err))
	}
	nc, _, err := c.NATS(ctx)
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
		Retention: natsjs.WorkQueuePolicy, Storage: natsjs.FileStorage, Replicas: replicas})
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
	watching, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	startConsumer := func() error {
		consumeStart = time.Now()
		go m.watch(watching)
		cc, err := cons.Consume(handle, natsjs.PullMaxMessages(o.ConsumerBatch*o.Concurrency))
		if err != nil {
			return err
		}
		stops = append(stops, cc.Stop)
		return nil
	}
	if !o.Prefill {
		if err := startConsumer(); err != nil {
			return fail(err)
		}
	}

	body := []byte(benchBody(o.Size))
	msgOf := func() *nats.Msg {
		h := nats.Header{"Bench-Time": []string{strconv.FormatInt(time.Now().UnixNano(), 10)}}
		return &nats.Msg{Subject: subject, Header: h, Data: body}
	}
	pl := &benchPlan{count: n}
	progress := newBenchProgress(stderr, name, Options{Count: n})
	stopProgress := progress.run(m, pl)
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for range o.Producers {
		wg.Go(func() {
			var err error
			switch {
			case !async:
				err = rawSyncProducer(ctx, js, pl, m, msgOf)
			case o.Batch > 1:
				err = rawBatchProducer(ctx, nc, pl, m, msgOf, o.Batch)
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
	if o.Prefill {
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
	if async && o.Batch <= 1 {
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

func newBenchProgress(w io.Writer, name string, o Options) *benchProgress {
	p := &benchProgress{w: w, name: name}
	if o.Duration == 0 {
		p.total = o.Count
	}
	max := p.total
	if max == 0 {
		max = -1
	}
	p.bar = ProgressBar(w, max)
	return p
}

// ProgressBar is the bar demo and bench draw on w when it is a terminal, counting settled
// messages up to total (-1: no known total); nil when w is not a terminal, where they print a
// plain line a second instead.
func ProgressBar(w io.Writer, total int) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("settled"),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
	)
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

// Kind says what kind of failure an Error is, for the command's exit status.
type Kind int

// Kinds of failure.
const (
	Unavailable Kind = iota // the platform failed or stalled
	Usage                   // the options do not fit the platform
	IO                      // a local file could not be made
	Software                // the bench program failed
	Interrupted             // the context ended
)

// Error is a failed bench.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(k Kind, err error) error { return &Error{k, err} }

func usageError(msg string) error { return &Error{Usage, errors.New(msg)} }

// Percentile is the nearest-rank percentile of sorted durations.
func Percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ⌈p/100 · n⌉
	return sorted[max(rank, 1)-1]
}
