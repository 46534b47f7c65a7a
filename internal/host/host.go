// Package host runs programs: it makes events (their kind, permissions, bindings, batch, time
// limit and abort state), runs the consumer runtime that turns platform deliveries into queue
// events and settles them by SPEC §7, runs fetch events for HTTP requests, and reports every
// event and send to an Observer.
//
// A program is a Handler, called once per event. Programs in other languages run as a Handler
// that starts a process per event and serves it the interface over the bridge (package bridge).
// Package server composes a host, a platform and a program into the running host that
// duilie serve is; most Go code embeds that rather than a Host.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/platform"
)

// The event's names, as the host's own code uses them.
type (
	// Event is one run of a program (see package duilie).
	Event = event.Event
	// Kind is an event's kind, as 读取入站事件种类 reports it.
	Kind = event.Kind
	// Handler is a program's queue handler.
	Handler = duilie.Handler
	// FetchHandler is a program's fetch handler.
	FetchHandler = duilie.FetchHandler
)

// Event kinds.
const (
	QueueEvent = event.QueueEvent // a batch delivery
	FetchEvent = event.FetchEvent // an HTTP request
)

// Permissions is the host's allow-list (许可), shaped {"QUEUE":["PAGE_QUEUE", …]}.
type Permissions struct {
	Queue []string `json:"QUEUE"`
}

// DefaultTimeLimit is an event's wall-clock limit when Config.TimeLimit is zero.
const DefaultTimeLimit = 30 * time.Second

// MaxTimeLimit is the longest allowed event time limit (900000 ms).
const MaxTimeLimit = 900 * time.Second

// Config configures a Host. The zero value of every field is its documented default.
type Config struct {
	// Platform stores and delivers the messages. Required.
	Platform platform.Platform
	// Permissions lists the bindings programs may use.
	Permissions Permissions
	// Bindings maps each configured binding to its queue.
	Bindings map[string]string
	// TimeLimit is each event's wall-clock limit, 1 ms – 900 s; 0 means 30 s.
	TimeLimit time.Duration `rule:"must be 1–900000 (milliseconds)"`
	// Observer, when set, receives a report of every event, send and settlement.
	Observer Observer
	// Logger receives the host's own failures (a platform that fails to deliver or settle);
	// nil means slog.Default(). Events are reported to the Observer, not logged.
	Logger *slog.Logger
}

// CheckTimeLimit reports whether d is a valid event time limit (1 ms – 900 s); its error is a
// *platform.FieldError for Config.TimeLimit.
func CheckTimeLimit(d time.Duration) error {
	if d < time.Millisecond || d > MaxTimeLimit {
		return platform.Invalid(Config{}, "TimeLimit")
	}
	return nil
}

// Host runs events against a platform.
type Host struct {
	cfg       Config
	permitted map[string]bool
	log       *slog.Logger

	halt     context.Context // canceled by Halt: every running event is aborted
	haltFunc context.CancelFunc

	mu     sync.Mutex
	queues map[string]platform.Queue // by queue name
}

// New makes a Host.
func New(cfg Config) (*Host, error) {
	if cfg.Platform == nil {
		return nil, errors.New("host: Config.Platform is required")
	}
	if cfg.TimeLimit == 0 {
		cfg.TimeLimit = DefaultTimeLimit
	} else if err := CheckTimeLimit(cfg.TimeLimit); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{cfg: cfg, permitted: map[string]bool{},
		log: cfg.Logger, queues: map[string]platform.Queue{}}
	h.halt, h.haltFunc = context.WithCancel(context.Background())
	for _, b := range cfg.Permissions.Queue {
		h.permitted[b] = true
	}
	return h, nil
}

// capabilities are the platform's, as it declares them now (a platform opened on first use
// declares them once open).
func (h *Host) capabilities() platform.Capabilities { return platform.CapabilitiesOf(h.cfg.Platform) }

// TimeLimit is the wall-clock limit of every event.
func (h *Host) TimeLimit() time.Duration { return h.cfg.TimeLimit }

// Platform is the host's platform.
func (h *Host) Platform() platform.Platform { return h.cfg.Platform }

// Halt aborts every running event and every event started later: the last step of a shutdown,
// once running events have had their grace period. Their messages are redelivered.
func (h *Host) Halt() { h.haltFunc() }

// Halted reports whether Halt has been called.
func (h *Host) Halted() bool { return h.halt.Err() != nil }

