package platform

import (
	"context"
	"errors"
	"time"
)

// State is where a stored message stands.
type State string

// States of a stored message, as duilie queues counts them.
const (
	Ready    State = "ready"     // deliverable now
	Delayed  State = "delayed"   // waiting for a send or retry delay to end
	InFlight State = "in_flight" // delivered, its event not yet settled
)

// ParseState returns the State named s, or an error listing the states.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case Ready, Delayed, InFlight:
		return st, nil
	}
	return "", errors.New(`state must be "ready", "delayed" or "in_flight"`)
}

// StoredMessage is a message as an operator sees it in its queue.
type StoredMessage struct {
	// Message is the message. Attempts counts its deliveries so far: 0 for a message never
	// delivered (or moved since, as from a dead-letter queue), and for a message in flight the
	// delivery under way (a platform may undercount one it did not deliver itself). Due is, for
	// a delayed message, when it becomes ready (Unix ms).
	Message
	State State
	// Delivered is, for a message in flight, when that delivery was made (Unix ms), or 0 when
	// the platform cannot tell.
	Delivered int64
}

// BrowseOptions choose a page of a queue's messages.
type BrowseOptions struct {
	// State lists only messages in that state; "" lists every state.
	State State
	// Limit is the most messages in the page, 1–1000; 0 means 100.
	Limit int
	// Cursor continues after the previous page (its Next); "" starts at the oldest message.
	Cursor string
}

// MaxBrowseLimit is the largest BrowseOptions.Limit.
const MaxBrowseLimit = 1000

// DefaultBrowseLimit is the page size when BrowseOptions.Limit is 0.
const DefaultBrowseLimit = 100

// PageLimit is opts.Limit with its default, clamped to 1–MaxBrowseLimit.
func (o BrowseOptions) PageLimit() int {
	switch {
	case o.Limit <= 0:
		return DefaultBrowseLimit
	case o.Limit > MaxBrowseLimit:
		return MaxBrowseLimit
	}
	return o.Limit
}

// MessagePage is one page of a queue's messages, oldest first.
type MessagePage struct {
	Messages []StoredMessage
	// Next is the cursor of the following page, or "" when this page is the last.
	Next string
}

// MoveOptions choose which messages Move moves, and how they arrive.
type MoveOptions struct {
	// Limit is the most messages moved; 0 means every one.
	Limit int
	// IDs, when not empty, moves only these messages (those still ready or delayed).
	IDs []string
	// Delay makes the moved messages ready this long after the move; 0 means at once.
	Delay time.Duration
}

// Operator is implemented by a platform whose queues an operator can inspect and change: list
// and read messages by state, delete one, purge a queue, move messages to another queue (a
// dead-letter queue back to its source), pause and resume delivery, and delete a queue.
// duilie's commands (peek, replay, purge, delete, pause, resume), its dashboard and its
// Cloudflare API are built on it; its operations are those of Cloudflare's queue API where Cloudflare has one.
//
// Errors: ErrNoQueue for a queue the platform does not have, ErrNotFound for a message it
// does not hold, ErrCursor for a cursor it did not make. A platform with no API for an
// operation (Cloudflare cannot list, get, delete or move single messages) fails it with an
// error wrapping errors.ErrUnsupported that says so; callers report it as unsupported.
type Operator interface {
	// Browse lists a page of the queue's messages, oldest first, without loading the whole
	// queue. A message may move between states while it is listed; a page shows each message
	// at most once, in the state it had when it was read.
	Browse(ctx context.Context, queue string, opts BrowseOptions) (MessagePage, error)
	// Get returns the message with this id, in whatever state it is.
	Get(ctx context.Context, queue, id string) (StoredMessage, error)
	// Delete removes the message with this id, in whatever state it is, for good: in flight
	// too, and received for a batch not started yet (see Starter, gone.go).
	Delete(ctx context.Context, queue, id string) error
	// Purge removes every message of the queue, in every state, for good as Delete does, and
	// returns how many it removed (those in flight included), or -1 when the platform cannot
	// tell (Cloudflare's purge does not say).
	Purge(ctx context.Context, queue string) (int64, error)
	// Move moves messages that are ready or delayed, oldest first, to the queue to (created
	// if missing): each keeps its id, timestamp, body and content type, and starts again at
	// attempts 1, ready after opts.Delay. It returns how many it moved. A crash mid-move may
	// leave a message in both queues, never in neither.
	Move(ctx context.Context, from, to string, opts MoveOptions) (int, error)
	// Pause stops delivery of the queue's messages until Resume, across restarts of the
	// platform: sends are still accepted, and a Consumer's Receive delivers nothing (messages
	// already in flight stay with their events). Pausing a paused queue changes nothing.
	Pause(ctx context.Context, queue string) error
	// Resume restarts delivery of a paused queue.
	Resume(ctx context.Context, queue string) error
	// DeleteQueue removes the queue and every message it holds, in every state. Its consumers
	// deliver nothing of it any more: they stop (Receive returns ErrClosed) or, on a platform
	// that creates queues on demand, wait on the queue created anew. A later Queue or Consume
	// creates it anew, empty and not paused.
	DeleteQueue(ctx context.Context, queue string) error
}

// Errors of an Operator.
var (
	ErrNoQueue  = errors.New("no such queue")
	ErrNotFound = errors.New("no such message")
	ErrCursor   = errors.New("not a cursor of this platform") // BrowseOptions.Cursor is not a page's Next
)
