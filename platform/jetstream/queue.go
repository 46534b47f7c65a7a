package jetstream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

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

// queue is the producer side of one queue.
type queue struct {
	p     *Platform
	name  string
	ready string
	fast  atomic.Bool // the stream takes fast batches (fastbatch.go)
}

var _ platform.Queue = (*queue)(nil)

func newQueue(p *Platform, name string) *queue {
	return &queue{p: p, name: name, ready: readySubject(name)}
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
	if delay <= 0 {
		return q.messageDue(e, body, time.Time{})
	}
	// Rounded up to the millisecond the header carries, so it is never early.
	return q.messageDue(e, body, time.Now().Add(delay+time.Millisecond-1).Truncate(time.Millisecond))
}

// messageDue is message with the due time given: the zero time for a message ready at once.
// A due time already past is scheduled at once, and delivered when it fires.
func (q *queue) messageDue(e envelope, body []byte, due time.Time) *nats.Msg {
	m := &nats.Msg{Header: make(nats.Header, 8)}
	q.fill(m, new(headerValues), e, body, due)
	return m
}

// headerValues holds the values of a message's duilie headers, each a slice of one of them
// (which an append would move out): one allocation for all, or none when a batch's messages,
// published one after another, reuse them.
type headerValues [4]string

// fill makes m the stream message messageDue describes, over whatever m held before (its
// header map is cleared and reused). Its duilie headers' values are written to vals, which
// must not change while m is in use.
func (q *queue) fill(m *nats.Msg, vals *headerValues, e envelope, body []byte, due time.Time) {
	if e.ctype == "" {
		e.ctype = platform.JSON
	}
	h := m.Header
	clear(h)
	vals[0], vals[1], vals[2] = e.id, strconv.FormatInt(e.time, 10), string(e.ctype)
	h[hdrID] = vals[0:1:1]
	h[hdrTime] = vals[1:2:2]
	h[hdrType] = vals[2:3:3]
	if e.attempts > 0 {
		vals[3] = strconv.Itoa(e.attempts)
		h[hdrAttempts] = vals[3:4:4]
	}
	m.Reply, m.Data = "", body
	if due.IsZero() {
		m.Subject = q.ready
		return
	}
	// A long delay waits on a holding subject (hold.go). The delay it is judged by leaves out
	// the round-up of due to the millisecond, so a delay of holding.after itself is not held.
	if q.hold(m, due, time.Until(due)-time.Millisecond) {
		return
	}
	h[hdrDue] = []string{strconv.FormatInt(due.UnixMilli(), 10)}
	q.schedule(m, due)
}

// schedule makes m a message schedule that JetStream turns into a ready message scheduleLead
// before due (at once if that is past); the consumer holds it until due.
func (q *queue) schedule(m *nats.Msg, due time.Time) {
	now := time.Now()
	at := due.Add(-scheduleLead)
	if at.Before(now) {
		at = now.Add(time.Millisecond - 1).Truncate(time.Millisecond)
	}
	m.Subject = scheduleSubject(q.name)
	m.Header[hdrSchedule] = []string{"@at " + at.UTC().Format(scheduleLayout)}
	m.Header[hdrScheduleTarget] = []string{q.ready}
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
	if err := q.p.publishOne(ctx, m); err != nil {
		return fmt.Errorf("jetstream: send to queue %s: %w", q.name, err)
	}
	return nil
}

// roomFor refuses to write need more bytes to a store on this machine (the embedded engine,
// or the one a local serve runs) when its file system would be left with less than
// DiskReserve free. A cluster's servers mind their own disks.
//
// It looks at the file system (statfs) at most every diskLook, or after diskLookBytes written,
// and in between counts down from what it saw by what it let through (a statfs per send was a
// twentieth of Send's CPU); whenever that count says the write would not fit, it looks again
// before it refuses.
func (p *Platform) roomFor(need int64) error {
	if p.cfg.URL != "" {
		return nil
	}
	r := &p.room
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.at) < diskLook && r.written+need <= diskLookBytes && r.free-r.written-need >= DiskReserve {
		r.written += need
		return nil
	}
	free, err := freeBytes(p.cfg.DataDir)
	if err != nil {
		r.at = time.Time{}
		return fmt.Errorf("the space left on the data directory's file system is unknown: %w", err)
	}
	r.free, r.at, r.written = free, time.Now(), 0
	if free-need < DiskReserve {
		return fmt.Errorf("the data directory's file system has %s free; duilie keeps %s free to settle the messages it holds, so it stores no more until space is freed (nothing of this was stored)",
			mib(free), mib(DiskReserve))
	}
	r.written = need
	return nil
}

// How long, and for how many bytes written, roomFor trusts what it last saw of the disk.
const (
	diskLook      = 100 * time.Millisecond
	diskLookBytes = 1 << 20
)

// diskRoom is what roomFor last saw of the data directory's file system.
type diskRoom struct {
	mu      sync.Mutex
	free    int64     // bytes free then
	at      time.Time // when
	written int64     // bytes let through since
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
