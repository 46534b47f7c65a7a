package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/duilie/duilie/platform"
)

// Kind is an event's kind, as 读取入站事件种类 reports it.
type Kind string

// Event kinds.
const (
	QueueEvent Kind = "queue" // a batch delivery
	FetchEvent Kind = "fetch" // an HTTP request
)

// Event is one run of a program: a queue event with its batch, or a fetch event. It carries its
// own context, as http.Request does, so the interface's functions take the event alone.
//
// An Event is safe for use by several goroutines of its program.
type Event struct {
	ctx   context.Context
	id    string
	kind  Kind
	host  *Host
	batch *Batch

	mu    sync.Mutex
	abort *Abort
}

func newEvent(ctx context.Context, h *Host, kind Kind, b *Batch) *Event {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Event{ctx: ctx, id: hex.EncodeToString(id[:]), kind: kind, host: h, batch: b}
}

// Kind reports whether this is a queue or a fetch event.
func (e *Event) Kind() Kind { return e.kind }

// ID identifies the event in logs.
func (e *Event) ID() string { return e.id }

// Context is the event's context: it ends at the event's time limit or when the host stops.
func (e *Event) Context() context.Context { return e.ctx }

// Batch is the queue event's batch, or nil for other events.
func (e *Event) Batch() *Batch { return e.batch }

// Abort aborts the event with reason, unless it was aborted already, and returns the event's
// abort: every later call of the interface's functions returns it, and the event fails whatever
// the program returns (SPEC §8.3).
func (e *Event) Abort(reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.abort == nil {
		e.abort = &Abort{Reason: reason}
	}
	return e.abort
}

// Err returns the event's abort, or nil while it has not been aborted.
func (e *Event) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.abort == nil {
		return nil // not a typed nil
	}
	return e.abort
}

// Queue resolves a binding to its queue (SPEC §8.2). A binding the permissions do not list, or
// one the deployment does not configure, aborts the event: the error is then an *Abort. Any
// other error is the platform's failure to provide the queue (the engine is unreachable, say).
func (e *Event) Queue(binding string) (platform.Queue, error) {
	if err := e.Err(); err != nil {
		return nil, err
	}
	q, reason, err := e.host.resolve(e.ctx, binding)
	if reason != "" {
		return nil, e.Abort(reason)
	}
	return q, err
}

// Batch is the batch of a queue event: the messages in index order, and the program's ack and
// retry calls, recorded until the event ends. Only the first call on a message counts.
type Batch struct {
	queue      string
	deliveries []platform.Delivery

	mu     sync.Mutex
	calls  []platform.Call
	frozen bool
}

// NewBatch makes a batch of deliveries from queue. The consumer runtime makes one per event;
// tests may make any batch, including empty ones.
func NewBatch(queue string, ds []platform.Delivery) *Batch {
	return &Batch{queue: queue, deliveries: ds, calls: make([]platform.Call, len(ds))}
}

// Queue is the name of the queue the batch came from, as the platform reports it.
func (b *Batch) Queue() string { return b.queue }

// Len is the number of messages.
func (b *Batch) Len() int { return len(b.deliveries) }

// Message returns message i, 0 ≤ i < Len().
func (b *Batch) Message(i int) *platform.Message { return &b.deliveries[i].Message }

// Ack records an ack of message i. It reports false if i is out of range; a call on a message
// that already has one, or after the event ended, changes nothing.
func (b *Batch) Ack(i int) bool {
	return b.record(i, platform.Call{Kind: platform.AckCall})
}

// Retry records a retry of message i after delaySeconds (0: the consumer's retry_delay).
// It reports false if i is out of range.
func (b *Batch) Retry(i, delaySeconds int) bool {
	return b.record(i, platform.Call{Kind: platform.RetryCall, DelaySeconds: delaySeconds})
}

func (b *Batch) record(i int, c platform.Call) bool {
	if i < 0 || i >= len(b.deliveries) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.frozen && b.calls[i].Kind == platform.NoCall {
		b.calls[i] = c
	}
	return true
}

// freeze ends recording and returns the calls.
func (b *Batch) freeze() []platform.Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frozen = true
	return b.calls
}
