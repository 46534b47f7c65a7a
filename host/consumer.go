package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/duilie/duilie/platform"
)

// ConsumerConfig configures the consumer of one queue (SPEC §11). Several settings have
// meaningful zero values, so start from DefaultConsumerConfig rather than from a zero value.
type ConsumerConfig struct {
	Queue           string
	MaxBatchSize    int           // 1–100
	MaxBatchTimeout time.Duration // 0–60 s: deliver a partial batch this long after its first message
	MaxRetries      int           // 0–100: redeliveries before a message is dead-lettered or dropped
	RetryDelay      time.Duration // 0–43200 s: the delay of a retry() without one, and after a failed event
	DeadLetterQueue string        // "" for none: exhausted messages are deleted
	MaxConcurrency  int           // 1–250 batches in flight
}

// DefaultConsumerConfig returns the consumer settings of SPEC §11 for queue: batches of up to
// 10 messages or 5 s, 3 retries without delay, no dead-letter queue, one batch at a time.
func DefaultConsumerConfig(queue string) ConsumerConfig {
	return ConsumerConfig{Queue: queue, MaxBatchSize: 10, MaxBatchTimeout: 5 * time.Second, MaxRetries: 3, MaxConcurrency: 1}
}

// Validate reports the first setting outside its range.
func (c ConsumerConfig) Validate() error {
	switch {
	case platform.CheckQueueName(c.Queue) != nil:
		return fmt.Errorf("consumer: %w", platform.CheckQueueName(c.Queue))
	case c.MaxBatchSize < 1 || c.MaxBatchSize > 100:
		return fmt.Errorf("consumer %s: max_batch_size %d is outside 1–100", c.Queue, c.MaxBatchSize)
	case c.MaxBatchTimeout < 0 || c.MaxBatchTimeout > 60*time.Second:
		return fmt.Errorf("consumer %s: max_batch_timeout %v is outside 0–60s", c.Queue, c.MaxBatchTimeout)
	case c.MaxRetries < 0 || c.MaxRetries > 100:
		return fmt.Errorf("consumer %s: max_retries %d is outside 0–100", c.Queue, c.MaxRetries)
	case c.RetryDelay < 0 || c.RetryDelay > 43200*time.Second:
		return fmt.Errorf("consumer %s: retry_delay %v is outside 0–43200s", c.Queue, c.RetryDelay)
	case c.MaxConcurrency < 1 || c.MaxConcurrency > 250:
		return fmt.Errorf("consumer %s: max_concurrency %d is outside 1–250", c.Queue, c.MaxConcurrency)
	case c.DeadLetterQueue == c.Queue:
		return fmt.Errorf("consumer %s: dead_letter_queue must be another queue", c.Queue)
	case c.DeadLetterQueue != "" && platform.CheckQueueName(c.DeadLetterQueue) != nil:
		return fmt.Errorf("consumer %s: dead_letter_queue: %w", c.Queue, platform.CheckQueueName(c.DeadLetterQueue))
	}
	return nil
}

// AckWait is how long the host asks a platform to keep a delivery in flight before
// redelivering it: beyond the longest a batch can wait to fill plus the event time limit, with
// room to settle.
func (h *Host) AckWait(c ConsumerConfig) time.Duration {
	return c.MaxBatchTimeout + h.cfg.TimeLimit + 30*time.Second
}

// Consume delivers the queue's messages to handler, one event per batch, until ctx ends; then
// it takes no new batch and returns once the running events have ended and been settled. Call
// Halt to abort running events sooner.
func (h *Host) Consume(ctx context.Context, cc ConsumerConfig, handler Handler) error {
	if err := cc.Validate(); err != nil {
		return err
	}
	c, err := h.cfg.Platform.Consume(ctx, cc.Queue, platform.ConsumerOptions{
		MaxBatchSize: cc.MaxBatchSize, MaxConcurrency: cc.MaxConcurrency, AckWait: h.AckWait(cc),
	})
	if err != nil {
		return fmt.Errorf("consume %s: %w", cc.Queue, err)
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
	backoff := 100 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if ctx.Err() != nil { // both were ready, and select chose the slot
			return nil
		}
		ds, err := collect(ctx, c, cc)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, platform.ErrClosed) {
				return fmt.Errorf("consume %s: %w", cc.Queue, err)
			}
			// The platform is failing (a lost connection, say): keep trying, not too often.
			h.log.Error("receive", "queue", cc.Queue, "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
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
			_ = h.RunBatch(events, cc, c, ds, handler)
		}()
	}
}

