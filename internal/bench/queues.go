package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/server"
)

// A run over many queues (--queues N) measures what each queue costs, as duilie serve runs
// them: a server with one configured consumer per queue, started fresh (start), shut down and
// started again on the same store (restart), left idle (idle CPU and RSS), then loaded with
// the messages spread evenly over the queues (message k, or batch k, to queue k mod N). Start
// and restart are timed from the server's start until every queue's consumer has run an event
// on a message sent to it right after the start: until every queue is consumed.

// runQueues makes one run over many queues for each count of o.Queues, in order, each on an
// engine (or queues) of its own, and gives each run its end-to-end rate's share of the first
// run's.
func runQueues(ctx context.Context, o Options, stderr io.Writer) (*Result, error) {
	res := &Result{Producers: o.Producers, Batch: o.Batch, Size: o.Size, ConsumerBatch: o.ConsumerBatch,
		Concurrency: o.Concurrency, Delayed: o.Delayed, Delay: o.Delay, CPUs: runtime.NumCPU(), Idle: o.Idle.String()}
	if o.Duration > 0 {
		res.Duration = o.Duration.String()
	} else {
		res.Count = o.Count
	}
	for _, n := range o.Queues {
		r, err := benchQueues(ctx, o, n, res, stderr)
		if err != nil {
			return nil, err
		}
		if len(res.Runs) > 0 {
			r.ShareOfFirst = round3(r.EndToEndRate / res.Runs[0].EndToEndRate)
		}
		res.Runs = append(res.Runs, *r)
	}
	return res, nil
}

// queuesName is the name of a run over n queues.
func queuesName(n int) string {
	if n == 1 {
		return "duilie, 1 queue"
	}
	return fmt.Sprintf("duilie, %d queues", n)
}

