package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/duilie/duilie/platform"
)

// Removed means removed (platform.Starter). A stream purge or a message deletion removes the
// stored message, but a consumer may hold it already: received for a batch still filling, or
// leased over the Cloudflare API. So Purge and Delete then tell every process consuming the
// queue (a request on _DUILIE.gone.<queue>: {"floor":N}, every sequence up to N, or {"seq":N})
// and return once they have answered: each records it before it answers, and Start leaves such
// deliveries out of the batch about to start, and Settle stores none of them again. On the
// embedded engine only the serve holding the data directory consumes, so once it has answered
// nothing it held is delivered; on a cluster every serve that answers within goneWait of the
// first answer (goneTimeout at most) has recorded it.
//
// A settlement racing a removal is closed by the order of things: a copy (a retry, a release,
// a dead letter) is stored before its original is acked, and once stored the original is read
// again; if it is gone, removed meanwhile, the copy is deleted too. A purge that comes later
// removes the copy with the rest, and a Delete that finds the original gone looks for the
// message again and finds the copy.

// goneSubject is where Purge and Delete tell the processes consuming queue what they removed.
func goneSubject(queue string) string { return "_DUILIE.gone." + queue }

const (
	goneWait    = 50 * time.Millisecond
	goneTimeout = 2 * time.Second
)

// goneNote is what a removal tells consumers.
type goneNote struct {
	Floor uint64 `json:"floor,omitempty"` // every sequence up to it (Purge)
	Seq   uint64 `json:"seq,omitempty"`   // this one (Delete)
}

// goneBook is what this process knows was removed from each queue while it may have held it.
type goneBook struct {
	mu     sync.Mutex
	queues map[string]*removed
}

type removed struct {
	floor uint64
	seqs  map[uint64]bool // above floor
}

func (g *goneBook) note(queue string, n goneNote) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queues == nil {
		g.queues = map[string]*removed{}
	}
	r := g.queues[queue]
	if r == nil {
		r = &removed{seqs: map[uint64]bool{}}
		g.queues[queue] = r
	}
	if n.Floor > r.floor {
		r.floor = n.Floor
		for seq := range r.seqs {
			if seq <= r.floor {
				delete(r.seqs, seq)
			}
		}
	}
	if n.Seq > r.floor {
		r.seqs[n.Seq] = true
	}
}

// has reports whether the message at seq of queue was removed.
func (g *goneBook) has(queue string, seq uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.queues[queue]
	return r != nil && (seq <= r.floor || r.seqs[seq])
}

// heardGone takes a removal's note, and answers once it is recorded.
func (c *consumer) heardGone(m *nats.Msg) {
	var n goneNote
	if json.Unmarshal(m.Data, &n) == nil {
		c.q.p.gone.note(c.q.name, n)
	}
	_ = m.Respond(nil)
}

// tellGone tells every process consuming queue what was removed, and waits for their answers:
// until none is consuming (no responders), goneWait after the last answer, or goneTimeout.
func (p *Platform) tellGone(ctx context.Context, queue string, n goneNote) {
	p.gone.note(queue, n) // this process's own consumers too, whatever the network does
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		return
	}
	defer sub.Unsubscribe()
	b, _ := json.Marshal(n)
	if err := p.nc.PublishRequest(goneSubject(queue), inbox, b); err != nil {
		return
	}
	deadline := time.Now().Add(goneTimeout)
	for {
		wait, cancel := context.WithDeadline(ctx, deadline)
		m, err := sub.NextMsgWithContext(wait)
		cancel()
		if err != nil || m.Header.Get("Status") == "503" {
			return
		}
		if soon := time.Now().Add(goneWait); soon.Before(deadline) {
			deadline = soon
		}
	}
}

// Start leaves out the deliveries whose messages were removed since they were received
// (platform.Starter), acking them: the server forgets them, and this process too.
func (c *consumer) Start(ctx context.Context, ds []platform.Delivery) []platform.Delivery {
	return slices.DeleteFunc(slices.Clone(ds), func(d platform.Delivery) bool {
		t, err := tokenOf(d)
		if err != nil || !c.q.p.gone.has(c.q.name, t.seq) {
			return false
		}
		_ = c.nc.Publish(t.reply, ackAck)
		c.landed(t.seq)
		return true
	})
}

var _ platform.Starter = (*consumer)(nil)

// stillStored reports whether queue's stream still holds the message at seq.
func (p *Platform) stillStored(ctx context.Context, queue string, seq uint64) (bool, error) {
	if p.gone.has(queue, seq) {
		return false, nil
	}
	r, err := p.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+streamName(queue), []byte(`{"seq":`+strconv.FormatUint(seq, 10)+`}`))
	if err != nil {
		return false, err
	}
	var resp struct {
		Error *struct {
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return false, fmt.Errorf("unreadable reply %q", r.Data)
	}
	switch {
	case resp.Error == nil:
		return true, nil
	case resp.Error.ErrCode == 10037: // no message found
		return false, nil
	}
	return false, errors.New(resp.Error.Desc)
}

// undoCopy deletes a copy stored of a message that turned out to be removed meanwhile.
func (p *Platform) undoCopy(ctx context.Context, stream string, seq uint64) error {
	st, err := p.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	return st.DeleteMsg(ctx, seq)
}
