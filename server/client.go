package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/nats-io/nats.go"
)

// Client is the one door to the configured platform, for everything that is not a program's
// event: duilie's commands, the dashboard, Cloudflare's API served by duilie, bench, and any Go
// code. It runs events with the configuration's permissions, bindings and time limit, sends
// outside an event (each send one event, with every check of the interface), and carries the
// operator's operations. Each operation is reported to the observers, as events are.
//
// Open makes a Client that does not serve: it reaches the running serve that holds the
// configuration's store, or opens the store itself for as long as it is open, as duilie's
// commands do. Server.Client is the running server's own. A Client is safe for concurrent use.
type Client struct {
	cfg    *Config
	log    *slog.Logger
	srv    *Server // the server whose client this is; nil for Open's
	delays *deliveryDelays

	// open opens the platform on first use; p is it, wrapped with the delivery delays.
	open    func(ctx context.Context) (platform.Platform, error)
	mu      sync.Mutex
	p       platform.Platform
	raw     platform.Platform // p without the delays: Close closes it
	openErr error
	closed  bool

	h       *host.Host
	observe host.Observer
}

// Errors of a Client's operations. A platform's own failures are returned as it reports them.
var (
	// ErrNoQueue: the platform has no such queue.
	ErrNoQueue = platform.ErrNoQueue
	// ErrNoMessage: the queue holds no message with that id.
	ErrNoMessage = platform.ErrNotFound
	// ErrCursor: a cursor that no page of this queue gave.
	ErrCursor = platform.ErrCursor
	// ErrInvalid: an argument outside what the operation allows (a limit, a delay, a state, a
	// queue name); the error says which.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the client, or its server, has closed.
	ErrClosed = platform.ErrClosed
	// ErrConfigured: the configuration names the queue, or its consumer, so only the
	// configuration can remove or change it.
	ErrConfigured = errors.New("named in the configuration")
	// ErrNotServing: the operation needs a running server (starting or stopping a consumer).
	ErrNotServing = errors.New("this client does not serve: no consumer runs here")
)

// invalid is an ErrInvalid that says which argument, and why.
func invalid(format string, a ...any) error { return &invalidError{fmt.Sprintf(format, a...)} }

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Open makes a Client of the configuration that does not serve. Nothing is opened until an
// operation needs the platform: a send whose body fails its checks, or whose binding aborts,
// never touches the store. Close releases what it opened. Mistakes in cfg are a *ConfigError.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.prepare(false); err != nil {
		return nil, err
	}
	c := newClient(&cfg, nil, cfg.observers())
	c.open = func(ctx context.Context) (platform.Platform, error) {
		return cfg.openPlatform(ctx, false, c.log)
	}
	if err := c.newHost(); err != nil {
		return nil, err
	}
	return c, nil
}

// newClient makes a Client of cfg; observe hears of everything it does.
func newClient(cfg *Config, srv *Server, observe host.Observer) *Client {
	c := &Client{cfg: cfg, log: cfg.Logger, srv: srv, observe: observe, delays: newDeliveryDelays(cfg.DeliveryDelays)}
	if srv == nil && cfg.Logger == slog.Default() {
		// A command's own client speaks through its exit status, not a log.
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// newHost makes the host that runs the client's events, on the platform opened on first use.
func (c *Client) newHost() error {
	h, err := host.New(host.Config{
		Platform:    lazy{c},
		Permissions: c.cfg.Permissions,
		Bindings:    c.cfg.Bindings,
		TimeLimit:   c.cfg.TimeLimit,
		Logger:      c.log,
		Observer:    c.observe,
	})
	c.h = h
	return err
}

// observers joins cfg's observers into one.
func (cfg *Config) observers() host.Observer {
	obs := slices.Clone(cfg.Observers)
	if len(obs) == 0 {
		return nil
	}
	return func(r host.Report) {
		for _, o := range obs {
			o(r)
		}
	}
}

// opened returns the open platform without the delivery delays, for the operator's operations.
func (c *Client) opened(ctx context.Context) (platform.Platform, error) {
	if _, err := c.platform(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw, nil
}

// platform returns the open platform with the delivery delays, opening it on first use.
func (c *Client) platform(ctx context.Context) (platform.Platform, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, platform.ErrClosed
	case c.p == nil && c.open == nil: // a server's client before Start
		return nil, ErrNotStarted
	case c.p == nil && c.openErr == nil:
		p, err := c.open(ctx)
		if err != nil {
			c.openErr = err // p may be a typed nil: not kept
			break
		}
		c.raw, c.p = p, delaying{p, c.delays}
	}
	return c.p, c.openErr
}

// serve gives a server's client the platform and host it started.
func (c *Client) serve(p platform.Platform, h *host.Host) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw, c.p, c.h = p, delaying{p, c.delays}, h
}

// stop ends a server's client: its operations fail with platform.ErrClosed from now on.
func (c *Client) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// Connect opens the platform now, rather than when an operation first needs it, and returns
// why it cannot be opened: a service that should fail at its start calls it.
func (c *Client) Connect(ctx context.Context) error {
	_, err := c.platform(ctx)
	return err
}

// OpenErr is why the platform could not be opened, or nil when it opened or was not needed yet.
// A command exits with it rather than with what an event made of it.
func (c *Client) OpenErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.openErr
}

