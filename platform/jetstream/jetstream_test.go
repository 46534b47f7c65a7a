package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/duilie/duilie/platform"
)

var quiet = slog.New(slog.DiscardHandler)

func open(t testing.TB, cfg Config) *Platform {
	t.Helper()
	if cfg.DataDir == "" && cfg.URL == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func queueOf(t testing.TB, p platform.Platform, name string) platform.Queue {
	t.Helper()
	q, err := p.Queue(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func consume(t testing.TB, p platform.Platform, name string, ackWait time.Duration) platform.Consumer {
	t.Helper()
	c, err := p.Consume(context.Background(), name, platform.ConsumerOptions{MaxBatchSize: 10, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, q platform.Queue, body string, delay int) {
	t.Helper()
	if err := q.Send(context.Background(), []byte(body), platform.SendOptions{ContentType: platform.JSON, DelaySeconds: delay}); err != nil {
		t.Fatal(err)
	}
}

// receive returns the next batch of up to n messages, failing after within.
func receive(t testing.TB, c platform.Consumer, n int, within time.Duration) []platform.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := c.Receive(ctx, n)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(ds) == 0 || len(ds) > n {
		t.Fatalf("receive returned %d messages for a limit of %d", len(ds), n)
	}
	return ds
}

// receiveAll collects exactly n messages.
func receiveAll(t testing.TB, c platform.Consumer, n int, within time.Duration) []platform.Delivery {
	t.Helper()
	deadline := time.Now().Add(within)
	var all []platform.Delivery
	for len(all) < n {
		all = append(all, receive(t, c, n-len(all), time.Until(deadline))...)
	}
	return all
}

// nothing asserts that no message is delivered for d.
func nothing(t testing.TB, c platform.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := c.Receive(ctx, 10)
	if err == nil {
		t.Fatalf("unexpected delivery of %d messages: %s", len(ds), ds[0].Body)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive: %v", err)
	}
}

func settle(t testing.TB, c platform.Consumer, queue string, action platform.Action, ds ...platform.Delivery) {
	t.Helper()
	s := platform.Settlement{Queue: queue}
	for _, d := range ds {
		s.Messages = append(s.Messages, platform.Resolution{Delivery: d, Action: action})
	}
	if err := c.Settle(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func stats(t testing.TB, p platform.Platform) []platform.QueueStats {
	t.Helper()
	s, err := p.(platform.Stater).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventually retries f until it returns nil or within passes.
func eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantStats(t testing.TB, p platform.Platform, want ...platform.QueueStats) {
	t.Helper()
	eventually(t, 3*time.Second, func() error {
		got := stats(t, p)
		if !slices.Equal(got, want) {
			return fmt.Errorf("stats = %+v, want %+v", got, want)
		}
		return nil
	})
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestSendReceiveAck(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	before := time.Now().UnixMilli()
	send(t, q, `{"n":1}`, 0)
	if err := q.Send(context.Background(), []byte("hello"), platform.SendOptions{ContentType: platform.Text}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	c := consume(t, p, "q", time.Minute)
	ds := receiveAll(t, c, 2, 2*time.Second)
	for i, want := range []struct {
		body  string
		ctype platform.ContentType
	}{{`{"n":1}`, platform.JSON}, {"hello", platform.Text}} {
		d := ds[i]
		if string(d.Body) != want.body || d.ContentType != want.ctype || d.Attempts != 1 ||
			!idPattern.MatchString(d.ID) || d.Timestamp < before || d.Timestamp > after {
			t.Errorf("message %d = %+v", i, d.Message)
		}
	}
	if ds[0].ID == ds[1].ID {
		t.Error("two messages share an id")
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", InFlight: 2})
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	wantStats(t, p, platform.QueueStats{Queue: "q"})
	nothing(t, c, 300*time.Millisecond)
}

func TestReceiveLimitAndWait(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	nothing(t, c, 200*time.Millisecond) // an empty queue: the context's error, never an empty batch
	for i := range 10 {
		send(t, q, fmt.Sprint(i), 0)
	}
	// The pull request the empty Receive left open may bring the first message alone (it came
	// before the rest were sent); after it, batches are full while enough are ready.
	var sizes []int
	var bodies []string
	for len(bodies) < 10 && len(sizes) < 10 {
		ds := receive(t, c, 4, time.Second)
		sizes = append(sizes, len(ds))
		for _, d := range ds {
			bodies = append(bodies, string(d.Body))
		}
	}
	if slices.Max(sizes) != 4 || slices.Contains(sizes[1:len(sizes)-1], 1) || len(sizes) > 4 ||
		strings.Join(bodies, ",") != "0,1,2,3,4,5,6,7,8,9" {
		t.Fatalf("batches %v, bodies %v", sizes, bodies)
	}
	// A blocked Receive returns as soon as a message is sent.
	go func() {
		time.Sleep(100 * time.Millisecond)
		send(t, q, "late", 0)
	}()
	start := time.Now()
	ds := receive(t, c, 10, 2*time.Second)
	if waited := time.Since(start); string(ds[0].Body) != "late" || waited > 150*time.Millisecond {
		t.Fatalf("got %s after %v", ds[0].Body, waited)
	}
}

func TestDelayedSend(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	start := time.Now()
	send(t, q, "2", 2)
	send(t, q, "1", 1)
	send(t, q, "0", 0)
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 1, Delayed: 2})
	for _, want := range []string{"0", "1", "2"} {
		d := receive(t, c, 1, 4*time.Second)[0]
		at := time.Since(start)
		due := time.Duration(d.Body[0]-'0') * time.Second
		if string(d.Body) != want || at < due || at > due+time.Second {
			t.Errorf("message %s due at %v arrived at %v", d.Body, due, at)
		}
		if d.Attempts != 1 || d.Timestamp > start.UnixMilli()+100 {
			t.Errorf("message %s: attempts %d, timestamp %d ms after the send", d.Body, d.Attempts, d.Timestamp-start.UnixMilli())
		}
		settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	send(t, q, `"x"`, 0)
	first := receive(t, c, 1, time.Second)[0]

	// With a delay: a scheduled copy with the same identity, attempts + 1.
	start := time.Now()
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver, Delay: time.Second}, first)
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: 1})
	d := receive(t, c, 1, 3*time.Second)[0]
	if at := time.Since(start); at < time.Second || at > 2*time.Second {
		t.Errorf("retry after 1 s arrived after %v", at)
	}
	if d.ID != first.ID || d.Timestamp != first.Timestamp || string(d.Body) != `"x"` || d.ContentType != platform.JSON || d.Attempts != 2 {
		t.Errorf("retried message = %+v, first = %+v", d.Message, first.Message)
	}

	// Without a delay: at once.
	start = time.Now()
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver}, d)
	d = receive(t, c, 1, time.Second)[0]
	if at := time.Since(start); at > 200*time.Millisecond || d.Attempts != 3 || d.ID != first.ID {
		t.Errorf("immediate retry: attempts %d after %v", d.Attempts, at)
	}
	// And once more with a delay: attempts keep counting across both kinds.
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver, Delay: time.Second}, d)
	d = receive(t, c, 1, 3*time.Second)[0]
	if d.Attempts != 4 || d.ID != first.ID {
		t.Errorf("attempts %d, want 4", d.Attempts)
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}

func TestAckWaitAndInProgress(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Second)
	send(t, q, "a", 0)
	send(t, q, "b", 0)
	ds := receiveAll(t, c, 2, time.Second)
	start := time.Now()
	// Keep "a" in progress; let "b" lapse.
	for range 5 {
		time.Sleep(300 * time.Millisecond)
		if err := c.InProgress(context.Background(), ds[:1]); err != nil {
			t.Fatal(err)
		}
	}
	d := receive(t, c, 10, 2*time.Second)
	if len(d) != 1 || string(d[0].Body) != "b" || d[0].Attempts != 2 || d[0].ID != ds[1].ID {
		t.Fatalf("redelivered %+v", d)
	}
	if at := time.Since(start); at < time.Second {
		t.Errorf("redelivered after %v, before the ack wait", at)
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds[0], d[0])
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}

func TestDeadLetterAndDrop(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	send(t, q, `{"dead":true}`, 0)
	send(t, q, `{"drop":true}`, 0)
	ds := receiveAll(t, c, 2, time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver}, ds...)
	ds = receiveAll(t, c, 2, time.Second)
	if ds[0].Attempts != 2 {
		t.Fatalf("attempts %d", ds[0].Attempts)
	}
	s := platform.Settlement{Queue: "q", Failed: true, Messages: []platform.Resolution{
		{Delivery: ds[0], Action: platform.Action{Kind: platform.DeadLetter, Queue: "dlq"}},
		{Delivery: ds[1], Action: platform.Action{Kind: platform.Drop}},
	}}
	if err := c.Settle(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "dlq", Ready: 1}, platform.QueueStats{Queue: "q"})
	nothing(t, c, 200*time.Millisecond)
	dc := consume(t, p, "dlq", time.Minute)
	d := receive(t, dc, 10, time.Second)
	if len(d) != 1 || d[0].ID != ds[0].ID || d[0].Timestamp != ds[0].Timestamp || string(d[0].Body) != `{"dead":true}` ||
		d[0].ContentType != platform.JSON || d[0].Attempts != 1 {
		t.Fatalf("dead letter = %+v, original %+v", d, ds[0].Message)
	}
}

