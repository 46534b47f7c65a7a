// Package event is the event model shared by the host, the interface's functions and the
// Workers adapter: an event's kind, context, abort state and batch, and the calls its program
// makes on the batch.
//
// Its exported methods on Event are the ones a program may use (Kind, ID, Context, Err); the
// privileged operations (aborting, reaching the batch, resolving a binding) are package
// functions, which only duilie's own packages can call, so no program gets around the
// interface's checks.
package event

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/duilie/duilie/platform"
)

// Kind is an event's kind, as 读取入站事件种类 reports it.
type Kind string

// Event kinds.
const (
	QueueEvent Kind = "queue" // a batch delivery
	FetchEvent Kind = "fetch" // an HTTP request
)

// Runtime is what an event needs from the host that runs it.
type Runtime interface {
	// Resolve finds the queue of a binding (SPEC §8.2). It returns the abort when the binding is
	// not permitted or not configured, or the platform's failure to provide the queue.
	Resolve(ctx context.Context, binding string) (q platform.Queue, queue string, abort *Abort, err error)
	// Sent hears of one send through the interface, once it has ended.
	Sent(ev *Event, s Send)
}

// Send describes one call of 发送队列消息 or 批量发送队列消息 that reached its binding.
type Send struct {
	Binding  string
	Queue    string // "" when the binding aborted
	Batch    bool   // 批量发送队列消息
	Messages int
	Bytes    int // normalized bodies
	Delayed  int // messages with a delay
	Err      error
	Start    time.Time
	Duration time.Duration
}

// Event is one run of a program: a queue event with its batch, or a fetch event. It carries its
// own context, as http.Request does, so the interface's functions take the event alone.
//
// An Event is safe for use by several goroutines of its program.
type Event struct {
	ctx   context.Context
	id    string
	kind  Kind
	rt    Runtime
	batch *Batch

	mu    sync.Mutex
	abort *Abort
	calls map[BridgeCall]int
}

// BridgeCall is one kind of bridge call an event's program made: the interface name ("" for a
// call that names no interface function) and the reply's status.
type BridgeCall struct {
	Name   string
	Status int
}

// NoteBridgeCall counts a bridge call of ev's program.
func NoteBridgeCall(ev *Event, name string, status int) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.calls == nil {
		ev.calls = map[BridgeCall]int{}
	}
	ev.calls[BridgeCall{name, status}]++
}

// BridgeCalls returns how many bridge calls of each kind ev's program made.
func BridgeCalls(ev *Event) map[BridgeCall]int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.calls) == 0 {
		return nil
	}
	out := make(map[BridgeCall]int, len(ev.calls))
	for k, v := range ev.calls {
		out[k] = v
	}
	return out
}

// New makes an event of kind, with batch b for a queue event (nil otherwise), run by rt.
func New(ctx context.Context, rt Runtime, kind Kind, b *Batch) *Event {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Event{ctx: ctx, id: hex.EncodeToString(id[:]), kind: kind, rt: rt, batch: b}
}

// Kind reports whether this is a queue or a fetch event (读取入站事件种类).
func (e *Event) Kind() Kind { return e.kind }

// ID identifies the event in logs and reports.
func (e *Event) ID() string { return e.id }

// Context is the event's context: it ends at the event's time limit or when the host stops.
func (e *Event) Context() context.Context { return e.ctx }

// Err returns the event's abort, or nil while it has not been aborted. Once aborted, every
// call of the interface's functions in the event returns this abort (SPEC §8.3). An event whose
// context has ended (its time limit passed, or the host halted) is aborted with 执行超过时限
// from that moment, even before its host has noticed, unless an earlier abort stands.
func (e *Event) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.abort == nil && e.ctx.Err() != nil {
		// The host ends an event's context with the abort that ends it.
		var cause *Abort
		if !errors.As(context.Cause(e.ctx), &cause) {
			cause = TimeLimit
		}
		e.abort = cause
	}
	if e.abort == nil {
		return nil // not a typed nil
	}
	return e.abort
}

// AbortWith aborts ev with a, unless it was aborted already, and returns the event's abort:
// the first abort wins.
func AbortWith(ev *Event, a *Abort) error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.abort == nil {
		ev.abort = a
	}
	return ev.abort
}

// BatchOf is a queue event's batch, or nil for other events.
func BatchOf(ev *Event) *Batch { return ev.batch }

