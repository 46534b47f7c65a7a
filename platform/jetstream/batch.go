package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/duilie/duilie/platform"
)

// A batch is all or nothing by one stream message: its envelope, the whole batch stored on the
// queue's envelope subject, which no consumer reads. Once the envelope is stored the batch is
// committed; its messages are then published in a pipeline, each with a deduplication id of its
// own (the batch's id and its index), and the envelope is deleted. A sender that stops in
// between (a crash, a lost connection) leaves the envelope, and whoever next opens the embedded
// engine, or starts a serve on a cluster, publishes the messages again and deletes it: within
// the stream's duplicate window (two minutes) the ones already stored are deduplicated; later
// they may be stored twice (at least once, as every crash in duilie is).
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
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("jetstream: send batch to queue %s: %w", q.name, err)
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
	if err := q.fanOut(ctx, id, env); err != nil {
		return fmt.Errorf("jetstream: send batch to queue %s: the batch is stored, but not yet all of its messages; they will be once the engine is opened again or a serve starts: %w", q.name, err)
	}
	q.p.dropEnvelope(ctx, q.name, ack.Sequence)
	return nil
}

// fanOut publishes the messages of the batch id, each with its deduplication id, in a pipeline,
// publishing again those that failed until all are stored or ctx ends.
func (q *queue) fanOut(ctx context.Context, id string, env batchEnvelope) error {
	left := make([]int, len(env.Items))
	for i := range left {
		left[i] = i
	}
	for {
		type sent struct {
			i int
			f jetstream.PubAckFuture
		}
		var (
			fs     []sent
			failed []int
			last   error
		)
		for _, i := range left {
			it := env.Items[i]
			var due time.Time
			if it.Due > 0 {
				due = time.UnixMilli(it.Due)
			}
			m := q.messageDue(envelope{id: it.ID, time: it.Time, ctype: platform.ContentType(it.Type)}, it.Body, due)
			m.Header[hdrMsgID] = []string{"batch." + id + "." + strconv.Itoa(i)}
			if testHookFanOut != nil {
				if err := testHookFanOut(i, m); err != nil {
					return err
				}
			}
			f, err := q.p.js.PublishMsgAsync(m, jetstream.WithStallWait(publishWait))
			if err != nil {
				failed, last = append(failed, i), err
				continue
			}
			fs = append(fs, sent{i, f})
		}
		for _, s := range fs {
			select {
			case <-s.f.Ok():
			case err := <-s.f.Err():
				failed, last = append(failed, s.i), err
			case <-ctx.Done():
				return fmt.Errorf("no acknowledgement of a message: %w", ctx.Err())
			}
		}
		if len(failed) == 0 {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%d messages not stored: %w", len(failed), last)
		}
		left = failed
	}
}

// dropEnvelope deletes a batch's envelope once its messages are stored. A failure leaves it for
// finishBatches, which stores nothing twice within the duplicate window.
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
				if at, err := time.Parse(time.RFC3339Nano, m.msg.Header.Get(jetstream.TimeStampHeaer)); !storedBefore.IsZero() && (err != nil || !at.Before(storedBefore)) {
					continue
				}
				var env batchEnvelope
				if err := json.Unmarshal(m.msg.Data, &env); err != nil {
					errs = append(errs, fmt.Errorf("queue %s: the batch at sequence %d is unreadable: %w", name, m.seq, err))
					continue
				}
				bctx, cancel := context.WithTimeout(ctx, requestTimeout)
				err := q.fanOut(bctx, m.msg.Header.Get(hdrBatch), env)
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
