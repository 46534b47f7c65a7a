package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// batchAcks collects the acknowledgements of a batch's messages. Each message is published with
// a reply subject of its own, <inbox>.<batch>.<index>, on one subscription the Platform keeps,
// and each batch waits for its own. It does for SendBatch what PublishAsync does, without the
// per-message future, its two channels, and the reflection-driven decoding of every
// acknowledgement: a third of what the pipeline cost beyond the publish itself (docs/bench.md).
//
// Nothing here is needed for safety: a message whose acknowledgement never comes (a lost
// connection, a batch that gave up waiting) is one whose fate is unknown, and fanOut looks for
// it in the stream before publishing it again.
type batchAcks struct {
	nc      *nats.Conn
	prefix  string // the inbox and a dot, before each reply's batch and index
	fprefix string // another inbox and a dot, before each fast batch's replies (fastbatch.go)

	mu    sync.Mutex
	seq   uint64
	waits map[string]*ackWait // by the batch's token
}

// ackWait is one batch's acknowledgements so far.
type ackWait struct {
	left     int       // acknowledgements still to come
	answered []bool    // by index: acknowledged (or refused, or never sent)
	refused  []int     // indexes the server refused, or whose fate is unknown
	last     error     // why the last of them was refused
	done     chan bool // closed when left reaches 0

	order   []int // a fast batch's indexes in the order published: batch sequence s is order[s-1]
	noted   error // why the engine refused a message of a fast batch, from its note
	unbegun error // why the engine refused a fast batch at its start, storing none of it
}

// settle records message i's outcome, once; a.mu is held.
func (a *batchAcks) settle(token string, w *ackWait, i int, err error) {
	if i < 0 || i >= len(w.answered) || w.answered[i] {
		return
	}
	w.answered[i] = true
	if err != nil {
		w.refused, w.last = append(w.refused, i), err
	}
	if w.left--; w.left == 0 {
		close(w.done)
		delete(a.waits, token)
	}
}

// batchAcks is the Platform's collector of acknowledgements, made at its first use.
func (p *Platform) batchAcks() (*batchAcks, error) {
	if a := p.acks.Load(); a != nil {
		return a, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.acks.Load(); a != nil {
		return a, nil
	}
	a, err := newBatchAcks(p.nc)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the acknowledgements of publishes: %w", err)
	}
	p.acks.Store(a)
	return a, nil
}

// publishOne publishes m and waits for JetStream's acknowledgement, as js.PublishMsg does, but
// on the collector's subscription: the usual acknowledgement is recognized without decoding
// it, and no request is set up per message (a send's own overhead, beside raw js.Publish, in
// docs/bench.md). When no server answers for the stream (a cluster electing a leader) it asks
// again after a quarter second, twice, as js.PublishMsg does.
func (p *Platform) publishOne(ctx context.Context, m *nats.Msg) error {
	acks, err := p.batchAcks()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		token, w := acks.start(firstIndex, 1)
		m.Reply = acks.subject(token, 0)
		if err := p.nc.PublishMsg(m); err != nil {
			acks.forget(token)
			return err
		}
		select {
		case <-w.done:
		case <-ctx.Done():
			acks.forget(token)
			return ctx.Err()
		}
		// done is closed under the lock that wrote last: reading it now is safe.
		if w.last == nil {
			return nil
		}
		if !errors.Is(w.last, nats.ErrNoResponders) || attempt == publishRetries {
			return w.last
		}
		select {
		case <-time.After(publishRetryWait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// firstIndex is the one index of a single publish.
var firstIndex = []int{0}

// How often, and after how long, a publish that no server answered for is made again
// (nats.go's DefaultPubRetryAttempts and DefaultPubRetryWait).
const (
	publishRetries   = 2
	publishRetryWait = 250 * time.Millisecond
)

// newBatchAcks subscribes to the replies of every batch this Platform sends.
func newBatchAcks(nc *nats.Conn) (*batchAcks, error) {
	inbox := nc.NewInbox()
	a := &batchAcks{nc: nc, prefix: inbox + ".", waits: map[string]*ackWait{}}
	sub, err := subscribeAnswers(nc, inbox+".*.*", a.reply)
	if err != nil {
		return nil, err
	}
	a.fprefix = nc.NewInbox() + "."
	if _, err := subscribeAnswers(nc, a.fprefix+">", a.fastReply); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	// A lost connection loses the answers still to come, as PublishAsync's futures do.
	onConnectionLost(nc, a.disconnected)
	return a, nil
}

// subscribeAnswers subscribes handle to the engine's answers on subject, none of which may be
// dropped: each ends somebody's wait.
func subscribeAnswers(nc *nats.Conn, subject string, handle nats.MsgHandler) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subject, handle)
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	return sub, nil
}

// onConnectionLost calls lost whenever nc loses its connection (reconnecting, or closed for
// good), until it is closed.
func onConnectionLost(nc *nats.Conn, lost func()) {
	status := nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	go func() {
		for s := range status {
			lost()
			if s == nats.CLOSED {
				return
			}
		}
	}()
}

// answerStatus is the error of an answer without data: a status (503: no server answered for
// the stream), or none at all. what names what was answered: "publish", "deletion", "batch".
func answerStatus(m *nats.Msg, what string) error {
	switch status := m.Header.Get("Status"); status {
	case "":
		return fmt.Errorf("jetstream: empty answer to a %s", what)
	case "503":
		return fmt.Errorf("jetstream: %s answered with status 503, no server answered for the stream: %w", what, nats.ErrNoResponders)
	default:
		return fmt.Errorf("jetstream: %s answered with status %s %s", what, status, m.Header.Get("Description"))
	}
}

// disconnected ends every batch's wait: the messages not yet acknowledged are of unknown fate.
func (a *batchAcks) disconnected() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for token, w := range a.waits {
		for i, ok := range w.answered {
			if !ok {
				a.settle(token, w, i, nats.ErrDisconnected)
			}
		}
	}
}

