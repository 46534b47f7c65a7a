// Package memory is an in-memory platform: queues held in the process, with real timers for
// send delays, retry delays and ack waits. Nothing survives the process, so it is for unit
// tests, examples and quick demos; the embedded engine (package jetstream) is the durable
// default.
//
// Beyond the platform contract it offers what tests of programs need:
//   - Options.Record records every platform call (send with its options, sendBatch with its
//     items, and the ack and retry calls a program made, as the platform receives them when the
//     event settles); Calls returns them.
//   - Put hands over any messages exactly as given (any id, attempts, timestamp or content
//     type), and RejectSends makes a queue's sends fail with a given message.
//   - Options.Miniflare makes a failed event redeliver its whole batch, acked messages included,
//     as Cloudflare's local simulator Miniflare does. Cloudflare itself (and duilie's other
//     platforms) keep acked messages acked; run a program's tests both ways to prove it
//     idempotent.
//
// Running a Go handler per batch is the host's job: see the package example.
package memory

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duilie/duilie/platform"
)

// Kind is the name this driver is registered under, for [platform] kind in duilie.toml.
const Kind = "memory"

func init() {
	platform.Register(Kind, func() platform.Opener { return &Config{} })
}

// Config is the [platform] table of duilie.toml for kind "memory": a platform that lives in the
// serving process and is gone when it stops. It is for quick tries and tests, never for
// messages that matter.
type Config struct {
	// Miniflare redelivers a failed event's whole batch, acked messages included.
	Miniflare bool `toml:"miniflare" rule:"must be true or false"`
	// Platform, when set, is the platform Open returns instead of a new one: for a test that
	// puts messages or refuses sends itself.
	Platform *Platform
}

var _ platform.OwnerOpener = (*Config)(nil)

var _ platform.Starter = (*consumer)(nil)

// Kind is "memory".
func (c *Config) Kind() string { return Kind }

// Validate accepts every Config.
func (c *Config) Validate() error { return nil }

// Open fails: a process that does not own the platform (a command: send, queues, …) would get
// a platform of its own, which no serve ever reads.
func (c *Config) Open(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	return nil, errors.New(`memory: platform kind "memory" keeps its messages inside the serving process, ` +
		`so a command cannot reach them; use kind "jetstream" (the default) to send from outside`)
}

// OpenOwner makes an empty in-memory platform, or returns Platform.
func (c *Config) OpenOwner(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	if c.Platform != nil {
		return c.Platform, nil
	}
	return New(Options{Miniflare: c.Miniflare}), nil
}

// Options configure a Platform. The zero value is a plain in-memory platform.
type Options struct {
	// Record keeps every platform call for Calls.
	Record bool
	// Miniflare redelivers a failed event's whole batch, acked messages included.
	Miniflare bool
	// Now is the clock for message timestamps; nil means time.Now.
	Now func() time.Time
}

// Platform is an in-memory platform. It is safe for concurrent use.
type Platform struct {
	opts Options

	mu          sync.Mutex
	queues      map[string]*queue
	calls       []Call
	settlements []platform.Settlement
	closed      bool
}

var (
	_ platform.Platform = (*Platform)(nil)
	_ platform.Stater   = (*Platform)(nil)
	_ platform.Operator = (*Platform)(nil)
)

// New makes an empty in-memory platform.
func New(opts Options) *Platform {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Platform{opts: opts, queues: map[string]*queue{}}
}

// queue is one queue's messages. Fields are guarded by Platform.mu.
type queue struct {
	name     string
	ready    []*message // in delivery order
	stored   []*message // every message the queue holds, in any state, by seq (oldest first)
	seq      uint64     // the last seq given to a stored message
	delayed  int
	inFlight int
	paused   bool
	reject   *string
	wake     chan struct{} // closed and replaced whenever a message becomes ready, or the queue resumes
}

