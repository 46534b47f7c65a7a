package jetstream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Long delays are held outside JetStream's scheduler (docs/delays-at-scale.md). The engine
// keeps every message schedule in memory, and on a subject of its own (it keys schedules by
// subject), which the store indexes in memory too: about 500 B of heap per pending delayed
// message, and a restart that rebuilds it all. So a message due later than holding.after is
// stored as a plain message on a holding subject, one per holding.bucket of due time,
//
//	duilie.<queue>.h.<due time in Unix ms / bucket length in ms>
//
// and a mover, which runs in every process that consumes the queue, turns each bucket into
// message schedules (as a shorter delay is stored from the start) once the bucket begins
// within holding.horizon, then removes the bucket's messages it moved. Many messages share a
// subject, so the engine keeps nothing per held message in memory.
//
// A message due further ahead is held twice. The file store reads a message by loading its
// whole block, so moving a bucket whose messages were sent over hours would read the whole
// stream, every minute. So a message whose hour (holding.farBucket) begins later than
// holding.farHorizon is held on the hour's subject,
//
//	duilie.<queue>.H.<due time in Unix ms / far bucket length in ms>
//
// and once that hour begins within holding.farHorizon the mover holds its messages again on
// their near buckets, at most holding.pace messages a pass, so it reads the stream once an
// hour, slowly, and each near bucket then lies in the blocks that pass wrote.
//
// The mover publishes a bucket's messages, confirmed, before it removes them (a purge of the
// bucket's subject up to the last sequence it moved): a crash in between leaves both, and the
// next pass publishes them again with the same Nats-Msg-Id (held.<queue>.<sequence>, or
// rehold.<queue>.<sequence> for a message held again on its near bucket), which the
// stream drops as a duplicate within its duplicate window (2 minutes). A message is delivered
// twice only when the next pass comes later than that (a process that consumed the queue
// crashed there, and none came back within 2 minutes). Several processes moving the same
// bucket at once publish the same ids, so they store each message once.

// holding is when and how long delays are held.
type holding struct {
	after   time.Duration // a delay longer than this is held
	bucket  time.Duration // the span of due times that share a holding subject
	horizon time.Duration // a bucket is moved once it begins within this
	every   time.Duration // how often the mover looks
	chunk   int           // messages moved between two removals

	farBucket  time.Duration // the span of due times of a far holding subject; 0: none
	farHorizon time.Duration // a far bucket is held again on near buckets once it begins within this
	pace       int           // far-held messages held again per pass, at most

	// testHookMoved, when set by a test, runs after a chunk is published and before its
	// removal; an error stops the pass there, as a crash would.
	testHookMoved func() error
}

// defaultHolding: a delay over 2 minutes is held, in buckets of a minute, moved into schedules
// a minute before they begin, so a held message becomes a schedule 1 to 2 minutes before it is
// due. One due in an hour that begins more than an hour ahead is held on that hour first, and
// held again on its minute about an hour before the hour begins, 4,096 messages a second (an
// hour of 10 million messages due over 12 hours, some 830,000, in under 4 minutes).
var defaultHolding = holding{after: 2 * time.Minute, bucket: time.Minute, horizon: time.Minute, every: time.Second, chunk: 4096,
	farBucket: time.Hour, farHorizon: time.Hour, pace: 4096}

// The holding subjects' level tokens: near (moved into schedules) and far (held again on near).
const (
	nearLevel = "h"
	farLevel  = "H"
)

// holdSubject is the holding subject of a message due at due, held at now.
func (h *holding) holdSubject(queue string, due, now time.Time) string {
	if h.farBucket > 0 {
		if n := due.UnixMilli() / h.farBucket.Milliseconds(); time.UnixMilli(n * h.farBucket.Milliseconds()).After(now.Add(h.farHorizon)) {
			return levelSubject(queue, farLevel, n)
		}
	}
	return h.nearSubject(queue, due)
}

// nearSubject is the near holding subject of a message due at due.
func (h *holding) nearSubject(queue string, due time.Time) string {
	return levelSubject(queue, nearLevel, due.UnixMilli()/h.bucket.Milliseconds())
}

func levelSubject(queue, level string, n int64) string {
	return subjectPrefix + queue + "." + level + "." + strconv.FormatInt(n, 10)
}

// holdFilter matches a queue's near holding subjects; farFilter its far ones.
func holdFilter(queue string) string { return subjectPrefix + queue + "." + nearLevel + ".*" }
func farFilter(queue string) string  { return subjectPrefix + queue + "." + farLevel + ".*" }

