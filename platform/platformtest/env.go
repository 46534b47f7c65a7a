package platformtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// The deployment every test runs in.
const (
	binding   = "TASKS"      // permitted and configured
	queueName = "conf-tasks" // its queue
	dlqName   = "conf-dead"  // the dead-letter queue of tests that need one
)

// Queues are the queues the suite uses. A harness whose platform does not create queues on
// demand (Cloudflare's) makes these, empty, for every platform.
func Queues() []string { return []string{queueName, dlqName} }

// env is one test's platform and host.
type env struct {
	t   *testing.T
	ctx context.Context
	p   platform.Platform
	h   *host.Host
	hn  Harness
	// backlogOK: the test judges a platform that counts only unacknowledged messages too.
	backlogOK bool
}

func newEnv(t *testing.T, hn Harness) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := hn.MakePlatform(ctx, t)
	if err != nil {
		t.Fatalf("MakePlatform: %v", err)
	}
	e := &env{t: t, ctx: ctx, hn: hn}
	e.use(p)
	// Create the queues up front, as a deployment does.
	for _, q := range []string{queueName, dlqName} {
		if _, err := p.Queue(e.ctx, q); err != nil {
			t.Fatalf("Queue(%s): %v", q, err)
		}
	}
	return e
}

// use makes p the test's platform, with a host of its own; the test closes p when it ends.
func (e *env) use(p platform.Platform) {
	e.t.Helper()
	e.t.Cleanup(func() { _ = p.Close() })
	h, err := host.New(host.Config{
		Platform:    p,
		Permissions: host.Permissions{Queue: []string{binding}},
		Bindings:    map[string]string{binding: queueName},
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.p, e.h = p, h
}

// restart closes the test's platform and opens its store again.
func (e *env) restart(r Restarter) {
	e.t.Helper()
	p, err := r.Restart(e.ctx, e.p)
	if err != nil {
		e.t.Fatalf("Restart: %v", err)
	}
	e.use(p)
}

// produce runs fn in a fetch event and returns the event's failure, if any.
func (e *env) produce(fn func(ev *duilie.Event) error) error {
	return e.h.Do(e.ctx, fn)
}

// send sends one body from a fetch event and returns Send's error.
func (e *env) send(body string, delay int) error {
	var err error
	_ = e.produce(func(ev *duilie.Event) error { err = duilie.Send(ev, binding, body, delay); return nil })
	return err
}

// sendBatch sends a batch from a fetch event and returns SendBatch's error.
func (e *env) sendBatch(items string) error {
	var err error
	_ = e.produce(func(ev *duilie.Event) error { err = duilie.SendBatch(ev, binding, items); return nil })
	return err
}

// mustSend sends bodies one by one and fails the test on an error.
func (e *env) mustSend(bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		if err := e.send(b, 0); err != nil {
			e.t.Fatalf("send %s: %v", b, err)
		}
	}
}

// Reasons for skipping a part of a test on a harness without a capability.
const (
	noCalls = "the harness does not record platform calls (platformtest.Recorder)"
	noStats = "the platform does not count its messages (platform.Stater)"
	noSplit = "the platform counts only unacknowledged messages (QueueStats.Backlog), " +
		"not ready, delayed and in flight apart"
	ownRetries = "the platform applies its own consumers' max_retries, retry_delay and dead-letter queue " +
		"(platform.Capabilities.Retries): the host's retry settings do not reach it"
)

// needHostRetries skips t on a platform that applies its own retry settings, for tests of the
// host's max_retries, retry_delay and dead_letter_queue.
func (e *env) needHostRetries() {
	e.t.Helper()
	if platform.CapabilitiesOf(e.p).Retries {
		e.t.Skip(ownRetries)
	}
}

// wantCalls asserts the platform calls so far, exactly, in a subtest "calls" that skips on a
// harness that does not record them: the rest of the test runs either way.
func (e *env) wantCalls(want ...string) {
	e.t.Helper()
	e.t.Run("calls", func(t *testing.T) {
		t.Helper()
		if got := e.recorded(t); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("platform calls:\n got %q\nwant %q", got, want)
		}
	})
}

