package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// QueueInfo is one queue as an operator sees it: the platform's counts, and what the
// configuration (and, on a running server, the consumers started at run time) says of it. Its
// JSON is the counts, as duilie queues --json and the dashboard show them:
// {"queue","ready","delayed","in_flight","paused","lost","damage"?,"backlog"?}.
type QueueInfo struct {
	Queue    string `json:"queue"`
	Ready    int64  `json:"ready"`     // deliverable now
	Delayed  int64  `json:"delayed"`   // waiting for a send or retry delay
	InFlight int64  `json:"in_flight"` // delivered, its event not yet settled
	Paused   bool   `json:"paused"`    // delivery paused
	// Lost is how many of its messages damaged storage lost, as far as the platform can tell;
	// Damage says what happened, or why the queue cannot be read at all.
	Lost   int64  `json:"lost"`
	Damage string `json:"damage,omitempty"`
	// Backlog is set instead of the counts by a platform that counts only its unacknowledged
	// messages, in every state together (Cloudflare).
	Backlog *int64 `json:"backlog,omitempty"`
	// DeadLetterQueue is the dead-letter queue of the queue's consumer, "" for none.
	DeadLetterQueue string `json:"-"`
	// Sources are the queues whose consumers dead-letter into this one, sorted.
	Sources []string `json:"-"`
	// Bindings are the bindings that send to it, sorted.
	Bindings []string `json:"-"`
	// Configured: the configuration names the queue (a binding's, a consumer's or a
	// dead-letter queue), so it is listed before the platform holds it.
	Configured bool `json:"-"`
}

// Queues lists every queue: those the platform holds and those the configuration names, sorted
// by name, each with its counts (zero for a configured queue the platform does not hold yet).
// It reads the platform's counts once.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	p, err := c.opened(ctx)
	if err != nil {
		return nil, err
	}
	st, ok := p.(platform.Stater)
	if !ok {
		return nil, fmt.Errorf("platform kind %s cannot count its messages: %w", c.Kind(), errors.ErrUnsupported)
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]platform.QueueStats{}
	counted := false // the platform reports backlogs only
	for _, s := range stats {
		byName[s.Queue] = s
		counted = counted || s.Backlog != nil
	}
	configured := map[string]bool{}
	for _, q := range c.cfg.Queues() {
		configured[q] = true
		if _, ok := byName[q]; !ok {
			s := platform.QueueStats{Queue: q}
			if counted {
				s.Backlog = new(int64)
			}
			byName[q] = s
		}
	}
	dlqs := c.deadLetterQueues()
	out := make([]QueueInfo, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		s := byName[name]
		qi := QueueInfo{Queue: name, Ready: s.Ready, Delayed: s.Delayed, InFlight: s.InFlight, Paused: s.Paused,
			Lost: s.Lost, Damage: s.Damage, Backlog: s.Backlog, DeadLetterQueue: dlqs[name], Configured: configured[name]}
		for q, d := range dlqs {
			if d == name {
				qi.Sources = append(qi.Sources, q)
			}
		}
		slices.Sort(qi.Sources)
		for b, q := range c.cfg.Bindings {
			if q == name {
				qi.Bindings = append(qi.Bindings, b)
			}
		}
		slices.Sort(qi.Bindings)
		out = append(out, qi)
	}
	return out, nil
}

// deadLetterQueues maps each queue whose consumer names a dead-letter queue to it: the
// configured consumers' (program and http_pull ones) and, on a running server, those started
// over Cloudflare's API.
func (c *Client) deadLetterQueues() map[string]string {
	out := c.cfg.DeadLetterQueues()
	if c.srv != nil {
		for _, ci := range c.srv.consumerInfos() {
			if d := ci.DeadLetterQueue(); d != "" {
				out[ci.Queue] = d
			}
		}
	}
	return out
}

