package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bench"
	"github.com/duilie/duilie/server"
)

func newDemo() *cobra.Command {
	var quick, verbose bool
	c := &cobra.Command{
		Use:                   "demo [--quick] [--verbose]",
		DisableFlagsInUseLine: true,
		Short:                 "Run a mixed workload through the embedded engine and show what happened",
		Long: `demo needs no setup: it starts the embedded engine in a temporary directory (removed at
the end), runs a page-task consumer (like examples/pagetask) in-process, exactly as serve
would run it, and sends it a mixed workload through the interface's functions: tasks for
at once, tasks delayed a few seconds, tasks that fail twice and then succeed, tasks that
always fail and end in the dead-letter queue, and stale tasks that are acked unread.
Retries are 1 s apart so it ends in about 10 s (--quick: about 3 s). It shows live
progress, then a summary with delivery latency percentiles measured on the real
deliveries, from each message's enqueue time (or the end of its delay) to the start of its
handler, as the host reports them.`,
		Example: `  duilie demo
  duilie demo --quick --verbose   # a short run, with the host's log on stderr`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), quick, verbose, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().BoolVar(&quick, "quick", false, "a shorter workload (about 3 s)")
	c.Flags().BoolVar(&verbose, "verbose", false, "log every event to stderr")
	return c
}

// Demo queues and settings.
const (
	demoQueue      = "page-render"
	demoDLQ        = "page-dlq"
	demoMaxRetries = 2
	demoBinding    = "PAGE_QUEUE"
	demoVersion    = "v8"
)

// demoConfig is the demo's duilie.toml: the embedded engine in the temporary directory.
var demoConfig = fmt.Sprintf(`
[permissions]
QUEUE = [%[1]q]

[[queues.producers]]
binding = %[1]q
queue = %[2]q

[[queues.consumers]]
queue = %[2]q
max_batch_size = 10
max_batch_timeout = 0
max_retries = %[4]d
retry_delay = 1
dead_letter_queue = %[3]q
max_concurrency = 4

[[queues.consumers]]
queue = %[3]q
max_batch_timeout = 0

[app]
shutdown_grace_ms = 5000

[platform]
kind = "jetstream"
data_dir = "data"
`, demoBinding, demoQueue, demoDLQ, demoMaxRetries)

// demoTask is a page task, as examples/pagetask reads them.
type demoTask struct {
	Kind    string `json:"kind"`
	URL     string `json:"url"`
	Version string `json:"version"`
	Fail    bool   `json:"fail,omitempty"`
}

// demoGroup is one kind of task in the workload, and what happened to its messages.
type demoGroup struct {
	label  string
	prefix string // every task's url starts with it
	count  int
	delay  func(i int) int // send delay in seconds
	task   func(i int) demoTask

	sent, delivered, retried, done, dead int
	latency                              []time.Duration // first deliveries, from due time to handler start
}

func demoWorkload(quick bool) []*demoGroup {
	n := func(full, short int) int {
		if quick {
			return short
		}
		return full
	}
	task := func(kind, prefix string, fail bool, version string) func(int) demoTask {
		return func(i int) demoTask {
			return demoTask{Kind: kind, URL: prefix + strconv.Itoa(i), Version: version, Fail: fail}
		}
	}
	now := func(int) int { return 0 }
	return []*demoGroup{
		{label: "immediate", prefix: "/page/", count: n(100, 30), delay: now, task: task("page", "/page/", false, demoVersion)},
		{label: fmt.Sprintf("delayed %d–%d s", n(2, 1), n(6, 2)), prefix: "/release/", count: n(20, 6),
			delay: func(i int) int { return n(2+i%5, 1+i%2) }, task: task("release", "/release/", false, demoVersion)},
		{label: "fails twice, then succeeds", prefix: "/flaky/", count: n(10, 4), delay: now, task: task("page", "/flaky/", true, demoVersion)},
		{label: "always fails", prefix: "/broken/", count: n(5, 2), delay: now, task: task("page", "/broken/", true, demoVersion)},
		{label: "stale version (acked)", prefix: "/stale/", count: n(10, 4), delay: now, task: task("page", "/stale/", false, "v7")},
	}
}

// demoState counts what the host reports.
type demoState struct {
	mu      sync.Mutex
	groups  []*demoGroup
	groupOf map[string]*demoGroup // message id → its group, as the program first saw it
	start   time.Time
}

func (d *demoState) group(url string) *demoGroup {
	for _, g := range d.groups {
		if strings.HasPrefix(url, g.prefix) {
			return g
		}
	}
	return nil
}

type demoTotals struct{ total, sent, delivered, retried, done, dead int }

func (d *demoState) totals() demoTotals {
	d.mu.Lock()
	defer d.mu.Unlock()
	var t demoTotals
	for _, g := range d.groups {
		t.total += g.count
		t.sent += g.sent
		t.delivered += g.delivered
		t.retried += g.retried
		t.done += g.done
		t.dead += g.dead
	}
	return t
}