func TestSendBatch(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	items := make([]platform.BatchItem, 100)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
		if i%10 == 0 {
			items[i].DelaySeconds = 1
		}
	}
	start := time.Now()
	if err := q.SendBatch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 90, Delayed: 10})
	ds := receiveAll(t, c, 90, time.Second)
	for i, d := range ds { // in order, delayed items left out
		if want := i + i/9 + 1; string(d.Body) != fmt.Sprint(want) {
			t.Fatalf("message %d is %s, want %d", i, d.Body, want)
		}
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	late := receiveAll(t, c, 10, 3*time.Second)
	if at := time.Since(start); at < time.Second {
		t.Errorf("delayed items arrived after %v", at)
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, late...)

	// A batch whose envelope the server refuses leaves nothing behind, delayed items included.
	testHookEnvelope = func(m *nats.Msg) { m.Header.Set("Nats-Expected-Last-Sequence", "1") }
	defer func() { testHookEnvelope = nil }()
	err := q.SendBatch(context.Background(), items)
	if err == nil || !strings.Contains(err.Error(), "wrong last sequence") {
		t.Fatalf("failed batch: %v", err)
	}
	testHookEnvelope = nil
	wantStats(t, p, platform.QueueStats{Queue: "q"})
	nothing(t, c, 1500*time.Millisecond) // past the delayed items' due time

	// A message the server refuses once, after the envelope was stored, is published again:
	// the batch is stored whole, each message once.
	refused := false
	testHookFanOut = func(i int, m *nats.Msg) error {
		if i == 50 && !refused {
			refused = true
			m.Header.Set("Nats-Expected-Last-Sequence", "1")
		}
		return nil
	}
	defer func() { testHookFanOut = nil }()
	if err := q.SendBatch(context.Background(), items); err != nil || !refused {
		t.Fatalf("batch with a message refused once: %v (refused %v)", err, refused)
	}
	testHookFanOut = nil
	ds = receiveAll(t, c, 100, 3*time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	nothing(t, c, 500*time.Millisecond)
}

// A sender that stops after storing a batch's envelope, before all of its messages are stored
// (here: before any, and after 50), leaves a batch that the next open of the engine completes:
// every message once (the duplicate window covers those stored before the stop), delayed items
// at their time, and no envelope left.
func TestSendBatchFinishedAtOpen(t *testing.T) {
	for _, stopAt := range []int{0, 50} {
		t.Run(fmt.Sprintf("stop at %d", stopAt), func(t *testing.T) {
			dir := t.TempDir()
			p, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			q := queueOf(t, p, "q")
			items := make([]platform.BatchItem, 100)
			for i := range items {
				items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
				if i%10 == 0 {
					items[i].DelaySeconds = 2
				}
			}
			testHookFanOut = func(i int, m *nats.Msg) error {
				if i == stopAt {
					return errors.New("stopped")
				}
				return nil
			}
			defer func() { testHookFanOut = nil }()
			start := time.Now()
			err = q.SendBatch(context.Background(), items)
			testHookFanOut = nil
			if err == nil || !strings.Contains(err.Error(), "the batch is stored, but not yet all of its messages") {
				t.Fatalf("stopped batch: %v", err)
			}
			// Before: only what was published before the stop (no delayed item is among the first
			// 50 but items 0, 10, 20, 30, 40), and the envelope counted nowhere.
			wantStats(t, p, platform.QueueStats{Queue: "q", Ready: int64(stopAt - stopAt/10), Delayed: int64(stopAt / 10)})
			p.Close()
			p, err = Open(context.Background(), Config{DataDir: dir, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 90, Delayed: 10})
			if n := p.js; n != nil {
				st, err := p.js.Stream(context.Background(), streamName("q"))
				if err != nil {
					t.Fatal(err)
				}
				if msgs := st.CachedInfo().State.Msgs; msgs != 100 {
					t.Errorf("%d stream messages, want 100 (no envelope)", msgs)
				}
			}
			c := consume(t, p, "q", time.Minute)
			ds := receiveAll(t, c, 90, 2*time.Second)
			late := receiveAll(t, c, 10, 4*time.Second)
			if at := time.Since(start); at < 2*time.Second {
				t.Errorf("delayed items arrived after %v", at)
			}
			seen := map[string]bool{}
			for _, d := range append(ds, late...) {
				if seen[string(d.Body)] {
					t.Errorf("message %s twice", d.Body)
				}
				seen[string(d.Body)] = true
			}
			if len(seen) != 100 {
				t.Errorf("%d distinct messages", len(seen))
			}
			nothing(t, c, 300*time.Millisecond)
		})
	}
}

func TestStatsSortedAndCounted(t *testing.T) {
	p := open(t, Config{})
	b := queueOf(t, p, "b-queue")
	a := queueOf(t, p, "a-queue")
	for range 3 {
		send(t, b, "1", 0)
	}
	send(t, b, "1", 60)
	send(t, a, "1", 60)
	send(t, a, "1", 120)
	c := consume(t, p, "b-queue", time.Minute)
	receive(t, c, 1, time.Second)
	wantStats(t, p,
		platform.QueueStats{Queue: "a-queue", Delayed: 2},
		platform.QueueStats{Queue: "b-queue", Ready: 2, Delayed: 1, InFlight: 1})
}

func TestQueueNames(t *testing.T) {
	p := open(t, Config{})
	for _, bad := range []string{"", "Upper", "-x", "a.b", "a*", strings.Repeat("a", 64)} {
		if _, err := p.Queue(context.Background(), bad); err == nil {
			t.Errorf("queue %q accepted", bad)
		}
	}
	queueOf(t, p, strings.Repeat("a", 63))
	queueOf(t, p, "0-a")
}

func TestConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Retention: 59 * time.Second}, {Retention: 337 * time.Hour}, {Replicas: 2}, {Replicas: 3},
		{Sync: "sometimes"}, {URL: "nats://127.0.0.1:1", Sync: SyncAlways},
		{Creds: "x"}, {URL: "nats://127.0.0.1:1", TLSCert: "c"},
	} {
		if _, err := Open(context.Background(), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestSyncAlways(t *testing.T) {
	dir := t.TempDir()
	p := open(t, Config{DataDir: dir, Sync: SyncAlways})
	if !p.srv.JetStreamConfig().SyncAlways {
		t.Fatal("sync always not set on the server")
	}
	q := queueOf(t, p, "q")
	send(t, q, "1", 0)
	c := consume(t, p, "q", time.Minute)
	settle(t, c, "q", platform.Action{Kind: platform.Done}, receive(t, c, 1, time.Second)...)
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}

// A second open of a directory whose holder does not serve waits LockWait for it, however
// long its context would allow (a send's is its time limit), then fails naming the directory
// and the holder.
func TestLockWithoutServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, Config{DataDir: dir})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, Config{DataDir: dir, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "does not accept local commands") ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second open: %v", err)
	}
	if waited := time.Since(start); waited < LockWait || waited > LockWait+2*time.Second {
		t.Fatalf("second open failed after %v, want LockWait (%v)", waited, LockWait)
	}
}