// Message is a stored message as an operator sees it, rendered once for every surface (peek,
// the dashboard, Cloudflare's API). Its JSON is
// {"id","state","attempts","timestamp","due"?,"delivered"?,"content_type","size","body"}: times
// in Unix milliseconds, a json body as itself, a text body as a string, any other as base64.
type Message struct {
	ID string `json:"id"`
	// State is "ready" (deliverable now), "delayed" (waiting for a send or retry delay) or
	// "in_flight" (delivered, its event not yet settled).
	State string `json:"state"`
	// Attempts counts its deliveries so far: 0 for a message never delivered, or one moved
	// back from a dead-letter queue.
	Attempts  int   `json:"attempts"`
	Timestamp int64 `json:"timestamp"`           // enqueue time
	Due       int64 `json:"due,omitempty"`       // a delayed message: when it becomes ready
	Delivered int64 `json:"delivered,omitempty"` // a message in flight: when it was delivered
	// ContentType is "json", "text", "bytes" or "v8".
	ContentType string `json:"content_type"`
	Size        int    `json:"size"` // the body's bytes
	// Body is the body as a JSON value: a json body as itself, a text body as a string, any
	// other (or json that does not parse) as a base64 string.
	Body json.RawMessage `json:"body"`
	// Raw is the body's bytes as stored.
	Raw []byte `json:"-"`
}

// Readable reports whether Body shows the body itself (json or text) rather than its base64.
func (m Message) Readable() bool {
	return m.ContentType == string(platform.Text) || m.ContentType == string(platform.JSON) && json.Valid(m.Raw)
}

func messageOf(m platform.StoredMessage) Message {
	out := Message{ID: m.ID, State: string(m.State), Attempts: m.Attempts, Timestamp: m.Timestamp,
		ContentType: string(m.ContentType), Size: len(m.Body), Raw: m.Body}
	if out.ContentType == "" {
		out.ContentType = string(platform.Bytes)
	}
	if m.State == platform.Delayed && m.Due > 0 {
		out.Due = m.Due
	}
	if m.State == platform.InFlight && m.Delivered > 0 {
		out.Delivered = m.Delivered
	}
	switch {
	case m.ContentType == platform.JSON && json.Valid(m.Body):
		out.Body = m.Body
	case m.ContentType == platform.Text:
		out.Body, _ = json.Marshal(string(m.Body))
	default:
		out.Body, _ = json.Marshal(base64.StdEncoding.EncodeToString(m.Body))
	}
	return out
}

// PeekOptions choose a page of a queue's messages.
type PeekOptions struct {
	// State lists only messages in that state ("ready", "delayed" or "in_flight"); "" lists
	// every state.
	State string
	// Limit is the most messages in the page, 1–MaxPeekLimit; 0 means DefaultPeekLimit.
	Limit int
	// Cursor continues after the previous page (its Next); "" starts at the oldest message.
	Cursor string
}

// Page limits of Peek.
const (
	MaxPeekLimit     = platform.MaxBrowseLimit
	DefaultPeekLimit = platform.DefaultBrowseLimit
)

// MessagePage is one page of a queue's messages, oldest first.
type MessagePage struct {
	Messages []Message
	// Next is the cursor of the following page, or "" when this page is the last.
	Next string
}

// Peek lists a page of the queue's messages, oldest first, without taking or changing them.
func (c *Client) Peek(ctx context.Context, queue string, o PeekOptions) (MessagePage, error) {
	var page MessagePage
	bo := platform.BrowseOptions{Limit: o.Limit, Cursor: o.Cursor}
	if o.State != "" {
		st, err := platform.ParseState(o.State)
		if err != nil {
			return page, invalid("%q: %v", o.State, err)
		}
		bo.State = st
	}
	if o.Limit < 0 || o.Limit > MaxPeekLimit {
		return page, invalid("a page holds 1–%d messages, not %d", MaxPeekLimit, o.Limit)
	}
	if err := checkQueue(queue); err != nil {
		return page, err
	}
	_, err := c.operation(ctx, host.OpPeek, queue, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, "", err
		}
		if err := c.ensure(ctx, p, queue); err != nil {
			return 0, "", err
		}
		bp, err := op.Browse(ctx, queue, bo)
		if err != nil {
			return 0, "", err
		}
		page.Next = bp.Next
		page.Messages = make([]Message, len(bp.Messages))
		for i, m := range bp.Messages {
			page.Messages[i] = messageOf(m)
		}
		return int64(len(page.Messages)), "", nil
	})
	return page, err
}

