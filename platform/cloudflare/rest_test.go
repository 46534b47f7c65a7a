package cloudflare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// newHost is a host on p with the binding JOBS for the queue "jobs".
func newHost(t *testing.T, p platform.Platform, log *slog.Logger) *host.Host {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := host.New(host.Config{Platform: p, Permissions: host.Permissions{Queue: []string{"JOBS"}},
		Bindings: map[string]string{"JOBS": "jobs"}, Logger: log, TimeLimit: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A program's send is a push of its normalized body as a JSON value, content_type json, and
// delay_seconds only when it is over 0; a batch is one bulk push of the items in order.
func TestFakePush(t *testing.T) {
	f := newFake(t)
	h := newHost(t, f.platform(0, nil), nil)
	err := h.Do(context.Background(), func(ev *host.Event) error {
		if err := duilie.Send(ev, "JOBS", `{"kind":"page", "url":"/x","n":1E2,"s":"毒\u2028"}`, 0); err != nil {
			return err
		}
		if err := duilie.Send(ev, "JOBS", `"later"`, 30); err != nil {
			return err
		}
		return duilie.SendBatch(ev, "JOBS", `[{"body":{"a":[1,2]}},{"body":"],[","delaySeconds":5}]`)
	})
	if err != nil {
		t.Fatal(err)
	}
	pushes := f.sent("messages")
	want := []string{
		`{"body":{"kind":"page","url":"/x","n":100,"s":"毒` + "\u2028" + `"},"content_type":"json"}`,
		`{"body":"later","content_type":"json","delay_seconds":30}`,
	}
	if len(pushes) != 2 || pushes[0].body != want[0] || pushes[1].body != want[1] {
		t.Errorf("pushes %+v, want %q", pushes, want)
	}
	batches := f.sent("messages/batch")
	wantBatch := `{"messages":[{"body":{"a":[1,2]},"content_type":"json"},{"body":"],[","content_type":"json","delay_seconds":5}]}`
	if len(batches) != 1 || batches[0].body != wantBatch {
		t.Errorf("bulk pushes %+v, want one %s", batches, wantBatch)
	}
}

// A refusal reaches the program after 队列发送失败： (or 队列批量发送失败：) as Cloudflare wrote it,
// with its code; the producer does not try again on its own.
func TestFakePushRefused(t *testing.T) {
	f := newFake(t)
	h := newHost(t, f.platform(0, nil), nil)
	f.refuse("messages", fakeAnswer{status: 429, code: 10250, message: "Queue is overloaded. Please back off.", retryAfter: "1"})
	f.refuse("messages/batch", fakeAnswer{status: 413, code: 10205, message: "Batch size out of bounds"})
	var sendErr, batchErr error
	_ = h.Do(context.Background(), func(ev *host.Event) error {
		sendErr = duilie.Send(ev, "JOBS", `1`, 0)
		batchErr = duilie.SendBatch(ev, "JOBS", `[{"body":1}]`)
		return nil
	})
	if sendErr == nil || sendErr.Error() != "队列发送失败：Queue is overloaded. Please back off. (10250)" {
		t.Errorf("send: %v", sendErr)
	}
	if batchErr == nil || batchErr.Error() != "队列批量发送失败：Batch size out of bounds (10205)" {
		t.Errorf("send batch: %v", batchErr)
	}
	if n := len(f.sent("messages")); n != 1 {
		t.Errorf("%d pushes, want 1: the program decides whether to send again", n)
	}
}

// Bodies are decoded by metadata["CF-Content-Type"]: base64 for json and bytes, plain for text,
// and a plain JSON body under json is accepted; ids, attempts and timestamp_ms pass through.
func TestFakePullBodies(t *testing.T) {
	f := newFake(t)
	msgs := []struct {
		body json.RawMessage
		ct   string
		want string
		as   platform.ContentType
	}{
		{b64(`{"url":"/x"}`), "json", `{"url":"/x"}`, platform.JSON},
		{str(`{"url":"/plain"}`), "json", `{"url":"/plain"}`, platform.JSON}, // a JSON text, not base64
		{json.RawMessage(`{"url":"/value"}`), "json", `{"url":"/value"}`, platform.JSON},
		{str("hello"), "json", `"hello"`, platform.JSON}, // Cloudflare's own example: a json message "hello"
		{str("true"), "json", `true`, platform.JSON},     // plain, though "true" is base64 too
		{b64("{"), "json", `{`, platform.JSON},           // no JSON: the program's ReadBatch says so
		{str("hello, 世界"), "text", "hello, 世界", platform.Text},
		{b64("\x00\xffraw"), "bytes", "\x00\xffraw", platform.Bytes},
		{b64("\xff\x0fT"), "v8", "\xff\x0fT", platform.V8},
	}
	for i, m := range msgs {
		f.put(&fakeMessage{ID: strings.Repeat(string(rune('a'+i)), 32), Body: m.body, Attempts: i + 1, Metadata: meta(m.ct), TimestampMs: 1710950954154 + int64(i)})
	}
	c := consume(t, f.platform(0, nil), time.Minute)
	ds, err := receive(t, c, 5*time.Second)
	if err != nil || len(ds) != len(msgs) {
		t.Fatalf("received %d messages, %v", len(ds), err)
	}
	for i, m := range msgs {
		d := ds[i]
		if string(d.Body) != m.want || d.ContentType != m.as {
			t.Errorf("message %d: body %q (%s), want %q (%s)", i, d.Body, d.ContentType, m.want, m.as)
		}
		if d.ID != strings.Repeat(string(rune('a'+i)), 32) || d.Attempts != i+1 || d.Timestamp != 1710950954154+int64(i) || d.Token == "" {
			t.Errorf("message %d: id %q attempts %d timestamp %d lease %v", i, d.ID, d.Attempts, d.Timestamp, d.Token)
		}
	}
	pulls := f.sent("messages/pull")
	if len(pulls) != 1 || pulls[0].body != `{"batch_size":10,"visibility_timeout_ms":60000}` {
		t.Errorf("pulls %+v, want batch_size = max_batch_size and visibility_timeout_ms = the ack wait", pulls)
	}
}

// A lease asked for covers the ack wait; once it runs out the message comes back with
// attempts + 1. InProgress cannot extend it and asks nothing of Cloudflare.
func TestFakeLeaseExpires(t *testing.T) {
	t.Parallel() // waits for leases and backoffs: beside the others
	f := newFake(t)
	f.put(&fakeMessage{ID: "0123456789abcdef0123456789abcdef", Body: b64(`1`), Attempts: 1, Metadata: meta("json"), TimestampMs: 1})
	c := consume(t, f.platform(50*time.Millisecond, nil), 1500*time.Millisecond)
	first, err := receive(t, c, 5*time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("first pull: %v %v", first, err)
	}
	before := len(f.requests)
	if err := c.InProgress(context.Background(), first); err != nil || len(f.requests) != before {
		t.Errorf("InProgress: %v, %d requests", err, len(f.requests)-before)
	}
	start := time.Now()
	again, err := receive(t, c, 5*time.Second)
	if err != nil || len(again) != 1 {
		t.Fatalf("after the lease: %v %v", again, err)
	}
	if again[0].ID != first[0].ID || again[0].Attempts != 2 || again[0].Token == first[0].Token {
		t.Errorf("came back as %+v, want the same id with attempts 2 and a new lease", again[0])
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("came back after %v, before its 1.5 s lease ended", waited)
	}
}

// A batch is settled with one ack call: acks for Done (and Drop), retries for Redeliver with
// delay_seconds only when the program asked for a delay, and Release as a retry without delay.
func TestFakeSettleOneAckCall(t *testing.T) {
	f := newFake(t)
	for i := range 4 {
		f.put(&fakeMessage{ID: strings.Repeat(string(rune('a'+i)), 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	}
	c := consume(t, f.platform(0, nil), time.Minute)
	ds, err := receive(t, c, 5*time.Second)
	if err != nil || len(ds) != 4 {
		t.Fatalf("%v %v", ds, err)
	}
	s := platform.Settlement{Queue: "jobs", Messages: []platform.Resolution{
		{Delivery: ds[0], Action: platform.Action{Kind: platform.Done}},
		{Delivery: ds[1], Action: platform.Action{Kind: platform.Redeliver, Delay: 30 * time.Second}},
		{Delivery: ds[2], Action: platform.Action{Kind: platform.Redeliver}},
		{Delivery: ds[3], Action: platform.Action{Kind: platform.Release}},
	}}
	if err := c.Settle(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	acks := f.sent("messages/ack")
	want := `{"acks":[{"lease_id":"lease-1"}],"retries":[{"delay_seconds":30,"lease_id":"lease-2"},{"lease_id":"lease-3"},{"delay_seconds":0,"lease_id":"lease-4"}]}`
	if len(acks) != 1 || acks[0].body != want {
		t.Errorf("ack calls %+v, want one %s", acks, want)
	}
}

// The host leaves retries to Cloudflare: a message delivered more often than the host's
// max_retries allows still reaches the program, and a failed event retries every message not
// acked, without delay, never dead-lettering or dropping one.
func TestFakeHostLeavesRetriesToCloudflare(t *testing.T) {
	t.Parallel() // waits for leases and backoffs: beside the others
	f := newFake(t)
	f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`"acked"`), Attempts: 9, Metadata: meta("json")})
	f.put(&fakeMessage{ID: strings.Repeat("b", 32), Body: b64(`"failed"`), Attempts: 9, Metadata: meta("json")})
	h := newHost(t, f.platform(50*time.Millisecond, nil), nil)
	cc := host.DefaultConsumerConfig("jobs")
	cc.MaxBatchTimeout, cc.MaxRetries, cc.DeadLetterQueue = host.NoBatchTimeout, 1, "jobs-dead"
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan string, 10)
	done := make(chan error)
	go func() {
		done <- h.Consume(ctx, cc, func(ev *host.Event) error {
			b, _ := duilie.ReadBatch(ev)
			ran <- b
			_ = duilie.Ack(ev, 0)
			return errors.New("render failed")
		})
	}()
	select {
	case b := <-ran:
		if !strings.Contains(b, `"attempts":9`) {
			t.Errorf("batch %s", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the program never saw messages past the host's max_retries")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.sent("messages/ack")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	acks := f.sent("messages/ack")
	if len(acks) != 1 || acks[0].body != `{"acks":[{"lease_id":"lease-1"}],"retries":[{"lease_id":"lease-2"}]}` {
		t.Errorf("ack calls %+v", acks)
	}
}

// 429 with Retry-After, and 10250, are temporary: Receive returns the refusal, and the next pull
// waits as long as Cloudflare asked. A 5xx is backed off from 1 s.
func TestFakeRetryAfter(t *testing.T) {
	t.Parallel() // waits for leases and backoffs: beside the others
	for _, tc := range []struct {
		name string
		a    fakeAnswer
		wait time.Duration
	}{
		{"429", fakeAnswer{status: 429, code: 971, message: "Please wait and consider throttling your request speed", retryAfter: "2"}, 2 * time.Second},
		{"10250", fakeAnswer{status: 429, code: 10250, message: "Queue is overloaded. Please back off.", retryAfter: "1"}, time.Second},
		{"5xx", fakeAnswer{status: 502, code: 10001, message: "Internal error"}, defaultBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
			f.refuse("messages/pull", tc.a)
			c := consume(t, f.platform(0, nil), time.Minute)
			_, err := receive(t, c, 5*time.Second)
			if err == nil || platform.IsPermanent(err) || !strings.Contains(err.Error(), tc.a.message) {
				t.Fatalf("Receive: %v, want the temporary refusal", err)
			}
			ds, err := receive(t, c, 10*time.Second)
			if err != nil || len(ds) != 1 {
				t.Fatalf("after waiting: %v %v", ds, err)
			}
			pulls := f.sent("messages/pull")
			if gap := pulls[1].at.Sub(pulls[0].at); gap < tc.wait-50*time.Millisecond || gap > tc.wait+time.Second {
				t.Errorf("pulled again after %v, want %v", gap, tc.wait)
			}
		})
	}
}

// A bad token (403) and a queue that is gone (10104) are permanent: the consumer stops with one
// line naming the queue and the cause.
func TestFakePermanent(t *testing.T) {
	t.Parallel() // waits for leases and backoffs: beside the others
	for _, tc := range []struct {
		name string
		a    fakeAnswer
		want string
	}{
		{"403", fakeAnswer{status: 403, code: 10000, message: "Authentication error"}, "Authentication error (10000) (the API token must be valid for account " + fakeAccount + ", with Queues Read and Write)"},
		{"10106", fakeAnswer{status: 400, code: 10106, message: "Invalid token"}, "Invalid token (10106) (the API token must be valid"},
		{"10104", fakeAnswer{status: 404, code: 10104, message: "Queue does not exist"}, "pull from jobs: Queue does not exist (10104)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.refuse("messages/pull", tc.a)
			var logged bytes.Buffer
			var mu sync.Mutex
			log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, nil))
			h := newHost(t, f.platform(0, nil), log)
			cc := host.DefaultConsumerConfig("jobs")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := h.Consume(ctx, cc, func(ev *host.Event) error { return nil })
			if err == nil || !platform.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Consume: %v, want a permanent %q", err, tc.want)
			}
			mu.Lock()
			lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
			mu.Unlock()
			if len(lines) != 1 || !strings.Contains(lines[0], "consumer stopped") || !strings.Contains(lines[0], "queue=jobs") {
				t.Errorf("log %q, want one line naming the queue", lines)
			}
			if n := len(f.sent("messages/pull")); n != 1 {
				t.Errorf("%d pulls, want 1", n)
			}
		})
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A paused queue's pull answers 409 queue_delivery_paused: Receive delivers nothing and pulls
// less and less often, until delivery resumes.
func TestFakePaused(t *testing.T) {
	t.Parallel() // waits for leases and backoffs: beside the others
	f := newFake(t)
	f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
	c := consume(t, f.platform(400*time.Millisecond, nil), time.Minute)
	got := make(chan []platform.Delivery, 1)
	go func() {
		ds, err := receive(t, c, 10*time.Second)
		if err != nil {
			t.Errorf("Receive while paused: %v", err)
		}
		got <- ds
	}()
	time.Sleep(1200 * time.Millisecond)
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
	select {
	case ds := <-got:
		if len(ds) != 1 {
			t.Fatalf("after resuming: %v", ds)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered after resuming")
	}
	pulls := f.sent("messages/pull")
	if len(pulls) < 3 || len(pulls) > 8 {
		t.Errorf("%d pulls in 1.2 s while paused, want a few, spaced out", len(pulls))
	}
}

// An idle queue is pulled again after 0.1 s, 0.2 s, 0.4 s, … up to the ceiling; a pull that
// brings messages makes the next one immediate.
func TestFakePullInterval(t *testing.T) {
	f := newFake(t)
	c := consume(t, f.platform(400*time.Millisecond, nil), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 1700*time.Millisecond)
	defer cancel()
	go func() {
		time.Sleep(1400 * time.Millisecond)
		f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	}()
	if ds, err := c.Receive(ctx, 10); err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v %v", ds, err)
	}
	pulls := f.sent("messages/pull")
	var gaps []time.Duration
	for i := 1; i < len(pulls); i++ {
		gaps = append(gaps, pulls[i].at.Sub(pulls[i-1].at).Round(10*time.Millisecond))
	}
	want := []time.Duration{100, 200, 400, 400}
	for i, w := range want {
		w *= time.Millisecond
		if i >= len(gaps) || gaps[i] < w-20*time.Millisecond || gaps[i] > w+150*time.Millisecond {
			t.Fatalf("gaps between idle pulls %v, want about %v ms then the ceiling", gaps, want)
		}
	}
	t.Logf("gaps between idle pulls: %v", gaps)
	// Messages came: the next pull does not wait.
	f.put(&fakeMessage{ID: strings.Repeat("b", 32), Body: b64(`2`), Attempts: 1, Metadata: meta("json")})
	start := time.Now()
	if ds, err := receive(t, c, 5*time.Second); err != nil || len(ds) != 1 {
		t.Fatalf("%v %v", ds, err)
	}
	if d := time.Since(start); d > 80*time.Millisecond {
		t.Errorf("the pull after messages waited %v", d)
	}
}

// A queue whose consumer on Cloudflare is not http_pull cannot be consumed: the first Receive
// says so, naming the queue, and stops the consumer.
func TestFakeNotHTTPPull(t *testing.T) {
	f := newFake(t)
	f.consumer = "worker"
	c := consume(t, f.platform(0, nil), time.Minute)
	_, err := receive(t, c, 5*time.Second)
	want := `queue jobs has a consumer of type worker (script jobs-worker) on Cloudflare, not http_pull`
	if err == nil || !platform.IsPermanent(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "wrangler queues consumer http add jobs") {
		t.Errorf("Receive: %v, want a permanent %q", err, want)
	}
	if n := len(f.sent("messages/pull")); n != 0 {
		t.Errorf("%d pulls", n)
	}
}

// Queue names are resolved by listing the account's queues, once; a missing queue is an error
// naming it.
func TestFakeQueueNames(t *testing.T) {
	f := newFake(t)
	p := f.platform(0, nil)
	for range 3 {
		if _, err := p.Queue(context.Background(), "jobs"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.sent("list")); n != 1 {
		t.Errorf("%d lists for three lookups of one queue, want 1", n)
	}
	_, err := p.Queue(context.Background(), "nope")
	if err == nil || !strings.Contains(err.Error(), `account `+fakeAccount+` has no queue named "nope"`) {
		t.Errorf("Queue(nope): %v", err)
	}
}

// A wrong token is refused on the first request, as Cloudflare refuses it.
func TestFakeWrongToken(t *testing.T) {
	f := newFake(t)
	p, err := Open(context.Background(), Config{AccountID: fakeAccount, Token: "wrong", BaseURL: f.srv.URL + "/client/v4"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Queue(context.Background(), "jobs")
	if err == nil || !platform.IsPermanent(err) || !strings.Contains(err.Error(), "Authentication error (10000)") {
		t.Errorf("Queue with a wrong token: %v", err)
	}
}

// duilie queues shows what Cloudflare reports: each queue's backlog and whether it is paused.
func TestFakeStats(t *testing.T) {
	f := newFake(t)
	for i := range 3 {
		f.put(&fakeMessage{ID: strings.Repeat(string(rune('a'+i)), 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	}
	f.paused = true
	stats, err := f.platform(0, nil).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Queue != "jobs" || !stats[0].Paused || stats[0].Backlog == nil || *stats[0].Backlog != 3 {
		t.Errorf("stats %+v", stats)
	}
	f.refuse("metrics", fakeAnswer{status: 403, code: 10000, message: "Authentication error"})
	if _, err := f.platform(0, nil).Stats(context.Background()); err == nil || !strings.Contains(err.Error(), "metrics of queue jobs: Authentication error (10000)") {
		t.Errorf("Stats refused: %v", err)
	}
}

// A closed platform's consumers deliver nothing more, and its queues cannot be looked up.
func TestFakeClosed(t *testing.T) {
	f := newFake(t)
	f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	p := f.platform(0, nil)
	c := consume(t, p, time.Minute)
	p.Close()
	if _, err := receive(t, c, time.Second); !errors.Is(err, platform.ErrClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	if _, err := p.Queue(context.Background(), "jobs"); !errors.Is(err, platform.ErrClosed) {
		t.Errorf("Queue after Close: %v", err)
	}
	if n := len(f.sent("messages/pull")); n != 0 {
		t.Errorf("%d pulls after Close", n)
	}
}

// Pause, resume and purge are Cloudflare's own operations; listing, reading, deleting and
// moving single messages, and deleting queues, are unsupported, and say so.
func TestFakeOperator(t *testing.T) {
	f := newFake(t)
	f.put(&fakeMessage{ID: strings.Repeat("a", 32), Body: b64(`1`), Attempts: 1, Metadata: meta("json")})
	p := f.platform(0, nil)
	ctx := context.Background()
	if err := p.Pause(ctx, "jobs"); err != nil || !f.paused {
		t.Errorf("Pause: %v, paused %v", err, f.paused)
	}
	if err := p.Resume(ctx, "jobs"); err != nil || f.paused {
		t.Errorf("Resume: %v, paused %v", err, f.paused)
	}
	edits := f.sent("")
	if len(edits) != 2 || edits[0].body != `{"settings":{"delivery_paused":true}}` || edits[1].body != `{"settings":{"delivery_paused":false}}` {
		t.Errorf("queue edits %+v", edits)
	}
	if n, err := p.Purge(ctx, "jobs"); err != nil || n != -1 || len(f.msgs) != 0 {
		t.Errorf("Purge = %d, %v; %d messages left", n, err, len(f.msgs))
	}
	if purges := f.sent("purge"); len(purges) != 1 || purges[0].body != `{"delete_messages_permanently":true}` {
		t.Errorf("purges %+v", purges)
	}
	unsupported := []error{
		func() error { _, err := p.Browse(ctx, "jobs", platform.BrowseOptions{}); return err }(),
		func() error { _, err := p.Get(ctx, "jobs", "x"); return err }(),
		p.Delete(ctx, "jobs", "x"),
		func() error { _, err := p.Move(ctx, "jobs", "other", platform.MoveOptions{}); return err }(),
		p.DeleteQueue(ctx, "jobs"),
	}
	for i, err := range unsupported {
		if !errors.Is(err, errors.ErrUnsupported) || !strings.HasPrefix(err.Error(), "unsupported operation on Cloudflare: ") {
			t.Errorf("operation %d: %v, want unsupported", i, err)
		}
	}
	for i, err := range []error{p.Pause(ctx, "nope"), func() error { _, err := p.Browse(ctx, "nope", platform.BrowseOptions{}); return err }()} {
		if !errors.Is(err, platform.ErrNoQueue) {
			t.Errorf("operation %d on a missing queue: %v, want ErrNoQueue", i, err)
		}
	}
	f.refuse("purge", fakeAnswer{status: 404, code: 10104, message: "Queue does not exist"})
	if _, err := p.Purge(ctx, "jobs"); !errors.Is(err, platform.ErrNoQueue) || !strings.Contains(err.Error(), "Queue does not exist (10104)") {
		t.Errorf("Purge of a queue that is gone: %v", err)
	}
}
