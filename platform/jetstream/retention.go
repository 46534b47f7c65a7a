package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Retention is duilie's, not the engine's: nothing in a stream expires by itself (the engine
// would drop it without a word). A serving process (Config.Serve: duilie serve, on the
// embedded engine or a cluster) removes, at its start and every sweepEvery, the ready messages
// that became ready longer than Config.Retention ago, and logs how many per queue. A delayed
// message is ready at its due time, so its retention counts from then. On a cluster every
// serving process sweeps, each with its own retention.

// sweepEvery is how often a serving process removes messages past their retention.
var sweepEvery = time.Minute

// sweepClock is the sweeper's clock (tests move it on).
var sweepClock = time.Now

// sweep removes messages past their retention until ctx ends.
func (p *Platform) sweep(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		if err := p.expire(ctx, sweepClock().Add(-p.cfg.Retention)); err != nil && ctx.Err() == nil {
			p.log.Error("jetstream: removing messages past their retention", "err", err)
		}
		// Batches whose sender stopped half-way while this process serves (batch.go).
		n, err := p.finishBatches(ctx, time.Now().Add(-time.Duration(staleBatch.Load())))
		if n > 0 {
			p.log.Warn("jetstream: batches stored by a sender that stopped before their messages were all stored are complete now", "batches", n)
		}
		if err != nil && ctx.Err() == nil {
			p.log.Error("jetstream: finishing stored batches", "err", err)
		}
		// Damaged records the engine skips without a word (records.go).
		if err := p.checkFirstMessages(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("jetstream: looking for damaged records", "err", err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// expire removes every queue's ready messages stored before cutoff, and logs the count per
// queue at WARN.
func (p *Platform) expire(ctx context.Context, cutoff time.Time) error {
	names, err := p.queueNames(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		n, err := p.expireQueue(ctx, name, cutoff)
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", name, err))
			continue
		}
		if n > 0 {
			p.log.Warn("messages dropped: their retention passed before a consumer took them", "queue", name,
				"messages", n, "retention", p.cfg.Retention.String())
		}
	}
	return errors.Join(errs...)
}

// expireQueue removes the queue's ready messages stored before cutoff and returns how many.
// Stream sequences follow store times, so those are the ready subject's messages below the
// first one stored at cutoff or later.
func (p *Platform) expireQueue(ctx context.Context, name string, cutoff time.Time) (uint64, error) {
	st, err := p.js.Stream(ctx, streamName(name))
	if err != nil {
		return 0, err
	}
	info := st.CachedInfo()
	if info.State.Msgs == 0 || !info.State.FirstTime.Before(cutoff) {
		return 0, nil
	}
	purge := map[string]any{"filter": readySubject(name)}
	var got struct {
		Error   *jetstream.APIError `json:"error"`
		Message struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := p.api(ctx, "STREAM.MSG.GET."+streamName(name), map[string]any{"start_time": cutoff, "next_by_subj": readySubject(name)}, &got); err != nil {
		return 0, err
	}
	switch {
	case got.Error == nil:
		purge["seq"] = got.Message.Seq // the first that stays
	case got.Error.ErrorCode != jetstream.JSErrCodeMessageNotFound:
		return 0, got.Error
	} // none stored at cutoff or later: every ready message goes
	var purged struct {
		Error  *jetstream.APIError `json:"error"`
		Purged uint64              `json:"purged"`
	}
	if err := p.api(ctx, "STREAM.PURGE."+streamName(name), purge, &purged); err != nil {
		return 0, err
	}
	if purged.Error != nil {
		return 0, purged.Error
	}
	return purged.Purged, nil
}

// api makes one JetStream API request ($JS.API.<subject>) and decodes its reply into resp.
func (p *Platform) api(ctx context.Context, subject string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	m, err := p.nc.RequestWithContext(ctx, "$JS.API."+subject, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(m.Data, resp)
}
