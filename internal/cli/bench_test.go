package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/duilie/duilie/internal/bench"
)

// bench with a tiny count on a temporary embedded engine, SendBatch of 10 with a tenth of the
// messages delayed, beside raw nats.go: the JSON says what ran, every message was sent and
// settled once by each run, the delayed ones are measured apart, and duilie's shares of both raw
// runs are there.
func TestBenchJSONCompareRaw(t *testing.T) {
	// Not parallel: TestBenchConfigTable profiles too, and a process has one CPU profile at a time.
	var stdout, stderr bytes.Buffer
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	code := Run(context.Background(), Options{}, []string{"bench", "--count", "300", "--producers", "4", "--batch", "10",
		"--consumer-batch", "20", "--concurrency", "2", "--delayed", "0.1", "--json", "--compare-raw", "--cpuprofile", prof}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	// A CPU profile of each run, for go tool pprof -diff_base.
	for _, f := range []string{prof, prof + ".raw-sync", prof + ".raw-async"} {
		if info, err := os.Stat(f); err != nil || info.Size() == 0 {
			t.Errorf("no CPU profile %s: %v", f, err)
		}
	}
	var res struct {
		Platform      string  `json:"platform"`
		Producers     int     `json:"producers"`
		Batch         int     `json:"batch"`
		Size          int     `json:"size"`
		Count         int     `json:"count"`
		ConsumerBatch int     `json:"consumer_batch"`
		Concurrency   int     `json:"concurrency"`
		Delayed       float64 `json:"delayed"`
		Delay         int     `json:"delay_seconds"`
		Prefill       bool    `json:"prefill"`
		Sync          string  `json:"sync"`
		CPUs          int     `json:"cpus"`
		Runs          []struct {
			Name         string                        `json:"name"`
			Messages     int                           `json:"messages"`
			SendSeconds  float64                       `json:"send_seconds"`
			SendRate     float64                       `json:"send_msgs_per_s"`
			EndToEndSecs float64                       `json:"end_to_end_seconds"`
			EndToEndRate float64                       `json:"end_to_end_msgs_per_s"`
			ConsumeRate  float64                       `json:"consume_msgs_per_s"`
			SendCalls    int                           `json:"send_calls"`
			SendLatency  *bench.Latency                `json:"send_call_latency_ms"`
			Latency      *bench.Latency                `json:"enqueue_to_handler_ms"`
			Lateness     *bench.Latency                `json:"delayed_due_to_handler_ms"`
			Note         string                        `json:"note"`
			CPU          float64                       `json:"cpu_us_per_msg"`
			PeakRSS      int64                         `json:"peak_rss_bytes"`
			Ratio        map[string]map[string]float64 `json:"share_of_raw"`
			Redelivered  int                           `json:"redelivered"`
			MaxStall     float64                       `json:"max_stall_seconds"`
			Tries        int                           `json:"tries"`
		} `json:"runs"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("%v in:\n%s", err, stdout.String())
	}
	t.Logf("\n%s", stdout.String())
	if res.Platform != "embedded engine in a temporary directory" || res.Producers != 4 || res.Batch != 10 || res.Size != 200 ||
		res.Count != 300 || res.ConsumerBatch != 20 || res.Concurrency != 2 || res.Delayed != 0.1 || res.Delay != 1 ||
		res.Sync != "interval" || res.CPUs < 1 {
		t.Errorf("settings: %+v", res)
	}
	if len(res.Runs) != 3 || res.Runs[0].Name != "duilie" || res.Runs[1].Name != "raw js.Publish" || res.Runs[2].Name != "raw PublishAsync" {
		t.Fatalf("runs: %+v", res.Runs)
	}
	ours := res.Runs[0]
	if ours.SendCalls != 30 || ours.SendLatency == nil || ours.SendLatency.N != 30 || ours.SendLatency.P50 <= 0 {
		t.Errorf("duilie's send calls: %d, %+v", ours.SendCalls, ours.SendLatency)
	}
	if ours.Latency == nil || ours.Latency.N != 270 || ours.Lateness == nil || ours.Lateness.N != 30 || ours.Lateness.P50 < 0 {
		t.Errorf("duilie's latencies: immediate %+v, delayed %+v", ours.Latency, ours.Lateness)
	}
	if ours.Redelivered != 0 {
		t.Errorf("%d redeliveries", ours.Redelivered)
	}
	for _, r := range res.Runs {
		if r.Messages != 300 || r.SendRate <= 0 || r.EndToEndRate <= 0 || r.ConsumeRate <= 0 || r.CPU <= 0 || r.PeakRSS <= 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if r.Name != "duilie" && (r.Latency == nil || r.Latency.N != 300 || r.Lateness != nil || r.Tries < 1) {
			t.Errorf("%s's latencies: %+v, %+v", r.Name, r.Latency, r.Lateness)
		}
	}
	for _, raw := range []string{"raw js.Publish", "raw PublishAsync"} {
		if s := ours.Ratio[raw]; s["send"] <= 0 || s["end_to_end"] <= 0 || s["consume"] <= 0 {
			t.Errorf("share of %s: %v", raw, ours.Ratio)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+\d+\.\ds  duilie: sent 300 · settled 300$`).MatchString(stderr.String()) ||
		!strings.Contains(stderr.String(), "raw PublishAsync: sent 300 · settled 300\n") {
		t.Errorf("progress on stderr:\n%s", stderr.String())
	}
}

// bench on a configured data directory with single sends prints its table, and deletes the
// queue it made.
func TestBenchConfigTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "duilie.toml")
	if err := os.WriteFile(cfg, []byte("[platform]\ndata_dir = \"data\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), Options{}, []string{"bench", "--config", cfg, "--count", "200", "--producers", "3", "--sync", "always", "--prefill",
		"--cpuprofile", filepath.Join(dir, "cpu.prof")},
		nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	out := stdout.String()
	t.Logf("\n%s", out)
	if !strings.HasPrefix(out, "duilie bench: configured platform ("+cfg+"), sync always, ") ||
		!strings.Contains(out, "  200 messages of 200 B, 3 producers, Send; consumer batches of up to 100, 4 at once; the consumer started once all were sent\n") ||
		!regexp.MustCompile(`(?m)^duilie\s+200\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+\S+ms`).MatchString(out) || strings.Contains(out, "raw") {
		t.Errorf("table:\n%s", out)
	}
	if info, err := os.Stat(filepath.Join(dir, "cpu.prof")); err != nil || info.Size() == 0 {
		t.Errorf("no CPU profile: %v", err)
	}
	stdout.Reset()
	if code := Run(context.Background(), Options{}, []string{"queues", "--config", cfg}, nil, &stdout, &stderr); code != 0 ||
		strings.Contains(stdout.String(), "duilie-bench-") {
		t.Errorf("queues after bench: exit %d\n%s", code, stdout.String())
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--count", "10", "--duration", "1s"},
		{"--batch", "101"},
		{"--batch", "100", "--size", "3000"},
		{"--delayed", "1.5"},
		{"--sync", "sometimes"},
		{"--consumer-batch", "0"},
		{"--queues", "0"},
		{"--queues", "1,x"},
		{"--queues", "100001"},
		{"--queues", "10", "--compare-raw"},
		{"--queues", "10", "--prefill"},
		{"--queues", "10", "--idle", "10ms"},
		{"--idle", "5s"},
	} {
		var stderr bytes.Buffer
		code := Run(context.Background(), Options{}, append([]string{"bench"}, args...), nil, &bytes.Buffer{}, &stderr)
		if code != exitUsage || !strings.HasSuffix(stderr.String(), "Run 'duilie bench --help' for usage.\n") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// bench over many queues: each count a run of its own, as serve runs them, with its start,
// restart and idle cost, every message sent and settled once, each run's share of the first.
func TestBenchQueues(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), Options{}, []string{"bench", "--queues", "1,7", "--count", "210", "--producers", "3", "--batch", "5",
		"--idle", "1s", "--json"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v in:\n%s", err, stdout.String())
	}
	t.Logf("\n%s", stdout.String())
	if res.Idle != "1s" || len(res.Runs) != 2 || res.Runs[0].Name != "duilie, 1 queue" || res.Runs[1].Name != "duilie, 7 queues" {
		t.Fatalf("runs: %+v", res)
	}
	for i, r := range res.Runs {
		if r.Queues != []int{1, 7}[i] || r.Messages != 210 || r.SendCalls != 42 || r.Redelivered != 0 || r.EndToEndRate <= 0 ||
			r.StartSeconds <= 0 || r.RestartSeconds <= 0 || r.IdleRSS <= 0 || r.IdleHeap <= 0 || r.IdleCPU <= 0 || r.Latency == nil || r.Latency.N != 210 {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	if res.Runs[0].ShareOfFirst != 0 || res.Runs[1].ShareOfFirst != round3(res.Runs[1].EndToEndRate/res.Runs[0].EndToEndRate) {
		t.Errorf("shares of the first: %v, %v", res.Runs[0].ShareOfFirst, res.Runs[1].ShareOfFirst)
	}
	for _, want := range []string{"duilie, 7 queues: start: every queue consumed after ", "duilie, 7 queues: restart: every queue consumed after ",
		"duilie, 7 queues: idle for 1s", "duilie, 7 queues: sent 210 · settled 210"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	table := benchTable(&res)
	if !regexp.MustCompile(`(?m)^7\s+[\d.]+ s\s+[\d.]+ s\s+\d+ MB\s+[\d.]+%\s+[\d,]+\s+\d+%$`).MatchString(table) || strings.Contains(table, "raw") {
		t.Errorf("table:\n%s", table)
	}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// A raw run that stalled in every try is shown, and not compared.
func TestBenchTableStalledRaw(t *testing.T) {
	run := func(name string, rate, stall float64, tries int, stalled bool) bench.Measurement {
		return bench.Measurement{Name: name, Messages: 1000, SendRate: rate, EndToEndRate: rate, ConsumeRate: rate,
			MaxStall: stall, Tries: tries, Stalled: stalled}
	}
	out := benchTable(&bench.Result{Platform: "p", Count: 1000, Runs: []bench.Measurement{run("duilie", 50000, 0, 0, false),
		run("raw js.Publish", 40000, 0.3, 2, false), run("raw PublishAsync", 5000, 29.1, 3, true)}})
	t.Logf("\n%s", out)
	if !strings.Contains(out, "duilie / raw js.Publish: send 125%, end to end 125%, consume 125% (try 2: the earlier ones stalled)\n") ||
		!strings.Contains(out, "duilie / raw PublishAsync: not compared: its consumer stalled (no message settled for 29.1 s while messages waited) in each of 3 tries\n") ||
		strings.Contains(out, "1000%") {
		t.Errorf("table:\n%s", out)
	}
}