// Queue resolves a binding to its queue (SPEC §8.2). A binding the permissions do not list, or
// one the deployment does not configure, aborts the event: the error is then an *Abort. Any
// other error is the platform's failure to provide the queue.
func Queue(ev *Event, binding string) (platform.Queue, string, error) {
	if err := ev.Err(); err != nil {
		return nil, "", err
	}
	q, name, abort, err := ev.rt.Resolve(ev.ctx, binding)
	if abort != nil {
		return nil, "", AbortWith(ev, abort)
	}
	return q, name, err
}

// Sent reports a send to the event's runtime.
func Sent(ev *Event, s Send) { ev.rt.Sent(ev, s) }

// Abort is a host abort: the program cannot recover from it, and its event fails with this
// reason whatever the program does next (SPEC §8.3). Its Error is the spec's message, verbatim.
// Code names which of the spec's aborts it is; errors.Is(err, a) holds for every abort of a's
// code, whatever follows the reason's fixed part (a binding's name, what is wrong with a call).
type Abort struct {
	Reason string // the spec's message, verbatim: all a program in another language sees
	Code   string // a stable name of the abort, such as "not_permitted"
	Gloss  string // what it means, in English, for people
	// Detail says more, for people and in English: the bindings that are permitted, whether
	// the time limit passed or the host halted at shutdown. "" when there is nothing to add.
	Detail string
}

func (a *Abort) Error() string { return a.Reason }

// Is reports whether target is an abort of the same code.
func (a *Abort) Is(target error) bool {
	t, ok := target.(*Abort)
	return ok && t.Code != "" && t.Code == a.Code
}

// With returns an abort of a's code whose reason is a's followed by suffix (the binding of
// 未授权的QUEUE绑定：, what is wrong with a malformed bridge call), and whose detail is detail.
func (a *Abort) With(suffix, detail string) *Abort {
	x := *a
	x.Reason += suffix
	x.Detail = detail
	return &x
}

// The host's aborts (SPEC §9); those whose reason names something are completed by With.
var (
	NotPermitted = &Abort{Reason: "未授权的QUEUE绑定：", Code: "not_permitted",
		Gloss: "the host's permissions (QUEUE) do not list this binding"}
	NoBinding = &Abort{Reason: "绑定不存在：", Code: "no_binding",
		Gloss: "the binding is permitted, but no producer maps it to a queue"}
	TimeLimit = &Abort{Reason: "执行超过时限", Code: "time_limit",
		Gloss: "the event ran past its time limit, or the host halted it"}
	DeepResult = &Abort{Reason: "宿主结果嵌套过深", Code: "result_too_deep",
		Gloss: "a message body is nested deeper than the host carries (32 levels)"}
	BadCall = &Abort{Reason: "桥接调用无效：", Code: "bad_bridge_call",
		Gloss: "the program made a malformed bridge call"}
)

// Batch is the batch of a queue event: the messages in index order, and the program's ack and
// retry calls, recorded until the event ends. Only the first call on a message counts.
type Batch struct {
	queue      string
	deliveries []platform.Delivery

	mu     sync.Mutex
	calls  []platform.Call
	frozen bool
}

// NewBatch makes a batch of deliveries from queue.
func NewBatch(queue string, ds []platform.Delivery) *Batch {
	return &Batch{queue: queue, deliveries: ds, calls: make([]platform.Call, len(ds))}
}

// Queue is the name of the queue the batch came from, as the platform reports it.
func (b *Batch) Queue() string { return b.queue }

// Len is the number of messages.
func (b *Batch) Len() int { return len(b.deliveries) }

// Message returns message i, 0 ≤ i < Len(), as the platform delivered it.
func (b *Batch) Message(i int) *platform.Message { return &b.deliveries[i].Message }

// Delivery returns delivery i.
func (b *Batch) Delivery(i int) platform.Delivery { return b.deliveries[i] }

// Record records the program's call c on message i, which the caller has checked is in range.
// A call on a message that already has one, or after the event ended, changes nothing.
func (b *Batch) Record(i int, c platform.Call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.frozen && b.calls[i].Kind == platform.NoCall {
		b.calls[i] = c
	}
}

// Freeze ends recording and returns the calls, one per message.
func (b *Batch) Freeze() []platform.Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frozen = true
	return b.calls
}