// benchQueues makes the run over n queues (see runQueues), and sets res's platform and sync.
func benchQueues(ctx context.Context, o Options, n int, res *Result, stderr io.Writer) (*Measurement, error) {
	cfg, desc, remove, err := benchConfig(o)
	if err != nil {
		return nil, err
	}
	defer remove()
	res.Platform = desc
	if s, ok := cfg.PlatformSetting("sync"); ok {
		res.Sync, _ = s.(string)
	}
	prefix := "bench-"
	if o.ConfigPath != "" {
		prefix = "duilie-bench-" + randomHex(4) + "-"
	}
	plain := *cfg // without bench's bindings and consumers, to delete its queues with
	names, bindings := make([]string, n), make([]string, n)
	cfg.Bindings = make(map[string]string, n)
	cfg.Consumers = make([]server.ConsumerConfig, n)
	for i := range n {
		names[i], bindings[i] = prefix+strconv.Itoa(i+1), "BENCH_"+strconv.Itoa(i+1)
		cfg.Bindings[bindings[i]] = names[i]
		cfg.Consumers[i] = consumerConfig(o, names[i])
	}
	bc := &benchClient{}
	cfg.Permissions = server.Permissions{Queue: bindings}
	cfg.Program = &duilie.Program{Queue: bc.program(o)}
	cfg.TimeLimit = maxTimeLimit
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Observers = []server.Observer{bc.observe}
	if o.ConfigPath != "" {
		defer deleteQueues(plain, names)
	}
	name := queuesName(n)

	stop, err := profile(profileFile(o, n, "start"))
	if err != nil {
		return nil, err
	}
	s, startTook, err := startQueues(ctx, cfg, bc, bindings, o.Producers, name+": start", stderr)
	if err != nil {
		stop()
		return nil, err
	}
	err = s.Shutdown(context.WithoutCancel(ctx))
	var restartTook time.Duration
	if err == nil {
		s, restartTook, err = startQueues(ctx, cfg, bc, bindings, o.Producers, name+": restart", stderr)
	}
	stop()
	if err != nil {
		return nil, fail(Unavailable, fmt.Errorf("bench: %s: restart: %w", name, err))
	}
	defer func() { _ = s.Shutdown(context.WithoutCancel(ctx)) }()

	// Idle: every consumer waits for messages.
	stop, err = profile(profileFile(o, n, "idle"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "%s: idle for %v\n", name, o.Idle)
	cpu0, idleFrom := cpuTime(), time.Now()
	select {
	case <-time.After(o.Idle):
	case <-ctx.Done():
		stop()
		return nil, fail(Interrupted, errors.New("bench interrupted"))
	}
	idleCPU := (cpuTime() - cpu0).Seconds() / time.Since(idleFrom).Seconds()
	idleRSS := ownRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	stop()

	// The load, spread over the queues.
	stop, err = profile(profileFile(o, n, ""))
	if err != nil {
		return nil, err
	}
	defer stop()
	m := newBenchMeter()
	bc.meter.Store(m)
	defer bc.meter.Store(nil)
	pl := &benchPlan{count: o.Count}
	cpu0 = cpuTime()
	start := time.Now()
	if o.Duration > 0 {
		pl.deadline = start.Add(o.Duration)
	}
	progress := newBenchProgress(stderr, name, o)
	stopProgress := progress.run(m, pl)
	watching, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go m.watch(watching)
	batch := max(o.Batch, 1)
	err = produce(ctx, s.Client(), o, pl, m, func(first int) string { return bindings[(first/batch)%n] })
	sendTook := time.Since(start)
	if err != nil {
		stopProgress()
		return nil, fail(Unavailable, fmt.Errorf("bench: %s: sending: %w", name, err))
	}
	err = waitSettled(ctx, m, m.sent.Load(), s.Failed(), o)
	stopProgress()
	if err != nil {
		return nil, err
	}
	r := m.result(name, start, start, sendTook, cpu0)
	r.Queues, r.StartSeconds, r.RestartSeconds = n, round3(startTook.Seconds()), round3(restartTook.Seconds())
	r.IdleCPU, r.IdleRSS, r.IdleHeap = round3(idleCPU), idleRSS, int64(ms.HeapInuse)
	return r, nil
}

// profileFile is where the CPU profile of a phase of the run over n queues goes: FILE.<n>-start
// (start and restart), FILE.<n>-idle, FILE.<n> (the load); "" without --cpuprofile.
func profileFile(o Options, n int, phase string) string {
	if o.CPUProfile == "" {
		return ""
	}
	f := o.CPUProfile + "." + strconv.Itoa(n)
	if phase != "" {
		f += "-" + phase
	}
	return f
}

// startQueues starts a server of cfg and sends one message to each binding; it returns once
// every queue's consumer has run an event, and how long that took from the start.
func startQueues(ctx context.Context, cfg *server.Config, bc *benchClient, bindings []string, producers int, what string, stderr io.Writer) (*server.Server, time.Duration, error) {
	pm := &probeMeter{want: int64(len(bindings)), done: make(chan struct{})}
	bc.probe.Store(pm)
	defer bc.probe.Store(nil)
	fmt.Fprintf(stderr, "%s: %d queues\n", what, len(bindings))
	t0 := time.Now()
	s, err := server.New(*cfg)
	if err != nil {
		return nil, 0, fail(Software, err)
	}
	if err := s.Start(ctx); err != nil {
		return nil, 0, fail(Unavailable, fmt.Errorf("bench: %s: %w", what, err))
	}
	bc.Client = s.Client()
	stopped := func(err error) (*server.Server, time.Duration, error) {
		_ = s.Shutdown(context.WithoutCancel(ctx))
		return nil, 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var sendErr atomic.Pointer[error]
	for range min(producers, len(bindings)) {
		wg.Go(func() {
			err := s.Client().Do(ctx, func(ev *duilie.Event) error {
				for {
					i := next.Add(1) - 1
					if i >= int64(len(bindings)) {
						return nil
					}
					if err := duilie.Send(ev, bindings[i], `"probe"`, 0); err != nil {
						return err
					}
				}
			})
			if err != nil {
				sendErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if e := sendErr.Load(); e != nil {
		return stopped(fail(Unavailable, fmt.Errorf("bench: %s: sending a message to each queue: %w", what, *e)))
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		select {
		case <-pm.done:
			took := time.Since(t0)
			fmt.Fprintf(stderr, "%s: every queue consumed after %.2f s\n", what, took.Seconds())
			return s, took, nil
		case <-ctx.Done():
			return stopped(fail(Interrupted, errors.New("bench interrupted")))
		case err := <-s.Failed():
			return stopped(fail(Unavailable, fmt.Errorf("bench: %s: %w", what, err)))
		case <-tick.C:
			n := pm.reached.Load()
			fmt.Fprintf(stderr, "%5.1fs  %s: %d of %d queues consumed\n", time.Since(t0).Seconds(), what, n, pm.want)
			if n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) > time.Minute {
				return stopped(fail(Unavailable, fmt.Errorf("bench: %s: no further queue consumed for a minute, at %d of %d", what, n, pm.want)))
			}
		}
	}
}

// probeMeter counts the queues whose consumer has run an event.
type probeMeter struct {
	seen    sync.Map
	reached atomic.Int64
	want    int64
	done    chan struct{}
}

func (pm *probeMeter) consumed(queue string) {
	if _, dup := pm.seen.LoadOrStore(queue, true); !dup && pm.reached.Add(1) == pm.want {
		close(pm.done)
	}
}

// deleteQueues deletes bench's queues from the configured platform.
func deleteQueues(cfg server.Config, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(len(names))*100*time.Millisecond)
	defer cancel()
	c, err := server.Open(ctx, cfg)
	if err != nil {
		return
	}
	defer c.Close()
	for _, q := range names {
		_ = c.DeleteQueue(ctx, q)
	}
}
