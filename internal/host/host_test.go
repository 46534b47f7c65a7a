package host_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHost(t *testing.T, p platform.Platform, limit time.Duration) *host.Host {
	t.Helper()
	h, err := host.New(host.Config{Platform: p, TimeLimit: limit, Logger: quiet(),
		Permissions: host.Permissions{Queue: []string{"A", "GHOST"}}, Bindings: map[string]string{"A": "qa", "B": "qb"}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := host.New(host.Config{}); err == nil {
		t.Error("no platform accepted")
	}
	for _, d := range []time.Duration{-1, time.Microsecond, 901 * time.Second} {
		if _, err := host.New(host.Config{Platform: memory.New(memory.Options{}), TimeLimit: d}); err == nil {
			t.Errorf("time limit %v accepted", d)
		}
	}
	h, err := host.New(host.Config{Platform: memory.New(memory.Options{})})
	if err != nil || h.TimeLimit() != 30*time.Second {
		t.Errorf("default time limit: %v %v", h, err)
	}
}

func TestBindings(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 0)
	for binding, want := range map[string]string{"A": "", "B": "未授权的QUEUE绑定：B", "GHOST": "绑定不存在：GHOST", "": "未授权的QUEUE绑定："} {
		err := h.Do(context.Background(), func(ev *host.Event) error {
			_, _, err := event.Queue(ev, binding)
			return err
		})
		var ab *duilie.Abort
		if want == "" && err != nil || want != "" && (!errors.As(err, &ab) || ab.Reason != want) {
			t.Errorf("binding %q: got %v, want %q", binding, err, want)
		}
	}
}

func TestFirstAbortWins(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 0)
	err := h.Do(context.Background(), func(ev *host.Event) error {
		a := event.AbortWith(ev, &duilie.Abort{Reason: "first"})
		b := event.AbortWith(ev, &duilie.Abort{Reason: "second"})
		if a != b || ev.Err() != a {
			t.Errorf("aborts %v, %v, Err %v", a, b, ev.Err())
		}
		return errors.New("the handler's own error loses to the abort")
	})
	if err == nil || err.Error() != "first" {
		t.Errorf("event failure %v", err)
	}
}

func TestHandlerFailures(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 0)
	ctx := context.Background()
	if err := h.Do(ctx, func(*host.Event) error { return nil }); err != nil {
		t.Errorf("normal end: %v", err)
	}
	if err := h.Do(ctx, func(*host.Event) error { return io.EOF }); !errors.Is(err, io.EOF) {
		t.Errorf("error: %v", err)
	}
	err := h.Do(ctx, func(*host.Event) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("panic: %v", err)
	}
	// The host carries on after a panic.
	if _, err := h.RunBatch(ctx, host.DefaultConsumerConfig("q"), nil, func(ev *host.Event) error { return nil }); err != nil {
		t.Errorf("after a panic: %v", err)
	}
}

func TestTimeLimitAndHalt(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 100*time.Millisecond)
	start := time.Now()
	release := make(chan struct{})
	err := h.Do(context.Background(), func(ev *host.Event) error { <-release; return nil })
	close(release)
	var ab *duilie.Abort
	if !errors.As(err, &ab) || ab.Reason != "执行超过时限" {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > time.Second {
		t.Errorf("the limit of 100ms ended the event after %v", d)
	}

	h = newHost(t, memory.New(memory.Options{}), time.Minute)
	go func() { time.Sleep(50 * time.Millisecond); h.Halt() }()
	err = h.Do(context.Background(), func(ev *host.Event) error { <-ev.Context().Done(); return nil })
	if !errors.As(err, &ab) {
		t.Fatalf("halted event: %v", err)
	}
	if err := h.Do(context.Background(), func(ev *host.Event) error { return nil }); !errors.As(err, &ab) {
		t.Errorf("an event after Halt: %v", err)
	}
}

