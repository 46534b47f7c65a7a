package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/duilie/duilie/platform"
)

// duilie's own headers. A message fired by a schedule is a new stream message, with the fire
// time as its timestamp and without the sender's Nats-Msg-Id, so the message's identity travels
// here.
const (
	hdrID       = "Duilie-Id"       // the message id, 32 lowercase hex
	hdrTime     = "Duilie-Time"     // enqueue time, Unix milliseconds
	hdrType     = "Duilie-Type"     // content type
	hdrAttempts = "Duilie-Attempts" // deliveries before this stream message (a delayed retry); absent: 0
	hdrDue      = "Duilie-Due"      // a delayed message's due time, Unix milliseconds
)

// scheduleLead is how much earlier than its due time a delayed message is scheduled. JetStream's
// scheduler runs at most every 250 ms, so a schedule fires up to a quarter second late; firing
// early and holding the message in the consumer until it is due (Duilie-Due) turns that into
// at most a tenth of a second, and never early.
const scheduleLead = 150 * time.Millisecond

// JetStream's headers that duilie sets.
const (
	hdrMsgID          = "Nats-Msg-Id"
	hdrSchedule       = "Nats-Schedule"
	hdrScheduleTarget = "Nats-Schedule-Target"
	hdrBatchID        = "Nats-Batch-Id"
	hdrBatchSeq       = "Nats-Batch-Sequence"
	hdrBatchCommit    = "Nats-Batch-Commit"
)

// scheduleLayout is RFC 3339 with milliseconds, always UTC. (nats.go's WithScheduleAt drops
// the fraction, so the header is written by hand.)
const scheduleLayout = "2006-01-02T15:04:05.000Z07:00"

// requestTimeout bounds a request whose context has no deadline.
const requestTimeout = 10 * time.Second

// publishWait bounds the wait for JetStream to acknowledge a send or a batch, whatever the
// caller's deadline: an engine that stopped answering (out of space, it shuts JetStream down)
// is the platform's failure, reported as such, not a wait until the event's time limit.
const publishWait = 5 * time.Second

// DiskReserve is the space the embedded engine keeps free on its data directory's file
// system: a send or a batch that would leave less is refused before anything of it is written
// (the engine, run out of space in the middle of a batch, would store part of it), and what
// is left serves settling the messages there are (acks, retries, dead letters).
const DiskReserve = 16 << 20

// perMessage is what a stored message takes beyond its body: duilie's and JetStream's headers,
// the record's framing, its index entries.
const perMessage = 1 << 10

// maxBatchesInFlight keeps this process under JetStream's limit of 50 atomic batches in flight
// per stream.
const maxBatchesInFlight = 32

// testHookBatch, when set by a test, may change a batch's messages just before they are
// published (to make the server reject one).
var testHookBatch func([]*nats.Msg)

// queue is the producer side of one queue.
type queue struct {
	p       *Platform
	name    string
	ready   string
	batches chan struct{}
}

var _ platform.Queue = (*queue)(nil)

func newQueue(p *Platform, name string) *queue {
	return &queue{p: p, name: name, ready: readySubject(name), batches: make(chan struct{}, maxBatchesInFlight)}
}

// envelope is what identifies a message across stream messages: a send, a delayed retry and a
// dead-letter move all carry the same id, time and content type.
type envelope struct {
	id       string
	time     int64 // Unix ms
	ctype    platform.ContentType
	attempts int // deliveries so far
}

// message builds the stream message for e: on the ready subject, or, with a delay, a message
// schedule that JetStream turns into a ready message at its due time.
func (q *queue) message(e envelope, body []byte, delay time.Duration) *nats.Msg {
	if e.ctype == "" {
		e.ctype = platform.JSON
	}
	h := make(nats.Header, 8)
	h[hdrID] = []string{e.id}
	h[hdrTime] = []string{strconv.FormatInt(e.time, 10)}
	h[hdrType] = []string{string(e.ctype)}
	if e.attempts > 0 {
		h[hdrAttempts] = []string{strconv.Itoa(e.attempts)}
	}
	m := &nats.Msg{Header: h, Data: body}
	if delay <= 0 {
		m.Subject = q.ready
		return m
	}
	// Rounded up to the millisecond the header carries, so it is never early.
	now := time.Now()
	due := now.Add(delay + time.Millisecond - 1).Truncate(time.Millisecond)
	if q.hold(m, due, delay) { // a long delay waits on a holding subject (hold.go)
		return m
	}
	at := due.Add(-scheduleLead)
	if at.Before(now) {
		at = now.Add(time.Millisecond - 1).Truncate(time.Millisecond)
	}
	m.Subject = scheduleSubject(q.name)
	h[hdrDue] = []string{strconv.FormatInt(due.UnixMilli(), 10)}
	h[hdrSchedule] = []string{"@at " + at.UTC().Format(scheduleLayout)}
	h[hdrScheduleTarget] = []string{q.ready}
	return m
}

