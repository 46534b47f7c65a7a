package host

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/duilie/duilie/platform"
)

// PullConsumer configures a queue consumed by pulls: Cloudflare's http_pull consumer, whose
// clients pull messages over its Queues API, each leased to them for a visibility timeout.
// Names follow wrangler's. As for ConsumerConfig, the zero value of every setting is its
// default (Cloudflare's: batches of 5, 3 retries without delay, no dead-letter queue, leases of
// 30 s), and NoRetries means none.
type PullConsumer struct {
	Queue string `toml:"queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	// MaxBatchSize is a pull's batch when it asks for none, 1–100; 0 means 5.
	MaxBatchSize int `toml:"max_batch_size,nonzero" rule:"must be 1–100 (a pull's default batch_size)"`
	// MaxRetries is as ConsumerConfig's: 0 means 3, NoRetries none.
	MaxRetries int `toml:"max_retries,none" rule:"must be 0–100"`
	// RetryDelay is the delay of a retry without one, up to 86400 s; 0 means none.
	RetryDelay      time.Duration `toml:"retry_delay,seconds" rule:"must be 0–86400 (seconds)"`
	DeadLetterQueue string        `toml:"dead_letter_queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	// VisibilityTimeout is a pull's lease when it asks for none, 1 ms – 12 h; 0 means 30 s.
	VisibilityTimeout time.Duration `toml:"visibility_timeout_ms,ms,nonzero" rule:"must be 1–43200000 (milliseconds)"`
}

// WithDefaults returns c as the consumer runs it: each zero setting its default, NoRetries 0.
func (c PullConsumer) WithDefaults() PullConsumer {
	d := DefaultPullConsumer(c.Queue)
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = d.MaxBatchSize
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = d.MaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = d.VisibilityTimeout
	}
	return c
}

// Limits of pull consumers: Cloudflare's.
const (
	MaxPullBatch             = 100
	DefaultPullBatch         = 5
	MaxVisibilityTimeout     = 12 * time.Hour
	DefaultVisibilityTimeout = 30 * time.Second
	// MaxPullDelay is the longest delay of a pulled message's retry, as of every delay of
	// Cloudflare's Queues API (86400 s since 2026-02; SPEC §14.5).
	MaxPullDelay = 86400 * time.Second
)

// DefaultPullConsumer is Cloudflare's http_pull consumer for queue: batches of 5, 3 retries
// without delay, no dead-letter queue, leases of 30 s.
func DefaultPullConsumer(queue string) PullConsumer {
	return PullConsumer{Queue: queue, MaxBatchSize: DefaultPullBatch, MaxRetries: 3, VisibilityTimeout: DefaultVisibilityTimeout}
}

// Validate checks every setting; its error joins one *platform.FieldError per mistake.
func (c PullConsumer) Validate() error {
	var errs []error
	bad := func(field string) { errs = append(errs, platform.Invalid(c, field)) }
	if platform.CheckQueueName(c.Queue) != nil {
		bad("Queue")
	}
	if c.MaxBatchSize < 0 || c.MaxBatchSize > MaxPullBatch {
		bad("MaxBatchSize")
	}
	if c.MaxRetries > 100 {
		bad("MaxRetries")
	}
	if c.RetryDelay < 0 || c.RetryDelay > MaxPullDelay {
		bad("RetryDelay")
	}
	errs = append(errs, checkDeadLetterQueue(c, c.Queue, c.DeadLetterQueue))
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > MaxVisibilityTimeout {
		bad("VisibilityTimeout")
	}
	return errors.Join(errs...)
}

func (c PullConsumer) retries() retryRules {
	return retryRules{c.MaxRetries, c.RetryDelay, c.DeadLetterQueue}
}

// checkDeadLetterQueue checks the DeadLetterQueue field of settings, the consumer of queue.
func checkDeadLetterQueue(settings any, queue, dlq string) error {
	switch {
	case dlq == "":
		return nil
	case platform.CheckQueueName(dlq) != nil:
		return platform.Invalid(settings, "DeadLetterQueue")
	case dlq == queue:
		return &platform.FieldError{Field: "DeadLetterQueue", Rule: "must be another queue than the one consumed"}
	}
	return nil
}

