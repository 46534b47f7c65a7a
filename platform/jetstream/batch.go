package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/duilie/duilie/platform"
)

// A batch is all or nothing by one stream message: its envelope, the whole batch stored on the
// queue's envelope subject, which no consumer reads. Once the envelope is stored the batch is
// committed; its messages are then published in a pipeline and the envelope is deleted.
//
// The pipeline's messages carry no deduplication id: the stream would keep every id for its
// two-minute duplicate window, millions of them at full speed, and that cost a third of a
// batch's throughput (docs/bench.md). Instead, whenever the fate of some of a batch's messages
// is unknown (a publish failed or went unanswered; a sender stopped, and its envelope is still
// there), the stream is read from the envelope on for their Duilie-Ids, and only those not
// found are published again, each now with a deduplication id of its own (the batch's id and
// its index), so that a later attempt within the window stores none of them twice. A message
// that was stored, then delivered and acked before that look is delivered twice (at least
// once, as every crash in duilie is).
//
// A sender that stops in between (a crash, a lost connection) leaves the envelope, and whoever
// next opens the embedded engine, or starts a serve on a cluster, completes the batch so and
// deletes it.
//
// JetStream's own atomic batch would store nothing until the commit too, but it stages every
// batch in a store of its own (on a file stream: a directory, a file and an fsync per batch),
// which made a batch of 100 slower than 100 single sends (BenchmarkBatchDesigns).

// envelopeSubject is where a queue's batches are stored whole before their messages.
func envelopeSubject(queue string) string { return subjectPrefix + queue + ".b" }

// hdrBatch carries a batch's id on its envelope.
const hdrBatch = "Duilie-Batch"

// batchEnvelope is a batch as one stream message: each of its messages, in order.
type batchEnvelope struct {
	Items []envelopeItem `json:"items"`
}

type envelopeItem struct {
	ID   string `json:"id"`
	Time int64  `json:"time"`          // enqueue time, Unix ms
	Type string `json:"type"`          // content type
	Due  int64  `json:"due,omitempty"` // a delayed message's due time, Unix ms
	Body []byte `json:"body"`
}

// marshal appends json.Marshal(env) to b (nil, or a buffer SendBatch reuses), written out by
// hand: the same bytes (TestEnvelopeMarshal) without reflection, which was 2% of SendBatch's
// CPU. A string that JSON would escape (never one duilie makes: ids are hex, content types are
// words) goes to json.Marshal instead.
//
// The envelope stays JSON, bodies in base64, on purpose: a smaller binary one was tried, and
// blocks whose deleted envelopes are less than half their bytes are not compacted by the
// engine, which kept more memory for no measurable gain (docs/bench.md).
func (env batchEnvelope) marshal(b []byte) ([]byte, error) {
	size := len(`{"items":[]}`)
	for _, it := range env.Items {
		if !plainJSON(it.ID) || !plainJSON(it.Type) {
			j, err := json.Marshal(env)
			return append(b, j...), err
		}
		size += 80 + len(it.ID) + len(it.Type) + base64.StdEncoding.EncodedLen(len(it.Body))
	}
	b = slices.Grow(b, size)
	b = append(b, `{"items":[`...)
	for i, it := range env.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, it.ID...)
		b = append(b, `","time":`...)
		b = strconv.AppendInt(b, it.Time, 10)
		b = append(b, `,"type":"`...)
		b = append(b, it.Type...)
		b = append(b, '"')
		if it.Due != 0 {
			b = append(b, `,"due":`...)
			b = strconv.AppendInt(b, it.Due, 10)
		}
		b = append(b, `,"body":`...)
		if it.Body == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, it.Body)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// envelopeBuffers hold envelopes being published, tens of KiB each, for the next batch; one of
// a batch of large bodies (up to 17 MiB) is not kept.
var envelopeBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEnvelope = 1 << 20

// plainJSON says whether s is written in JSON as it is, between quotes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Test hooks: testHookEnvelope may change a batch's envelope before it is published (to make
// the server refuse it); testHookFanOut is called before each message of a batch is published,
// and an error from it stops the batch there, as a crash would.
var (
	testHookEnvelope func(*nats.Msg)
	testHookFanOut   func(i int, m *nats.Msg) error
)

