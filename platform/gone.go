package platform

import "context"

// Removed means removed. Once Operator.Purge or Operator.Delete has returned, no message it
// removed is delivered any more, wherever it was: ready, delayed, received by a consumer for a
// batch that has not started yet (a batch fills for up to max_batch_timeout; a pull consumer
// holds what it leases), or in a running event. For the last, the program already has it; but
// whatever its event's settlement asks for it afterwards (Redeliver, Release, DeadLetter),
// nothing is stored again: it is settled as Done. Purge's count includes all of them.
//
// A platform whose consumers hold what they received before it is handed over implements
// Starter, and the host calls Start on every batch right before its event starts, and on every
// pull right before its leases are handed out. The conformance suite (platformtest) checks the
// whole rule on every platform whose consumers are Starters, and skips it, with the reason, on
// the others.

// A Starter is a Consumer that can leave out of a batch what an operator removed since the
// batch was received.
type Starter interface {
	// Start returns, in order, the deliveries of ds (received from this consumer) whose
	// messages no Delete or Purge has removed since. The others are settled here: gone.
	Start(ctx context.Context, ds []Delivery) []Delivery
}

// Start is c.Start(ctx, ds) for a Starter, and ds for any other consumer.
func Start(ctx context.Context, c Consumer, ds []Delivery) []Delivery {
	if s, ok := c.(Starter); ok {
		return s.Start(ctx, ds)
	}
	return ds
}