func TestLockServeAttach(t *testing.T) {
	dir := t.TempDir()
	holder := open(t, Config{DataDir: dir, Serve: true})
	info, err := os.Stat(filepath.Join(dir, serveFileName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("serve record: %v %v", info, err)
	}
	client, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !client.Attached() || holder.Attached() {
		t.Fatal("the second open did not attach")
	}
	// A second serving process never shares the directory: it is told at once.
	start := time.Now()
	if _, err := Open(context.Background(), Config{DataDir: dir, Serve: true, Logger: quiet}); err == nil ||
		!strings.Contains(err.Error(), "is in use by another duilie serve") || time.Since(start) > time.Second {
		t.Errorf("a second serve: %v after %v", err, time.Since(start))
	}
	send(t, queueOf(t, client, "q"), "from-client", 0)
	wantStats(t, client, platform.QueueStats{Queue: "q", Ready: 1})
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	c := consume(t, holder, "q", time.Minute)
	if d := receive(t, c, 1, time.Second); string(d[0].Body) != "from-client" {
		t.Fatalf("holder got %s", d[0].Body)
	}
	// A client with a wrong token is refused.
	rec, _ := readServeRecord(dir)
	if nc, err := nats.Connect(rec.URL, nats.Token("guess")); err == nil {
		nc.Close()
		t.Fatal("connected with a wrong token")
	}
	c.Close()
	holder.Close()
	if _, err := os.Stat(filepath.Join(dir, serveFileName)); !os.IsNotExist(err) {
		t.Fatalf("serve record left after close: %v", err)
	}
	// With the holder gone, the next Open runs the engine itself, with the message kept (still
	// in flight: it was delivered and never settled).
	again := open(t, Config{DataDir: dir})
	if again.Attached() {
		t.Fatal("attached to a closed engine")
	}
	wantStats(t, again, platform.QueueStats{Queue: "q", InFlight: 1})
}

func TestStaleServeRecord(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.record(serveRecord{URL: "nats://127.0.0.1:1", Token: "x", PID: 1}); err != nil {
		t.Fatal(err)
	}
	l.f.Close() // as if the holder died: the lock is free, the record stays
	p := open(t, Config{DataDir: dir})
	if p.Attached() {
		t.Fatal("attached to a stale record")
	}
	if _, err := os.Stat(filepath.Join(dir, serveFileName)); !os.IsNotExist(err) {
		t.Fatal("stale serve record not removed")
	}
}

func TestCloseWakesReceive(t *testing.T) {
	p := open(t, Config{})
	c, err := p.Consume(context.Background(), "q", platform.ConsumerOptions{MaxBatchSize: 1, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := c.Receive(context.Background(), 1)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, platform.ErrClosed) {
			t.Fatalf("receive after close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake Receive")
	}
	p.Close()
	if _, err := p.Queue(context.Background(), "q"); !errors.Is(err, platform.ErrClosed) {
		t.Fatalf("queue after close: %v", err)
	}
}

// TestReceiveWithoutLeader: a pull request that no server answers for (a consumer without a
// leader, as in a cluster just after it is made or after its server is lost) is asked again
// until the consumer answers; after leaderWait of silence Receive reports it.
func TestReceiveWithoutLeader(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	ctx := context.Background()
	if err := p.js.DeleteConsumer(ctx, streamName("q"), consumerName); err != nil {
		t.Fatal(err)
	}
	send(t, q, `"after the election"`, 0)
	time.AfterFunc(500*time.Millisecond, func() {
		if err := ensureConsumer(ctx, p.js, "q", time.Minute); err != nil {
			t.Error(err)
		}
	})
	ds := receive(t, c, 1, 10*time.Second)
	if string(ds[0].Body) != `"after the election"` {
		t.Fatalf("received %s", ds[0].Body)
	}

	defer func(w time.Duration) { leaderWait = w }(leaderWait)
	leaderWait = 300 * time.Millisecond
	if err := p.js.DeleteConsumer(ctx, streamName("q"), consumerName); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Receive(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive ended by its ctx while no server answers: %v, want the ctx's error", err)
	}
	start := time.Now()
	_, err := c.Receive(ctx, 1)
	if !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "queue q") {
		t.Fatalf("receive from a consumer that stays gone: %v, want no responders naming the queue", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("gave up after %v, want about leaderWait", waited)
	}
}

// An answer of no responders that comes after its Receive gave up ends that request too: the
// next Receive asks again at once, instead of waiting for the request's expiry.
func TestReceiveLateNoResponders(t *testing.T) {
	p := open(t, Config{})
	c := consume(t, p, "q", time.Minute)
	ctx := context.Background()
	short, cancel := context.WithCancel(ctx) // no deadline: the request asks for pullWait
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := c.Receive(short, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("receive from an empty queue: %v", err)
	}
	jc := c.(*consumer)
	jc.mu.Lock()
	open, asked := jc.open, jc.seq
	jc.mu.Unlock()
	if open == "" {
		t.Fatal("no request open after a Receive that gave up")
	}
	if err := p.nc.PublishMsg(&nats.Msg{Subject: open, Header: nats.Header{"Status": []string{"503"}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	short, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _ = c.Receive(short, 1)
	jc.mu.Lock()
	if jc.seq == asked {
		t.Error("the Receive after a late no-responders answer did not ask again")
	}
	jc.mu.Unlock()
}

func TestParseAckReply(t *testing.T) {
	for _, tc := range []struct {
		reply string
		ok    bool
		m     ackMeta
	}{
		{"$JS.ACK.DUILIE_q.duilie.3.17.5.1700000000000000000.0", true, ackMeta{3, 17, 1700000000000000000}},
		{"$JS.ACK.hub.ACCHASH.DUILIE_q.duilie.2.9.4.1700000000000000000.1.abc", true, ackMeta{2, 9, 1700000000000000000}},
		{"$JS.ACK.hub.ACCHASH.DUILIE_q.duilie.2.9.4.1700000000000000000.1", true, ackMeta{2, 9, 1700000000000000000}},
		{"_INBOX.x", false, ackMeta{}},
		{"$JS.ACK.DUILIE_q.duilie.x.17.5.1.0", false, ackMeta{}},
	} {
		m, ok := parseAckReply(tc.reply)
		if ok != tc.ok || (ok && m != tc.m) {
			t.Errorf("parseAckReply(%q) = %+v, %v", tc.reply, m, ok)
		}
	}
}

// TestRestart closes the engine cleanly with a delayed send, a retry waiting for its delay, a
// message in flight and a dead letter, and opens it again.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Second)
	start := time.Now()
	send(t, q, `"delayed"`, 2)
	send(t, q, `"retried"`, 0)
	send(t, q, `"dead"`, 0)
	send(t, q, `"in-flight"`, 0)
	ds := receiveAll(t, c, 3, time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver, Delay: 2 * time.Second}, ds[0])
	settle(t, c, "q", platform.Action{Kind: platform.DeadLetter, Queue: "dlq"}, ds[1])
	wantStats(t, p, platform.QueueStats{Queue: "dlq", Ready: 1}, platform.QueueStats{Queue: "q", Delayed: 2, InFlight: 1})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = open(t, Config{DataDir: dir})
	wantStats(t, p, platform.QueueStats{Queue: "dlq", Ready: 1}, platform.QueueStats{Queue: "q", Delayed: 2, InFlight: 1})
	c = consume(t, p, "q", time.Second)
	got := map[string]platform.Delivery{}
	at := map[string]time.Duration{}
	for len(got) < 3 {
		for _, d := range receive(t, c, 3, 4*time.Second) {
			got[string(d.Body)], at[string(d.Body)] = d, time.Since(start)
			settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
		}
	}
	// JetStream restores a delivery's time to the second, so after a restart the ack wait may
	// end up to a second early.
	if d := got[`"in-flight"`]; d.Attempts != 2 || at[`"in-flight"`] > 3*time.Second {
		t.Errorf("in-flight message back after %v with attempts %d", at[`"in-flight"`], d.Attempts)
	}
	for body, attempts := range map[string]int{`"delayed"`: 1, `"retried"`: 2} {
		if d := got[body]; d.Attempts != attempts || at[body] < 2*time.Second || at[body] > 3*time.Second {
			t.Errorf("%s: attempts %d, arrived after %v, want %d after 2–3 s", body, d.Attempts, at[body], attempts)
		}
	}
	d := receive(t, consume(t, p, "dlq", time.Minute), 10, time.Second)
	if len(d) != 1 || string(d[0].Body) != `"dead"` || d[0].Attempts != 1 || d[0].ID != ds[1].ID || d[0].Timestamp != ds[1].Timestamp {
		t.Errorf("dead letter after restart: %+v", d)
	}
}

// A message redelivered without delay just before a restart is ready at once after it, not after
// its (long) ack wait. (TestHeldUntilDue covers one that reached the consumer but was never
// handed over.)
func TestRedeliverBeforeRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	send(t, q, `"halted"`, 0)
	ds := receiveAll(t, c, 1, time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver}, ds[0])
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = open(t, Config{DataDir: dir})
	c = consume(t, p, "q", time.Minute)
	again := receive(t, c, 1, 3*time.Second)
	if again[0].ID != ds[0].ID || again[0].Attempts != 2 || again[0].Timestamp != ds[0].Timestamp {
		t.Fatalf("after the restart: %+v, want %+v with attempts 2", again[0].Message, ds[0].Message)
	}
	// Settling the same delivery again (a crash before its ack) stores no second copy.
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver}, again[0])
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver}, again[0])
	third := receive(t, c, 10, 3*time.Second)
	if len(third) != 1 || third[0].Attempts != 3 {
		t.Fatalf("after settling one delivery twice: %+v", third)
	}
	nothing(t, c, 300*time.Millisecond)
}

