// Package platform defines the contract between duilie's host and the queue systems underneath
// it: the embedded engine, a NATS JetStream cluster, Cloudflare Queues and the in-memory
// platform. The contract is shaped like Cloudflare's Queue binding and MessageBatch (SPEC §10).
//
// A platform only stores, delivers and settles messages. It knows none of the interface's
// messages or limits: the root package checks and normalizes every body before a Queue sees it,
// and the host's consumer runtime decides what becomes of every delivered message (SPEC §7)
// before a Consumer is told to settle it.
package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ContentType says how a message body is encoded, as Cloudflare's contentType does.
type ContentType string

// Content types. duilie's own producers only ever send JSON; the others exist because a
// platform may hand over messages written by foreign producers (SPEC §6).
const (
	JSON  ContentType = "json"  // a JSON text
	Text  ContentType = "text"  // a string; it reads as a JSON string
	Bytes ContentType = "bytes" // raw bytes; not a JSON value
	V8    ContentType = "v8"    // a structured clone; not a JSON value
)

// SendOptions are the options of a send, exactly as the platform receives them.
type SendOptions struct {
	ContentType ContentType
	// DelaySeconds delays delivery; 0 means no delay (and no delaySeconds option at all).
	DelaySeconds int
}

// BatchItem is one item of a sendBatch call.
type BatchItem struct {
	Body         []byte
	ContentType  ContentType
	DelaySeconds int // 0: no delaySeconds field
}

// Queue is a producer binding's view of one queue.
type Queue interface {
	// Send enqueues one message. A returned error's text reaches the program verbatim after
	// 队列发送失败：, so it should read well on its own.
	Send(ctx context.Context, body []byte, opts SendOptions) error
	// SendBatch enqueues the items in order. A platform documents whether a failed batch may
	// have been partly enqueued.
	SendBatch(ctx context.Context, items []BatchItem) error
}

// Message is a message as a platform delivers it.
type Message struct {
	ID          string // duilie's platforms: 32 lowercase hex characters; others: anything
	Timestamp   int64  // enqueue time, Unix milliseconds
	Attempts    int    // deliveries so far, counting this one (from 1); a platform may undercount deliveries made just before a crash
	Body        []byte
	ContentType ContentType
	// Due is when the message became deliverable, Unix milliseconds: the end of its send or
	// retry delay, or 0 when it was deliverable from Timestamp on (or the platform cannot tell).
	// Only the host's reports read it (delivery lag); programs never see it.
	Due int64
}

// Delivery is a message in flight: handed to a consumer and not yet settled.
type Delivery struct {
	Message
	// Token is the delivering platform's own handle; the host passes it back untouched.
	Token any
}

// ConsumerOptions tell a platform how a queue is consumed, so it can size what it keeps in flight.
type ConsumerOptions struct {
	MaxBatchSize   int           // messages per batch, 1–100
	MaxConcurrency int           // batches in flight at once, 1–250
	AckWait        time.Duration // how long an unsettled delivery stays in flight before the platform redelivers it
}

// Consumer delivers one queue's messages to the host's consumer runtime.
type Consumer interface {
	// Receive waits until at least one message is ready, then returns up to max of them, now in
	// flight. It returns ctx's error when ctx ends first, and never an empty slice with a nil error.
	Receive(ctx context.Context, max int) ([]Delivery, error)
	// InProgress tells the platform these deliveries are still being worked on, restarting
	// their ack wait.
	InProgress(ctx context.Context, ds []Delivery) error
	// Settle carries out the host's resolution of a batch whose event has ended.
	Settle(ctx context.Context, s Settlement) error
	// Close stops delivering. Unsettled deliveries are redelivered after their ack wait (on a
	// platform that restores its state after a restart, to within about a second).
	Close() error
}

// Settlement is how a batch's event ended and what becomes of each of its messages.
type Settlement struct {
	Queue    string
	Failed   bool // the event failed (uncaught error, non-zero exit, abort, time limit)
	Messages []Resolution
}

// Resolution is the host's decision for one delivered message (SPEC §7).
type Resolution struct {
	Delivery
	// Call is the program's first explicit call on the message during the event, if any.
	Call Call
	// Action is what the platform must do.
	Action Action
}

// CallKind names what a program asked for a message.
type CallKind int

// Call kinds.
const (
	NoCall    CallKind = iota // the program made no call on this message
	AckCall                   // ack()
	RetryCall                 // retry(), or retry({delaySeconds}) when DelaySeconds > 0
)

// Call is an explicit ack or retry as the program made it.
type Call struct {
	Kind         CallKind
	DelaySeconds int // retry only; 0 means retry() with no options
}

// ActionKind names what becomes of a settled message.
type ActionKind int

