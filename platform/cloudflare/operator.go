package cloudflare

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/platform"
)

var _ platform.Operator = (*Platform)(nil)

// The operator operations that map onto Cloudflare's API are carried out there: pausing and
// resuming delivery (a queue's settings.delivery_paused) and purging. Cloudflare has no API to
// list, get, delete or move single messages, and duilie does not delete Cloudflare's queues:
// those operations fail with an error wrapping errors.ErrUnsupported, saying so.

// Pause stops delivery of the queue's messages on Cloudflare; sends are still accepted.
func (p *Platform) Pause(ctx context.Context, queue string) error {
	return p.setPaused(ctx, queue, true)
}

// Resume restarts delivery of a paused queue.
func (p *Platform) Resume(ctx context.Context, queue string) error {
	return p.setPaused(ctx, queue, false)
}

func (p *Platform) setPaused(ctx context.Context, queue string, paused bool) error {
	id, err := p.queueID(ctx, queue)
	if err != nil {
		return err
	}
	var settings queues.QueueSettingsParam
	settings.DeliveryPaused.Value, settings.DeliveryPaused.Present = paused, true
	var params queues.QueueEditParams
	params.AccountID.Value, params.AccountID.Present = p.cfg.AccountID, true
	params.Queue.Settings.Value, params.Queue.Settings.Present = settings, true
	if _, err := p.api.Edit(ctx, id, params); err != nil {
		return fmt.Errorf("pause or resume %s: %w", queue, p.refused(queue, err))
	}
	return nil
}

// Purge deletes every message of the queue on Cloudflare, leased ones too. Cloudflare does
// not say how many it deleted (a purge completes in the background), so Purge returns -1.
func (p *Platform) Purge(ctx context.Context, queue string) (int64, error) {
	id, err := p.queueID(ctx, queue)
	if err != nil {
		return 0, err
	}
	var params queues.PurgeStartParams
	params.AccountID.Value, params.AccountID.Present = p.cfg.AccountID, true
	params.DeleteMessagesPermanently.Value, params.DeleteMessagesPermanently.Present = true, true
	if _, err := p.api.Purge.Start(ctx, id, params); err != nil {
		return 0, fmt.Errorf("purge %s: %w", queue, p.refused(queue, err))
	}
	return -1, nil
}

// Browse is unsupported: Cloudflare has no API to list a queue's messages.
func (p *Platform) Browse(ctx context.Context, queue string, opts platform.BrowseOptions) (platform.MessagePage, error) {
	return platform.MessagePage{}, p.unsupported(ctx, queue, "it has no API to list a queue's messages")
}

// Get is unsupported: Cloudflare has no API to read one message.
func (p *Platform) Get(ctx context.Context, queue, id string) (platform.StoredMessage, error) {
	return platform.StoredMessage{}, p.unsupported(ctx, queue, "it has no API to read one message")
}

// Delete is unsupported: Cloudflare has no API to delete one message (only an ack of a pulled one).
func (p *Platform) Delete(ctx context.Context, queue, id string) error {
	return p.unsupported(ctx, queue, "it has no API to delete one message")
}

// Move is unsupported: Cloudflare has no API to move messages between queues (a consumer's
// dead-letter queue is Cloudflare's own).
func (p *Platform) Move(ctx context.Context, from, to string, opts platform.MoveOptions) (int, error) {
	return 0, p.unsupported(ctx, from, "it has no API to move messages between queues")
}

// DeleteQueue is unsupported: duilie does not delete Cloudflare's queues.
func (p *Platform) DeleteQueue(ctx context.Context, queue string) error {
	return p.unsupported(ctx, queue, "duilie does not delete its queues; delete one with wrangler queues delete")
}

// unsupported is the error of an operation Cloudflare cannot carry out, on a queue it has (or
// the queue's own error, ErrNoQueue for one it does not have).
func (p *Platform) unsupported(ctx context.Context, queue, why string) error {
	if _, err := p.queueID(ctx, queue); err != nil {
		return err
	}
	return fmt.Errorf("%w on Cloudflare: %s", errors.ErrUnsupported, why)
}