// A delayed message fires before its due time and is held until then; one still held when its
// consumer closes goes back to the queue, ready, with its attempts unchanged.
func TestHeldUntilDue(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	sent := time.Now()
	send(t, q, `"due in 1 s"`, 1)
	// The schedule fires about 150 ms early; the Receive gives up before the message is due.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second-100*time.Millisecond)
	ds, err := c.Receive(ctx, 1)
	cancel()
	if err == nil {
		t.Fatalf("delivered %v after sending, before its due time: %+v", time.Since(sent), ds)
	}
	if s := stats(t, p); s[0].InFlight != 1 {
		t.Fatalf("the early message is not held: %+v", s)
	}
	c.Close()
	c = consume(t, p, "q", time.Minute)
	got := receive(t, c, 1, time.Second)
	if string(got[0].Body) != `"due in 1 s"` || got[0].Attempts != 1 || time.Since(sent) < time.Second {
		t.Fatalf("after Close: %+v at %v", got[0].Message, time.Since(sent))
	}
}

// A second process waits, up to LockWait, for a holder that does not serve to release the
// data directory: parallel local commands take turns instead of failing.
func TestLockWaitsForShortHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(LockWait / 2); first.Close() }()
	second, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("waiting for a holder that lets go after %v: %v", LockWait/2, err)
	}
	second.Close()
}

