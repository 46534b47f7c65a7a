package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bench"
)

func newBench() *cobra.Command {
	o := bench.Options{}
	asJSON := false
	queues := ""
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
waiting for a confirmation; and prints duilie's rates as a share of each. A raw run whose
consumer stalls (no message settled for 2 s while messages wait) is made again, three times at
most; one that stalls every time is shown but not compared.

--queues N (or a list, N,M,…) measures what each queue costs, as duilie serve runs them: one
configured consumer per queue, the server started fresh and started again on the same store
(each timed until every queue's consumer has run an event on a message sent right after the
start), left idle for --idle (its CPU per second and resident memory), then the load spread
evenly over the N queues; each count on an engine (or queues) of its own, and each run's
end-to-end rate as a share of the first's.`,
		Example: `  duilie bench                                # 100,000 messages of 200 B, 32 producers, Send
  duilie bench --batch 100 --compare-raw      # SendBatch of 100 beside raw nats.go
  duilie bench --duration 30s --delayed 0.1 --config duilie.toml --json
  duilie bench --queues 1,1000,10000          # per-queue cost: start, idle, load over many queues`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkQueues(cmd, queues, &o); err != nil {
				return err
			}
			if err := checkBench(cmd, &o); err != nil {
				return err
			}
			res, err := bench.Run(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return benchError(err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), benchTable(res))
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&o.ConfigPath, "config", "", "configuration file whose platform to measure (default: a temporary embedded engine)")
	f.IntVar(&o.Producers, "producers", 32, "concurrent producers, each one event")
	f.IntVar(&o.Batch, "batch", 1, "messages per send: 0 or 1 Send, 2–100 SendBatch")
	f.IntVar(&o.Size, "size", 200, "body size in bytes (a JSON string), 2–128000")
	f.IntVar(&o.Count, "count", 100_000, "messages to send (not with --duration)")
	f.DurationVar(&o.Duration, "duration", 0, "send for this long instead of --count messages")
	f.IntVar(&o.ConsumerBatch, "consumer-batch", 100, "the consumer's max_batch_size, 1–100")
	f.IntVar(&o.Concurrency, "concurrency", 4, "the consumer's max_concurrency, 1–250")
	f.Float64Var(&o.Delayed, "delayed", 0, "fraction of messages sent with a delay, 0–1")
	f.IntVar(&o.Delay, "delay", 1, fmt.Sprintf("the delay of delayed messages, in seconds (1–%d)", duilie.MaxDelaySeconds))
	f.StringVar(&o.Sync, "sync", "", `"always" to fsync every write (embedded engine); default: the configured sync, or "interval"`)
	f.BoolVar(&asJSON, "json", false, "print the results as JSON instead of a table")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the duilie run to this file; with --compare-raw, of the raw runs to FILE.raw-sync and FILE.raw-async")
	f.BoolVar(&o.Prefill, "prefill", false, "send everything first, then start the consumer (measures consuming alone)")
	f.BoolVar(&o.CompareRaw, "compare-raw", false, "also run raw nats.go doing the same work on the same server (jetstream platform)")
	f.StringVar(&queues, "queues", "", "spread the load over this many queues, each with a consumer, measuring start, restart and idle cost; a list N,M,… runs each")
	f.DurationVar(&o.Idle, "idle", 10*time.Second, "with --queues: how long to measure the idle CPU and memory")
	return c
}

func checkBench(cmd *cobra.Command, o *bench.Options) error {
	switch {
	case o.Producers < 1 || o.Producers > 10_000:
		return usageErr("--producers must be 1–10000")
	case o.Batch < 0 || o.Batch > 100:
		return usageErr("--batch must be 0–100 (0 or 1: Send; more: SendBatch)")
	case o.Size < 2 || o.Size > 128_000:
		return usageErr("--size must be 2–128000 bytes")
	case o.Batch > 1 && o.Batch*o.Size > 256_000:
		return usageErr("--batch × --size must be at most 256000 bytes (a batch's limit)")
	case o.Duration < 0:
		return usageErr("--duration must not be negative")
	case o.Duration == 0 && o.Count < 1:
		return usageErr("--count must be at least 1")
	case o.ConsumerBatch < 1 || o.ConsumerBatch > 100:
		return usageErr("--consumer-batch must be 1–100")
	case o.Concurrency < 1 || o.Concurrency > 250:
		return usageErr("--concurrency must be 1–250")
	case o.Delayed < 0 || o.Delayed > 1:
		return usageErr("--delayed must be a fraction 0–1")
	case o.Delay < 1 || o.Delay > duilie.MaxDelaySeconds:
		return usageErr("--delay must be 1–%d seconds", duilie.MaxDelaySeconds)
	}
	if o.Duration > 0 && cmd.Flags().Changed("count") {
		return usageErr("--count and --duration exclude each other")
	}
	if o.Batch == 0 {
		o.Batch = 1
	}
	return nil
}

// maxQueues bounds --queues: Cloudflare allows 10,000 queues an account; ten times that leaves
// room to look beyond.
const maxQueues = 100_000