// Close releases the platform if this client opened it; for a non-serving client the close
// also drains its connection, so what it sent has reached the engine when Close returns. The
// running server's client closes with the server.
func (c *Client) Close() error {
	if c.srv != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.raw == nil {
		return nil
	}
	if err := c.raw.Close(); err != nil {
		return fmt.Errorf("closing the platform: %w", err)
	}
	return nil
}

// Config is the configuration the client runs on. It must not be changed.
func (c *Client) Config() *Config { return c.cfg }

// Kind is the platform's kind, as duilie.toml's [platform] kind names it.
func (c *Client) Kind() string { return c.cfg.Platform.Kind() }

// Do runs fn as one fetch-kind event with the configuration's permissions, bindings and time
// limit, as an HTTP request to the fetch listener would run, and returns its failure. It is how
// Go code that is not a program's handler sends. When the platform could not be opened, Do
// returns that error rather than the exception an event made of it.
func (c *Client) Do(ctx context.Context, fn duilie.Handler) error {
	c.mu.Lock()
	h := c.h
	c.mu.Unlock()
	if h == nil {
		return ErrNotStarted
	}
	failure := h.Do(ctx, fn)
	if err := c.OpenErr(); err != nil {
		return err
	}
	return failure
}

// Send sends one message as 发送队列消息 does, in an event of its own: the same checks, the
// same exceptions and aborts.
func (c *Client) Send(ctx context.Context, binding, body string, delaySeconds int) error {
	return c.send(ctx, func(ev *duilie.Event) error { return duilie.Send(ev, binding, body, delaySeconds) })
}

// SendBatch sends a batch as 批量发送队列消息 does, in an event of its own.
func (c *Client) SendBatch(ctx context.Context, binding, items string) error {
	return c.send(ctx, func(ev *duilie.Event) error { return duilie.SendBatch(ev, binding, items) })
}

// send runs one send in an event and returns the send's error (or the event's, if it failed
// otherwise).
func (c *Client) send(ctx context.Context, send func(ev *duilie.Event) error) error {
	var sendErr error
	failure := c.Do(ctx, func(ev *duilie.Event) error { sendErr = send(ev); return sendErr })
	if sendErr != nil {
		if err := c.OpenErr(); err != nil {
			return err
		}
		return sendErr
	}
	return failure
}

// lazy is the client's platform as its host sees it: opened on first use, with the delivery
// delays.
type lazy struct{ c *Client }

func (l lazy) Queue(ctx context.Context, name string) (platform.Queue, error) {
	p, err := l.c.platform(ctx)
	if err != nil {
		return nil, err
	}
	return p.Queue(ctx, name)
}

func (l lazy) Consume(ctx context.Context, name string, opts platform.ConsumerOptions) (platform.Consumer, error) {
	p, err := l.c.platform(ctx)
	if err != nil {
		return nil, err
	}
	return p.Consume(ctx, name, opts)
}

func (l lazy) Close() error { return nil } // the client closes the platform

// Capabilities are the platform's once it is open (a consumer opens it before it settles).
func (l lazy) Capabilities() platform.Capabilities {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.c.raw == nil {
		return platform.Capabilities{}
	}
	return platform.CapabilitiesOf(l.c.raw)
}