// eventuallyCalls is wantCalls for calls that come when an event has been settled, a moment
// after it ended.
func (e *env) eventuallyCalls(want ...string) {
	e.t.Helper()
	e.t.Run("calls", func(t *testing.T) {
		t.Helper()
		var got []string
		deadline := time.Now().Add(10 * time.Second)
		for got = e.recorded(t); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want); got = e.recorded(t) {
			if time.Now().After(deadline) {
				t.Fatalf("platform calls:\n got %q\nwant %q", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// recorded returns the calls the harness recorded, or skips t when it records none.
func (e *env) recorded(t *testing.T) []string {
	r, ok := e.hn.(Recorder)
	if !ok {
		t.Skip(noCalls)
	}
	return r.Calls(e.p)
}

// batchText is ReadBatch's text, decoded.
type batchText struct {
	Queue    string        `json:"queue"`
	Messages []messageText `json:"messages"`
}

type messageText struct {
	ID        string          `json:"id"`
	Attempts  int             `json:"attempts"`
	Timestamp int64           `json:"timestamp"`
	Body      json.RawMessage `json:"body"`
}

// seen is one queue event as a test's consumer saw it.
type seen struct {
	batch batchText
	at    time.Time // when the event started
}

// consumer runs a consumer in the background until the test ends and reports every event.
type consumer struct {
	events chan seen
	t      *testing.T
	stop   func() // ends the consumer and waits for it
}

// consume starts consuming cc.Queue with handle, which runs after the batch has been read.
func (e *env) consume(cc host.ConsumerConfig, handle func(ev *duilie.Event, b batchText) error) *consumer {
	e.t.Helper()
	c := &consumer{events: make(chan seen, 10000), t: e.t}
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := e.h.Consume(ctx, cc, func(ev *duilie.Event) error {
			at := time.Now()
			text, err := duilie.ReadBatch(ev)
			if err != nil {
				return err
			}
			var b batchText
			if err := json.Unmarshal([]byte(text), &b); err != nil {
				e.t.Errorf("ReadBatch returned invalid JSON %q: %v", text, err)
				return err
			}
			// Reported once handle returns, so what it wrote is visible to the test.
			defer func() { c.events <- seen{b, at} }()
			if handle == nil {
				return nil
			}
			return handle(ev, b)
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("Consume: %v", err)
		}
	}()
	c.stop = func() { cancel(); wg.Wait() }
	e.t.Cleanup(c.stop)
	return c
}

// next waits for the next event.
func (c *consumer) next(within time.Duration) seen {
	c.t.Helper()
	select {
	case s := <-c.events:
		return s
	case <-time.After(within):
		c.t.Fatalf("no queue event within %v", within)
		return seen{}
	}
}

// messages waits until n messages have been delivered, over any number of events.
func (c *consumer) messages(n int, within time.Duration) []messageText {
	c.t.Helper()
	var out []messageText
	deadline := time.After(within)
	for len(out) < n {
		select {
		case s := <-c.events:
			out = append(out, s.batch.Messages...)
		case <-deadline:
			c.t.Fatalf("got %d of %d messages within %v", len(out), n, within)
		}
	}
	return out
}

// none asserts that no event comes within d.
func (c *consumer) none(d time.Duration) {
	c.t.Helper()
	select {
	case s := <-c.events:
		c.t.Fatalf("unexpected queue event: %+v", s.batch)
	case <-time.After(d):
	}
}

// contract consumes a queue through the platform contract alone, with no host: for tests of
// what a platform keeps that no program sees (content types, restarts, ack waits). The
// consumer is closed when the test ends.
func (e *env) contract(queue string, ackWait time.Duration) platform.Consumer {
	e.t.Helper()
	c, err := e.p.Consume(e.ctx, queue, platform.ConsumerOptions{MaxBatchSize: 100, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		e.t.Fatalf("Consume(%s): %v", queue, err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// receive returns exactly n deliveries from c, over as many Receive calls as it takes, in the
// order they came.
func receive(t *testing.T, c platform.Consumer, n int, within time.Duration) []platform.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out []platform.Delivery
	for len(out) < n {
		ds, err := c.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("received %d of %d messages within %v: %v", len(out), n, within, err)
		}
		if len(ds) == 0 || len(ds) > n-len(out) {
			t.Fatalf("Receive(%d) returned %d messages", n-len(out), len(ds))
		}
		out = append(out, ds...)
	}
	return out
}

// settle settles deliveries of queue on c, all with one action.
func settle(t *testing.T, c platform.Consumer, queue string, action platform.Action, ds ...platform.Delivery) {
	t.Helper()
	s := platform.Settlement{Queue: queue}
	for _, d := range ds {
		s.Messages = append(s.Messages, platform.Resolution{Delivery: d, Action: action})
	}
	if err := c.Settle(context.Background(), s); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

// config is the consumer configuration of most tests: batches delivered as soon as ready.
func config(queue string) host.ConsumerConfig {
	cc := host.DefaultConsumerConfig(queue)
	cc.MaxBatchTimeout = host.NoBatchTimeout
	return cc
}

// batched is the configuration of tests that send a batch of n messages and want them in one
// event: batches of n, filled for up to a second.
func batched(n int) host.ConsumerConfig {
	cc := config(queueName)
	cc.MaxBatchSize, cc.MaxBatchTimeout = n, time.Second
	return cc
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventuallyStats waits until the stats of the test's queue meet cond, in a subtest "stats"
// that skips when the platform cannot count its messages.
func (e *env) eventuallyStats(what string, cond func(platform.QueueStats) bool) {
	e.t.Helper()
	e.t.Run("stats", func(t *testing.T) {
		t.Helper()
		e.pollStats(t, what, cond)
	})
}

// eventuallyEmpty waits until the platform holds no message in any queue, in a subtest "stats"
// that skips when the platform cannot count its messages.
func (e *env) eventuallyEmpty() {
	e.t.Helper()
	e.t.Run("stats", func(t *testing.T) {
		t.Helper()
		var last []platform.QueueStats
		eventually(t, 10*time.Second, "the platform holds no message", func() bool {
			last = e.allStats(t)
			for _, s := range last {
				if s.Ready+s.Delayed+s.InFlight != 0 {
					return false
				}
			}
			return last != nil
		})
	})
}

// pollStats waits until the stats of the test's queue meet cond, and skips t when the platform
// cannot count its messages.
func (e *env) pollStats(t *testing.T, what string, cond func(platform.QueueStats) bool) {
	t.Helper()
	eventually(t, 10*time.Second, what, func() bool {
		for _, s := range e.allStats(t) {
			if s.Queue == queueName {
				return cond(s)
			}
		}
		return false
	})
}

// allStats returns every queue's stats, or skips t when the platform cannot count its messages.
// A failing Stats call (a cluster still electing a new consumer's leader answers slowly) is
// logged and reads as nil, so polling goes on.
func (e *env) allStats(t *testing.T) []platform.QueueStats {
	t.Helper()
	st, ok := e.p.(platform.Stater)
	if !ok {
		t.Skip(noStats)
	}
	all, err := st.Stats(e.ctx)
	if err != nil {
		t.Logf("Stats: %v", err)
		return nil
	}
	if backlog(all) && !e.backlogOK {
		t.Skip(noSplit)
	}
	return all
}