// SendBatch enqueues the items in order, all or nothing, delayed items included: the batch is
// stored as one envelope message first, then as its messages (see above). It returns once every
// message is stored. If it fails before the envelope is acknowledged, nothing was stored (or,
// when the acknowledgement was lost, the whole batch was); if it fails after, the batch is stored
// and its messages are all ready once the engine is opened again or a serve starts.
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
	if err := q.p.roomFor(2 * need); err != nil { // the envelope, then the messages
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, publishWait)
	defer cancel()
	now := time.Now()
	env := batchEnvelope{Items: make([]envelopeItem, len(items))}
	for i, it := range items {
		ctype := it.ContentType
		if ctype == "" {
			ctype = platform.JSON
		}
		e := envelopeItem{ID: platform.NewMessageID(), Time: now.UnixMilli(), Type: string(ctype), Body: it.Body}
		if it.DelaySeconds > 0 {
			// Rounded up to the millisecond, so it is never early.
			e.Due = now.Add(time.Duration(it.DelaySeconds)*time.Second + time.Millisecond - 1).Truncate(time.Millisecond).UnixMilli()
		}
		env.Items[i] = e
	}
	buf := envelopeBuffers.Get().(*[]byte)
	defer envelopeBuffers.Put(buf)
	data, err := env.marshal((*buf)[:0])
	if err != nil {
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
	}
	if cap(data) <= maxPooledEnvelope { // free once the envelope's publish returns: PublishMsg copies it out
		*buf = data
	}
	id := nuid.Next()
	m := &nats.Msg{Subject: envelopeSubject(q.name), Data: data,
		Header: nats.Header{hdrMsgID: []string{"batch." + id}, hdrBatch: []string{id}}}
	if testHookEnvelope != nil {
		testHookEnvelope(m)
	}
	ack, err := q.p.js.PublishMsg(ctx, m)
	if err != nil {
		if parent.Err() == nil && ctx.Err() != nil {
			err = fmt.Errorf("no acknowledgement of the batch (it may or may not have been stored): none within %v", publishWait)
		}
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
	}
	if err := q.fanOut(ctx, id, env, ack.Sequence, time.Time{}); err != nil {
		return fmt.Errorf("jetstream: send batch to queue %s: the batch is stored, but not yet all of its messages; they will be once the engine is opened again or a serve starts: %w", q.name, err)
	}
	if drops, err := q.p.envelopeDrops(); err == nil {
		drops.drop(q.name, ack.Sequence) // answered later (drop.go)
	} else {
		q.p.dropEnvelope(ctx, q.name, ack.Sequence)
	}
	return nil
}

// fanOut publishes the messages of the batch id, whose envelope is at sequence at, in a
// pipeline, until all are stored or ctx ends. With firstBy zero it is the batch's sender and
// publishes them all at once; otherwise the envelope was left by a sender that stopped, and
// every message's fate is unknown (its first publish came before firstBy, if at all). A message
// whose fate is unknown is looked for in the stream and published again only if it is not
// there, then with its deduplication id.
func (q *queue) fanOut(ctx context.Context, id string, env batchEnvelope, at uint64, firstBy time.Time) error {
	all := make([]int, len(env.Items))
	for i := range all {
		all[i] = i
	}
	var left []int
	var last error
	if firstBy.IsZero() {
		var err error
		if left, _, err = q.publishItems(ctx, id, env, all, false); err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		// The failed publishes came before now (plus the servers' clock skew).
		firstBy = time.Now().Add(clockSkew)
	} else {
		left = all
	}
	for {
		var err error
		if left, err = q.notStored(ctx, env, left, at, firstBy); err != nil {
			return fmt.Errorf("look for the batch's messages: %w", err)
		}
		if len(left) == 0 {
			return nil
		}
		if left, last, err = q.publishItems(ctx, id, env, left, true); err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%d messages not stored: %w", len(left), last)
		}
	}
}

// clockSkew is how far a cluster's clocks may be apart, for the stream's timestamps.
const clockSkew = 2 * time.Second

