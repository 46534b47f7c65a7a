package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/platform"
)

// ConsumerConfig configures the consumer of one queue (SPEC §11), a [[queues.consumers]] table
// of duilie.toml. The zero value of every setting is its default (SPEC §11): batches of up to 10
// messages or 5 s, 3 retries without delay, no dead-letter queue, one batch at a time. A zero
// that is not the default is written NoBatchTimeout (deliver each batch as soon as it has a
// message) and NoRetries (never deliver a failed message again). In duilie.toml, 0 means zero
// itself, as wrangler's keys do.
type ConsumerConfig struct {
	Queue string `toml:"queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	// MaxBatchSize is the most messages a batch holds, 1–100; 0 means 10.
	MaxBatchSize int `toml:"max_batch_size,nonzero" rule:"must be 1–100"`
	// MaxBatchTimeout is how long after its first message a batch that is not full is
	// delivered, up to 60 s; 0 means 5 s, NoBatchTimeout none.
	MaxBatchTimeout time.Duration `toml:"max_batch_timeout,seconds,none" rule:"must be 0–60 (seconds)"`
	// MaxRetries is how many times a message that did not succeed is delivered again before
	// it is dead-lettered or dropped, up to 100; 0 means 3, NoRetries none.
	MaxRetries int `toml:"max_retries,none" rule:"must be 0–100"`
	// RetryDelay is the delay of a retry() without one, and after a failed event, up to
	// 43200 s; 0 means none.
	RetryDelay time.Duration `toml:"retry_delay,seconds" rule:"must be 0–43200 (seconds)"`
	// DeadLetterQueue is where exhausted messages go; "" means none: they are deleted.
	DeadLetterQueue string `toml:"dead_letter_queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	// MaxConcurrency is how many batches are in flight at once, 1–250; 0 means 1.
	MaxConcurrency int `toml:"max_concurrency,nonzero" rule:"must be 1–250 (batches at once)"`
}

// The zero settings that are not defaults (any negative value means the same).
const (
	NoBatchTimeout time.Duration = -1 // MaxBatchTimeout: deliver a batch as soon as it has a message
	NoRetries      int           = -1 // MaxRetries: never deliver a failed message again
)

// DefaultConsumerConfig returns the consumer settings of SPEC §11 for queue, each written out:
// batches of up to 10 messages or 5 s, 3 retries without delay, no dead-letter queue, one batch
// at a time. ConsumerConfig{Queue: queue} means the same.
func DefaultConsumerConfig(queue string) ConsumerConfig {
	return ConsumerConfig{Queue: queue, MaxBatchSize: 10, MaxBatchTimeout: 5 * time.Second, MaxRetries: 3, MaxConcurrency: 1}
}

// WithDefaults returns c as a consumer runs it: each zero setting its default, each "none"
// zero. Its zeros mean zero, so it is for reading, not for configuring a consumer again.
func (c ConsumerConfig) WithDefaults() ConsumerConfig {
	d := DefaultConsumerConfig(c.Queue)
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = d.MaxBatchSize
	}
	switch {
	case c.MaxBatchTimeout == 0:
		c.MaxBatchTimeout = d.MaxBatchTimeout
	case c.MaxBatchTimeout < 0:
		c.MaxBatchTimeout = 0
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = d.MaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = d.MaxConcurrency
	}
	return c
}

// Validate checks every setting. Its error joins one *platform.FieldError per mistake, in
// field order.
func (c ConsumerConfig) Validate() error {
	var errs []error
	bad := func(field string) { errs = append(errs, platform.Invalid(c, field)) }
	if platform.CheckQueueName(c.Queue) != nil {
		bad("Queue")
	}
	if c.MaxBatchSize < 0 || c.MaxBatchSize > 100 {
		bad("MaxBatchSize")
	}
	if c.MaxBatchTimeout > 60*time.Second {
		bad("MaxBatchTimeout")
	}
	if c.MaxRetries > 100 {
		bad("MaxRetries")
	}
	if c.RetryDelay < 0 || c.RetryDelay > duilie.MaxDelaySeconds*time.Second {
		bad("RetryDelay")
	}
	errs = append(errs, checkDeadLetterQueue(c, c.Queue, c.DeadLetterQueue))
	if c.MaxConcurrency < 0 || c.MaxConcurrency > 250 {
		bad("MaxConcurrency")
	}
	if err := errors.Join(errs...); err != nil {
		return &consumerError{c.Queue, err}
	}
	return nil
}