// signal wakes every Receive waiting on q.
func (q *queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// token identifies one delivery of a message: a settlement of an earlier delivery (redelivered
// since, after its ack wait) must not settle the current one.
type token struct {
	m *message
	n int // m.deliveries when delivered
}

// current returns the token's message if this delivery is the one in flight, or the one an
// operator removed while it was in flight (its event may still retry it).
func (t token) current() (*message, bool) {
	return t.m, (t.m.inFlight || t.m.removed) && t.m.deliveries == t.n
}

// message is a stored message.
type message struct {
	platform.Message
	seq        uint64      // its place among the queue's stored messages, while it is stored
	deliveries int         // delivered so far
	timer      *time.Timer // ack wait while in flight, delay while delayed
	inFlight   bool
	delayed    bool
	delivered  time.Time // in flight: when
	removed    bool      // deleted or purged by an operator while in flight
}

// q returns the named queue, creating it. p.mu must be held.
func (p *Platform) q(name string) *queue {
	q := p.queues[name]
	if q == nil {
		q = &queue{name: name, wake: make(chan struct{})}
		p.queues[name] = q
	}
	return q
}

// Queue returns the producer side of a queue, creating the queue.
func (p *Platform) Queue(ctx context.Context, name string) (platform.Queue, error) {
	if err := platform.CheckQueueName(name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, platform.ErrClosed
	}
	p.q(name)
	return producer{p, name}, nil
}

type producer struct {
	p    *Platform
	name string
}

func (pr producer) Send(ctx context.Context, body []byte, opts platform.SendOptions) error {
	return pr.p.send(pr.name, Call{Op: "send", Queue: pr.name, Body: clone(body), Options: opts},
		[]platform.BatchItem{{Body: body, ContentType: opts.ContentType, DelaySeconds: opts.DelaySeconds}})
}

func (pr producer) SendBatch(ctx context.Context, items []platform.BatchItem) error {
	rec := make([]platform.BatchItem, len(items))
	for i, it := range items {
		rec[i] = it
		rec[i].Body = clone(it.Body)
	}
	return pr.p.send(pr.name, Call{Op: "sendBatch", Queue: pr.name, Items: rec}, items)
}

// send records the call and enqueues every item, or none when the queue rejects sends.
func (p *Platform) send(name string, call Call, items []platform.BatchItem) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return platform.ErrClosed
	}
	if p.opts.Record {
		p.calls = append(p.calls, call)
	}
	q := p.q(name)
	if q.reject != nil {
		return errors.New(*q.reject)
	}
	now := p.opts.Now().UnixMilli()
	for _, it := range items {
		m := &message{Message: platform.Message{
			ID: platform.NewMessageID(), Timestamp: now, Body: clone(it.Body), ContentType: it.ContentType,
		}}
		p.enqueue(q, m, time.Duration(it.DelaySeconds)*time.Second)
	}
	return nil
}

// enqueue makes m ready in q after delay, as the newest of q's stored messages (a retried or
// fired message is stored anew, as JetStream stores a new stream message). p.mu must be held.
func (p *Platform) enqueue(q *queue, m *message, delay time.Duration) {
	m.Due = time.Now().Add(delay).UnixMilli()
	q.unstore(m)
	q.seq++
	m.seq = q.seq
	q.stored = append(q.stored, m)
	if delay <= 0 {
		q.ready = append(q.ready, m)
		q.signal()
		return
	}
	q.delayed++
	m.delayed = true
	m.timer = time.AfterFunc(delay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed || !m.delayed || m.timer == nil {
			return
		}
		q.delayed--
		m.delayed = false
		p.enqueue(q, m, 0)
	})
}

// unstore drops m from q's stored messages, if it is there.
func (q *queue) unstore(m *message) {
	if m.seq == 0 {
		return
	}
	i, found := slices.BinarySearchFunc(q.stored, m.seq, func(s *message, seq uint64) int { return cmp.Compare(s.seq, seq) })
	if found {
		q.stored = slices.Delete(q.stored, i, i+1)
	}
	m.seq = 0
}