// bucketStart is when the bucket of a holding subject of the level with buckets of span begins.
func bucketStart(queue, level string, span time.Duration, subject string) (time.Time, bool) {
	s, ok := strings.CutPrefix(subject, subjectPrefix+queue+"."+level+".")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n * span.Milliseconds()), true
}

// hold makes m, due at due, a held message if its delay is long enough, and says whether it did.
func (q *queue) hold(m *nats.Msg, due time.Time, delay time.Duration) bool {
	if delay <= q.p.holding.after {
		return false
	}
	m.Subject = q.p.holding.holdSubject(q.name, due, time.Now())
	m.Header[hdrDue] = []string{strconv.FormatInt(due.UnixMilli(), 10)}
	return true
}

// mover is the mover of one queue in this process, shared by its consumers here.
type mover struct {
	refs int
	stop context.CancelFunc
	done chan struct{}
}

// startMover starts the queue's mover, or counts one more consumer of it. p.mu is held.
func (p *Platform) startMover(q *queue) {
	if p.movers == nil {
		p.movers = map[string]*mover{}
	}
	if m := p.movers[q.name]; m != nil {
		m.refs++
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &mover{refs: 1, stop: cancel, done: make(chan struct{})}
	p.movers[q.name] = m
	go func() {
		defer close(m.done)
		p.runMover(ctx, q)
	}()
}

// stopMover counts one consumer of the queue less, and stops its mover after the last one; the
// returned channel closes when the mover has ended. p.mu is held.
func (p *Platform) stopMover(queue string) <-chan struct{} {
	m := p.movers[queue]
	if m == nil {
		return nil
	}
	if m.refs--; m.refs > 0 {
		return nil
	}
	delete(p.movers, queue)
	m.stop()
	return m.done
}

func (p *Platform) runMover(ctx context.Context, q *queue) {
	t := time.NewTicker(p.holding.every)
	defer t.Stop()
	failing := false
	for {
		err := p.moveDue(ctx, q)
		if ctx.Err() != nil {
			return
		}
		// Logged once per run of failures; the next pass tries again.
		if err != nil && !failing {
			p.log.Warn("jetstream: moving held delayed messages into schedules; trying again", "queue", q.name, "err", err)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// moveDue moves every near bucket of the queue that begins within the horizon (or has begun: a
// bucket left by a process that stopped), oldest first, then holds again on near buckets up
// to holding.pace messages of the far buckets that begin within the far horizon, oldest first.
func (p *Platform) moveDue(ctx context.Context, q *queue) error {
	st, due, err := p.dueBuckets(ctx, q, holdFilter(q.name), nearLevel, p.holding.bucket, p.holding.horizon)
	if err != nil {
		return err
	}
	for _, subject := range due {
		if _, err := p.moveBucket(ctx, q, st, subject, q.release, 0); err != nil {
			return err
		}
	}
	if p.holding.farBucket <= 0 {
		return nil
	}
	st, due, err = p.dueBuckets(ctx, q, farFilter(q.name), farLevel, p.holding.farBucket, p.holding.farHorizon)
	if err != nil {
		return err
	}
	left := p.holding.pace
	for _, subject := range due {
		n, err := p.moveBucket(ctx, q, st, subject, q.rehold, left)
		if err != nil {
			return err
		}
		if left -= n; left <= 0 {
			return nil
		}
	}
	return nil
}

// dueBuckets lists, oldest first, the queue's holding subjects matching filter whose buckets
// begin within horizon.
func (p *Platform) dueBuckets(ctx context.Context, q *queue, filter, level string, span, horizon time.Duration) (jetstream.Stream, []string, error) {
	// Each request has its own time limit, not the pass: moving a large backlog takes long.
	ictx, cancel := withTimeout(ctx)
	defer cancel()
	st, err := p.js.Stream(ictx, streamName(q.name))
	if err != nil {
		return nil, nil, err
	}
	info, err := st.Info(ictx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, nil, err
	}
	until := time.Now().Add(horizon)
	type bucket struct {
		subject string
		start   time.Time
	}
	var due []bucket
	for subj := range info.State.Subjects {
		if start, ok := bucketStart(q.name, level, span, subj); ok && !start.After(until) {
			due = append(due, bucket{subj, start})
		}
	}
	slices.SortFunc(due, func(a, b bucket) int { return a.start.Compare(b.start) })
	subjects := make([]string, len(due))
	for i, b := range due {
		subjects[i] = b.subject
	}
	return st, subjects, nil
}

// moveBucket publishes the bucket's messages as to makes them (schedules, or near-held
// messages), a chunk at a time, each chunk confirmed before it is removed from the bucket. With
// limit > 0 it moves that many at most. It returns how many it moved.
//
// It starts where the last pass in this process left the bucket (what lay before is removed):
// a bucket's first messages may lie in the stream's first blocks, and looking for them there
// again at every pass would read those blocks again.
func (p *Platform) moveBucket(ctx context.Context, q *queue, st jetstream.Stream, subject string, to func(storedMsg) *nats.Msg, limit int) (int, error) {
	born := st.CachedInfo().Created // a stream deleted and made again starts over
	from := p.movedTo.load(subject, born)
	var last uint64
	moved, total := 0, 0
	remove := func() error {
		if last == 0 || moved == 0 {
			return nil
		}
		if p.holding.testHookMoved != nil {
			if err := p.holding.testHookMoved(); err != nil {
				return err
			}
		}
		pctx, cancel := withTimeout(ctx)
		defer cancel()
		if err := st.Purge(pctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(last+1)); err != nil {
			return fmt.Errorf("remove moved messages of %s: %w", subject, err)
		}
		p.movedTo.store(subject, born, last+1)
		moved = 0
		return nil
	}
	for limit <= 0 || total < limit {
		n := scanBatch
		if limit > 0 {
			n = min(n, limit-total)
		}
		ms, err := p.scan(ctx, q.name, subject, from, n)
		if err != nil {
			return total, err
		}
		if len(ms) == 0 {
			if err := remove(); err != nil {
				return total, err
			}
			p.movedTo.drop(subject) // empty: it goes from the stream's subjects
			return total, nil
		}
		futures := make([]jetstream.PubAckFuture, len(ms))
		for i, m := range ms {
			if futures[i], err = p.js.PublishMsgAsync(to(m), jetstream.WithStallWait(requestTimeout)); err != nil {
				return total, fmt.Errorf("move held message %d: %w", m.seq, err)
			}
		}
		wait := time.NewTimer(requestTimeout)
		for i, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				wait.Stop()
				return total, fmt.Errorf("move held message %d: %w", ms[i].seq, err)
			case <-wait.C:
				return total, fmt.Errorf("move held message %d: no acknowledgement within %v", ms[i].seq, requestTimeout)
			case <-ctx.Done():
				wait.Stop()
				return total, ctx.Err()
			}
		}
		wait.Stop()
		last = ms[len(ms)-1].seq
		from = last + 1
		total += len(ms)
		if moved += len(ms); moved >= p.holding.chunk {
			if err := remove(); err != nil {
				return total, err
			}
		}
	}
	return total, remove()
}

// positions is where the mover left each bucket in this process, by subject: the sequence to
// look from next.
type positions struct {
	mu sync.Mutex
	m  map[string]position
}

type position struct {
	born time.Time // the stream's creation time
	next uint64
}

func (ps *positions) load(subject string, born time.Time) uint64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if at, ok := ps.m[subject]; ok && at.born.Equal(born) {
		return at.next
	}
	return 1
}

func (ps *positions) store(subject string, born time.Time, next uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[string]position{}
	}
	ps.m[subject] = position{born, next}
}