// deliveryDelays are the queues' delivery delays, in seconds: the configuration's, changed at
// run time by Cloudflare's API (a queue's settings.delivery_delay).
type deliveryDelays struct {
	mu sync.Mutex
	m  map[string]int
}

func newDeliveryDelays(m map[string]int) *deliveryDelays {
	return &deliveryDelays{m: maps.Clone(m)}
}

func (d *deliveryDelays) of(queue string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[queue]
}

// apply is the delay of a message sent to queue: its own, when it has one, else the queue's
// delivery delay.
func (d *deliveryDelays) apply(queue string, own int, hasOwn bool) int {
	if hasOwn {
		return own
	}
	return d.of(queue)
}

// DeliveryDelay is the queue's delivery delay in seconds: every message sent to it without a
// delay of its own waits that long.
func (c *Client) DeliveryDelay(queue string) int { return c.delays.of(queue) }

// SetDeliveryDelay changes the queue's delivery delay for this client's sends (0–86400 s), as
// Cloudflare's API's settings.delivery_delay does. It lasts as long as the client.
func (c *Client) SetDeliveryDelay(queue string, seconds int) error {
	if seconds < 0 || seconds > MaxDeliveryDelay {
		return invalid("a delivery delay must be 0–%d seconds, not %d", MaxDeliveryDelay, seconds)
	}
	c.delays.mu.Lock()
	defer c.delays.mu.Unlock()
	if c.delays.m == nil {
		c.delays.m = map[string]int{}
	}
	c.delays.m[queue] = seconds
	return nil
}

// MaxDeliveryDelay is the longest delivery delay, in seconds: Cloudflare's (SPEC §14.5).
const MaxDeliveryDelay = int(host.MaxPullDelay / time.Second)

// delaying applies each queue's delivery delay to the interface's sends: a message sent
// without a delay of its own (the interface's 0) waits that long, as a Cloudflare Queue binding
// with delivery_delay (or a queue with settings.delivery_delay) delays it.
type delaying struct {
	platform.Platform
	delays *deliveryDelays
}

func (p delaying) Queue(ctx context.Context, name string) (platform.Queue, error) {
	q, err := p.Platform.Queue(ctx, name)
	if err != nil {
		return nil, err
	}
	return delayingQueue{q, name, p.delays}, nil
}

type delayingQueue struct {
	platform.Queue
	name   string
	delays *deliveryDelays
}

func (q delayingQueue) Send(ctx context.Context, body []byte, opts platform.SendOptions) error {
	opts.DelaySeconds = q.delays.apply(q.name, opts.DelaySeconds, opts.DelaySeconds > 0)
	return q.Queue.Send(ctx, body, opts)
}

func (q delayingQueue) SendBatch(ctx context.Context, items []platform.BatchItem) error {
	if q.delays.of(q.name) > 0 {
		items = slices.Clone(items)
		for i := range items {
			items[i].DelaySeconds = q.delays.apply(q.name, items[i].DelaySeconds, items[i].DelaySeconds > 0)
		}
	}
	return q.Queue.SendBatch(ctx, items)
}

// PushMessage is one message pushed straight to a queue, as Cloudflare's Queues API pushes it:
// not through a binding.
type PushMessage struct {
	// Body is a JSON text as duilie.CheckBody returns it (ContentType "json"), or text
	// (ContentType "text"): Push stores it as it is.
	Body        []byte
	ContentType string
	// DelaySeconds delays its delivery, 0–86400 s, when HasDelay; without, the queue's delivery
	// delay applies.
	DelaySeconds int
	HasDelay     bool
}

