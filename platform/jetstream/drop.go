package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// envelopeDrops deletes the envelopes of batches whose messages are all stored, without
// waiting for the engine's answer: SendBatch returns one round trip sooner, and its producer
// goes on while the engine deletes. Each request's answer comes to one subscription the
// Platform keeps; a refusal is logged, as a failed delete always was.
//
// Nothing here is needed for safety. An envelope whose deletion is lost (a lost connection, a
// process that stopped first) is a batch that looks unfinished: finishBatches finds all of its
// messages stored and deletes it at the next open or sweep (a message already delivered and
// acked by then comes twice: at least once). Platform.Close waits for the answers still to
// come, so a command that sends a batch and exits leaves no envelope behind.
type envelopeDrops struct {
	nc     *nats.Conn
	log    *slog.Logger
	prefix string // the inbox and a dot, before each request's number

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]droppedEnvelope // deletions asked for and not yet answered, by number
	empty   chan struct{}              // closed when pending empties, if someone waits for that
}

// droppedEnvelope names an envelope whose deletion was asked for, for the log.
type droppedEnvelope struct {
	queue string
	seq   uint64
}

// envelopeDrops is the Platform's deleter of envelopes, made at its first use.
func (p *Platform) envelopeDrops() (*envelopeDrops, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drops == nil {
		d, err := newEnvelopeDrops(p.nc, p.log)
		if err != nil {
			return nil, fmt.Errorf("subscribe to the answers to envelope deletions: %w", err)
		}
		p.drops = d
	}
	return p.drops, nil
}

func newEnvelopeDrops(nc *nats.Conn, log *slog.Logger) (*envelopeDrops, error) {
	inbox := nc.NewInbox()
	d := &envelopeDrops{nc: nc, log: log, prefix: inbox + ".", pending: map[uint64]droppedEnvelope{}}
	// Every answer must be seen, or Close waits for it in vain.
	if _, err := subscribeAnswers(nc, inbox+".*", d.answer); err != nil {
		return nil, err
	}
	onConnectionLost(nc, d.disconnected)
	return d, nil
}

// drop asks the engine to delete the envelope of queue's batch at sequence seq.
func (d *envelopeDrops) drop(queue string, seq uint64) {
	d.mu.Lock()
	d.seq++
	n := d.seq
	d.pending[n] = droppedEnvelope{queue, seq}
	d.mu.Unlock()
	req := fmt.Appendf(nil, `{"seq":%d,"no_erase":true}`, seq)
	reply := d.prefix + strconv.FormatUint(n, 10)
	if err := d.nc.PublishRequest("$JS.API.STREAM.MSG.DELETE."+streamName(queue), reply, req); err != nil {
		d.done(n, err)
	}
}

// answer takes the engine's answer to one deletion.
func (d *envelopeDrops) answer(m *nats.Msg) {
	n, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, d.prefix), 10, 64)
	if err != nil {
		return
	}
	d.done(n, dropErr(m))
}

// done records the end of deletion n, logging why it failed, if it did.
func (d *envelopeDrops) done(n uint64, err error) {
	d.mu.Lock()
	e, ok := d.pending[n]
	delete(d.pending, n)
	if len(d.pending) == 0 && d.empty != nil {
		close(d.empty)
		d.empty = nil
	}
	d.mu.Unlock()
	if ok && err != nil {
		d.log.Warn("jetstream: a stored batch's envelope stays until the next open", "queue", e.queue, "seq", e.seq, "err", err)
	}
}

// disconnected forgets the deletions whose answers a lost connection took with it: each may or
// may not have been made.
func (d *envelopeDrops) disconnected() {
	d.mu.Lock()
	lost := len(d.pending)
	clear(d.pending)
	if d.empty != nil {
		close(d.empty)
		d.empty = nil
	}
	d.mu.Unlock()
	if lost > 0 {
		d.log.Warn("jetstream: the connection was lost before envelope deletions were answered; an envelope still there is finished at the next open",
			"envelopes", lost)
	}
}

// wait waits until every deletion asked for is answered, or for at most within. It reports
// how many were still unanswered.
func (d *envelopeDrops) wait(within time.Duration) int {
	d.mu.Lock()
	if len(d.pending) == 0 {
		d.mu.Unlock()
		return 0
	}
	if d.empty == nil {
		d.empty = make(chan struct{})
	}
	empty := d.empty
	d.mu.Unlock()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-empty:
	case <-t.C:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending)
}

// dropErr reads JetStream's answer to a message deletion: nil when the message is deleted, or
// was not there (a sweep deleted it first), or its queue is gone; else why not.
func dropErr(m *nats.Msg) error {
	if len(m.Data) == 0 {
		return answerStatus(m, "deletion")
	}
	if bytes.Contains(m.Data, []byte(`"success":true`)) {
		return nil
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fmt.Errorf("jetstream: unreadable answer to a deletion: %w", err)
	}
	if resp.Error == nil {
		return fmt.Errorf("jetstream: a deletion neither made nor refused: %.200s", m.Data)
	}
	switch resp.Error.ErrorCode {
	case jetstream.JSErrCodeMessageNotFound, jetstream.JSErrCodeStreamNotFound:
		return nil
	}
	return resp.Error
}