// consumerError is a ConsumerConfig that does not validate.
type consumerError struct {
	queue string
	err   error
}

func (e *consumerError) Error() string {
	return fmt.Sprintf("consumer %q: %v", e.queue, e.err)
}
func (e *consumerError) Unwrap() error { return e.err }

// ackWait is how long the host asks a platform to keep a delivery in flight before
// redelivering it: beyond the longest a batch can wait to fill plus the event time limit, with
// room to settle.
func (h *Host) ackWait(c ConsumerConfig) time.Duration {
	return c.MaxBatchTimeout + h.cfg.TimeLimit + 30*time.Second
}

// Backoff bounds of a consumer whose platform fails temporarily.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Consume delivers the queue's messages to handler, one event per batch, until ctx ends; then
// it takes no new batch and returns nil once the running events have ended and been settled.
// Call Halt to abort running events sooner.
//
// A platform that fails to start the consumer or to deliver is asked again, backing off from
// 0.1 s to 5 s, for as long as its errors are temporary. A permanent error (platform.Permanent:
// bad credentials, a queue that no longer exists) or a closed platform stops the consumer:
// Consume logs one line naming the queue and the cause and returns the error.
//
// A batch whose program the host could not start (the handler returned a *StartError) is
// released, its attempts unchanged, and the consumer waits before its next batch, from 0.1 s
// doubling to 5 s for as long as starts keep failing.
func (h *Host) Consume(ctx context.Context, cc ConsumerConfig, handler Handler) error {
	if err := cc.Validate(); err != nil {
		return err
	}
	cc = cc.WithDefaults()
	c, err := h.startConsumer(ctx, cc)
	if c == nil || err != nil {
		return err
	}
	defer c.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	// Running events finish on their own time limit even when ctx ends; after Halt nothing new
	// is taken.
	events := context.WithoutCancel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.halt, cancel)()
	slots := make(chan struct{}, cc.MaxConcurrency)
	var receiving, starting backoff
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if ctx.Err() != nil { // both were ready, and select chose the slot
			return nil
		}
		if !starting.wait(ctx) { // the last program could not start: give the host a moment
			<-slots
			return nil
		}
		ds, err := collect(ctx, c, cc)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, platform.ErrClosed) || platform.IsPermanent(err) {
				h.log.Error("consumer stopped", "queue", cc.Queue, "err", err)
				return fmt.Errorf("consume %s: %w", cc.Queue, err)
			}
			// The platform is failing (a lost connection, say): keep trying, not too often.
			h.log.Error("receive", "queue", cc.Queue, "err", err, "retry_in", receiving.fail())
			if !receiving.wait(ctx) {
				return nil
			}
			continue
		}
		receiving.ok()
		if len(ds) == 0 { // a platform that broke Receive's promise: never run an empty batch
			<-slots
			continue
		}
		if h.halt.Err() != nil {
			// Halted while the batch was filling: no event can run it. Give its messages back
			// without counting a delivery that never reached the program.
			<-slots
			h.release(events, cc, c, ds)
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			var se *StartError
			if err := h.runBatch(events, cc, c, ds, handler); errors.As(err, &se) {
				starting.fail()
			} else {
				starting.ok()
			}
		}()
	}
}