// Put hands over messages to a queue exactly as given, ready now: any id, attempts, timestamp,
// body and content type. Attempts is the number of earlier deliveries plus one, so a message
// Put with Attempts 3 is delivered with attempts 3. It creates the queue.
func (p *Platform) Put(name string, msgs ...platform.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.q(name)
	for _, msg := range msgs {
		m := &message{Message: msg, deliveries: max(msg.Attempts-1, 0)}
		m.Body = clone(msg.Body)
		p.enqueue(q, m, 0)
	}
}

// RejectSends makes every later send and sendBatch to the queue fail with message, verbatim
// (even ""). Accept undoes it.
func (p *Platform) RejectSends(name, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q(name).reject = &message
}

// Accept makes the queue accept sends again.
func (p *Platform) Accept(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q(name).reject = nil
}

// Consume starts delivering a queue's messages. A delivery left unsettled for opts.AckWait
// (default 1 minute) is delivered again.
func (p *Platform) Consume(ctx context.Context, name string, opts platform.ConsumerOptions) (platform.Consumer, error) {
	if err := platform.CheckQueueName(name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, platform.ErrClosed
	}
	p.q(name)
	if opts.AckWait <= 0 {
		opts.AckWait = time.Minute
	}
	return &consumer{p: p, name: name, ackWait: opts.AckWait}, nil
}

type consumer struct {
	p       *Platform
	name    string
	ackWait time.Duration
}

func (c *consumer) Receive(ctx context.Context, max int) ([]platform.Delivery, error) {
	if max < 1 {
		max = 1
	}
	p := c.p
	for {
		if err := ctx.Err(); err != nil { // an ended ctx takes nothing, even if messages are ready
			return nil, err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, platform.ErrClosed
		}
		q := p.q(c.name)
		if n := min(len(q.ready), max); n > 0 && !q.paused {
			ds := make([]platform.Delivery, n)
			now := time.Now()
			for i, m := range q.ready[:n] {
				m.deliveries++
				m.Attempts = m.deliveries
				m.inFlight = true
				m.delivered = now
				q.inFlight++
				t := token{m, m.deliveries}
				m.timer = time.AfterFunc(c.ackWait, func() { c.expire(t) })
				ds[i] = platform.Delivery{Message: m.Message, Token: t}
				ds[i].Body = clone(m.Body)
			}
			q.ready = slices.Delete(q.ready, 0, n)
			p.mu.Unlock()
			return ds, nil
		}
		wake := q.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// expire redelivers a message whose ack wait passed, unless that delivery was settled meanwhile.
func (c *consumer) expire(t token) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m, current := t.current()
	if p.closed || !current || !m.inFlight {
		return
	}
	q := p.q(c.name)
	m.inFlight = false
	q.inFlight--
	p.enqueue(q, m, 0)
}

func (c *consumer) InProgress(ctx context.Context, ds []platform.Delivery) error {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		if t, ok := d.Token.(token); ok {
			if m, ok := t.current(); ok && m.inFlight {
				m.timer.Reset(c.ackWait)
			}
		}
	}
	return nil
}

// Start leaves out the deliveries whose messages an operator removed since they were received
// (platform.Starter): under the platform's lock, so a Delete or Purge that has returned has
// removed them from every batch that starts after.
func (c *consumer) Start(ctx context.Context, ds []platform.Delivery) []platform.Delivery {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(ds), func(d platform.Delivery) bool {
		t, ok := d.Token.(token)
		if !ok {
			return false
		}
		m, current := t.current()
		return current && m.removed
	})
}