// Send enqueues one message and returns once JetStream has stored it.
func (q *queue) Send(ctx context.Context, body []byte, opts platform.SendOptions) error {
	if err := q.p.roomFor(int64(len(body)) + perMessage); err != nil {
		return fmt.Errorf("jetstream: send to queue %s: %w", q.name, err)
	}
	m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli(), ctype: opts.ContentType},
		body, time.Duration(opts.DelaySeconds)*time.Second)
	ctx, cancel := context.WithTimeout(ctx, publishWait)
	defer cancel()
	if _, err := q.p.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("jetstream: send to queue %s: %w", q.name, err)
	}
	return nil
}

// roomFor refuses to write need more bytes to a store on this machine (the embedded engine,
// or the one a local serve runs) when its file system would be left with less than
// DiskReserve free. A cluster's servers mind their own disks.
func (p *Platform) roomFor(need int64) error {
	if p.cfg.URL != "" {
		return nil
	}
	free, err := freeBytes(p.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("the space left on the data directory's file system is unknown: %w", err)
	}
	if free-need < DiskReserve {
		return fmt.Errorf("the data directory's file system has %s free; duilie keeps %s free to settle the messages it holds, so it stores no more until space is freed (nothing of this was stored)",
			mib(free), mib(DiskReserve))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// SendBatch enqueues the items in order, all or nothing, through JetStream's atomic batch
// publish: the server stages the messages and stores them only when the last one commits the
// batch, delayed items (message schedules) included. A rejected batch leaves nothing behind.
// A batch whose commit never reaches the server is abandoned by it after 10 s. If the call
// fails with a timeout, the batch may or may not have been stored, as with any send whose
// acknowledgement was lost.
func (q *queue) SendBatch(ctx context.Context, items []platform.BatchItem) error {
	switch len(items) {
	case 0:
		return nil
	case 1:
		return q.Send(ctx, items[0].Body, platform.SendOptions{ContentType: items[0].ContentType, DelaySeconds: items[0].DelaySeconds})
	}
	need := int64(0)
	for _, it := range items {
		need += int64(len(it.Body)) + perMessage
	}
	if err := q.p.roomFor(2 * need); err != nil { // staged, then stored
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
	}
	now := time.Now().UnixMilli()
	msgs := make([]*nats.Msg, len(items))
	for i, it := range items {
		msgs[i] = q.message(envelope{id: platform.NewMessageID(), time: now, ctype: it.ContentType},
			it.Body, time.Duration(it.DelaySeconds)*time.Second)
	}
	if err := q.publishAtomic(ctx, msgs); err != nil {
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
	}
	return nil
}

// pubResponse is JetStream's reply to a publish: an error, or the ack of a stored message or
// of a committed batch. Messages of a batch before its commit get an empty reply.
type pubResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Batch  string `json:"batch"`
	Count  int    `json:"count"`
}

func (q *queue) publishAtomic(parent context.Context, msgs []*nats.Msg) error {
	ctx, cancel := context.WithTimeout(parent, publishWait)
	defer cancel()
	select {
	case q.batches <- struct{}{}:
		defer func() { <-q.batches }()
	case <-ctx.Done():
		return ctx.Err()
	}
	nc := q.p.nc
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	id := nuid.Next()
	for i, m := range msgs {
		m.Header[hdrBatchID] = []string{id}
		m.Header[hdrBatchSeq] = []string{strconv.Itoa(i + 1)}
		m.Reply = inbox
	}
	msgs[len(msgs)-1].Header[hdrBatchCommit] = []string{"1"}
	if testHookBatch != nil {
		testHookBatch(msgs)
	}
	for _, m := range msgs {
		if err := nc.PublishMsg(m); err != nil {
			return err // the server abandons the incomplete batch
		}
	}
	// One reply per message, in order; the first error is the cause of the others.
	var first error
	for i := range msgs {
		r, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if first != nil {
				return first
			}
			if parent.Err() == nil && ctx.Err() != nil {
				err = fmt.Errorf("none within %v", publishWait)
			}
			return fmt.Errorf("no acknowledgement of the batch (it may or may not have been stored): %w", err)
		}
		if len(r.Data) == 0 {
			if i < len(msgs)-1 {
				continue
			}
			if first == nil {
				first = errors.New("empty acknowledgement of the batch commit")
			}
			continue
		}
		var resp pubResponse
		if err := json.Unmarshal(r.Data, &resp); err != nil {
			if first == nil {
				first = fmt.Errorf("unreadable acknowledgement: %q", r.Data)
			}
			continue
		}
		if resp.Error != nil && first == nil {
			first = fmt.Errorf("nats: %s (error %d)", resp.Error.Description, resp.Error.ErrCode)
		}
		if i == len(msgs)-1 && resp.Error == nil && first == nil && resp.Count != len(msgs) {
			first = fmt.Errorf("batch commit stored %d of %d messages", resp.Count, len(msgs))
		}
	}
	return first
}