// A serve that holds the directory but does not answer (stopped with SIGSTOP, say) makes an
// open fail after LockWait too, not after its context's end.
func TestLockStoppedServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks: a stopped process
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := l.record(serveRecord{URL: "nats://" + silent.Addr().String(), Token: "t", PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Open(ctx, Config{DataDir: dir, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "connecting to it at nats://"+silent.Addr().String()+" failed") {
		t.Fatalf("open: %v", err)
	}
	if waited := time.Since(start); waited < LockWait || waited > LockWait+2*time.Second {
		t.Fatalf("failed after %v, want LockWait (%v)", waited, LockWait)
	}
}

// Release makes a message ready again without counting the delivery no program saw.
func TestRelease(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	send(t, q, `"r"`, 0)
	first := receive(t, c, 1, time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Release}, first...)
	again := receive(t, c, 1, time.Second)
	if again[0].ID != first[0].ID || again[0].Attempts != 1 {
		t.Fatalf("released message came back as %+v", again[0].Message)
	}
}

// TestDelayOfADay: a message delayed 86400 s (the longest delay of the Cloudflare API duilie
// serves) is stored as a schedule due a day from now, and the stream keeps it that long.
func TestDelayOfADay(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "day")
	before := time.Now()
	send(t, q, `"tomorrow"`, 86400)
	page, err := p.Browse(context.Background(), "day", platform.BrowseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].State != platform.Delayed {
		t.Fatalf("listed %+v, want one delayed message", page.Messages)
	}
	due := time.UnixMilli(page.Messages[0].Due)
	if lo, hi := before.Add(86400*time.Second), time.Now().Add(86400*time.Second+time.Second); due.Before(lo) || due.After(hi) {
		t.Errorf("due %v, want a day from the send", due)
	}
	st, err := p.js.Stream(context.Background(), streamName("day"))
	if err != nil {
		t.Fatal(err)
	}
	// No limit (0) or one beyond the delay and the retention: the schedule is never dropped.
	if age := st.CachedInfo().Config.MaxAge; age != 0 && age < 24*time.Hour+p.cfg.Retention {
		t.Errorf("stream MaxAge %v would drop the schedule before it is due and retained", age)
	}
}