func TestConsumerConfigValidate(t *testing.T) {
	ok := host.DefaultConsumerConfig("q")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	// Zero settings are their defaults: a consumer runs with those.
	if zero := (host.ConsumerConfig{Queue: "q"}); zero.Validate() != nil || zero.WithDefaults() != ok {
		t.Errorf("the zero settings are %+v, want the defaults %+v", zero.WithDefaults(), ok)
	}
	none := ok
	none.MaxBatchTimeout, none.MaxRetries = host.NoBatchTimeout, host.NoRetries
	if w := none.WithDefaults(); none.Validate() != nil || w.MaxBatchTimeout != 0 || w.MaxRetries != 0 {
		t.Errorf("NoBatchTimeout and NoRetries run as %+v", w)
	}
	for name, mut := range map[string]func(*host.ConsumerConfig){
		"queue":          func(c *host.ConsumerConfig) { c.Queue = "Q" },
		"size -1":        func(c *host.ConsumerConfig) { c.MaxBatchSize = -1 },
		"size 101":       func(c *host.ConsumerConfig) { c.MaxBatchSize = 101 },
		"timeout":        func(c *host.ConsumerConfig) { c.MaxBatchTimeout = 61 * time.Second },
		"retries":        func(c *host.ConsumerConfig) { c.MaxRetries = 101 },
		"retry delay":    func(c *host.ConsumerConfig) { c.RetryDelay = 43201 * time.Second },
		"dlq self":       func(c *host.ConsumerConfig) { c.DeadLetterQueue = "q" },
		"dlq name":       func(c *host.ConsumerConfig) { c.DeadLetterQueue = "-x" },
		"concurrency":    func(c *host.ConsumerConfig) { c.MaxConcurrency = 251 },
		"concurrency -1": func(c *host.ConsumerConfig) { c.MaxConcurrency = -1 },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, c)
		}
	}
}

func TestResolve(t *testing.T) {
	cc := host.DefaultConsumerConfig("q")
	cc.MaxRetries, cc.RetryDelay, cc.DeadLetterQueue = 2, 7*time.Second, "dead"
	msg := func(attempts int) platform.Delivery {
		return platform.Delivery{Message: platform.Message{Attempts: attempts}}
	}
	type want struct {
		kind  platform.ActionKind
		delay time.Duration
	}
	for _, tc := range []struct {
		name   string
		call   func(b *event.Batch)
		failed bool
		att    int
		want   want
	}{
		{"no call, ok", nil, false, 1, want{platform.Done, 0}},
		{"no call, failed", nil, true, 1, want{platform.Redeliver, 7 * time.Second}},
		{"no call, failed, exhausted", nil, true, 3, want{platform.DeadLetter, 0}},
		{"ack, failed", func(b *event.Batch) { ack(b) }, true, 3, want{platform.Done, 0}},
		{"retry 0", func(b *event.Batch) { retry(b, 0) }, false, 1, want{platform.Redeliver, 7 * time.Second}},
		{"retry 30", func(b *event.Batch) { retry(b, 30) }, false, 2, want{platform.Redeliver, 30 * time.Second}},
		{"retry, exhausted", func(b *event.Batch) { retry(b, 30) }, false, 3, want{platform.DeadLetter, 0}},
		{"ack then retry", func(b *event.Batch) { ack(b); retry(b, 5) }, true, 1, want{platform.Done, 0}},
		{"retry then ack", func(b *event.Batch) { retry(b, 5); ack(b) }, false, 1, want{platform.Redeliver, 5 * time.Second}},
	} {
		b := event.NewBatch("q", []platform.Delivery{msg(tc.att)})
		if tc.call != nil {
			tc.call(b)
		}
		s := host.Resolve(cc, platform.Capabilities{}, b, tc.failed)
		a := s.Messages[0].Action
		if a.Kind != tc.want.kind || a.Delay != tc.want.delay || (a.Kind == platform.DeadLetter && a.Queue != "dead") || s.Failed != tc.failed {
			t.Errorf("%s: got %+v", tc.name, a)
		}
		// Calls after the event ended change nothing.
		ack(b)
		retry(b, 1)
		if again := host.Resolve(cc, platform.Capabilities{}, b, tc.failed); again.Messages[0].Action != a {
			t.Errorf("%s: a call after the end changed %+v to %+v", tc.name, a, again.Messages[0].Action)
		}
	}
	cc.DeadLetterQueue = ""
	b := event.NewBatch("q", []platform.Delivery{msg(3)})
	if a := host.Resolve(cc, platform.Capabilities{}, b, true).Messages[0].Action; a.Kind != platform.Drop {
		t.Errorf("exhausted without a dead-letter queue: %+v", a)
	}
}

