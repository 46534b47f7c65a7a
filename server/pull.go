package server

import (
	"context"
	"errors"
	"time"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// Limits of pull consumers: Cloudflare's.
const (
	MaxPullBatch             = host.MaxPullBatch
	MaxVisibilityTimeout     = host.MaxVisibilityTimeout
	DefaultVisibilityTimeout = host.DefaultVisibilityTimeout
)

// ErrNoPullConsumer: the queue has no pull consumer to pull from.
var ErrNoPullConsumer = errors.New("the queue has no http_pull consumer")

// Leased is a pulled message, leased to the client that pulled it until its visibility timeout
// ends or the client acks or retries it by LeaseID.
type Leased struct {
	LeaseID string
	Message
}

// Pull leases up to max ready messages of the queue (0: its pull consumer's batch size) for
// visibility (0: the consumer's visibility timeout). It answers at once with what is ready,
// none when nothing is. A paused queue delivers nothing.
func (c *Client) Pull(ctx context.Context, queue string, max int, visibility time.Duration) ([]Leased, error) {
	p, err := c.puller(queue)
	if err != nil {
		return nil, err
	}
	ls, err := p.Pull(ctx, max, visibility)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, platform.ErrClosed) {
			return nil, invalid("%v", err)
		}
		return nil, err
	}
	out := make([]Leased, len(ls))
	for i, l := range ls {
		out[i] = Leased{LeaseID: l.ID, Message: messageOf(platform.StoredMessage{Message: l.Message, State: platform.InFlight})}
	}
	return out, nil
}

// LeaseRetry asks for a leased message to be delivered again: after Delay when HasDelay, else
// after its consumer's retry_delay; once its retries are spent it is dead-lettered or dropped.
type LeaseRetry = host.LeaseRetry

// Settled is what SettleLeases did: messages acked and retried, and a warning for each lease id
// that changed nothing (never issued, of another queue, ended already, or given twice).
type Settled = host.Settled

// SettleLeases acks and retries messages of the queue by their lease ids, as one request of
// Cloudflare's ack endpoint does.
func (c *Client) SettleLeases(ctx context.Context, queue string, acks []string, retries []LeaseRetry) (Settled, error) {
	p, err := c.puller(queue)
	if err != nil {
		return Settled{}, err
	}
	for _, r := range retries {
		if r.HasDelay && (r.Delay < 0 || r.Delay > host.MaxPullDelay) {
			return Settled{}, invalid("a retry's delay must be 0–%d seconds, not %d", MaxDeliveryDelay, r.Delay/time.Second)
		}
	}
	return p.Settle(ctx, acks, retries), nil
}

// puller is the queue's pull consumer on a running server.
func (c *Client) puller(queue string) (*host.Puller, error) {
	if c.srv == nil {
		return nil, ErrNotServing
	}
	if p := c.srv.puller(queue); p != nil {
		return p, nil
	}
	return nil, ErrNoPullConsumer
}
