package cfapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/duilie/duilie/jsonvalue"
	"github.com/duilie/duilie/platform"
)

// An http_pull consumer is a platform Consumer of its queue that the API receives from when a
// client pulls, never before, so a message no client asked for is not delivered (and not
// counted as an attempt). Each pulled message is leased: a lease is this process's timer for
// the pull's visibility timeout, over a platform delivery whose own ack wait is the consumer's
// visibility timeout (and is kept in progress while a longer lease runs). So a lease that ends
// is settled here, while one whose serve died returns after the platform's ack wait.

// pullWait is how long a pull waits for a first message: a pull answers at once with what is
// ready, as Cloudflare's does, and an empty queue answers an empty batch after this long.
const pullWait = 100 * time.Millisecond

// ackWaitMargin makes the platform's ack wait outlast the consumer's own leases, so that the
// lease's timer, not the platform, ends them.
const ackWaitMargin = 5 * time.Second

type puller struct {
	a       *API
	cfg     Pull
	c       platform.Consumer
	ackWait time.Duration

	mu     sync.Mutex
	leases map[string]*lease // live leases, by lease id
	byMsg  map[string]*lease // live leases, by message id
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

func (a *API) newPuller(ctx context.Context, pc Pull) (*puller, error) {
	ackWait := pc.VisibilityTimeout + ackWaitMargin
	c, err := a.cfg.Platform.Consume(ctx, pc.Queue, platform.ConsumerOptions{MaxBatchSize: MaxPullBatch, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		return nil, err
	}
	p := &puller{a: a, cfg: pc, c: c, ackWait: ackWait, leases: map[string]*lease{}, byMsg: map[string]*lease{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.keepLeases()
	return p, nil
}

// keepLeases tells the platform, every half ack wait, that the messages of leases that end
// after the next tick are still being worked on.
func (p *puller) keepLeases() {
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
				p.a.log.Warn("cloudflare api: keep leased messages in flight", "queue", p.cfg.Queue, "err", err)
			}
		}
	}
}

// close stops the consumer. Leased messages are not settled: the platform delivers them again
// after its ack wait, with one more attempt.
func (p *puller) close() {
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

// release ends every lease, making its message deliverable again at once with one more
// attempt, then stops the consumer: what deleting an http_pull consumer does.
func (p *puller) release(ctx context.Context) {
	var rs []platform.Resolution
	p.mu.Lock()
	for _, l := range p.leases {
		if l.timer.Stop() {
			rs = append(rs, p.again(l.d, 0))
		}
	}
	p.leases, p.byMsg = map[string]*lease{}, map[string]*lease{}
	p.mu.Unlock()
	p.settle(ctx, rs)
	p.close()
}

// forgetAll acks every leased message: after a purge they are gone, and no lease may bring one
// back.
func (p *puller) forgetAll(ctx context.Context) {
	var rs []platform.Resolution
	p.mu.Lock()
	for _, l := range p.leases {
		if l.timer.Stop() {
			rs = append(rs, platform.Resolution{Delivery: l.d, Action: platform.Action{Kind: platform.Done}})
		}
	}
	p.leases, p.byMsg = map[string]*lease{}, map[string]*lease{}
	p.mu.Unlock()
	p.settle(ctx, rs)
}

// again is what becomes of a message that a client retried or whose lease ran out: delivered
// again after delay, or, once max_retries redeliveries are spent, dead-lettered (dropped
// without a dead-letter queue), as the host decides for a program's batch (SPEC §7).
func (p *puller) again(d platform.Delivery, delay time.Duration) platform.Resolution {
	r := platform.Resolution{Delivery: d, Call: platform.Call{Kind: platform.RetryCall}}
	switch {
	case d.Attempts < p.cfg.MaxRetries+1:
		r.Action = platform.Action{Kind: platform.Redeliver, Delay: delay}
	case p.cfg.DeadLetterQueue != "":
		r.Action = platform.Action{Kind: platform.DeadLetter, Queue: p.cfg.DeadLetterQueue}
	default:
		r.Action = platform.Action{Kind: platform.Drop}
	}
	return r
}

func (p *puller) settle(ctx context.Context, rs []platform.Resolution) {
	if len(rs) == 0 {
		return
	}
	if err := p.c.Settle(context.WithoutCancel(ctx), platform.Settlement{Queue: p.cfg.Queue, Messages: rs}); err != nil {
		p.a.log.Error("cloudflare api: settle pulled messages", "queue", p.cfg.Queue, "err", err)
	}
}

// expire ends a lease whose visibility timeout passed, unless it was settled meanwhile.
func (p *puller) expire(id string) {
	p.mu.Lock()
	l, ok := p.leases[id]
	if !ok || p.closed {
		p.mu.Unlock()
		return
	}
	p.drop(l)
	p.mu.Unlock()
	p.settle(context.Background(), []platform.Resolution{p.again(l.d, 0)})
}

// drop forgets a live lease. p.mu must be held.
func (p *puller) drop(l *lease) {
	delete(p.leases, l.id)
	if p.byMsg[l.d.ID] == l {
		delete(p.byMsg, l.d.ID)
	}
}

// take ends the live lease with this id, returning it, or nil when it is not live.
func (p *puller) take(id string) *lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.leases[id]
	if !ok || !l.timer.Stop() {
		return nil
	}
	p.drop(l)
	return l
}

// takeMessage ends the live lease of the message with this id, if a client holds one.
func (p *puller) takeMessage(msgID string) *lease {
	p.mu.Lock()
	l, ok := p.byMsg[msgID]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return p.take(l.id)
}

// Lease ids name the message they lease, so that an ack that comes after its lease ended (and
// after a restart) still finds the message: base64url of 12 random bytes and the message id.
func newLeaseID(msgID string) string {
	b := make([]byte, 12, 12+len(msgID))
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(append(b, msgID...))
}

func leaseMessage(leaseID string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(leaseID)
	if err != nil || len(b) <= 12 {
		return "", false
	}
	return string(b[12:]), true
}

// pulledJSON is a pulled message as Cloudflare returns it: a json body base64-encoded, a text
// body as it is.
type pulledJSON struct {
	ID          string            `json:"id"`
	Body        string            `json:"body"`
	Attempts    int               `json:"attempts"`
	LeaseID     string            `json:"lease_id"`
	Metadata    map[string]string `json:"metadata"`
	TimestampMs int64             `json:"timestamp_ms"`
}

type pullJSON struct {
	MessageBacklogCount int64        `json:"message_backlog_count"`
	Messages            []pulledJSON `json:"messages"`
	Metadata            metadataJSON `json:"metadata"`
}

// puller returns the queue's http_pull consumer, or the error a pull gets without one.
func (a *API) puller(name string) (*puller, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cs := a.state(name).consumer
	if cs == nil || cs.pull == nil {
		return nil, errConflict(10255, "Queue "+name+" has no http_pull consumer: add one (type \"http_pull\") to pull its messages")
	}
	return cs.pull, nil
}

func (a *API) pull(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, true, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	p, err := a.puller(name)
	if err != nil {
		fail(w, err)
		return
	}
	batch := p.cfg.BatchSize
	if n, present, err := body.integer("batch_size", 1, MaxPullBatch, errInvalid); err != nil {
		fail(w, err)
		return
	} else if present {
		batch = int(n)
	}
	vt := p.cfg.VisibilityTimeout
	// Cloudflare's API names it visibility_timeout_ms; its own guide writes visibility_timeout.
	for _, key := range []string{"visibility_timeout", "visibility_timeout_ms"} {
		if ms, present, err := body.integer(key, 1, int64(MaxVisibilityTimeout/time.Millisecond), errInvalid); err != nil {
			fail(w, err)
			return
		} else if present {
			vt = time.Duration(ms) * time.Millisecond
		}
	}
	ctx := r.Context()
	s, err := a.stat(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	if s.Paused {
		fail(w, errPaused)
		return
	}
	wait, cancel := context.WithTimeout(ctx, pullWait)
	ds, err := p.c.Receive(wait, batch)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return // the client went away
		}
		fail(w, a.internal("pull from "+name, err))
		return
	}
	// A message delivered more often than max_retries allows (its serve died while it was
	// leased) is settled without being handed out, as the host does for a program.
	var out []pulledJSON
	var exhausted []platform.Resolution
	now := time.Now()
	p.mu.Lock()
	for _, d := range ds {
		if d.Attempts > p.cfg.MaxRetries+1 {
			exhausted = append(exhausted, p.again(d, 0))
			continue
		}
		l := &lease{id: newLeaseID(d.ID), d: d, expires: now.Add(vt)}
		id := l.id
		l.timer = time.AfterFunc(vt, func() { p.expire(id) })
		p.leases[l.id] = l
		p.byMsg[d.ID] = l
		out = append(out, pulled(l))
	}
	p.mu.Unlock()
	p.settle(ctx, exhausted)
	if out == nil {
		out = []pulledJSON{}
	}
	m := a.backlog(ctx, name)
	ok(w, pullJSON{MessageBacklogCount: m.BacklogCount, Messages: out, Metadata: metadataJSON{m}})
}