// startConsumer asks the platform to consume the queue, and again after a temporary failure,
// backing off as for a failed delivery. A permanent failure or a closed platform stops it with
// one log line, and is returned. It returns a nil Consumer and a nil error when ctx ended or
// the host halted first: a stop, not a failure.
func (h *Host) startConsumer(ctx context.Context, cc ConsumerConfig) (platform.Consumer, error) {
	waiting, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.halt, cancel)()
	var b backoff
	for {
		c, err := h.cfg.Platform.Consume(ctx, cc.Queue, platform.ConsumerOptions{
			MaxBatchSize: cc.MaxBatchSize, MaxConcurrency: cc.MaxConcurrency, AckWait: h.ackWait(cc),
		})
		switch {
		case err == nil:
			return c, nil
		case waiting.Err() != nil: // stopped before it started: not a failure
			return nil, nil
		case errors.Is(err, platform.ErrClosed) || platform.IsPermanent(err):
			h.log.Error("consumer stopped", "queue", cc.Queue, "err", err)
			return nil, fmt.Errorf("consume %s: %w", cc.Queue, err)
		}
		h.log.Error("consume", "queue", cc.Queue, "err", err, "retry_in", b.fail())
		if !b.wait(waiting) {
			return nil, nil
		}
	}
}

// backoff spaces out attempts at something that keeps failing: 0.1 s after the first
// failure, doubling up to 5 s, back to none after a success. It is safe for concurrent use.
type backoff struct {
	mu    sync.Mutex
	next  time.Duration // the wait after the next failure; 0 means minBackoff
	until time.Time     // no attempt before then
}

// fail records a failure and returns the wait it sets.
func (b *backoff) fail() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := max(b.next, minBackoff)
	b.next = min(2*d, maxBackoff)
	b.until = time.Now().Add(d)
	return d
}

// ok records a success: the next attempt need not wait.
func (b *backoff) ok() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next, b.until = 0, time.Time{}
}

// wait waits until the next attempt may be made, and reports false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	b.mu.Lock()
	d := time.Until(b.until)
	b.mu.Unlock()
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives deliveries back to the platform, ready again with their attempts unchanged.
func (h *Host) release(ctx context.Context, cc ConsumerConfig, c platform.Consumer, ds []platform.Delivery) {
	h.settleUnrun(ctx, c, releasing(cc.Queue, ds), Halting)
}

// releasing is the settlement that gives deliveries no program saw back to the platform: each
// ready again at once, its attempts unchanged.
func releasing(queue string, ds []platform.Delivery) platform.Settlement {
	s := platform.Settlement{Queue: queue, Messages: make([]platform.Resolution, len(ds))}
	for i, d := range ds {
		s.Messages[i] = platform.Resolution{Delivery: d, Action: platform.Action{Kind: platform.Release}}
	}
	return s
}

// settleUnrun settles messages that no event ran, and reports them.
func (h *Host) settleUnrun(ctx context.Context, c platform.Consumer, s platform.Settlement, why SettleReason) {
	err := c.Settle(ctx, s)
	if err != nil {
		h.log.Error("settle messages no event ran", "queue", s.Queue, "reason", string(why), "err", err)
	}
	h.observe(&SettleReport{Queue: s.Queue, Reason: why, Messages: messageReports(s, time.Time{}), Err: err})
}

// collect gathers one batch: it waits for a first message, then fills the batch until it holds
// MaxBatchSize messages or MaxBatchTimeout has passed since the first arrived. If ctx ends after
// the first message arrived, the batch is returned as it is, so no delivery is left stranded.
func collect(ctx context.Context, c platform.Consumer, cc ConsumerConfig) ([]platform.Delivery, error) {
	ds, err := c.Receive(ctx, cc.MaxBatchSize)
	if err != nil {
		return nil, err
	}
	if len(ds) >= cc.MaxBatchSize || cc.MaxBatchTimeout == 0 {
		return ds, nil
	}
	fill, cancel := context.WithTimeout(ctx, cc.MaxBatchTimeout)
	defer cancel()
	for len(ds) < cc.MaxBatchSize {
		more, err := c.Receive(fill, cc.MaxBatchSize-len(ds))
		if err != nil {
			break // the timeout passed, ctx ended or the platform failed: deliver what we have
		}
		ds = append(ds, more...)
	}
	return ds, nil
}