// checkQueue is ErrInvalid for a name that is not a queue name.
func checkQueue(name string) error {
	if err := platform.CheckQueueName(name); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// ensure creates a queue the configuration names on a platform that does not hold it yet, as
// a serve creates it at its start, so that it can be paused or peeked before any serve ran.
func (c *Client) ensure(ctx context.Context, p platform.Platform, queue string) error {
	if !slices.Contains(c.cfg.Queues(), queue) {
		return nil
	}
	_, err := p.Queue(ctx, queue)
	return err
}

// ReplayOptions choose which dead-lettered messages Replay sends back, and where.
type ReplayOptions struct {
	// To is the queue to send them to; "" means the queue whose consumer names the
	// dead-letter queue as its dead_letter_queue (there must be exactly one).
	To string
	// IDs, when not empty, replays only these messages.
	IDs []string
	// Limit is the most messages replayed, oldest first; 0 means every one.
	Limit int
	// Delay makes them ready this long after the replay, 0–43200 s; 0 means at once.
	Delay time.Duration
}

// Replayed is what Replay did: how many messages it moved, and where.
type Replayed struct {
	Messages int
	To       string
}

// Replay moves a dead-letter queue's messages (ready or delayed; those in flight stay) back to
// the queue they came from: each keeps its id, timestamp and body and is delivered again with
// attempts from 1. Replays of one queue that run at once each move a message at most once
// between them, and none fails because another took a message first. A crash in the middle
// may leave a message in both queues, never in neither.
func (c *Client) Replay(ctx context.Context, dlq string, o ReplayOptions) (Replayed, error) {
	out := Replayed{To: o.To}
	switch {
	case o.Limit < 0:
		return out, invalid("a limit is 0 (every message) or more, not %d", o.Limit)
	case o.Delay < 0 || o.Delay > duilie.MaxDelaySeconds*time.Second:
		return out, invalid("a replay's delay must be 0–%d seconds, not %d", duilie.MaxDelaySeconds, o.Delay/time.Second)
	}
	if err := checkQueue(dlq); err != nil {
		return out, err
	}
	if out.To == "" {
		var err error
		if out.To, err = c.replayTarget(dlq); err != nil {
			return out, err
		}
	}
	if err := checkQueue(out.To); err != nil {
		return out, err
	}
	if out.To == dlq {
		return out, invalid("replay %s to another queue than itself", dlq)
	}
	n, err := c.operation(ctx, host.OpReplay, dlq, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, out.To, err
		}
		if err := c.ensure(ctx, p, dlq); err != nil {
			return 0, out.To, err
		}
		n, err := op.Move(ctx, dlq, out.To, platform.MoveOptions{IDs: o.IDs, Limit: o.Limit, Delay: o.Delay})
		return int64(n), out.To, err
	})
	out.Messages = int(n)
	return out, err
}

// replayTarget is the queue whose consumer names dlq as its dead-letter queue.
func (c *Client) replayTarget(dlq string) (string, error) {
	var sources []string
	for q, d := range c.deadLetterQueues() {
		if d == dlq {
			sources = append(sources, q)
		}
	}
	slices.Sort(sources)
	switch len(sources) {
	case 1:
		return sources[0], nil
	case 0:
		where := "the configuration"
		if c.cfg.File != "" {
			where = c.cfg.File
		}
		return "", invalid("no consumer in %s names %s as its dead_letter_queue; say where to send its messages (--to QUEUE)", where, dlq)
	}
	return "", invalid("the consumers of %s all name %s as their dead_letter_queue; choose one (--to QUEUE)", strings.Join(sources, ", "), dlq)
}

// Purge deletes every message of the queue, in every state, and returns how many it deleted,
// or -1 when the platform cannot tell (Cloudflare). Once it returns, none of them is delivered:
// not from a batch still filling, nor leased, nor again after an event that had one retries it
// (platform.Starter).
func (c *Client) Purge(ctx context.Context, queue string) (int64, error) {
	if err := checkQueue(queue); err != nil {
		return 0, err
	}
	return c.operation(ctx, host.OpPurge, queue, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, "", err
		}
		if err := c.ensure(ctx, p, queue); err != nil {
			return 0, "", err
		}
		n, err := op.Purge(ctx, queue)
		if err == nil && c.srv != nil {
			if pl := c.srv.puller(queue); pl != nil {
				pl.Purged(ctx) // leased messages are gone too: no lease may bring one back
			}
		}
		return n, "", err
	})
}