// The confirmer asks every ack for a reply on a cluster, and only the last one on a single
// server, where the last one's reply confirms every earlier one; either way a call returns once
// the replies it asked for came.
func TestConfirmerReplies(t *testing.T) {
	p := open(t, Config{})
	var mu sync.Mutex
	var withReply, without []string
	sub, err := p.nc.Subscribe("acks.*", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if m.Reply == "" {
			without = append(without, m.Subject)
			return
		}
		withReply = append(withReply, m.Subject)
		_ = m.Respond(nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	replies := []string{"acks.1", "acks.2", "acks.3", "acks.4"}
	for _, ordered := range []bool{false, true} {
		withReply, without = nil, nil
		cf, err := newConfirmer(p.nc, ordered)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = cf.send(ctx, replies, ackAck)
		cancel()
		cf.close()
		mu.Lock()
		want := [2][]string{replies, nil}
		if ordered {
			want = [2][]string{{"acks.4"}, {"acks.1", "acks.2", "acks.3"}}
		}
		if err != nil || !slices.Equal(withReply, want[0]) || !slices.Equal(without, want[1]) {
			t.Errorf("ordered %v: %v; with a reply %v, without %v", ordered, err, withReply, without)
		}
		mu.Unlock()
	}
}

// On the embedded engine, once Settle returns, every ack of the settlement has been applied:
// the acked messages are gone from the stream at once.
func TestSettleAppliedOnReturn(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	items := make([]platform.BatchItem, 100)
	for i := range items {
		items[i] = platform.BatchItem{Body: []byte(strconv.Itoa(i)), ContentType: platform.JSON}
	}
	for range 5 {
		if err := q.SendBatch(context.Background(), items); err != nil {
			t.Fatal(err)
		}
	}
	c, err := p.Consume(context.Background(), "q", platform.ConsumerOptions{MaxBatchSize: 100, MaxConcurrency: 5, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ds := receiveAll(t, c, 500, 10*time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	info, err := p.js.Stream(context.Background(), streamName("q"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d messages left in the stream when Settle returned", n)
	}
}

// The "platform open" log line never shows a cluster's password or token.
func TestLogAttrsRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://a:pw@h1:4222,nats://b:pw2@h2:4222": "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222",
		"nats://s3cr3t@h:4222":                     "nats://xxxxx@h:4222",
		"nats://h1:4222, nats://h2:4222":           "nats://h1:4222, nats://h2:4222",
		"nats://a:%zz@h":                           "(a URL that does not parse)",
	} {
		p := &Platform{cfg: Config{URL: in}}
		got := fmt.Sprint(p.LogAttrs())
		if !strings.Contains(got, "url "+want+" ") || strings.Contains(got, "pw") || strings.Contains(got, "s3cr3t") {
			t.Errorf("LogAttrs for %q: %s, want url %s", in, got, want)
		}
	}
}