// program is the demo's page-task consumer: a stale task is acked unread, a failing one is
// retried after 1 s (a flaky one succeeds on its third attempt), every other one is rendered
// (a few milliseconds of work) and acked. The dead-letter queue's consumer acks everything.
// It notes which group each message belongs to, so the host's reports can be counted by group.
func (d *demoState) program(ev *duilie.Event) error {
	b, err := duilie.ReadBatchOf[demoTask](ev)
	if err != nil {
		return err
	}
	for i, m := range b.Messages {
		d.mu.Lock()
		if d.groupOf[m.ID] == nil {
			d.groupOf[m.ID] = d.group(m.Body.URL)
		}
		d.mu.Unlock()
		switch {
		case b.Queue == demoDLQ, m.Body.Version != demoVersion:
			err = duilie.Ack(ev, i)
		case m.Body.Fail && !(strings.HasPrefix(m.Body.URL, "/flaky/") && m.Attempts >= 3):
			err = duilie.Retry(ev, i, 1)
		default:
			time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond) // the work
			err = duilie.Ack(ev, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// observe counts what became of the queue's messages, from the host's reports.
func (d *demoState) observe(r server.Report) {
	er, ok := r.(*server.EventReport)
	if !ok || er.Kind != duilie.QueueEvent || er.Queue != demoQueue {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range er.Messages {
		g := d.groupOf[m.ID]
		if g == nil {
			continue
		}
		g.delivered++
		if m.Attempts > 1 {
			g.retried++
		} else {
			g.latency = append(g.latency, m.Lag)
		}
		switch m.Result {
		case server.Acked:
			g.done++
		case server.DeadLettered:
			g.dead++
		}
	}
}

func runDemo(ctx context.Context, quick, verbose bool, stdout, stderr io.Writer) error {
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	dir, err := os.MkdirTemp("", "duilie-demo-")
	if err != nil {
		return &exitError{exitIOErr, fmt.Errorf("temporary directory: %w", err)}
	}
	defer os.RemoveAll(dir)

	d := &demoState{groups: demoWorkload(quick), groupOf: map[string]*demoGroup{}}
	cfg, err := server.ParseConfig("(demo)", dir, []byte(demoConfig))
	if err != nil {
		return &exitError{exitSoftware, err}
	}
	cfg.Program = &duilie.Program{Queue: d.program}
	cfg.Observers = []server.Observer{d.observe}
	cfg.Logger = log
	srv, err := server.New(*cfg)
	if err != nil {
		return &exitError{exitSoftware, err}
	}

	fmt.Fprintf(stdout, "duilie demo: the embedded engine in %s (removed at the end)\n", dir)
	fmt.Fprintf(stdout, "  queue %s: batches of up to 10, 4 at once, %d retries 1 s apart, then dead-letter queue %s\n",
		demoQueue, demoMaxRetries, demoDLQ)
	var parts []string
	for _, g := range d.groups {
		parts = append(parts, fmt.Sprintf("%d %s", g.count, g.label))
	}
	fmt.Fprintf(stdout, "  workload: %s\n\n", strings.Join(parts, ", "))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := srv.Start(runCtx); err != nil {
		return unavailable(err)
	}
	d.start = time.Now()
	sendErr := make(chan error, 1)
	go func() { sendErr <- d.send(runCtx, srv, quick) }()

	progress := newDemoProgress(stdout, d.totals().total)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	var failure error
loop:
	for {
		select {
		case <-ctx.Done():
			failure = &exitError{130, errors.New("demo interrupted")}
			break loop
		case err := <-sendErr:
			if err != nil {
				failure = &exitError{exitSoftware, fmt.Errorf("demo: sending: %w", err)}
				break loop
			}
		case err := <-srv.Failed():
			failure = unavailable(err)
			break loop
		case <-deadline:
			failure = &exitError{exitSoftware, errors.New("demo: the workload did not settle within 90 s")}
			break loop
		case <-tick.C:
			t := d.totals()
			progress.update(time.Since(d.start), t)
			if t.sent == t.total && t.done+t.dead == t.total {
				break loop
			}
		}
	}
	elapsed := time.Since(d.start)
	cancel()
	grace, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(grace)
	progress.finish(elapsed, d.totals())
	if failure != nil {
		return failure
	}
	fmt.Fprint(stdout, d.summary(elapsed))
	if err := d.check(); err != nil {
		return &exitError{exitSoftware, err}
	}
	return nil
}

// send sends the workload in waves, each one producer event with one 批量发送队列消息, spread
// over a few seconds so the consumer works while messages arrive.
func (d *demoState) send(ctx context.Context, srv *server.Server, quick bool) error {
	type item struct {
		g    *demoGroup
		body demoTask
		wait int
	}
	var items []item
	for _, g := range d.groups {
		for i := range g.count {
			items = append(items, item{g, g.task(i), g.delay(i)})
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })

	waves, gap := 24, 250*time.Millisecond
	if quick {
		waves, gap = 6, 150*time.Millisecond
	}
	per := (len(items) + waves - 1) / waves
	for len(items) > 0 {
		wave := items[:min(per, len(items))]
		items = items[len(wave):]
		type sendItem struct {
			Body         demoTask `json:"body"`
			DelaySeconds int      `json:"delaySeconds,omitempty"`
		}
		batch := make([]sendItem, len(wave))
		for i, it := range wave {
			batch[i] = sendItem{it.body, it.wait}
		}
		text, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		if err := srv.Client().Do(ctx, func(ev *duilie.Event) error {
			return duilie.SendBatch(ev, demoBinding, string(text))
		}); err != nil {
			return err
		}
		d.mu.Lock()
		for _, it := range wave {
			it.g.sent++
		}
		d.mu.Unlock()
		if len(items) > 0 {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// summary is the table printed at the end.
func (d *demoState) summary(elapsed time.Duration) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	rows := [][]string{{"workload", "sent", "delivered", "retried", "done", "dead-lettered"}}
	var t demoGroup
	for _, g := range d.groups {
		rows = append(rows, []string{g.label, itoa(g.sent), itoa(g.delivered), itoa(g.retried), itoa(g.done), itoa(g.dead)})
		t.sent += g.sent
		t.delivered += g.delivered
		t.retried += g.retried
		t.done += g.done
		t.dead += g.dead
	}
	rows = append(rows, []string{"total", itoa(t.sent), itoa(t.delivered), itoa(t.retried), itoa(t.done), itoa(t.dead)})

	var immediate, delayed []time.Duration
	for _, g := range d.groups {
		if g.prefix == "/release/" {
			delayed = append(delayed, g.latency...)
		} else {
			immediate = append(immediate, g.latency...)
		}
	}
	lat := [][]string{{"delivery latency (first deliveries)", "p50", "p90", "p99", "max"}}
	lat = append(lat, latencyRow(fmt.Sprintf("enqueue → handler start (%d)", len(immediate)), immediate))
	lat = append(lat, latencyRow(fmt.Sprintf("delayed: due time → handler start (%d)", len(delayed)), delayed))

	return fmt.Sprintf("\nall %d messages settled in %.1f s\n\n%s\n%s", t.sent, elapsed.Seconds(), table(rows, 1), table(lat, 1))
}

// check verifies that the numbers add up: every message was delivered once and then once
// per retry, and ended done or dead-lettered, the failing ones dead-lettered.
func (d *demoState) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var wrong []string
	for _, g := range d.groups {
		wantDead := 0
		if g.prefix == "/broken/" {
			wantDead = g.count
		}
		if g.sent != g.count || g.delivered != g.sent+g.retried || g.done+g.dead != g.sent || g.dead != wantDead ||
			len(g.latency) != g.sent {
			wrong = append(wrong, fmt.Sprintf("%s: sent %d of %d, delivered %d, retried %d, done %d, dead-lettered %d, first deliveries %d",
				g.label, g.sent, g.count, g.delivered, g.retried, g.done, g.dead, len(g.latency)))
		}
	}
	if len(wrong) > 0 {
		return errors.New("demo: the numbers do not add up:\n  " + strings.Join(wrong, "\n  "))
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func latencyRow(label string, ds []time.Duration) []string {
	if len(ds) == 0 {
		return []string{label, "-", "-", "-", "-"}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return []string{label, fmtLatency(bench.Percentile(s, 50)), fmtLatency(bench.Percentile(s, 90)),
		fmtLatency(bench.Percentile(s, 99)), fmtLatency(s[len(s)-1])}
}

func fmtLatency(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// demoProgress shows progress: a bar on a terminal, a plain line a second otherwise.
type demoProgress struct {
	w     io.Writer
	total int
	bar   *progressbar.ProgressBar
	last  time.Duration // when the last plain line was printed
	shown string        // and what it said
}

func newDemoProgress(w io.Writer, total int) *demoProgress {
	p := &demoProgress{w: w, total: total, last: -time.Second}
	p.bar = bench.ProgressBar(w, total)
	return p
}

func (p *demoProgress) line(t demoTotals) string {
	return fmt.Sprintf("sent %d/%d · delivered %d · retried %d · dead-lettered %d · settled %d/%d",
		t.sent, t.total, t.delivered, t.retried, t.dead, t.done+t.dead, t.total)
}

func (p *demoProgress) update(elapsed time.Duration, t demoTotals) {
	if p.bar != nil {
		p.bar.Describe(p.line(t))
		_ = p.bar.Set(t.done + t.dead)
		return
	}
	if elapsed-p.last >= time.Second {
		p.last, p.shown = elapsed, p.line(t)
		fmt.Fprintf(p.w, "%5.1fs  %s\n", elapsed.Seconds(), p.shown)
	}
}

func (p *demoProgress) finish(elapsed time.Duration, t demoTotals) {
	if p.bar != nil {
		p.bar.Describe(p.line(t))
		_ = p.bar.Set(t.done + t.dead)
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		return
	}
	if p.line(t) != p.shown {
		fmt.Fprintf(p.w, "%5.1fs  %s\n", elapsed.Seconds(), p.line(t))
	}
}