// Settle records the program's calls and carries out the host's decisions. Deliveries that
// were not made by this platform (a test's hand-made batch) are treated as messages of the
// queue: a redelivered or dead-lettered one is enqueued.
func (c *consumer) Settle(ctx context.Context, s platform.Settlement) error {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return platform.ErrClosed
	}
	if p.opts.Record {
		for _, r := range s.Messages {
			switch r.Call.Kind {
			case platform.AckCall:
				p.calls = append(p.calls, Call{Op: "ack", Queue: s.Queue, ID: r.ID})
			case platform.RetryCall:
				p.calls = append(p.calls, Call{Op: "retry", Queue: s.Queue, ID: r.ID, Options: platform.SendOptions{DelaySeconds: r.Call.DelaySeconds}})
			}
		}
		p.settlements = append(p.settlements, s)
	}
	q := p.q(c.name)
	for _, r := range s.Messages {
		var m *message
		if t, ok := r.Token.(token); !ok {
			m = &message{Message: r.Message, deliveries: r.Attempts}
			m.Body = clone(r.Body)
		} else if m, ok = t.current(); ok {
			if m.inFlight {
				m.inFlight = false
				q.inFlight--
				m.timer.Stop()
			}
			if m.removed {
				continue // deleted or purged while in flight: gone, whatever the action (platform.Starter)
			}
		} else {
			continue // settled already, or delivered again after its ack wait
		}
		action := r.Action
		if p.opts.Miniflare && s.Failed && action.Kind == platform.Done {
			action = platform.Action{Kind: platform.Redeliver}
		}
		switch action.Kind {
		case platform.Redeliver:
			p.enqueue(q, m, action.Delay)
		case platform.Release:
			m.deliveries = max(m.deliveries-1, 0)
			p.enqueue(q, m, 0)
		case platform.DeadLetter:
			q.unstore(m)
			dead := &message{Message: m.Message}
			dead.Attempts = 0
			p.enqueue(p.q(action.Queue), dead, 0)
		default: // Done, Drop
			q.unstore(m)
		}
	}
	return nil
}

func (c *consumer) Close() error { return nil }

// Stats reports every queue, sorted by name.
func (p *Platform) Stats(ctx context.Context) ([]platform.QueueStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]platform.QueueStats, 0, len(p.queues))
	for _, q := range p.queues {
		out = append(out, platform.QueueStats{Queue: q.name, Ready: int64(len(q.ready)), Delayed: int64(q.delayed), InFlight: int64(q.inFlight), Paused: q.paused})
	}
	slices.SortFunc(out, func(a, b platform.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// Close stops every timer and ends the platform: later calls return platform.ErrClosed.
func (p *Platform) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, q := range p.queues {
		q.signal()
	}
	return nil
}

// Calls returns the recorded platform calls, in the order the platform received them.
func (p *Platform) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// Settlements returns every settled batch, in order, when Options.Record is set: how each event
// ended and what became of each message.
func (p *Platform) Settlements() []platform.Settlement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.settlements)
}

// Call is one recorded platform call.
type Call struct {
	Op      string // "send", "sendBatch", "ack" or "retry"
	Queue   string
	ID      string               // ack and retry: the message
	Body    []byte               // send
	Options platform.SendOptions // send; retry: DelaySeconds only
	Items   []platform.BatchItem // sendBatch
}

// String renders the call as the platform received it, in the shape of Cloudflare's API:
//
//	send(<body>, {"contentType":"json","delaySeconds":30})
//	sendBatch([{"body":<body>,"contentType":"json"},…])
//	ack(<id>)
//	retry(<id>)  or  retry(<id>, {"delaySeconds":30})
//
// The queue is not shown.
func (c Call) String() string {
	var b []byte
	switch c.Op {
	case "send":
		b = append(b, "send("...)
		b = append(b, c.Body...)
		b = append(b, ", "...)
		b = c.Options.AppendJSON(b)
	case "sendBatch":
		b = append(b, "sendBatch("...)
		b = platform.AppendItemsJSON(b, c.Items)
	case "ack":
		b = append(b, "ack("+c.ID...)
	case "retry":
		b = append(b, "retry("+c.ID...)
		if c.Options.DelaySeconds > 0 {
			b = append(b, `, {"delaySeconds":`+strconv.Itoa(c.Options.DelaySeconds)+"}"...)
		}
	}
	return string(append(b, ')'))
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
