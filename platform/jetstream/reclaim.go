package jetstream

import (
	"context"
	"fmt"
)

// After a crash, deliveries come back at once on the embedded engine. A process killed with
// messages in flight leaves them pending on the queue's durable consumer, and JetStream would
// deliver them again only when their ack wait runs out (max_batch_timeout + time_limit + 30 s,
// a minute or more). The process that runs the embedded engine holds the data directory's lock,
// so when it starts consuming a queue no other process can be consuming it: every pending
// delivery then belongs to a process that is gone. The first consumer of each queue in this
// process negatively acknowledges them all before it pulls, and they are delivered again at
// once, their delivery count (attempts) one higher, as after an ack wait. On a cluster another
// serve may hold them, and the ack wait stays.
//
// A pending delivery is a message on the queue's ready subject between the consumer's ack floor
// and its last delivery: the stream is a work queue, so a message acked is gone from it. Each is
// nakked on the consumer's ack subject in JetStream's v1 form,
// $JS.ACK.<stream>.<consumer>.<deliveries>.<stream seq>.<consumer seq>.<time>.<pending>; the
// server takes a nak for any stream sequence still pending and a consumer sequence past the
// floor (it uses the deliveries and the rest only in advisories).

// reclaimFlights naks, once per queue and process, the deliveries a previous process left
// pending on queue's consumer, if this process runs the embedded engine. It returns how many.
func (p *Platform) reclaimFlights(ctx context.Context, queue string) (int, error) {
	if p.srv == nil {
		return 0, nil
	}
	if _, done := p.reclaimed.LoadOrStore(queue, true); done {
		return 0, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	ci, err := p.js.Consumer(ctx, streamName(queue), consumerName)
	if err != nil {
		return 0, err
	}
	info := ci.CachedInfo()
	if info.NumAckPending == 0 {
		return 0, nil
	}
	last := info.Delivered.Stream
	prefix := fmt.Sprintf("$JS.ACK.%s.%s.1.", streamName(queue), consumerName)
	n := 0
	var perr error
	err = p.each(ctx, listing{queue: queue, delivered: last}, readySubject(queue), info.AckFloor.Stream+1, info.NumAckPending, func(m storedMsg) bool {
		if m.seq > last {
			return false
		}
		if perr = p.nc.Publish(fmt.Sprintf("%s%d.%d.0.0", prefix, m.seq, info.Delivered.Consumer), ackNak); perr != nil {
			return false
		}
		n++
		return true
	})
	if err == nil {
		err = perr
	}
	if err == nil {
		err = p.nc.FlushWithContext(ctx)
	}
	if err != nil {
		return n, fmt.Errorf("jetstream: deliver again what a stopped process left in flight in queue %s: %w", queue, err)
	}
	p.log.Info("jetstream: messages a stopped process left in flight are delivered again", "queue", queue, "messages", n)
	return n, nil
}