// runBatch runs handler as one queue event on the deliveries still to run (platform.Start),
// resolves every message by SPEC §7, settles the batch on c and reports it. It returns the
// event's failure, if any, or the platform's error when settling failed. Unless the platform
// counts retries itself, messages whose retries were already exhausted before this delivery
// (a crash or shutdown redelivered them once too often) are dead-lettered or dropped without
// being delivered.
func (h *Host) runBatch(ctx context.Context, cc ConsumerConfig, c platform.Consumer, ds []platform.Delivery, handler Handler) error {
	ds = platform.Start(ctx, c, ds) // what an operator removed while the batch filled is gone (platform.Starter)
	live := h.giveUpExhausted(ctx, c, cc.Queue, cc.retries(), ds)
	if len(live) == 0 {
		return nil
	}

	start := time.Now()
	stop := keepInFlight(ctx, c, live, h.ackWait(cc))
	ev, s, failure := h.runQueueEvent(ctx, cc, live, handler, true)
	stop()
	duration := time.Since(start)

	settleErr := c.Settle(ctx, s)
	if settleErr != nil {
		h.log.Error("settle", "event", ev.ID(), "queue", cc.Queue, "err", settleErr)
	}
	h.observe(&EventReport{ID: ev.ID(), Kind: QueueEvent, Outcome: OutcomeOf(failure), Err: failure,
		Start: start, Duration: duration, Queue: cc.Queue, Batch: len(live),
		Messages: messageReports(s, start), SettleErr: settleErr, BridgeCalls: event.BridgeCalls(ev)})
	return errors.Join(failure, settleErr)
}

// Deliver runs handler as one queue event on deliveries that the caller received from c
// itself, exactly as Consume runs a batch: it resolves every message (SPEC §7), settles the
// batch on c, reports the event to the Observer, and returns the event's failure joined with
// the platform's failure to settle, if any. It is for platforms that push batches instead of
// being asked for them, such as a Worker's queue handler, whose MessageBatch arrives with the
// call.
func (h *Host) Deliver(ctx context.Context, cc ConsumerConfig, c platform.Consumer, ds []platform.Delivery, handler Handler) error {
	return h.runBatch(ctx, cc.WithDefaults(), c, ds, handler)
}

// RunBatch runs handler as one queue event on a batch of deliveries from cc.Queue, exactly as
// the consumer runtime runs a batch, and returns how the host resolves each message when the
// event has ended (SPEC §7), and the event's failure. The platform is not told and no report
// is made: settling the batch is the caller's. It is for tests of programs; adapters use
// Deliver.
func (h *Host) RunBatch(ctx context.Context, cc ConsumerConfig, ds []platform.Delivery, handler Handler) (platform.Settlement, error) {
	_, s, failure := h.runQueueEvent(ctx, cc.WithDefaults(), ds, handler, false)
	return s, failure
}

func (h *Host) runQueueEvent(ctx context.Context, cc ConsumerConfig, ds []platform.Delivery, handler Handler, started bool) (*Event, platform.Settlement, error) {
	b := event.NewBatch(cc.Queue, ds)
	ev, failure := h.runEvent(ctx, QueueEvent, b, handler, started)
	var se *StartError
	if errors.As(failure, &se) {
		b.Freeze() // no program ran to make calls
		s := releasing(cc.Queue, ds)
		s.Failed = true
		return ev, s, failure
	}
	return ev, resolve(cc, h.capabilities(), b, failure != nil), failure
}

// giveUpExhausted dead-letters or drops, undelivered, the deliveries whose retries were spent
// before this delivery, reports them, and returns the others.
func (h *Host) giveUpExhausted(ctx context.Context, c platform.Consumer, queue string, r retryRules, ds []platform.Delivery) []platform.Delivery {
	caps := h.capabilities()
	if !slices.ContainsFunc(ds, func(d platform.Delivery) bool { return r.exhausted(caps, d.Attempts) }) {
		return ds
	}
	var spent []platform.Resolution
	live := make([]platform.Delivery, 0, len(ds))
	for _, d := range ds {
		if r.exhausted(caps, d.Attempts) {
			spent = append(spent, platform.Resolution{Delivery: d, Action: r.giveUp()})
			continue
		}
		live = append(live, d)
	}
	h.settleUnrun(ctx, c, platform.Settlement{Queue: queue, Messages: spent}, Exhausted)
	return live
}

