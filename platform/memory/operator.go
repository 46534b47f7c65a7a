package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/duilie/duilie/platform"
)

// The operator operations (platform.Operator). A queue's stored messages are kept in the order
// they were stored, and a cursor is the seq of the last message of a page.

// existing returns the named queue, or platform.ErrNoQueue. p.mu must be held.
func (p *Platform) existing(name string) (*queue, error) {
	if p.closed {
		return nil, platform.ErrClosed
	}
	q := p.queues[name]
	if q == nil {
		return nil, fmt.Errorf("memory: queue %q: %w", name, platform.ErrNoQueue)
	}
	return q, nil
}

func (m *message) state() platform.State {
	switch {
	case m.inFlight:
		return platform.InFlight
	case m.delayed:
		return platform.Delayed
	}
	return platform.Ready
}

func (m *message) stored() platform.StoredMessage {
	s := platform.StoredMessage{Message: m.Message, State: m.state()}
	s.Body = clone(m.Body)
	s.Attempts = m.deliveries
	if s.State != platform.Delayed {
		s.Due = 0
	}
	if m.inFlight {
		s.Delivered = m.delivered.UnixMilli()
	}
	return s
}

// Browse lists a page of the queue's messages, oldest first.
func (p *Platform) Browse(ctx context.Context, name string, opts platform.BrowseOptions) (platform.MessagePage, error) {
	var page platform.MessagePage
	var after uint64
	if opts.Cursor != "" {
		var err error
		if after, err = strconv.ParseUint(opts.Cursor, 10, 64); err != nil {
			return page, fmt.Errorf("memory: cursor %q: %w", opts.Cursor, platform.ErrCursor)
		}
	}
	limit := opts.PageLimit()
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return page, err
	}
	i, _ := slices.BinarySearchFunc(q.stored, after+1, bySeq)
	var last uint64
	for ; i < len(q.stored); i++ {
		m := q.stored[i]
		if opts.State != "" && m.state() != opts.State {
			continue
		}
		if len(page.Messages) == limit {
			page.Next = strconv.FormatUint(last, 10)
			break
		}
		page.Messages = append(page.Messages, m.stored())
		last = m.seq
	}
	return page, nil
}

func bySeq(m *message, seq uint64) int { return cmp.Compare(m.seq, seq) }

// find returns the stored message with this id. p.mu must be held.
func (q *queue) find(id string) (*message, error) {
	for _, m := range q.stored {
		if m.ID == id {
			return m, nil
		}
	}
	return nil, fmt.Errorf("memory: message %s in queue %s: %w", id, q.name, platform.ErrNotFound)
}

// Get returns the message with this id.
func (p *Platform) Get(ctx context.Context, name, id string) (platform.StoredMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return platform.StoredMessage{}, err
	}
	m, err := q.find(id)
	if err != nil {
		return platform.StoredMessage{}, err
	}
	return m.stored(), nil
}

// remove takes m out of q in whatever state it is, for good: a message in flight is no longer
// started (Start), and its settlement stores nothing (Settle). p.mu must be held.
func (q *queue) remove(m *message) {
	switch {
	case m.inFlight:
		m.inFlight, m.removed = false, true
		q.inFlight--
		m.timer.Stop()
	case m.delayed:
		m.delayed = false
		q.delayed--
		m.timer.Stop()
		m.timer = nil
	default:
		if i := slices.Index(q.ready, m); i >= 0 {
			q.ready = slices.Delete(q.ready, i, i+1)
		}
	}
	q.unstore(m)
}

// Delete removes the message with this id.
func (p *Platform) Delete(ctx context.Context, name, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return err
	}
	m, err := q.find(id)
	if err != nil {
		return err
	}
	q.remove(m)
	return nil
}

// Purge removes every message of the queue.
func (p *Platform) Purge(ctx context.Context, name string) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return 0, err
	}
	n := int64(len(q.stored))
	for _, m := range slices.Clone(q.stored) {
		q.remove(m)
	}
	return n, nil
}

// Move moves ready and delayed messages, oldest first, to another queue, attempts from 1.
func (p *Platform) Move(ctx context.Context, from, to string, opts platform.MoveOptions) (int, error) {
	if err := platform.CheckQueueName(to); err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	if from == to {
		return 0, errors.New("memory: a queue's messages cannot be moved to the queue itself")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	src, err := p.existing(from)
	if err != nil {
		return 0, err
	}
	dst := p.q(to)
	var moving []*message
	for _, m := range src.stored {
		if opts.Limit > 0 && len(moving) == opts.Limit {
			break
		}
		if m.inFlight || len(opts.IDs) > 0 && !slices.Contains(opts.IDs, m.ID) {
			continue
		}
		moving = append(moving, m)
	}
	for _, m := range moving {
		src.remove(m)
		moved := &message{Message: m.Message}
		moved.Attempts, moved.Due = 0, 0
		p.enqueue(dst, moved, max(opts.Delay, 0))
	}
	return len(moving), nil
}

// Pause stops delivery of the queue until Resume; sends are still accepted.
func (p *Platform) Pause(ctx context.Context, name string) error {
	return p.setPaused(name, true)
}

// Resume restarts delivery of a paused queue.
func (p *Platform) Resume(ctx context.Context, name string) error {
	return p.setPaused(name, false)
}

func (p *Platform) setPaused(name string, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return err
	}
	q.paused = paused
	q.signal()
	return nil
}

// DeleteQueue removes the queue and its messages. A consumer still receiving from it waits on
// the queue created anew.
func (p *Platform) DeleteQueue(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.existing(name)
	if err != nil {
		return err
	}
	for _, m := range slices.Clone(q.stored) {
		q.remove(m)
	}
	delete(p.queues, name)
	q.signal()
	return nil
}