func ack(b *event.Batch) { b.Record(0, platform.Call{Kind: platform.AckCall}) }
func retry(b *event.Batch, delay int) {
	b.Record(0, platform.Call{Kind: platform.RetryCall, DelaySeconds: delay})
}

// A message redelivered past max_retries + 1 (a crash redelivered it) is dead-lettered without
// running the program, and reported as exhausted.
func TestExhaustedBeforeDelivery(t *testing.T) {
	p := memory.New(memory.Options{Record: true})
	reports := make(chan host.Report, 10)
	h, err := host.New(host.Config{Platform: p, Logger: quiet(), Observer: func(r host.Report) { reports <- r }})
	if err != nil {
		t.Fatal(err)
	}
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxRetries, cc.DeadLetterQueue, cc.MaxBatchTimeout = 1, "dead", host.NoBatchTimeout
	p.Put("qa", platform.Message{ID: "old", Attempts: 3, Body: []byte("1"), ContentType: platform.JSON},
		platform.Message{ID: "new", Attempts: 1, Body: []byte("2"), ContentType: platform.JSON})
	var saw []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- h.Consume(ctx, cc, func(ev *host.Event) error {
			b := event.BatchOf(ev)
			for i := range b.Len() {
				saw = append(saw, b.Message(i).ID)
			}
			return nil
		})
	}()
	var settled *host.SettleReport
	var ran *host.EventReport
	for settled == nil || ran == nil {
		select {
		case r := <-reports:
			switch r := r.(type) {
			case *host.SettleReport:
				settled = r
			case *host.EventReport:
				ran = r
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no reports")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(saw) != 1 || saw[0] != "new" {
		t.Fatalf("program saw %v", saw)
	}
	if settled.Queue != "qa" || settled.Reason != host.Exhausted || len(settled.Messages) != 1 ||
		settled.Messages[0].ID != "old" || settled.Messages[0].Attempts != 3 ||
		settled.Messages[0].Action != (platform.Action{Kind: platform.DeadLetter, Queue: "dead"}) {
		t.Errorf("settle report %+v", settled)
	}
	if ran.Batch != 1 || ran.Messages[0].ID != "new" {
		t.Errorf("event report %+v", ran)
	}
	s, _ := p.Stats(context.Background())
	if s[0].Queue != "dead" || s[0].Ready != 1 {
		t.Errorf("stats %+v", s)
	}
}

// Consume stops taking batches when its context ends and waits for the running event.
func TestConsumeStops(t *testing.T) {
	p := memory.New(memory.Options{})
	h := newHost(t, p, 0)
	p.Put("qa", platform.Message{ID: "1", Body: []byte("1"), ContentType: platform.JSON})
	ctx, cancel := context.WithCancel(context.Background())
	var finished atomic.Bool
	done := make(chan error)
	go func() {
		cc := host.DefaultConsumerConfig("qa")
		cc.MaxBatchTimeout = host.NoBatchTimeout
		done <- h.Consume(ctx, cc, func(ev *host.Event) error {
			cancel()
			time.Sleep(100 * time.Millisecond)
			finished.Store(true)
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || !finished.Load() {
			t.Fatalf("Consume returned %v before the event finished (%v)", err, finished.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Consume did not stop")
	}
	s, _ := p.Stats(context.Background())
	if s[0].Ready+s[0].InFlight+s[0].Delayed != 0 {
		t.Errorf("the finished event's message was not settled: %+v", s)
	}
}

func TestConsumeInvalidConfig(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 0)
	if err := h.Consume(context.Background(), host.ConsumerConfig{Queue: "Q"}, nil); err == nil {
		t.Error("a consumer of a queue name that is not one was accepted")
	}
}

// A closed platform ends Consume instead of being retried forever.
func TestConsumeEndsWhenPlatformCloses(t *testing.T) {
	p := memory.New(memory.Options{})
	h := newHost(t, p, 0)
	done := make(chan error)
	go func() {
		done <- h.Consume(context.Background(), host.DefaultConsumerConfig("qa"), func(*host.Event) error { return nil })
	}()
	time.Sleep(50 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, platform.ErrClosed) {
			t.Errorf("Consume returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Consume kept going on a closed platform")
	}
}

// A handler that leaves its goroutine with runtime.Goexit (t.FailNow does) fails its event at
// once, not at the time limit.
func TestGoexitFailsAtOnce(t *testing.T) {
	h := newHost(t, memory.New(memory.Options{}), 10*time.Second)
	start := time.Now()
	err := h.Do(context.Background(), func(*host.Event) error { runtime.Goexit(); return nil })
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
}

// After Halt a consumer takes nothing new: messages stay ready with their attempts.
func TestConsumeStopsAtHalt(t *testing.T) {
	p := memory.New(memory.Options{})
	h := newHost(t, p, 0)
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxBatchTimeout = host.NoBatchTimeout
	done := make(chan error)
	var ran atomic.Int32
	go func() {
		done <- h.Consume(context.Background(), cc, func(*host.Event) error { ran.Add(1); return nil })
	}()
	time.Sleep(50 * time.Millisecond)
	h.Halt()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Consume kept going after Halt")
	}
	p.Put("qa", platform.Message{ID: "1", Attempts: 1, Body: []byte("1"), ContentType: platform.JSON})
	if s, _ := p.Stats(context.Background()); s[0].Ready != 1 || ran.Load() != 0 {
		t.Errorf("after Halt: %+v, %d events", s, ran.Load())
	}
}

// A consumer whose ctx has ended starts no batch, even with messages ready and a slot free.
func TestConsumeTakesNothingAfterCancel(t *testing.T) {
	for range 20 {
		p := memory.New(memory.Options{})
		h := newHost(t, p, 0)
		for i := range 5 {
			p.Put("qa", platform.Message{ID: string(rune('a' + i)), Body: []byte("1"), ContentType: platform.JSON})
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cc := host.DefaultConsumerConfig("qa")
		cc.MaxBatchSize, cc.MaxBatchTimeout = 1, host.NoBatchTimeout
		var ran atomic.Int32
		if err := h.Consume(ctx, cc, func(*host.Event) error { ran.Add(1); return nil }); err != nil || ran.Load() != 0 {
			t.Fatalf("a cancelled Consume ran %d events (%v)", ran.Load(), err)
		}
	}
}

// Messages collected for a batch when the host halts go back without an attempt counted.
func TestReleaseKeepsAttempts(t *testing.T) {
	p := memory.New(memory.Options{})
	c, _ := p.Consume(context.Background(), "qa", platform.ConsumerOptions{})
	p.Put("qa", platform.Message{ID: "x", Attempts: 2, Body: []byte("1"), ContentType: platform.JSON})
	ds, _ := c.Receive(context.Background(), 1)
	c.Settle(context.Background(), platform.Settlement{Queue: "qa", Messages: []platform.Resolution{{Delivery: ds[0], Action: platform.Action{Kind: platform.Release}}}})
	again, _ := c.Receive(context.Background(), 1)
	if again[0].Attempts != 2 {
		t.Errorf("released message came back with attempts %d, want 2", again[0].Attempts)
	}
}

// ctxPlatform is a platform whose Consume, like a networked one's, fails once its ctx has ended.
type ctxPlatform struct{ *memory.Platform }

func (p ctxPlatform) Consume(ctx context.Context, name string, o platform.ConsumerOptions) (platform.Consumer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.Platform.Consume(ctx, name, o)
}

// A context that ends while the consumer is being set up is a stop, not a failure: a server
// shut down as it starts must not report its consumers as failed.
func TestConsumeCanceledBeforeStart(t *testing.T) {
	h := newHost(t, ctxPlatform{memory.New(memory.Options{})}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Consume(ctx, host.DefaultConsumerConfig("qa"), func(*host.Event) error { return nil }); err != nil {
		t.Fatalf("Consume on an ended context: %v", err)
	}
}