// observe hands r to the observer, if there is one.
func (h *Host) observe(r Report) {
	if h.cfg.Observer != nil {
		h.cfg.Observer(r)
	}
}

// runtime is the host as its events see it.
type runtime Host

// Resolve finds a binding's queue, or says why the event must abort, or returns the
// platform's failure to provide the queue.
func (rt *runtime) Resolve(ctx context.Context, binding string) (platform.Queue, string, *event.Abort, error) {
	h := (*Host)(rt)
	if !h.permitted[binding] {
		return nil, "", event.NotPermitted.With(binding, bindingHint("permitted", binding, h.cfg.Permissions.Queue)), nil
	}
	name, ok := h.cfg.Bindings[binding]
	if !ok {
		return nil, "", event.NoBinding.With(binding, bindingHint("configured", binding, slices.Collect(maps.Keys(h.cfg.Bindings)))), nil
	}
	h.mu.Lock()
	q, ok := h.queues[name]
	h.mu.Unlock()
	if ok {
		return q, name, nil, nil
	}
	q, err := h.cfg.Platform.Queue(ctx, name)
	if err != nil {
		return nil, name, nil, err
	}
	h.mu.Lock()
	h.queues[name] = q
	h.mu.Unlock()
	return q, name, nil, nil
}

// Sent reports a send.
func (rt *runtime) Sent(ev *Event, s event.Send) {
	h := (*Host)(rt)
	if h.cfg.Observer == nil {
		return
	}
	h.cfg.Observer(&SendReport{Event: ev.ID(), Binding: s.Binding, Queue: s.Queue, Batch: s.Batch,
		Messages: s.Messages, Bytes: s.Bytes, Delayed: s.Delayed, Err: s.Err, Start: s.Start, Duration: s.Duration})
}

// Do runs handler as one fetch-kind event, as an HTTP request would, and returns nil when the
// event ended normally, or why it failed: the event's abort, the handler's error, or its panic.
// Past the time limit the event is aborted with 执行超过时限 and Do returns without waiting
// for the handler, whose later calls all return that abort. It is how code outside an HTTP
// request (a command, a timer) sends: the handler calls duilie.Send.
func (h *Host) Do(ctx context.Context, handler Handler) error {
	_, err := h.runEvent(ctx, FetchEvent, nil, handler, false)
	return err
}

// runEvent runs handler as one event of kind with batch b, and returns the event (for its id)
// and its failure. With started, a StartReport is observed as it starts (the caller then
// observes its EventReport when it ends).
func (h *Host) runEvent(ctx context.Context, kind Kind, b *event.Batch, handler Handler, started bool) (*Event, error) {
	// The event's context ends with the abort that ends it: its time limit, or the host's halt.
	ctx, cancelLimit := context.WithTimeoutCause(ctx, h.cfg.TimeLimit,
		event.TimeLimit.With("", "its time limit of "+h.cfg.TimeLimit.String()+" passed"))
	defer cancelLimit()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(h.halt, func() { cancel(halted) })()
	ev := event.New(ctx, (*runtime)(h), kind, b)
	if started && h.cfg.Observer != nil {
		r := &StartReport{ID: ev.ID(), Kind: kind, Start: time.Now()}
		if b != nil {
			r.Queue, r.Batch = b.Queue(), b.Len()
		}
		h.observe(r)
	}
	if h.halt.Err() != nil {
		return ev, event.AbortWith(ev, halted) // halted: no event runs any more
	}
	return ev, h.run(ev, func() error { return handler(ev) })
}

func (h *Host) run(ev *Event, body func() error) error {
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if p := recover(); p != nil {
				done <- &PanicError{Value: p, Stack: debug.Stack()}
			} else if !returned {
				done <- errors.New("the handler exited its goroutine (runtime.Goexit) without returning")
			}
		}()
		err := body()
		returned = true
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ev.Context().Done():
		// The time limit passed, or the host halted: either way the event cannot finish.
		err = ev.Err()
	}
	if a := ev.Err(); a != nil {
		return a
	}
	return err
}

// halted is the abort of an event the host halted: its server shut down and the grace period
// ended (SPEC §8.1's time limit, as far as the program can tell).
var halted = event.TimeLimit.With("", "the host halted it: the server is shutting down and its grace period ended")

// PanicError is the failure of an event whose handler panicked.
type PanicError struct {
	Value any
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