// Delete deletes the messages with these ids from the queue, in whatever state each is, and
// returns how many it deleted before the first failure (ErrNoMessage for an id the queue does
// not hold).
func (c *Client) Delete(ctx context.Context, queue string, ids ...string) (int, error) {
	if err := checkQueue(queue); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, invalid("name the messages to delete by their ids")
	}
	n, err := c.operation(ctx, host.OpDelete, queue, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, "", err
		}
		var n int64
		for _, id := range ids {
			if err := op.Delete(ctx, queue, id); err != nil {
				return n, "", err
			}
			n++
		}
		return n, "", nil
	})
	return int(n), err
}

// Pause stops delivery of the queue's messages until Resume, across restarts: sends are still
// accepted, and no batch is delivered (messages in flight stay with their events). When it
// returns, no consumer anywhere starts a batch of the queue.
func (c *Client) Pause(ctx context.Context, queue string) error {
	return c.pauseOrResume(ctx, host.OpPause, queue)
}

// Resume restarts delivery of a paused queue. When it returns, consumers deliver again.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.pauseOrResume(ctx, host.OpResume, queue)
}

func (c *Client) pauseOrResume(ctx context.Context, o host.Op, queue string) error {
	if err := checkQueue(queue); err != nil {
		return err
	}
	_, err := c.operation(ctx, o, queue, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, "", err
		}
		if err := c.ensure(ctx, p, queue); err != nil {
			return 0, "", err
		}
		if o == host.OpPause {
			return 0, "", op.Pause(ctx, queue)
		}
		return 0, "", op.Resume(ctx, queue)
	})
	return err
}

// CreateQueue makes an empty queue, or does nothing for one the platform holds already.
func (c *Client) CreateQueue(ctx context.Context, queue string) error {
	if err := checkQueue(queue); err != nil {
		return err
	}
	_, err := c.operation(ctx, host.OpCreateQueue, queue, func(p platform.Platform) (int64, string, error) {
		_, err := p.Queue(ctx, queue)
		return 0, "", err
	})
	return err
}

// DeleteQueue removes a queue that the configuration does not name, with every message it
// holds. Its consumer, if a running server has one it started at run time, stops first.
func (c *Client) DeleteQueue(ctx context.Context, queue string) error {
	if err := checkQueue(queue); err != nil {
		return err
	}
	if slices.Contains(c.cfg.Queues(), queue) {
		return fmt.Errorf("queue %s: %w; remove it there instead", queue, ErrConfigured)
	}
	_, err := c.operation(ctx, host.OpDeleteQueue, queue, func(p platform.Platform) (int64, string, error) {
		op, err := c.operator(p)
		if err != nil {
			return 0, "", err
		}
		if c.srv != nil {
			if err := c.srv.stopConsumer(ctx, queue); err != nil {
				return 0, "", err
			}
		}
		return 0, "", op.DeleteQueue(ctx, queue)
	})
	return err
}

// StartConsumer starts consuming cc.Queue with the running server's program, as a
// [[queues.consumers]] table does. A queue has one consumer, of either kind.
func (c *Client) StartConsumer(cc ConsumerConfig) error {
	if c.srv == nil {
		return ErrNotServing
	}
	if err := cc.Validate(); err != nil {
		return invalid("%v", err)
	}
	if c.srv.run.queue == nil {
		return invalid("this serve runs no program (app.command) to consume %s", cc.Queue)
	}
	return c.srv.consume(cc, false)
}

// StartPullConsumer starts consuming pc.Queue by pulls: clients pull its messages over
// Cloudflare's Queues API (Pull), each leased to them for a visibility timeout.
func (c *Client) StartPullConsumer(ctx context.Context, pc PullConsumer) error {
	if c.srv == nil {
		return ErrNotServing
	}
	if err := pc.Validate(); err != nil {
		return invalid("%v", err)
	}
	return c.srv.pull(ctx, pc, false)
}

// StopConsumer stops the queue's consumer that StartConsumer or StartPullConsumer started: a
// program consumer's running events finish and are settled, until ctx ends; a pull
// consumer's leased messages are deliverable again at once. A consumer the configuration names
// cannot be stopped (ErrInvalid); a queue without one is left as it is.
func (c *Client) StopConsumer(ctx context.Context, queue string) error {
	if c.srv == nil {
		return ErrNotServing
	}
	return c.srv.stopConsumer(ctx, queue)
}

// Consumers lists the running server's consumers, of programs and of pulls, sorted by queue.
func (c *Client) Consumers() []ConsumerInfo {
	if c.srv == nil {
		return nil
	}
	return c.srv.consumerInfos()
}
