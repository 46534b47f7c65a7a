package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// Pull requests. A Receive asks for exactly what the host wants, with no_wait and an expiry:
// JetStream then holds the request until at least one message is ready and answers with every
// ready message up to the batch, followed by a 404 status. Nothing is fetched ahead, so a
// message the host never asked for is not delivered (and not counted as an attempt).
const (
	pullWait   = 5 * time.Second // longest a single pull request waits; Receive renews it
	pullGrace  = time.Second     // after its expiry, a request whose end never came is forgotten
	drainWait  = 20 * time.Millisecond
	defaultAck = 30 * time.Second
)

// A pull request that no server answers for (no responders) finds a consumer without a leader:
// in a cluster a new consumer, or one whose server was lost, has none for a few seconds.
// Receive asks again every leaderPoll; after leaderWait without an answer the consumer is likely
// gone, and Receive says so.
var (
	leaderWait = 15 * time.Second
	leaderPoll = 100 * time.Millisecond
)

// Acknowledgement payloads (JetStream's ack protocol).
var (
	ackAck      = []byte("+ACK")
	ackNak      = []byte("-NAK")
	ackProgress = []byte("+WPI")
)

// consumer delivers one queue's messages through the queue's durable pull consumer.
type consumer struct {
	q        *queue
	nc       *nats.Conn
	next     string // the consumer's pull request subject
	inbox    string // pull requests are answered on inbox.<n>
	sub      *nats.Subscription
	ackWait  time.Duration
	confirms *confirmer
	life     context.Context // ends at Close, waking a blocked Receive
	stop     context.CancelFunc

	mu     sync.Mutex // serializes Receive and Close
	closed bool
	open   string    // reply subject of the outstanding pull request, "" when none
	owed   int       // messages the outstanding request may still bring
	until  time.Time // when to stop waiting for the outstanding request to end
	seq    uint64
	silent time.Time   // since when pull requests have found no responders; zero while answered
	stash  []*nats.Msg // delivered after a Receive gave up waiting; handed to the next one
	held   []*nats.Msg // fired before their due time (scheduleLead), by due time; handed over when due

	fmu    sync.Mutex
	flying map[uint64]flight  // deliveries handed to the host and not yet settled, by stream sequence
	asked  *nats.Subscription // other processes' questions about flying
	told   *nats.Subscription // removals by Purge and Delete (gone.go)

	closeOnce sync.Once
}

// flight is what this process knows of a delivery in flight: when it was made, and JetStream's
// delivery count of its stream message.
type flight struct {
	at        time.Time
	delivered int
}

var _ platform.Consumer = (*consumer)(nil)