// publishItems publishes the batch's items of the indexes given, in a pipeline, with their
// deduplication ids when dedupe is set, and returns the indexes that failed and the last error.
// An error of its own (ctx ended, a test's stop) ends the batch's attempt.
//
// A first attempt (no deduplication ids) goes as one fast batch when the queue's stream takes
// them (fastbatch.go); one the engine refuses at its start stored nothing, and is published
// again at once message by message.
func (q *queue) publishItems(ctx context.Context, id string, env batchEnvelope, idx []int, dedupe bool) (failed []int, last error, err error) {
	if !dedupe && len(idx) > 1 && q.fast.Load() {
		failed, last, unbegun, err := q.publish(ctx, id, env, idx, false, true)
		if err != nil || unbegun == nil {
			return failed, last, err
		}
		if fastUnsupported(unbegun) {
			q.fast.Store(false)
			q.p.log.Info("jetstream: the queue's stream takes no fast batches; its batches' messages are published one by one",
				"queue", q.name, "err", unbegun)
		}
	}
	failed, last, _, err = q.publish(ctx, id, env, idx, dedupe, false)
	return failed, last, err
}

// publish is publishItems' one attempt, as a fast batch or message by message. unbegun is the
// engine's refusal of a fast batch at its start, when it stored none of it.
func (q *queue) publish(ctx context.Context, id string, env batchEnvelope, idx []int, dedupe, fast bool) (failed []int, last, unbegun, err error) {
	acks, err := q.p.batchAcks()
	if err != nil {
		return nil, nil, nil, err
	}
	var token string
	var w *ackWait
	if fast {
		token, w = acks.startFast(idx, len(env.Items))
	} else {
		token, w = acks.start(idx, len(env.Items))
	}
	defer acks.forget(token)
	// One message and its header map serve every item in turn: PublishMsg copies a message
	// out before it returns.
	m := &nats.Msg{Header: make(nats.Header, 8)}
	var vals headerValues
	for k, i := range idx {
		it := env.Items[i]
		var due time.Time
		if it.Due != 0 {
			due = time.UnixMilli(it.Due)
		}
		q.fill(m, &vals, envelope{id: it.ID, time: it.Time, ctype: platform.ContentType(it.Type)}, it.Body, due)
		if dedupe {
			m.Header[hdrMsgID] = []string{"batch." + id + "." + strconv.Itoa(i)}
		}
		if testHookFanOut != nil {
			if err := testHookFanOut(i, m); err != nil {
				return nil, nil, nil, err
			}
		}
		if fast {
			m.Reply = acks.fastSubject(token, k+1, len(idx))
		} else {
			m.Reply = acks.subject(token, i)
		}
		if err := q.p.nc.PublishMsg(m); err != nil {
			if fast { // the batch cannot end: what was published is of unknown fate
				acks.failAll(token, w, err)
				break
			}
			acks.unsent(token, w, i, err)
		}
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return nil, nil, nil, fmt.Errorf("no acknowledgement of a message: %w", ctx.Err())
	}
	// done is closed under the lock that wrote refused, last and unbegun: reading them now is safe.
	return w.refused, w.last, w.unbegun, nil
}

// notStored returns those of the batch's items of the indexes given that the stream does not
// hold: it reads the queue's messages from the envelope (sequence at) on, up to the first
// stored after firstBy, for their Duilie-Ids. A message that was stored and is gone (delivered
// and acked) counts as not stored.
func (q *queue) notStored(ctx context.Context, env batchEnvelope, idx []int, at uint64, firstBy time.Time) ([]int, error) {
	want := make(map[string]bool, len(idx))
	for _, i := range idx {
		want[env.Items[i].ID] = true
	}
	found := map[string]bool{}
	from := at + 1
scan:
	for len(found) < len(want) {
		ms, err := q.p.scan(ctx, q.name, subjectPrefix+q.name+".>", from, scanBatch)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if ts, err := m.storedAt(); err == nil && ts.After(firstBy) {
				break scan
			}
			if id := m.msg.Header.Get(hdrID); want[id] {
				found[id] = true
			}
			from = m.seq + 1
		}
		if len(ms) < scanBatch {
			break
		}
	}
	var left []int
	for _, i := range idx {
		if !found[env.Items[i].ID] {
			left = append(left, i)
		}
	}
	return left, nil
}