// checkQueues reads --queues into o.Queues.
func checkQueues(cmd *cobra.Command, list string, o *bench.Options) error {
	if !cmd.Flags().Changed("queues") {
		if cmd.Flags().Changed("idle") {
			return usageErr("--idle goes with --queues")
		}
		return nil
	}
	for s := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > maxQueues {
			return usageErr("--queues must be a count of queues 1–%d, or a list of them like 1,1000,10000", maxQueues)
		}
		o.Queues = append(o.Queues, n)
	}
	switch {
	case o.CompareRaw:
		return usageErr("--compare-raw measures one queue; leave out --queues")
	case o.Prefill:
		return usageErr("--prefill does not go with --queues: their consumers run from the start")
	case o.Idle < time.Second:
		return usageErr("--idle must be at least 1s")
	}
	return nil
}

// benchError gives a failed bench its exit status.
func benchError(err error) error {
	var be *bench.Error
	if !errors.As(err, &be) {
		return err
	}
	switch be.Kind {
	case bench.Usage:
		return usageErr("%s", be.Err.Error())
	case bench.IO:
		return &exitError{exitIOErr, be.Err}
	case bench.Software:
		return &exitError{exitSoftware, be.Err}
	case bench.Interrupted:
		return &exitError{130, be.Err}
	}
	return &exitError{exitUnavailable, be.Err}
}

// benchTable is bench's results as a table.
func benchTable(r *bench.Result) string {
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
	if r.Idle != "" {
		b.WriteString("; spread over each run's queues, a consumer each")
	}
	b.WriteString("\n\n")
	ms := func(l *bench.Latency, f func(*bench.Latency) float64) string {
		if l == nil {
			return "-"
		}
		return fmtLatency(time.Duration(f(l) * float64(time.Millisecond)))
	}
	p50 := func(l *bench.Latency) float64 { return l.P50 }
	p99 := func(l *bench.Latency) float64 { return l.P99 }
	rows := [][]string{{"run", "messages", "send msgs/s", "end-to-end msgs/s", "consume msgs/s", "send call p50", "send call p99", "enqueue→handler p50", "enqueue→handler p99", "CPU/msg", "peak RSS"}}
	for _, run := range r.Runs {
		rows = append(rows, []string{run.Name, itoa(run.Messages), fmtRate(run.SendRate), fmtRate(run.EndToEndRate), fmtRate(run.ConsumeRate),
			ms(run.SendLatency, p50), ms(run.SendLatency, p99), ms(run.Latency, p50), ms(run.Latency, p99),
			fmt.Sprintf("%.0fµs", run.CPUPerMessage), fmt.Sprintf("%.0f MB", float64(run.PeakRSS)/1e6)})
	}
	b.WriteString(table(rows, 1))
	if r.Runs[0].Queues > 0 {
		b.WriteString("\n")
		b.WriteString(queuesTable(r))
	}
	ours := r.Runs[0]
	if l := ours.Lateness; l != nil {
		fmt.Fprintf(&b, "\ndelayed messages (%d): due time → handler start p50 %s, p99 %s, max %s\n", l.N,
			ms(l, p50), ms(l, p99), ms(l, func(l *bench.Latency) float64 { return l.Max }))
	}
	if ours.Redelivered > 0 {
		fmt.Fprintf(&b, "\n%d deliveries were redeliveries\n", ours.Redelivered)
	}
	if len(r.Runs) > 1 && r.Idle == "" {
		b.WriteString("\n")
		for _, raw := range r.Runs[1:] {
			if raw.Stalled {
				// A rate measured across a stall says nothing of either side.
				fmt.Fprintf(&b, "duilie / %s: not compared: its consumer stalled (no message settled for %.1f s while messages waited) in each of %d tries\n",
					raw.Name, raw.MaxStall, raw.Tries)
				continue
			}
			fmt.Fprintf(&b, "duilie / %s: send %.0f%%, end to end %.0f%%, consume %.0f%%", raw.Name,
				100*ours.SendRate/raw.SendRate, 100*ours.EndToEndRate/raw.EndToEndRate, 100*ours.ConsumeRate/raw.ConsumeRate)
			if raw.Tries > 1 {
				fmt.Fprintf(&b, " (try %d: the earlier ones stalled)", raw.Tries)
			}
			b.WriteString("\n")
		}
		b.WriteString("(raw runs send no delayed messages; their consumer acks without waiting for a confirmation)\n")
	}
	b.WriteString("CPU/msg is this process's user + system time (the embedded engine runs in it); peak RSS is the process's peak so far.\n")
	return b.String()
}

// queuesTable is the per-queue cost of runs over many queues: start, restart, idle, and each
// run's end-to-end rate as a share of the first's.
func queuesTable(r *bench.Result) string {
	rows := [][]string{{"queues", "start", "restart", "idle RSS", "idle CPU", "end-to-end msgs/s", "of the first"}}
	for i, run := range r.Runs {
		share := "-"
		if i > 0 {
			share = fmt.Sprintf("%.0f%%", 100*run.ShareOfFirst)
		}
		rows = append(rows, []string{itoa(run.Queues), fmt.Sprintf("%.2f s", run.StartSeconds), fmt.Sprintf("%.2f s", run.RestartSeconds),
			fmt.Sprintf("%.0f MB", float64(run.IdleRSS)/1e6), fmt.Sprintf("%.1f%%", 100*run.IdleCPU), fmtRate(run.EndToEndRate), share})
	}
	return table(rows, 1) + "start and restart: until every queue's consumer ran an event; idle CPU: of one core, over " + r.Idle + ".\n"
}

func fmtRate(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