// A Puller is a pull consumer running: a platform Consumer of its queue that receives only
// when a client pulls, so a message no client asked for is not delivered (and costs no
// attempt). Each pulled message is leased: the lease is this process's timer for the pull's
// visibility timeout, over a platform delivery whose own ack wait outlasts the consumer's
// visibility timeout (and is kept in progress while a longer lease runs). So a lease that ends
// is settled here, by the same rules as a push consumer's batch (decide), while one whose serve
// died returns after the platform's ack wait.
//
// Lease ids are this process's own: an id it did not issue, one of another queue, one that
// has ended (acked, retried, or past its visibility timeout) and one used twice change nothing
// and are named in the settlement's warnings. Finding a lease never reads the queue.
type Puller struct {
	h       *Host
	cfg     PullConsumer
	c       platform.Consumer
	ackWait time.Duration

	mu     sync.Mutex
	leases map[string]*lease // live leases, by lease id
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// lease is one pulled message held by a client.
type lease struct {
	id      string
	d       platform.Delivery
	expires time.Time
	timer   *time.Timer
}

// Lease is a pulled message and the id of its lease.
type Lease struct {
	ID string
	platform.Message
}

// pullWait is how long a pull waits for a first message: a pull answers at once with what is
// ready, as Cloudflare's does, and an empty queue answers an empty batch after this long.
const pullWait = 100 * time.Millisecond

// ackWaitMargin makes the platform's ack wait outlast the consumer's own leases, so that the
// lease's timer, not the platform, ends them.
const ackWaitMargin = 5 * time.Second

// Pull starts the queue's pull consumer.
func (h *Host) Pull(ctx context.Context, pc PullConsumer) (*Puller, error) {
	if err := pc.Validate(); err != nil {
		return nil, fmt.Errorf("pull consumer %q: %w", pc.Queue, err)
	}
	pc = pc.WithDefaults()
	ackWait := pc.VisibilityTimeout + ackWaitMargin
	c, err := h.cfg.Platform.Consume(ctx, pc.Queue, platform.ConsumerOptions{MaxBatchSize: MaxPullBatch, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		return nil, err
	}
	p := &Puller{h: h, cfg: pc, c: c, ackWait: ackWait, leases: map[string]*lease{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.keepLeases()
	return p, nil
}

// Config is the pull consumer's settings.
func (p *Puller) Config() PullConsumer { return p.cfg }

// keepLeases tells the platform, every half ack wait, that the messages of leases that end
// after the next tick are still being worked on.
func (p *Puller) keepLeases() {
	defer close(p.done)
	t := time.NewTicker(p.ackWait / 2)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		horizon := time.Now().Add(p.ackWait / 2)
		var ds []platform.Delivery
		p.mu.Lock()
		for _, l := range p.leases {
			if l.expires.After(horizon) {
				ds = append(ds, l.d)
			}
		}
		p.mu.Unlock()
		if len(ds) > 0 {
			if err := p.c.InProgress(context.Background(), ds); err != nil {
				p.h.log.Warn("keep pulled messages in flight", "queue", p.cfg.Queue, "err", err)
			}
		}
	}
}

// Pull leases up to max ready messages (1–100; 0 means the consumer's batch size) for
// visibility (0 means the consumer's visibility timeout). It answers at once with what is
// ready, an empty slice when nothing is. A message delivered more often than max_retries
// allows (its serve died while it was leased) is given up without being handed out, as the
// host does for a program's batch.
func (p *Puller) Pull(ctx context.Context, max int, visibility time.Duration) ([]Lease, error) {
	if max == 0 {
		max = p.cfg.MaxBatchSize
	}
	if visibility == 0 {
		visibility = p.cfg.VisibilityTimeout
	}
	switch {
	case max < 1 || max > MaxPullBatch:
		return nil, fmt.Errorf("a pull takes 1–%d messages, not %d", MaxPullBatch, max)
	case visibility < time.Millisecond || visibility > MaxVisibilityTimeout:
		return nil, fmt.Errorf("a visibility timeout is 1 ms – 12 h, not %v", visibility)
	}
	wait, cancel := context.WithTimeout(ctx, pullWait)
	ds, err := p.c.Receive(wait, max)
	cancel()
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return []Lease{}, nil // nothing ready
	case err != nil:
		return nil, err
	}
	start := time.Now()
	ds = platform.Start(ctx, p.c, ds) // what an operator removed meanwhile is gone (platform.Starter)
	ds = p.h.giveUpExhausted(ctx, p.c, p.cfg.Queue, p.cfg.retries(), ds)
	out := make([]Lease, 0, len(ds))
	reports := make([]MessageReport, len(ds))
	p.mu.Lock()
	for i, d := range ds {
		l := &lease{id: newLeaseID(), d: d, expires: start.Add(visibility)}
		id := l.id
		l.timer = time.AfterFunc(visibility, func() { p.expire(id) })
		p.leases[id] = l
		out = append(out, Lease{ID: id, Message: d.Message})
		reports[i] = MessageReport{ID: d.ID, Attempts: d.Attempts, Lag: lag(d.Message, start)}
	}
	p.mu.Unlock()
	if len(ds) > 0 {
		p.h.observe(&PullReport{Queue: p.cfg.Queue, Start: start, Messages: reports})
	}
	return out, nil
}

// newLeaseID is a fresh lease id: base64url of 16 random bytes.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LeaseRetry asks for a leased message to be delivered again.
type LeaseRetry struct {
	Lease string
	// Delay is how long until it is delivered again when HasDelay; without, the consumer's
	// retry_delay.
	Delay    time.Duration
	HasDelay bool
}

// Settled is what a settlement of leases did.
type Settled struct {
	Acked, Retried int
	// Warnings name each lease id that changed nothing, and why.
	Warnings map[string]string
}

// Warnings of Settle.
const (
	WarnNotLeased = "not a live lease of this queue: never issued here, of another queue, or ended already (acked, retried, or past its visibility timeout)"
	WarnTwice     = "given twice in one request: settled once"
)

// Settle acks and retries leased messages: an ack ends the lease and the message; a retry ends
// the lease and redelivers the message after its delay (the consumer's retry_delay without
// one), or, once max_retries redeliveries are spent, dead-letters or drops it. Every lease id
// given is answered: counted, or named in Warnings with the reason.
func (p *Puller) Settle(ctx context.Context, acks []string, retries []LeaseRetry) Settled {
	out := Settled{Warnings: map[string]string{}}
	var rs []platform.Resolution
	seen := map[string]bool{}
	take := func(id string) *lease {
		if seen[id] {
			out.Warnings[id] = WarnTwice
			return nil
		}
		seen[id] = true
		l := p.take(id)
		if l == nil {
			out.Warnings[id] = WarnNotLeased
		}
		return l
	}
	for _, id := range acks {
		if l := take(id); l != nil {
			call := platform.Call{Kind: platform.AckCall}
			rs = append(rs, platform.Resolution{Delivery: l.d, Call: call, Action: p.decide(l.d, call)})
			out.Acked++
		}
	}
	for _, rt := range retries {
		l := take(rt.Lease)
		if l == nil {
			continue
		}
		call := platform.Call{Kind: platform.RetryCall}
		delay := p.cfg.RetryDelay
		if rt.HasDelay {
			delay = rt.Delay
		}
		a := p.decide(l.d, call)
		if a.Kind == platform.Redeliver {
			a.Delay = delay
		}
		rs = append(rs, platform.Resolution{Delivery: l.d, Call: call, Action: a})
		out.Retried++
	}
	p.settle(ctx, rs)
	return out
}

// decide is the host's one rule for a delivered message (decide), for a pulled one.
func (p *Puller) decide(d platform.Delivery, call platform.Call) platform.Action {
	return decide(p.cfg.retries(), p.h.capabilities(), d.Attempts, call, false)
}

// take ends the live lease with this id, returning it, or nil when it is not live.
func (p *Puller) take(id string) *lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.leases[id]
	if !ok || !l.timer.Stop() {
		return nil
	}
	delete(p.leases, id)
	return l
}

// expire ends a lease whose visibility timeout passed, unless it was settled meanwhile: its
// message is delivered again at once, as a retry without a delay of its own.
func (p *Puller) expire(id string) {
	p.mu.Lock()
	l, ok := p.leases[id]
	if !ok || p.closed {
		p.mu.Unlock()
		return
	}
	delete(p.leases, id)
	p.mu.Unlock()
	call := platform.Call{Kind: platform.RetryCall}
	a := p.decide(l.d, call)
	if a.Kind == platform.Redeliver {
		a.Delay = 0
	}
	p.settle(context.Background(), []platform.Resolution{{Delivery: l.d, Call: call, Action: a}})
}

// settle carries out resolutions of pulled messages and reports them.
func (p *Puller) settle(ctx context.Context, rs []platform.Resolution) {
	if len(rs) == 0 {
		return
	}
	s := platform.Settlement{Queue: p.cfg.Queue, Messages: rs}
	err := p.c.Settle(context.WithoutCancel(ctx), s)
	if err != nil {
		p.h.log.Error("settle pulled messages", "queue", p.cfg.Queue, "err", err)
	}
	p.h.observe(&SettleReport{Queue: p.cfg.Queue, Reason: Pulled, Messages: messageReports(s, time.Time{}), Err: err})
}

// Purged forgets every lease, and settles its message as done: a purge removed them, and no
// lease may bring one back.
func (p *Puller) Purged(ctx context.Context) {
	p.endAll(ctx, platform.Action{Kind: platform.Done})
}

// endAll ends every live lease, settling its message with a.
func (p *Puller) endAll(ctx context.Context, a platform.Action) {
	var rs []platform.Resolution
	p.mu.Lock()
	for id, l := range p.leases {
		if l.timer.Stop() {
			rs = append(rs, platform.Resolution{Delivery: l.d, Action: a})
		}
		delete(p.leases, id)
	}
	p.mu.Unlock()
	p.settle(ctx, rs)
}

// Release ends every lease, making its message deliverable again at once with one more
// attempt, then stops the consumer: what deleting a pull consumer does.
func (p *Puller) Release(ctx context.Context) {
	p.endAll(ctx, platform.Action{Kind: platform.Redeliver})
	p.Close()
}

// Close stops the consumer. Leased messages are not settled: the platform delivers them again
// after its ack wait, with one more attempt, as after a crash.
func (p *Puller) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for _, l := range p.leases {
		l.timer.Stop()
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	_ = p.c.Close()
}