// dropEnvelope deletes a batch's envelope once its messages are stored, and waits for the
// engine's answer (SendBatch does not wait: drop.go). A failure leaves it for finishBatches,
// which publishes again only those of its messages it does not find stored.
func (p *Platform) dropEnvelope(ctx context.Context, queue string, seq uint64) {
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	err := p.api(ctx, "STREAM.MSG.DELETE."+streamName(queue), map[string]any{"seq": seq, "no_erase": true}, &resp)
	if err == nil && resp.Error != nil && resp.Error.ErrorCode != jetstream.JSErrCodeMessageNotFound {
		err = resp.Error
	}
	if err != nil {
		p.log.Warn("jetstream: a stored batch's envelope stays until the next open", "queue", queue, "seq", seq, "err", err)
	}
}

// staleBatch is how old an envelope must be before a serving process's sweep finishes it: a
// live sender has given up on it long before (publishWait), so the sweep does not race one.
// (Nanoseconds; tests shorten it while a sweep runs.)
var staleBatch atomic.Int64

func init() { staleBatch.Store(int64(30 * time.Second)) }

// finishBatches publishes the messages of every batch whose envelope, stored before storedBefore
// (the zero time: any), is still there (its sender stopped before deleting it), then deletes the
// envelope. It returns how many batches it finished. It runs when the embedded engine opens,
// when a serve starts on a cluster, and at every sweep of a serving process (for envelopes older
// than staleBatch: a local command attached to a serve may be killed in the middle of a batch).
//
// A queue with damage on record (lost.json) is left as it is: a damaged block file can lose an
// envelope's deletion as well as its messages, and finishing the batch would store again
// messages that were consumed long ago, while the damage report counts them lost. Its batches
// are finished at the first open after lost.json is deleted (at least once, like everything a
// damaged store gives back).
func (p *Platform) finishBatches(ctx context.Context, storedBefore time.Time) (int, error) {
	names, err := p.queueNames(ctx)
	if err != nil {
		return 0, err
	}
	dmg, err := p.localDamage()
	if err != nil {
		return 0, err
	}
	var errs []error
	done := 0
	for _, name := range names {
		q := newQueue(p, name)
		if len(dmg[name]) > 0 {
			if ms, err := p.scan(ctx, name, envelopeSubject(name), 1, scanBatch); err == nil && len(ms) > 0 {
				p.log.Error("jetstream: the stored batches of a damaged queue are left unfinished until lost.json is deleted",
					"queue", name, "batches", len(ms))
			}
			continue
		}
		for from := uint64(1); ; {
			ms, err := p.scan(ctx, name, envelopeSubject(name), from, scanBatch)
			if err != nil {
				if !errors.Is(err, platform.ErrNoQueue) {
					errs = append(errs, err)
				}
				break
			}
			for _, m := range ms {
				from = m.seq + 1
				at, err := m.storedAt()
				if !storedBefore.IsZero() && (err != nil || !at.Before(storedBefore)) {
					continue
				}
				if err != nil {
					at = time.Now() // unknown: look at the whole stream after it
				}
				var env batchEnvelope
				if err := json.Unmarshal(m.msg.Data, &env); err != nil {
					errs = append(errs, fmt.Errorf("queue %s: the batch at sequence %d is unreadable: %w", name, m.seq, err))
					continue
				}
				bctx, cancel := context.WithTimeout(ctx, requestTimeout)
				err = q.fanOut(bctx, m.msg.Header.Get(hdrBatch), env, m.seq, at.Add(publishWait+clockSkew))
				if err == nil {
					p.dropEnvelope(bctx, name, m.seq)
					done++
				} else {
					errs = append(errs, fmt.Errorf("queue %s: the batch at sequence %d: %w", name, m.seq, err))
				}
				cancel()
			}
			if len(ms) < scanBatch {
				break
			}
		}
	}
	return done, errors.Join(errs...)
}