// Push stores messages in the queue as they are, in order, as one batch when there are several:
// Cloudflare's push and bulk push. Each is reported as a send.
func (c *Client) Push(ctx context.Context, queue string, msgs ...PushMessage) error {
	if err := checkQueue(queue); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return invalid("push at least one message")
	}
	start := time.Now()
	r := &host.SendReport{Queue: queue, Batch: len(msgs) > 1, Messages: len(msgs), Start: start}
	items := make([]platform.BatchItem, len(msgs))
	for i, m := range msgs {
		ct := platform.ContentType(m.ContentType)
		if ct != platform.JSON && ct != platform.Text {
			return invalid("a pushed message's content type is json or text, not %q", m.ContentType)
		}
		if m.HasDelay && (m.DelaySeconds < 0 || m.DelaySeconds > MaxDeliveryDelay) {
			return invalid("a pushed message's delay must be 0–%d seconds, not %d", MaxDeliveryDelay, m.DelaySeconds)
		}
		items[i] = platform.BatchItem{Body: m.Body, ContentType: ct, DelaySeconds: c.delays.apply(queue, m.DelaySeconds, m.HasDelay)}
		r.Bytes += len(m.Body)
		if items[i].DelaySeconds > 0 {
			r.Delayed++
		}
	}
	// The delays are applied above, so the platform without them stores the messages.
	p, err := c.opened(ctx)
	var q platform.Queue
	if err == nil {
		q, err = p.Queue(ctx, queue)
	}
	if err == nil && len(items) == 1 {
		err = q.Send(ctx, items[0].Body, platform.SendOptions{ContentType: items[0].ContentType, DelaySeconds: items[0].DelaySeconds})
	} else if err == nil {
		err = q.SendBatch(ctx, items)
	}
	r.Err, r.Duration = err, time.Since(start)
	c.report(r)
	return err
}

// report hands r to the observers.
func (c *Client) report(r host.Report) {
	if c.observe != nil {
		c.observe(r)
	}
}

// operation runs an operator operation on the open platform and reports it.
func (c *Client) operation(ctx context.Context, op host.Op, queue string, fn func(p platform.Platform) (int64, string, error)) (int64, error) {
	start := time.Now()
	p, err := c.opened(ctx)
	var n int64
	to := ""
	if err == nil {
		n, to, err = fn(p)
	}
	c.report(&host.OperationReport{Op: op, Queue: queue, To: to, Messages: n, Err: err, Start: start, Duration: time.Since(start)})
	return n, err
}

// Retention is how long the platform keeps an unconsumed message: [platform] retention, or 4
// days for a platform that does not say.
func (c *Client) Retention() time.Duration {
	if r, ok := c.cfg.Platform.(interface{ RetentionPeriod() time.Duration }); ok {
		return r.RetentionPeriod()
	}
	return 96 * time.Hour
}

// Operable reports whether the platform has the operator's operations (peek, replay, purge,
// delete, pause, resume): Cloudflare's, for one, lacks some.
func (c *Client) Operable(ctx context.Context) bool {
	p, err := c.opened(ctx)
	if err != nil {
		return false
	}
	_, ok := p.(platform.Operator)
	return ok
}

// operator is the platform's operator operations, or the error of a platform without them.
func (c *Client) operator(p platform.Platform) (platform.Operator, error) {
	op, ok := p.(platform.Operator)
	if !ok {
		return nil, fmt.Errorf("platform kind %s has no operator operations: %w", c.Kind(), errors.ErrUnsupported)
	}
	return op, nil
}

// Consume runs the queue's consumer in this process: one event of handler per batch, as a
// server's consumers run them (SPEC §7), until ctx ends; then it takes no new batch and returns
// once the running events have been settled. It is for a Go program that consumes without
// serving; a server's configured consumers run on their own. A queue should have one consumer.
func (c *Client) Consume(ctx context.Context, cc ConsumerConfig, handler duilie.Handler) error {
	c.mu.Lock()
	h := c.h
	c.mu.Unlock()
	if h == nil {
		return ErrNotStarted
	}
	if err := cc.Validate(); err != nil {
		return invalid("%v", err)
	}
	return h.Consume(ctx, cc, handler)
}

// NATS returns a new connection to the NATS server the platform runs on (the embedded engine,
// or the cluster), and the stream replicas the platform uses there, for measurements beside
// duilie's own (duilie bench --compare-raw). Other platforms have none: errors.ErrUnsupported.
func (c *Client) NATS(ctx context.Context) (*nats.Conn, int, error) {
	p, err := c.opened(ctx)
	if err != nil {
		return nil, 0, err
	}
	n, ok := p.(interface {
		Dial() (*nats.Conn, error)
		Replicas() int
	})
	if !ok {
		return nil, 0, fmt.Errorf("platform kind %s runs on no NATS server: %w", c.Kind(), errors.ErrUnsupported)
	}
	nc, err := n.Dial()
	return nc, n.Replicas(), err
}