// release gives deliveries back to the platform, ready again with their attempts unchanged.
func (h *Host) release(ctx context.Context, cc ConsumerConfig, c platform.Consumer, ds []platform.Delivery) {
	s := platform.Settlement{Queue: cc.Queue, Messages: make([]platform.Resolution, len(ds))}
	for i, d := range ds {
		s.Messages[i] = platform.Resolution{Delivery: d, Action: platform.Action{Kind: platform.Release}}
	}
	if err := c.Settle(ctx, s); err != nil {
		h.log.Error("release undelivered messages", "queue", cc.Queue, "err", err)
	}
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

// RunBatch runs handler as one queue event on the deliveries, resolves every message by
// SPEC §7 and settles the batch on c. It returns the event's failure, if any, or the
// platform's error when settling failed. Messages whose retries were already exhausted before
// this delivery (a crash or shutdown redelivered them once too often) are dead-lettered
// without being delivered.
func (h *Host) RunBatch(ctx context.Context, cc ConsumerConfig, c platform.Consumer, ds []platform.Delivery, handler Handler) error {
	start := time.Now()
	var exhausted []platform.Resolution
	live := ds[:0:0]
	for _, d := range ds {
		if d.Attempts > cc.MaxRetries+1 {
			exhausted = append(exhausted, platform.Resolution{Delivery: d, Action: giveUp(cc)})
			continue
		}
		live = append(live, d)
	}
	if len(exhausted) > 0 {
		if err := c.Settle(ctx, platform.Settlement{Queue: cc.Queue, Messages: exhausted}); err != nil {
			h.log.Error("settle exhausted messages", "queue", cc.Queue, "err", err)
		}
		if len(live) == 0 && len(ds) > 0 {
			return nil
		}
	}

	b := NewBatch(cc.Queue, live)
	stop := keepInFlight(ctx, c, live, h.AckWait(cc))
	id, failure := h.runEvent(ctx, QueueEvent, b, handler)
	stop()

	s := Resolve(cc, b, failure != nil)
	settleErr := c.Settle(ctx, s)

	var count [platform.Release + 1]int
	for _, r := range s.Messages {
		count[r.Action.Kind]++
	}
	attrs := []any{"event", id, "queue", cc.Queue, "batch", len(live), "outcome", Outcome(failure),
		"duration", time.Since(start).Round(time.Microsecond), "acked", count[platform.Done],
		"retried", count[platform.Redeliver], "dead", count[platform.DeadLetter], "dropped", count[platform.Drop]}
	if failure != nil {
		attrs = append(attrs, "err", failure.Error())
	}
	if settleErr != nil {
		attrs = append(attrs, "settle_err", settleErr.Error())
		h.log.Error("queue event", attrs...)
		return errors.Join(failure, settleErr)
	}
	h.log.Info("queue event", attrs...)
	return failure
}

// Outcome names how an event ended, for logs: "ok", "aborted" or "failed".
func Outcome(failure error) string {
	var a *Abort
	switch {
	case failure == nil:
		return "ok"
	case errors.As(failure, &a):
		return "aborted"
	default:
		return "failed"
	}
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

// Resolve decides what becomes of each message of a batch whose event has ended (SPEC §7):
// an explicit ack is final even when the event failed; an explicit retry is redelivered after
// its delay, or the consumer's retry_delay; with no call, a normal end is success and a failure
// redelivers after retry_delay. A redelivery that would exceed max_retries dead-letters the
// message, or drops it when there is no dead-letter queue.
func Resolve(cc ConsumerConfig, b *Batch, failed bool) platform.Settlement {
	calls := b.freeze()
	s := platform.Settlement{Queue: cc.Queue, Failed: failed, Messages: make([]platform.Resolution, len(calls))}
	for i, call := range calls {
		r := platform.Resolution{Delivery: b.deliveries[i], Call: call}
		switch {
		case call.Kind == platform.AckCall, call.Kind == platform.NoCall && !failed:
			r.Action = platform.Action{Kind: platform.Done}
		case r.Attempts >= cc.MaxRetries+1:
			r.Action = giveUp(cc)
		default:
			delay := cc.RetryDelay
			if call.Kind == platform.RetryCall && call.DelaySeconds > 0 {
				delay = time.Duration(call.DelaySeconds) * time.Second
			}
			r.Action = platform.Action{Kind: platform.Redeliver, Delay: delay}
		}
		s.Messages[i] = r
	}
	return s
}

func giveUp(cc ConsumerConfig) platform.Action {
	if cc.DeadLetterQueue != "" {
		return platform.Action{Kind: platform.DeadLetter, Queue: cc.DeadLetterQueue}
	}
	return platform.Action{Kind: platform.Drop}
}