func newConsumer(ctx context.Context, q *queue, opts platform.ConsumerOptions) (*consumer, error) {
	ackWait := opts.AckWait
	if ackWait <= 0 {
		ackWait = defaultAck
	}
	if err := ensureConsumer(ctx, q.p.js, q.name, ackWait); err != nil {
		return nil, fmt.Errorf("jetstream: consumer of queue %s: %w", q.name, err)
	}
	if _, err := q.p.reclaimFlights(ctx, q.name); err != nil {
		return nil, err
	}
	nc := q.p.nc
	c := &consumer{q: q, nc: nc, inbox: nc.NewInbox(), ackWait: ackWait, flying: map[uint64]flight{},
		next: "$JS.API.CONSUMER.MSG.NEXT." + streamName(q.name) + "." + consumerName}
	var err error
	if c.sub, err = nc.SubscribeSync(c.inbox + ".*"); err != nil {
		return nil, fmt.Errorf("jetstream: consumer of queue %s: %w", q.name, err)
	}
	// Pull replies can arrive in bursts of the whole backlog; never drop them client-side.
	_ = c.sub.SetPendingLimits(-1, -1)
	if c.confirms, err = newConfirmer(nc, q.p.cfg.URL == ""); err != nil {
		c.sub.Unsubscribe()
		return nil, fmt.Errorf("jetstream: consumer of queue %s: %w", q.name, err)
	}
	// Operators in other processes ask what this one has in flight (operator.go).
	if c.asked, err = nc.Subscribe(flightsSubject(q.name), c.answerFlights); err != nil {
		c.sub.Unsubscribe()
		c.confirms.close()
		return nil, fmt.Errorf("jetstream: consumer of queue %s: %w", q.name, err)
	}
	if c.told, err = nc.Subscribe(goneSubject(q.name), c.heardGone); err != nil {
		c.sub.Unsubscribe()
		c.asked.Unsubscribe()
		c.confirms.close()
		return nil, fmt.Errorf("jetstream: consumer of queue %s: %w", q.name, err)
	}
	c.life, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// consumerConfig is the queue's durable consumer. The host pulls only what it can run
// (max_batch_size × max_concurrency), so JetStream's own limit on unacknowledged messages is not
// needed; retries with a delay are new scheduled messages and do not stay pending either.
func consumerConfig(queue string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       consumerName,
		Description:   "duilie consumer of queue " + queue,
		FilterSubject: readySubject(queue),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// ensureConsumer creates the queue's durable consumer, or updates it to this ack wait. An
// update keeps the consumer's pause (Platform.Pause): a consumer already as configured is left
// untouched, so a pause made meanwhile is never undone. It is retried, as creating a stream is
// (create.go).
func ensureConsumer(ctx context.Context, js jetstream.JetStream, queue string, ackWait time.Duration) error {
	return retryCreate(ctx, func(ctx context.Context) error {
		cfg := consumerConfig(queue, ackWait)
		if c, err := js.Consumer(ctx, streamName(queue), consumerName); err == nil {
			have := c.CachedInfo().Config
			if have.AckWait == cfg.AckWait && have.FilterSubject == cfg.FilterSubject && have.MaxAckPending == cfg.MaxAckPending {
				return nil
			}
			cfg.PauseUntil = have.PauseUntil
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		_, err := js.CreateOrUpdateConsumer(ctx, streamName(queue), cfg)
		return err
	})
}

// Receive waits until at least one message is ready, then returns up to limit of them.
func (c *consumer) Receive(ctx context.Context, limit int) ([]platform.Delivery, error) {
	for {
		ds, err := c.receive(ctx, min(max(limit, 1), 1000))
		if err != nil || len(ds) > 0 {
			return ds, err
		}
		// Only messages without a JetStream ack subject came (never from JetStream): wait on.
	}
}

func (c *consumer) receive(ctx context.Context, limit int) ([]platform.Delivery, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, platform.ErrClosed
	}
	if ctx.Err() != nil { // an ended ctx takes nothing, even what is already buffered
		return nil, c.ctxErr(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()

	var got []*nats.Msg
	crowded := false
	take := func(m *nats.Msg) error {
		if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
			if m.Subject == c.open {
				c.open = ""
			}
			switch status {
			case "404": // no messages
				return nil
			case "408": // expired; or other processes' requests wait for the few messages there are
				crowded = m.Header.Get("Description") == "Requests Pending"
				return nil
			}
			return fmt.Errorf("jetstream: receive from queue %s: %s %s", c.q.name, status, m.Header.Get("Description"))
		}
		if c.open != "" {
			if c.owed--; c.owed <= 0 {
				c.open = ""
			}
		}
		if due := dueOf(m); due.After(time.Now()) {
			c.hold(m, due)
		} else if len(got) < limit {
			got = append(got, m)
		} else {
			c.stash = append(c.stash, m)
		}
		return nil
	}

	// Messages that arrived after an earlier Receive gave up come first, then held messages
	// whose time has come.
	n := min(len(c.stash), limit)
	got = append(got, c.stash[:n]...)
	c.stash = c.stash[n:]
	got = c.release(got, limit)
	for len(got) < limit {
		m, err := c.sub.NextMsg(0)
		if errors.Is(err, nats.ErrNoResponders) {
			c.open = "" // an earlier request found no one: ask again below
			continue
		}
		if err != nil {
			break
		}
		if err := take(m); err != nil {
			if len(got) == 0 {
				return nil, err
			}
			return c.deliveries(got), nil
		}
	}
	for len(got) == 0 {
		if c.open == "" {
			if crowded {
				crowded = false
				select {
				case <-time.After(drainWait):
				case <-ctx.Done():
					return nil, c.ctxErr(ctx)
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, c.ctxErr(ctx)
			}
			if err := c.request(ctx, limit); err != nil {
				return nil, err
			}
		}
		deadline := c.until
		if len(c.held) > 0 {
			deadline = minTime(deadline, dueOf(c.held[0]))
		}
		wait, cancelWait := context.WithDeadline(ctx, deadline)
		m, err := c.sub.NextMsgWithContext(wait)
		cancelWait()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, c.ctxErr(ctx) // the request stays open; what it brings goes to the next Receive
			case errors.Is(err, context.DeadlineExceeded) && len(c.held) > 0 && !time.Now().Before(dueOf(c.held[0])):
				got = c.release(got, limit) // a held message is due
				continue
			case errors.Is(err, context.DeadlineExceeded):
				c.open = "" // its end was lost (a reconnect, a new leader): ask again
				continue
			case errors.Is(err, nats.ErrNoResponders):
				c.open = ""
				if err := c.awaitLeader(ctx); err != nil {
					return nil, err
				}
				continue
			}
			return nil, fmt.Errorf("jetstream: receive from queue %s: %w", c.q.name, err)
		}
		c.silent = time.Time{}
		if err := take(m); err != nil {
			return nil, err
		}
	}
	// The rest of the ready messages follow the first at once, then the request's end.
	for len(got) < limit && c.open != "" {
		m, err := c.sub.NextMsg(drainWait)
		if err != nil {
			break
		}
		if take(m) != nil {
			break
		}
	}
	return c.deliveries(got), nil
}

// awaitLeader pauses before asking again a consumer that no server answered for. It gives up
// with an error once nothing has answered for leaderWait, and with ctx's error when ctx ends.
func (c *consumer) awaitLeader(ctx context.Context) error {
	now := time.Now()
	if c.silent.IsZero() {
		c.silent = now
	}
	if now.Sub(c.silent) >= leaderWait {
		c.silent = time.Time{}
		return fmt.Errorf("jetstream: receive from queue %s: no server answered for its consumer in %v: %w",
			c.q.name, leaderWait, nats.ErrNoResponders)
	}
	select {
	case <-time.After(leaderPoll):
		return nil
	case <-ctx.Done():
		return c.ctxErr(ctx)
	}
}

// dueOf is when a delayed message is due (Duilie-Due), or the zero time for any other.
func dueOf(m *nats.Msg) time.Time {
	ms := headerInt(m.Header, hdrDue)
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// hold keeps m, which fired before its due time, until then. Messages due at the same time
// keep their order.
func (c *consumer) hold(m *nats.Msg, due time.Time) {
	i := slices.IndexFunc(c.held, func(h *nats.Msg) bool { return dueOf(h).After(due) })
	if i < 0 {
		i = len(c.held)
	}
	c.held = slices.Insert(c.held, i, m)
}

// release moves held messages that are due now onto got, up to limit.
func (c *consumer) release(got []*nats.Msg, limit int) []*nats.Msg {
	now := time.Now()
	n := 0
	for n < len(c.held) && len(got) < limit && !dueOf(c.held[n]).After(now) {
		got = append(got, c.held[n])
		n++
	}
	c.held = c.held[n:]
	return got
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ctxErr is the error of a Receive whose ctx ended: ErrClosed if Close ended it.
func (c *consumer) ctxErr(ctx context.Context) error {
	if c.life.Err() != nil {
		return platform.ErrClosed
	}
	return ctx.Err()
}

// request sends a pull request for up to n messages, expiring with ctx or after pullWait.
func (c *consumer) request(ctx context.Context, n int) error {
	expires := pullWait
	if dl, ok := ctx.Deadline(); ok {
		expires = min(expires, time.Until(dl))
	}
	if expires < time.Millisecond {
		if err := ctx.Err(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	}
	c.seq++
	c.open = c.inbox + "." + strconv.FormatUint(c.seq, 10)
	c.owed = n
	c.until = time.Now().Add(expires + pullGrace)
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d,"no_wait":true}`, n, expires.Nanoseconds())
	if err := c.nc.PublishRequest(c.next, c.open, req); err != nil {
		c.open = ""
		return fmt.Errorf("jetstream: receive from queue %s: %w", c.q.name, err)
	}
	return nil
}

// deliveries turns JetStream messages into deliveries. attempts is duilie's count carried over
// from earlier stream messages of the same message (a delayed retry) plus JetStream's delivery
// count of this one.
func (c *consumer) deliveries(ms []*nats.Msg) []platform.Delivery {
	ds := make([]platform.Delivery, 0, len(ms))
	tokens := make([]ackToken, len(ms)) // one allocation for the batch's tokens
	now := time.Now()
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for i, m := range ms {
		meta, ok := parseAckReply(m.Reply)
		if !ok {
			c.q.p.log.Error("jetstream: message without a JetStream ack subject", "queue", c.q.name, "reply", m.Reply)
			continue
		}
		tokens[i] = ackToken{reply: m.Reply, seq: meta.streamSeq, at: now}
		d := platform.Delivery{Token: &tokens[i]}
		d.Body = m.Data
		d.ID = messageID(m.Header, meta.streamSeq)
		var err error
		if d.Timestamp, err = strconv.ParseInt(m.Header.Get(hdrTime), 10, 64); err != nil {
			d.Timestamp = meta.timestamp / int64(time.Millisecond)
		}
		d.ContentType = contentTypeOf(m.Header)
		d.Due = headerInt(m.Header, hdrDue)
		d.Attempts = max(int(headerInt(m.Header, hdrAttempts)), 0) + int(meta.delivered)
		ds = append(ds, d)
		c.flying[meta.streamSeq] = flight{at: now, delivered: int(meta.delivered)}
	}
	return ds
}

// headerInt is the integer in header key, or 0 when it is absent or not one. (Most messages
// have neither a due time nor earlier attempts: an absent header costs no parse error.)
func headerInt(h nats.Header, key string) int64 {
	v := h.Get(key)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// landed forgets deliveries that were settled or given back.
func (c *consumer) landed(seqs ...uint64) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for _, seq := range seqs {
		delete(c.flying, seq)
	}
}

// flights is what this process knows of the queue's deliveries in flight, by stream sequence.
func (p *Platform) flights(queue string) map[uint64]flight {
	p.mu.Lock()
	cs := make([]*consumer, 0, len(p.consumers))
	for c := range p.consumers {
		if c.q.name == queue {
			cs = append(cs, c)
		}
	}
	p.mu.Unlock()
	out := map[uint64]flight{}
	for _, c := range cs {
		c.fmu.Lock()
		maps.Copy(out, c.flying)
		c.fmu.Unlock()
	}
	return out
}

// ackToken is a delivery's JetStream ack subject, and when this consumer received it.
type ackToken struct {
	reply string
	seq   uint64 // the stream message's sequence: what a copy of it is deduplicated by
	at    time.Time
}

func tokenOf(d platform.Delivery) (*ackToken, error) {
	t, ok := d.Token.(*ackToken)
	if !ok || t == nil || t.reply == "" {
		return nil, fmt.Errorf("jetstream: message %s was not delivered by this platform", d.ID)
	}
	return t, nil
}

// publishCopy publishes a copy of d to q, ready at once or scheduled after delay, carrying
// attempts as the deliveries before the copy's own. It is deduplicated by the original stream
// message, so settling one delivery twice (after a crash between the copy and the ack) stores
// one copy, while a message copied again later, at whatever attempts, is never mistaken for a
// duplicate.
func (c *consumer) publishCopy(q *queue, d platform.Delivery, attempts int, delay time.Duration, kind string) (jetstream.PubAckFuture, error) {
	t, err := tokenOf(d)
	if err != nil {
		return nil, err
	}
	m := q.message(envelope{id: d.ID, time: d.Timestamp, ctype: d.ContentType, attempts: attempts}, d.Body, delay)
	if delay <= 0 {
		// Ready at once: when it became deliverable again, for the host's delivery lag.
		m.Header[hdrDue] = []string{strconv.FormatInt(time.Now().UnixMilli(), 10)}
	}
	m.Header[hdrMsgID] = []string{kind + "." + c.q.name + "." + strconv.FormatUint(t.seq, 10)}
	f, err := c.q.p.js.PublishMsgAsync(m, jetstream.WithStallWait(requestTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %s message %s to queue %s: %w", kind, d.ID, q.name, err)
	}
	return f, nil
}

type ackMeta struct {
	delivered uint64
	streamSeq uint64
	timestamp int64 // ns
}

// parseAckReply reads the metadata JetStream puts in an ack subject, in either form:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending> or
// $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>[.<token>].
func parseAckReply(reply string) (ackMeta, bool) {
	var m ackMeta
	// Its tokens, without allocating: this runs for every message delivered.
	var buf [12]string
	t := buf[:0]
	for rest := reply; ; {
		tok, after, more := strings.Cut(rest, ".")
		if len(t) == len(buf) {
			return m, false
		}
		t = append(t, tok)
		if !more {
			break
		}
		rest = after
	}
	var at int
	switch {
	case len(t) < 9 || t[0] != "$JS" || t[1] != "ACK":
		return m, false
	case len(t) == 9:
		at = 4
	case len(t) >= 11:
		at = 6
	default:
		return m, false
	}
	var err1, err2, err3 error
	m.delivered, err1 = strconv.ParseUint(t[at], 10, 64)
	m.streamSeq, err2 = strconv.ParseUint(t[at+1], 10, 64)
	m.timestamp, err3 = strconv.ParseInt(t[at+3], 10, 64)
	return m, err1 == nil && err2 == nil && err3 == nil && m.delivered > 0
}

// InProgress restarts the deliveries' ack wait. A delivery received within the last twentieth
// of the ack wait is skipped: its wait has barely begun, and every progress signal costs the
// server a write of the consumer's state.
func (c *consumer) InProgress(ctx context.Context, ds []platform.Delivery) error {
	fresh := time.Now().Add(-c.ackWait / 20)
	for _, d := range ds {
		t, err := tokenOf(d)
		if err != nil {
			return err
		}
		if t.at.After(fresh) {
			continue
		}
		if err := c.nc.Publish(t.reply, ackProgress); err != nil {
			return fmt.Errorf("jetstream: queue %s: %w", c.q.name, err)
		}
	}
	return nil
}

// Settle carries out the host's resolution of a batch:
//   - Done and Drop: an ack, confirmed by JetStream (the message is then removed, and a
//     confirmed ack cannot come back after a crash);
//   - Redeliver: a new message carrying the same id, time, body and the attempts so far, ready
//     at once or scheduled after the delay, then a confirmed ack of this one. Not a nak:
//     JetStream keeps a nakked message among the consumer's pending deliveries, and after a
//     restart it would come back only when its ack wait ran out;
//   - DeadLetter: the message published to the dead-letter queue with the same id, time, body
//     and content type, attempts from 1, then a confirmed ack of this one.
//
// A crash between a publish and its ack leaves both: the message is delivered again (at least
// once), and a copy of the same stream message published again within two minutes (the
// stream's duplicate window) is deduplicated.
func (c *consumer) Settle(ctx context.Context, s platform.Settlement) error {
	if c.life.Err() != nil {
		return platform.ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	var (
		errs  []error
		acks  []string
		moves []move
	)
	for _, r := range s.Messages {
		t, err := tokenOf(r.Delivery)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var f jetstream.PubAckFuture
		switch {
		case r.Action.Kind == platform.Done, r.Action.Kind == platform.Drop, c.q.p.gone.has(c.q.name, t.seq):
			// Removed by an operator meanwhile: gone, whatever the action (gone.go).
			acks = append(acks, t.reply)
			continue
		}
		switch r.Action.Kind {
		case platform.Redeliver:
			f, err = c.publishCopy(c.q, r.Delivery, r.Attempts, r.Action.Delay, "again")
		case platform.Release:
			f, err = c.publishCopy(c.q, r.Delivery, r.Attempts-1, 0, "again")
		case platform.DeadLetter:
			var dlq *queue
			if dlq, err = c.q.p.queue(ctx, r.Action.Queue); err == nil {
				f, err = c.publishCopy(dlq, r.Delivery, 0, 0, "dead")
			}
		default:
			err = fmt.Errorf("jetstream: unknown action %d for message %s", r.Action.Kind, r.ID)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		moves = append(moves, move{t.reply, t.seq, f})
	}
	errs = append(errs, c.ackAfter(ctx, moves, acks)...)
	for _, r := range s.Messages {
		if t, err := tokenOf(r.Delivery); err == nil {
			c.landed(t.seq)
		}
	}
	return errors.Join(errs...)
}

// giveBack returns messages that reached this consumer but were never handed to the host: each
// is copied back to the queue with its attempts unchanged (this delivery never reached a
// program) and then acked, so it is ready again at once (or at its due time, if it was held),
// even after a restart. A message whose copy fails is nakked instead.
func (c *consumer) giveBack(ms []*nats.Msg) {
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var moves []move
	for _, m := range ms {
		ds := c.deliveries([]*nats.Msg{m})
		if len(ds) == 0 {
			continue
		}
		d := ds[0]
		t, _ := tokenOf(d)
		c.landed(t.seq)
		if c.q.p.gone.has(c.q.name, t.seq) {
			_ = c.nc.Publish(t.reply, ackAck) // removed meanwhile: nothing goes back
			continue
		}
		// A message held until its due time goes back as a schedule for that time.
		f, err := c.publishCopy(c.q, d, d.Attempts-1, time.Until(dueOf(m)), "again")
		if err != nil {
			_ = c.nc.Publish(t.reply, ackNak)
			continue
		}
		moves = append(moves, move{t.reply, t.seq, f})
	}
	for _, err := range c.ackAfter(ctx, moves, nil) {
		c.q.p.log.Warn("jetstream: returning undelivered messages at close", "queue", c.q.name, "err", err)
	}
}

// move is a delivery whose copy is being published: its original is acked once the copy is
// stored.
type move struct {
	reply  string
	seq    uint64 // the original's
	future jetstream.PubAckFuture
}

// ackAfter waits for every copy to be stored, then acks those originals and acks, confirmed.
func (c *consumer) ackAfter(ctx context.Context, moves []move, acks []string) []error {
	var errs []error
	// The original goes only once its copy is stored.
	for _, m := range moves {
		select {
		case ack := <-m.future.Ok():
			// An original removed while its copy was stored takes the copy with it (gone.go). A
			// copy an earlier settlement of the same delivery stored (a duplicate) was checked then.
			if !ack.Duplicate {
				if ok, err := c.q.p.stillStored(ctx, c.q.name, m.seq); err == nil && !ok {
					if err := c.q.p.undoCopy(ctx, ack.Stream, ack.Sequence); err != nil {
						errs = append(errs, fmt.Errorf("jetstream: queue %s: delete the copy of a removed message: %w", c.q.name, err))
					}
				}
			}
			acks = append(acks, m.reply)
		case err := <-m.future.Err():
			errs = append(errs, fmt.Errorf("jetstream: queue %s: move message: %w", c.q.name, err))
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("jetstream: queue %s: move message: %w", c.q.name, ctx.Err()))
		}
	}
	if len(acks) > 0 {
		if err := c.confirms.send(ctx, acks, ackAck); err != nil {
			errs = append(errs, fmt.Errorf("jetstream: queue %s: ack: %w", c.q.name, err))
		}
	}
	return errs
}

// Close stops delivering. Messages that reached this consumer but were never handed to the host
// are given back, ready at once; unsettled deliveries return after their ack wait.
func (c *consumer) Close() error {
	c.closeOnce.Do(func() {
		c.stop()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed = true
		// Drain unsubscribes and lets through whatever the server sent before it saw that.
		left := append(c.stash, c.held...)
		c.stash, c.held = nil, nil
		if err := c.sub.Drain(); err == nil {
			for {
				m, err := c.sub.NextMsg(drainWait)
				if err != nil {
					break
				}
				if m.Header.Get("Status") == "" {
					left = append(left, m)
				}
			}
		} else {
			_ = c.sub.Unsubscribe()
		}
		c.giveBack(left)
		_ = c.asked.Unsubscribe()
		_ = c.told.Unsubscribe()
		c.confirms.close()
		c.q.p.forget(c)
	})
	return nil
}

// confirmer sends acks that JetStream confirms, many at a time, on one subject per call; the
// call returns when every ack is confirmed.
//
// On a single server (the embedded engine, or a local command attached to it) only the last ack
// of a call asks for a reply: the server takes a consumer's acks from one connection in the
// order they were sent (one queue per consumer, worked by one goroutine) and answers an ack once
// it has applied it, so the last one's reply confirms all of them. On a cluster every ack asks
// for its own: the consumer's leader can change between two acks, and an ack sent to the old
// one would go unanswered while a later one is confirmed by the new.
type confirmer struct {
	nc      *nats.Conn
	inbox   string
	sub     *nats.Subscription
	ordered bool // a single server: the last ack's reply confirms every earlier one

	mu      sync.Mutex
	seq     uint64
	waiting map[string]*pendingConfirms
}

type pendingConfirms struct {
	left int
	done chan struct{}
}

func newConfirmer(nc *nats.Conn, ordered bool) (*confirmer, error) {
	cf := &confirmer{nc: nc, inbox: nc.NewInbox(), ordered: ordered, waiting: map[string]*pendingConfirms{}}
	sub, err := nc.Subscribe(cf.inbox+".*", func(m *nats.Msg) {
		cf.mu.Lock()
		defer cf.mu.Unlock()
		if p, ok := cf.waiting[m.Subject]; ok {
			if p.left--; p.left == 0 {
				close(p.done)
				delete(cf.waiting, m.Subject)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	cf.sub = sub
	return cf, nil
}

func (cf *confirmer) send(ctx context.Context, replies []string, payload []byte) error {
	cf.mu.Lock()
	cf.seq++
	subject := cf.inbox + "." + strconv.FormatUint(cf.seq, 10)
	asked := replies
	if cf.ordered && len(replies) > 1 {
		asked = replies[len(replies)-1:]
	}
	p := &pendingConfirms{left: len(asked), done: make(chan struct{})}
	cf.waiting[subject] = p
	cf.mu.Unlock()
	for _, r := range replies[:len(replies)-len(asked)] {
		if err := cf.nc.Publish(r, payload); err != nil {
			cf.forget(subject)
			return err
		}
	}
	for _, r := range asked {
		if err := cf.nc.PublishRequest(r, subject, payload); err != nil {
			cf.forget(subject)
			return err
		}
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		cf.mu.Lock()
		left := p.left
		cf.mu.Unlock()
		cf.forget(subject)
		if len(asked) < len(replies) {
			return fmt.Errorf("%d acks not confirmed: %w", len(replies), ctx.Err())
		}
		return fmt.Errorf("%d of %d not confirmed: %w", left, len(replies), ctx.Err())
	}
}

func (cf *confirmer) forget(subject string) {
	cf.mu.Lock()
	delete(cf.waiting, subject)
	cf.mu.Unlock()
}

func (cf *confirmer) close() { _ = cf.sub.Unsubscribe() }