// reply takes one message's acknowledgement.
func (a *batchAcks) reply(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, a.prefix)
	if !ok {
		return
	}
	token, index, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	i, err := strconv.Atoi(index)
	if err != nil {
		return
	}
	err = pubAckErr(m)
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.waits[token]; w != nil { // else the batch gave up waiting
		a.settle(token, w, i, err)
	}
}

// start registers a batch that will publish the messages of the indexes given (of a batch of
// size), for subject to name their replies.
func (a *batchAcks) start(idx []int, size int) (token string, w *ackWait) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	token = strconv.FormatUint(a.seq, 10)
	w = &ackWait{left: len(idx), answered: make([]bool, size), done: make(chan bool)}
	for i := range w.answered {
		w.answered[i] = true
	}
	for _, i := range idx {
		w.answered[i] = false
	}
	if w.left == 0 {
		close(w.done)
	} else {
		a.waits[token] = w
	}
	return token, w
}

// unsent tells the batch that message i was not published after all (its publish failed).
func (a *batchAcks) unsent(token string, w *ackWait, i int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle(token, w, i, err)
}

// forget stops waiting for the batch's remaining acknowledgements.
func (a *batchAcks) forget(token string) {
	a.mu.Lock()
	delete(a.waits, token)
	a.mu.Unlock()
}

func (a *batchAcks) subject(token string, i int) string {
	return a.prefix + token + "." + strconv.Itoa(i)
}

// pubAckErr reads JetStream's answer to a publish: nil when the message is stored (or was a
// duplicate of one stored), else why not. The usual answer, {"stream":"…","seq":N}, is
// recognized without decoding it; anything else is decoded in full.
func pubAckErr(m *nats.Msg) error {
	if len(m.Data) == 0 {
		return answerStatus(m, "publish")
	}
	if storedAck(m.Data) {
		return nil
	}
	var ack struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return fmt.Errorf("jetstream: unreadable answer to a publish: %w", err)
	}
	switch {
	case ack.Error != nil:
		return ack.Error
	case ack.Stream == "":
		return fmt.Errorf("jetstream: answer to a publish names no stream: %.200s", m.Data)
	}
	return nil
}

// storedAck says whether b is, exactly, the acknowledgement nats-server writes for a stored
// message: {"stream":"S"[,"domain":"D"],"seq":N[,"duplicate":true]}, names without escapes.
// Anything else is left to json.Unmarshal.
func storedAck(b []byte) bool {
	if bytes.HasPrefix(b, []byte(`{"stream":""`)) {
		return false
	}
	b, ok := cutQuoted(b, `{"stream":`)
	if !ok {
		return false
	}
	if rest, ok := cutQuoted(b, `,"domain":`); ok {
		b = rest
	}
	if b, ok = bytes.CutPrefix(b, []byte(`,"seq":`)); !ok {
		return false
	}
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') {
		return false
	}
	if _, err := strconv.ParseUint(string(b[:n]), 10, 64); err != nil {
		return false
	}
	b = b[n:]
	b, _ = bytes.CutPrefix(b, []byte(`,"duplicate":true`))
	return string(b) == "}"
}

// cutQuoted cuts key and the string after it, "…" without escapes or control characters, from
// the front of b.
func cutQuoted(b []byte, key string) ([]byte, bool) {
	b, ok := bytes.CutPrefix(b, []byte(key))
	if !ok || len(b) == 0 || b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}