// messageReports reports each message of a settlement; start is when its handler started, or
// the zero time for messages no handler saw.
func messageReports(s platform.Settlement, start time.Time) []MessageReport {
	out := make([]MessageReport, len(s.Messages))
	for i, r := range s.Messages {
		out[i] = MessageReport{ID: r.ID, Attempts: r.Attempts, Call: r.Call, Action: r.Action, Result: ResultOf(r.Action)}
		if !start.IsZero() {
			out[i].Lag = lag(r.Message, start)
		}
	}
	return out
}

// keepInFlight restarts the deliveries' ack wait every half of it while the event runs. The ack
// wait already covers filling a batch and a whole event, so this only matters when settling is
// slow; every signal costs the platform a write. The returned func stops it.
func keepInFlight(ctx context.Context, c platform.Consumer, ds []platform.Delivery, ackWait time.Duration) (stop func()) {
	if len(ds) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ackWait / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = c.InProgress(ctx, ds)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// resolve decides what becomes of each message of a batch whose event has ended (SPEC §7):
// each message by decide, on the call the program made on it.
func resolve(cc ConsumerConfig, caps platform.Capabilities, b *event.Batch, failed bool) platform.Settlement {
	calls := b.Freeze()
	s := platform.Settlement{Queue: cc.Queue, Failed: failed, Messages: make([]platform.Resolution, len(calls))}
	for i, call := range calls {
		d := b.Delivery(i)
		s.Messages[i] = platform.Resolution{Delivery: d, Call: call, Action: decide(cc.retries(), caps, d.Attempts, call, failed)}
	}
	return s
}

// retryRules are a consumer's settings that decide what becomes of a message that did not
// succeed: a push consumer's and a pull consumer's alike.
type retryRules struct {
	maxRetries      int
	retryDelay      time.Duration
	deadLetterQueue string
}

func (c ConsumerConfig) retries() retryRules {
	return retryRules{c.MaxRetries, c.RetryDelay, c.DeadLetterQueue}
}

// decide is what becomes of one delivered message (SPEC §7), for push and pull consumers
// alike: an explicit ack is final even when the event failed; an explicit retry is
// redelivered after its delay, or the consumer's retry_delay; with no call, a normal end is
// success and a failure redelivers after retry_delay. A redelivery that would exceed
// max_retries dead-letters the message, or drops it when there is no dead-letter queue.
//
// On a platform that counts retries itself (platform.Capabilities.Retries) the host makes no
// such decision: a retried message, or one of a failed event, is redelivered with the delay
// the program asked for (0: the platform's own), and the platform applies its retry limit and
// dead-letter queue.
func decide(r retryRules, caps platform.Capabilities, attempts int, call platform.Call, failed bool) platform.Action {
	switch {
	case call.Kind == platform.AckCall, call.Kind == platform.NoCall && !failed:
		return platform.Action{Kind: platform.Done}
	case caps.Retries:
		return platform.Action{Kind: platform.Redeliver, Delay: time.Duration(call.DelaySeconds) * time.Second}
	case attempts >= r.maxRetries+1:
		return r.giveUp()
	}
	delay := r.retryDelay
	if call.Kind == platform.RetryCall && call.DelaySeconds > 0 {
		delay = time.Duration(call.DelaySeconds) * time.Second
	}
	return platform.Action{Kind: platform.Redeliver, Delay: delay}
}

// exhausted reports whether a message delivered attempts times has had more deliveries than
// max_retries allows (a crash or shutdown redelivered it before its last failure was
// recorded), so that it must be given up undelivered; never on a platform that counts retries.
func (r retryRules) exhausted(caps platform.Capabilities, attempts int) bool {
	return !caps.Retries && attempts > r.maxRetries+1
}

// giveUp is what becomes of a message whose retries are spent.
func (r retryRules) giveUp() platform.Action {
	if r.deadLetterQueue != "" {
		return platform.Action{Kind: platform.DeadLetter, Queue: r.deadLetterQueue}
	}
	return platform.Action{Kind: platform.Drop}
}