func pulled(l *lease) pulledJSON {
	ct := l.d.ContentType
	if ct == "" {
		ct = platform.Bytes
	}
	m := pulledJSON{ID: l.d.ID, Attempts: l.d.Attempts, LeaseID: l.id, TimestampMs: l.d.Timestamp,
		Metadata: map[string]string{"CF-Content-Type": string(ct)}}
	if ct == platform.Text {
		m.Body = string(l.d.Body)
	} else {
		m.Body = base64.StdEncoding.EncodeToString(l.d.Body)
	}
	return m
}

type ackJSON struct {
	AckCount   int               `json:"ackCount"`
	RetryCount int               `json:"retryCount"`
	Warnings   map[string]string `json:"warnings"`
}

// ack acks and retries leased messages. Every lease given is answered: counted, or named in
// warnings with the reason. An ack that comes after its lease ended is still accepted, as
// Cloudflare documents: the message is removed wherever it is by then (leased again, or
// waiting to be). A retry that comes after its lease ended changes nothing: the message was
// made deliverable again when the lease ended.
func (a *API) ack(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, true, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	type retry struct {
		lease string
		delay time.Duration
		given bool
	}
	var acks []string
	var retries []retry
	for _, key := range []string{"acks", "retries"} {
		raw, present := body.m[key]
		if !present {
			continue
		}
		if raw[0] != '[' {
			fail(w, errInvalid(key+" must be an array"))
			return
		}
		i := 0
		for el := range jsonvalue.Elements(raw) {
			path := key + "[" + strconv.Itoa(i) + "]."
			i++
			if el[0] != '{' {
				fail(w, errInvalid(path[:len(path)-1]+" must be an object"))
				return
			}
			o := members(path, el)
			id, present, err := o.str("lease_id")
			if err == nil && !present {
				err = errInvalid(path + "lease_id is required")
			}
			if err != nil {
				fail(w, err)
				return
			}
			if key == "acks" {
				acks = append(acks, id)
				continue
			}
			d, given, err := o.integer("delay_seconds", 0, MaxDelaySeconds, errMetadata)
			if err != nil {
				fail(w, err)
				return
			}
			retries = append(retries, retry{id, time.Duration(d) * time.Second, given})
		}
	}
	p, err := a.puller(name)
	if err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	out := ackJSON{Warnings: map[string]string{}}
	var rs []platform.Resolution
	for _, id := range acks {
		if l := p.take(id); l != nil {
			rs = append(rs, platform.Resolution{Delivery: l.d, Call: platform.Call{Kind: platform.AckCall}, Action: platform.Action{Kind: platform.Done}})
			out.AckCount++
			continue
		}
		msgID, ok := leaseMessage(id)
		if !ok {
			out.Warnings[id] = "not a lease id of this queue"
			continue
		}
		if l := p.takeMessage(msgID); l != nil { // leased again since
			rs = append(rs, platform.Resolution{Delivery: l.d, Call: platform.Call{Kind: platform.AckCall}, Action: platform.Action{Kind: platform.Done}})
			out.AckCount++
			continue
		}
		switch err := a.op.Delete(ctx, name, msgID); {
		case err == nil, errors.Is(err, platform.ErrNotFound): // removed now, or gone already
			out.AckCount++
		default:
			out.Warnings[id] = "the lease had ended and the message could not be removed: " + err.Error()
		}
	}
	for _, rt := range retries {
		l := p.take(rt.lease)
		if l == nil {
			if _, ok := leaseMessage(rt.lease); !ok {
				out.Warnings[rt.lease] = "not a lease id of this queue"
			} else {
				out.Warnings[rt.lease] = "the lease had ended (acked, retried, or past its visibility timeout): the message was not retried again"
			}
			continue
		}
		delay := p.cfg.RetryDelay
		if rt.given {
			delay = rt.delay
		}
		rs = append(rs, p.again(l.d, delay))
		out.RetryCount++
	}
	p.settle(ctx, rs)
	ok(w, out)
}