// Actions.
const (
	Done       ActionKind = iota // remove the message: it succeeded or was acked
	Redeliver                    // deliver it again after Delay, with attempts + 1
	DeadLetter                   // move it to Queue with the same id, timestamp and body, attempts from 1
	Drop                         // delete it: retries are exhausted and there is no dead-letter queue
	Release                      // make it ready again at once without counting this delivery: no program saw it
)

// Action is one settlement decision.
type Action struct {
	Kind  ActionKind
	Delay time.Duration // Redeliver
	Queue string        // DeadLetter: the dead-letter queue
}

// QueueStats is an operator's view of one queue (SPEC §13, duilie queues).
type QueueStats struct {
	Queue    string `json:"queue"`
	Ready    int64  `json:"ready"`     // deliverable now
	Delayed  int64  `json:"delayed"`   // waiting for a send or retry delay
	InFlight int64  `json:"in_flight"` // delivered, event not yet settled
	Paused   bool   `json:"paused"`    // delivery paused by an Operator
	// Lost is how many of the queue's messages the platform lost (damaged storage), as far as
	// it can tell; Damage says what happened, or why the queue cannot be read at all.
	Lost   int64  `json:"lost"`
	Damage string `json:"damage,omitempty"`
	// Backlog is set by a platform that counts only the messages not yet acknowledged, in every
	// state together, as Cloudflare reports its backlog_count; Ready, Delayed, InFlight and Lost
	// are then unknown and zero.
	Backlog *int64 `json:"backlog,omitempty"`
}

// Platform is a queue system.
type Platform interface {
	// Queue returns the producer side of the named queue, creating the queue where the
	// platform creates queues on demand.
	Queue(ctx context.Context, name string) (Queue, error)
	// Consume starts delivering the named queue's messages.
	Consume(ctx context.Context, name string, opts ConsumerOptions) (Consumer, error)
	// Close releases the platform. Messages not yet settled stay for a later consumer.
	Close() error
}

// Stater is implemented by a platform that can count its queues' messages (duilie queues).
type Stater interface {
	// Stats reports the platform's queues, sorted by name.
	Stats(ctx context.Context) ([]QueueStats, error)
}

// Capabilities are what a platform does beyond storing, delivering and settling.
type Capabilities struct {
	// Retries: the platform counts deliveries, applies its consumers' max_retries and moves
	// exhausted messages to their dead-letter queues itself, as Cloudflare Queues does. The host
	// then hands it each message's call and the event's outcome (Done for an ack or a normal
	// end, Redeliver for a retry or a failed event) and never dead-letters or drops a message on
	// its own.
	Retries bool
}

// Capable is implemented by a platform that has capabilities.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns p's capabilities; a platform that declares none has none.
func CapabilitiesOf(p Platform) Capabilities {
	if c, ok := p.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// ErrClosed is returned by a platform, queue or consumer that has been closed.
var ErrClosed = errors.New("platform closed")

// Permanent marks err as a failure that trying again will not mend: bad credentials, a queue
// that no longer exists. A consumer whose Receive fails permanently stops (with one log line
// naming the queue and the cause) instead of backing off and trying again, as it does for every
// other error. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var pe *permanentError
	return errors.As(err, &pe)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// NewMessageID returns a fresh message id: 32 lowercase hex characters from a random source.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// CheckQueueName reports whether name follows Cloudflare's rule for queue names, which
// duilie's own platforms follow too: lowercase letters, digits and '-', 1–63 characters,
// starting with a letter or digit.
func CheckQueueName(name string) error {
	if len(name) == 0 || len(name) > 63 {
		return fmt.Errorf("queue name %q must be 1–63 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0:
		default:
			return fmt.Errorf("queue name %q may hold only lowercase letters, digits and '-', and must start with a letter or digit", name)
		}
	}
	return nil
}

// AppendJSON appends the options as the platform's send receives them, e.g.
// {"contentType":"json"} or {"contentType":"json","delaySeconds":30}.
func (o SendOptions) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"contentType":"`...)
	dst = append(dst, o.ContentType...)
	dst = append(dst, '"')
	if o.DelaySeconds > 0 {
		dst = append(dst, `,"delaySeconds":`...)
		dst = strconv.AppendInt(dst, int64(o.DelaySeconds), 10)
	}
	return append(dst, '}')
}

// AppendItemsJSON appends items as sendBatch receives them: a JSON array of
// {"body":<body>,"contentType":"json"[,"delaySeconds":n]}, keys in that order. Bodies are
// appended as they are, so this is JSON when the bodies are JSON texts, as the interface's are.
func AppendItemsJSON(dst []byte, items []BatchItem) []byte {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"body":`...)
		dst = append(dst, it.Body...)
		dst = append(dst, `,"contentType":"`...)
		dst = append(dst, it.ContentType...)
		dst = append(dst, '"')
		if it.DelaySeconds > 0 {
			dst = append(dst, `,"delaySeconds":`...)
			dst = strconv.AppendInt(dst, int64(it.DelaySeconds), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
