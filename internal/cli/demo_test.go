package cli

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The demo runs its quick workload on the embedded engine and its summary adds up: every
// message delivered once plus once per retry, done or dead-lettered, and a latency for every
// first delivery. Its temporary directory is gone afterwards.
func TestDemo(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Run(context.Background(), Options{}, []string{"demo", "--quick"}, nil, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr.String(), out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the quick demo took %v", took)
	}
	t.Logf("\n%s", out)

	dir := regexp.MustCompile(`the embedded engine in (\S+) `).FindStringSubmatch(out)
	if dir == nil {
		t.Fatal("no data directory in the output")
	}
	if _, err := os.Stat(dir[1]); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir[1], err)
	}
	if !regexp.MustCompile(`(?m)^\s+\d+\.\ds  sent \d+/\d+ · delivered \d+ · retried \d+ · dead-lettered \d+ · settled (\d+)/(\d+)$`).MatchString(out) {
		t.Error("no progress line (stdout is not a terminal: plain lines)")
	}

	rows := map[string][5]int{} // sent, delivered, retried, done, dead-lettered
	rx := regexp.MustCompile(`(?m)^(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)
	for _, m := range rx.FindAllStringSubmatch(out, -1) {
		var r [5]int
		for i := range r {
			r[i], _ = strconv.Atoi(m[i+2])
		}
		rows[m[1]] = r
	}
	want := map[string]struct{ sent, retried, dead int }{
		"immediate":                  {30, 0, 0},
		"delayed 1–2 s":              {6, 0, 0},
		"fails twice, then succeeds": {4, 8, 0},
		"always fails":               {2, 4, 2}, // max_retries 2: three deliveries, then the dead-letter queue
		"stale version (acked)":      {4, 0, 0},
	}
	var sum [5]int
	for label, w := range want {
		r, ok := rows[label]
		if !ok {
			t.Errorf("no row %q", label)
			continue
		}
		if r[0] != w.sent || r[2] != w.retried || r[4] != w.dead || r[1] != r[0]+r[2] || r[3]+r[4] != r[0] {
			t.Errorf("%s: sent %d delivered %d retried %d done %d dead-lettered %d", label, r[0], r[1], r[2], r[3], r[4])
		}
		for i := range sum {
			sum[i] += r[i]
		}
	}
	if rows["total"] != sum {
		t.Errorf("total %v, rows add up to %v", rows["total"], sum)
	}

	lat := regexp.MustCompile(`(?m)^enqueue → handler start \((\d+)\)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$`).FindStringSubmatch(out)
	if lat == nil || lat[1] != "40" {
		t.Fatalf("latency row: %q", lat)
	}
	var prev time.Duration
	for _, s := range lat[2:] {
		d, err := time.ParseDuration(s)
		if err != nil || d < prev || d > 5*time.Second {
			t.Errorf("latency percentiles %v are not ascending and plausible", lat[2:])
		}
		prev = d
	}
	if !strings.Contains(out, "delayed: due time → handler start (6)") {
		t.Error("no latency row for the delayed messages")
	}
}

// The demo's own check fails when the numbers do not add up (a lost or doubled delivery).
func TestDemoCheck(t *testing.T) {
	d := &demoState{groups: demoWorkload(true)}
	for _, g := range d.groups {
		g.sent, g.delivered, g.done = g.count, g.count, g.count
		g.latency = make([]time.Duration, g.count)
		if g.prefix == "/broken/" {
			g.done, g.dead = 0, g.count
		}
	}
	if err := d.check(); err != nil {
		t.Fatalf("consistent numbers: %v", err)
	}
	d.groups[0].delivered++ // a delivery without a retry
	err := d.check()
	if err == nil || !strings.Contains(err.Error(), "immediate: sent 30 of 30, delivered 31, retried 0, done 30, dead-lettered 0, first deliveries 30") {
		t.Errorf("got %v", err)
	}
}
