package jetstream

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Creating queues and consumers is idempotent and retried. Several serves starting at once on
// one cluster each create the same streams and consumers; a fresh cluster places each R3
// stream and elects its leader while the requests of the others wait, so a request can time
// out (the JetStream API's 5 s), find the system "temporarily unavailable" (503), or find that
// another serve created the stream or consumer a moment before. None of these is the answer:
// createWait bounds how long a creation is tried again, with a backoff from createBackoff to
// createBackoffMax, and an existing stream or consumer that already has the configuration
// is taken as it is, without an update that would cost the cluster a proposal.
var (
	createWait       = time.Minute
	createBackoff    = 100 * time.Millisecond
	createBackoffMax = 2 * time.Second
)

// retryCreate calls attempt until it succeeds, fails with an error that is not transient
// (see transient), createWait has passed or ctx ends; it returns the last error.
func retryCreate(ctx context.Context, attempt func(ctx context.Context) error) error {
	deadline := time.Now().Add(createWait)
	wait := createBackoff
	for {
		err := attempt(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, createBackoffMax)
	}
}

// transient reports whether a creation that failed with err may succeed when tried again: a
// request that timed out or found no server to answer, the system temporarily unavailable, or
// a stream or consumer that another process created meanwhile.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || slices.Contains([]jetstream.ErrorCode{jetstream.JSErrCodeStreamNameInUse,
			jetstream.JSErrCodeConsumerExists, jetstream.JSErrCodeConsumerAlreadyExists, jetstream.JSErrCodeConsumerNameExists}, apiErr.ErrorCode)
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrConnectionReconnecting)
}

// ensureStream makes queue's stream have cfg: it is created if missing, updated if it differs
// in a setting duilie makes, and otherwise taken as it is.
func (p *Platform) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var st jetstream.Stream
	err := retryCreate(ctx, func(ctx context.Context) error {
		var err error
		st, err = p.js.Stream(ctx, cfg.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			st, err = p.js.CreateStream(ctx, cfg)
		case err == nil && !sameStream(st.CachedInfo().Config, cfg):
			st, err = p.js.UpdateStream(ctx, cfg)
		}
		return err
	})
	return st, err
}

// sameStream reports whether a stream configured as have already has every setting of want
// that duilie makes (the server fills in the others).
func sameStream(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Retention == want.Retention && have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.Discard == want.Discard && have.AllowMsgTTL == want.AllowMsgTTL &&
		have.AllowMsgSchedules == want.AllowMsgSchedules && have.AllowAtomicPublish == want.AllowAtomicPublish &&
		have.AllowBatchPublish == want.AllowBatchPublish && have.AllowRollup == want.AllowRollup &&
		have.AllowDirect == want.AllowDirect && have.Duplicates == want.Duplicates
}
