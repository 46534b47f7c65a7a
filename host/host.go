// Package host runs programs: it owns events (their kind, permissions, bindings, batch, time
// limit and abort state) and the consumer runtime that turns platform deliveries into queue
// events and settles them by SPEC §7.
//
// A program is a Handler, called once per event. Programs in other languages run as a Handler
// that starts a process per event and serves it the interface over the bridge.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/duilie/duilie/platform"
)

// Handler is a program: the host calls it once per event. Returning an error or panicking fails
// the event; so does an abort, whatever the handler returns.
type Handler func(ev *Event) error

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
	TimeLimit time.Duration
	// Logger receives one line per event; nil means slog.Default().
	Logger *slog.Logger
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
	switch {
	case cfg.TimeLimit == 0:
		cfg.TimeLimit = DefaultTimeLimit
	case cfg.TimeLimit < time.Millisecond || cfg.TimeLimit > MaxTimeLimit:
		return nil, fmt.Errorf("host: time limit %v is outside 1ms–900s", cfg.TimeLimit)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{cfg: cfg, permitted: map[string]bool{}, log: cfg.Logger, queues: map[string]platform.Queue{}}
	h.halt, h.haltFunc = context.WithCancel(context.Background())
	for _, b := range cfg.Permissions.Queue {
		h.permitted[b] = true
	}
	return h, nil
}

// TimeLimit is the wall-clock limit of every event.
func (h *Host) TimeLimit() time.Duration { return h.cfg.TimeLimit }

// Platform is the host's platform.
func (h *Host) Platform() platform.Platform { return h.cfg.Platform }

// Halt aborts every running event and every event started later: the last step of a shutdown,
// once running events have had their grace period. Their messages are redelivered.
func (h *Host) Halt() { h.haltFunc() }

// resolve finds a binding's queue, or says why the event must abort, or returns the
// platform's failure to provide the queue.
func (h *Host) resolve(ctx context.Context, binding string) (q platform.Queue, abort string, err error) {
	if !h.permitted[binding] {
		return nil, abortNotPermitted + binding, nil
	}
	name, ok := h.cfg.Bindings[binding]
	if !ok {
		return nil, abortNoBinding + binding, nil
	}
	h.mu.Lock()
	q, ok = h.queues[name]
	h.mu.Unlock()
	if ok {
		return q, "", nil
	}
	if q, err = h.cfg.Platform.Queue(ctx, name); err != nil {
		return nil, "", err
	}
	h.mu.Lock()
	h.queues[name] = q
	h.mu.Unlock()
	return q, "", nil
}

// Run runs handler as one event of the given kind (with batch b for a queue event, nil
// otherwise) and returns nil when the event ended normally, or why it failed: the event's abort,
// the handler's error, or its panic. Past the time limit the event is aborted with
// 执行超过时限 and Run returns without waiting for the handler, whose later calls all return
// that abort.
func (h *Host) Run(ctx context.Context, kind Kind, b *Batch, handler Handler) error {
	_, err := h.runEvent(ctx, kind, b, handler)
	return err
}

// runEvent is Run, also returning the event's id for logs.
func (h *Host) runEvent(ctx context.Context, kind Kind, b *Batch, handler Handler) (id string, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.TimeLimit)
	defer cancel()
	defer context.AfterFunc(h.halt, cancel)()
	ev := newEvent(ctx, h, kind, b)
	if h.halt.Err() != nil {
		return ev.id, ev.Abort(AbortTimeLimit) // halted: no event runs any more
	}
	return ev.id, h.run(ev, func() error { return handler(ev) })
}

func (h *Host) run(ev *Event, body func() error) error {
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v\n%s", p, debug.Stack())
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
	case <-ev.ctx.Done():
		// The time limit passed, or the host halted: either way the event cannot finish.
		err = ev.Abort(AbortTimeLimit)
	}
	if a := ev.Err(); a != nil {
		return a
	}
	return err
}