func (ps *positions) drop(subject string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.m, subject)
}

// release is the message schedule of a held message: the same message (duilie's headers,
// body), scheduled as a delay shorter than holding.after is (queue.message), deduplicated by the
// held message's sequence.
func (q *queue) release(m storedMsg) *nats.Msg {
	c, due, ok := q.copyHeld(m, "held.")
	if ok {
		q.schedule(c, due)
	}
	return c
}

// rehold is a far-held message held again on its near bucket, deduplicated by its sequence.
func (q *queue) rehold(m storedMsg) *nats.Msg {
	c, due, ok := q.copyHeld(m, "rehold.")
	if ok {
		c.Subject = q.p.holding.nearSubject(q.name, due)
	}
	return c
}

// copyHeld copies a held message (duilie's headers, body) onto the ready subject, with the
// Nats-Msg-Id idPrefix<queue>.<sequence>, and reads its due time: ok is false for a message
// that is not duilie's (no due time), which is then ready at once.
func (q *queue) copyHeld(m storedMsg, idPrefix string) (c *nats.Msg, due time.Time, ok bool) {
	h := make(nats.Header, 8)
	for k, v := range m.msg.Header {
		if strings.HasPrefix(k, "Duilie-") {
			h[k] = v
		}
	}
	h[hdrMsgID] = []string{idPrefix + q.name + "." + strconv.FormatUint(m.seq, 10)}
	c = &nats.Msg{Subject: q.ready, Header: h, Data: m.msg.Data}
	ms, err := strconv.ParseInt(h.Get(hdrDue), 10, 64)
	if err != nil {
		return c, time.Time{}, false
	}
	return c, time.UnixMilli(ms), true
}
