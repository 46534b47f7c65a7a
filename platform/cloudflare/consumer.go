package cloudflare

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/platform"
)

// maxVisibilityTimeout is Cloudflare's longest lease.
const maxVisibilityTimeout = 12 * time.Hour

// Consume returns an HTTP pull consumer of the named queue. It makes no request: the first
// Receive looks the queue up and checks that its consumer on Cloudflare is of type http_pull.
func (p *Platform) Consume(ctx context.Context, name string, opts platform.ConsumerOptions) (platform.Consumer, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, platform.ErrClosed
	}
	// Cloudflare cannot extend a lease, so the lease asked for covers the host's whole ack wait.
	vt := min(max(opts.AckWait, time.Second), maxVisibilityTimeout)
	return &consumer{p: p, name: name, batch: max(opts.MaxBatchSize, 1), visibility: vt}, nil
}

// consumer pulls one queue's messages over HTTP. Receive is called by one goroutine at a time
// (the host's consumer loop); Settle may run beside it.
type consumer struct {
	p          *Platform
	name       string
	batch      int           // max_batch_size: a pull's batch_size
	visibility time.Duration // a pull's visibility_timeout_ms: the host's ack wait

	mu        sync.Mutex
	id        string // the queue's id, once its http_pull consumer has been found
	closed    bool
	interval  time.Duration // the pause before the next pull: 0 while messages come
	failures  time.Duration // the wait after the next failure; 0 means defaultBackoff
	notBefore time.Time     // no pull before then
	paused    bool          // the last pull found delivery paused
}

// Receive pulls until a pull brings messages, pausing between empty pulls (and pulls of a
// paused queue) from MinPullInterval, doubling, to the configured ceiling. A temporary failure
// (429, 10250, 5xx, Cloudflare out of reach) is returned, and the next pull waits for
// Cloudflare's Retry-After or a backoff doubling from 1 s; a permanent one (a bad token, a queue
// that is gone or has no http_pull consumer) is marked platform.Permanent.
func (c *consumer) Receive(ctx context.Context, n int) ([]platform.Delivery, error) {
	for {
		c.mu.Lock()
		closed, wait := c.closed, time.Until(c.notBefore)
		c.mu.Unlock()
		if closed || c.p.isClosed() {
			return nil, platform.ErrClosed
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		id, err := c.queueID(ctx)
		if err != nil {
			return nil, c.failed(err)
		}
		ds, err := c.pull(ctx, id, max(1, min(n, c.batch)))
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.paused():
			c.idle(true)
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, c.failed(fmt.Errorf("pull from %s: %w", c.name, err))
		case len(ds) == 0:
			c.idle(false)
		default:
			c.mu.Lock()
			c.interval, c.failures, c.notBefore, c.paused = 0, 0, time.Time{}, false
			c.mu.Unlock()
			return ds, nil
		}
	}
}

// idle spaces out the pulls of a queue that gave nothing.
func (c *consumer) idle(paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if paused && !c.paused {
		c.p.log.Info("delivery is paused on Cloudflare: pulling less often until it resumes", "queue", c.name)
	}
	c.paused = paused
	c.interval = min(max(2*c.interval, MinPullInterval), c.p.cfg.MaxPullInterval)
	c.failures = 0
	c.notBefore = time.Now().Add(c.interval)
}

// failed records a failure: a queue that is gone is looked up again next time, and a temporary
// failure delays the next pull by Retry-After or the backoff.
func (c *consumer) failed(err error) error {
	var ae *apiError
	isAPI := errors.As(err, &ae)
	c.mu.Lock()
	defer c.mu.Unlock()
	if isAPI && ae.gone() {
		c.id = ""
		c.p.forget(c.name)
	}
	if platform.IsPermanent(err) {
		if isAPI && (ae.status == 401 || ae.status == 403 || ae.has(codeAuth) || ae.has(codeBadToken)) {
			err = fmt.Errorf("%w (the API token must be valid for account %s, with Queues Read and Write)", err, c.p.cfg.AccountID)
		}
		return err
	}
	d := max(c.failures, defaultBackoff)
	c.failures = min(2*d, time.Minute)
	if isAPI && ae.retryAfter > 0 {
		d = ae.retryAfter
	}
	c.notBefore = time.Now().Add(d)
	return err
}

// queueID looks the queue up once, and checks that Cloudflare delivers it to HTTP pulls.
func (c *consumer) queueID(ctx context.Context) (string, error) {
	c.mu.Lock()
	id := c.id
	c.mu.Unlock()
	if id != "" {
		return id, nil
	}
	id, err := c.p.queueID(ctx, c.name)
	if err != nil {
		return "", err
	}
	var params queues.ConsumerListParams
	params.AccountID.Value, params.AccountID.Present = c.p.cfg.AccountID, true
	page, err := c.p.api.Consumers.List(ctx, id, params)
	if err != nil {
		return "", fmt.Errorf("list the consumers of %s: %w", c.name, c.p.refused(c.name, err))
	}
	var others []string
	for _, cs := range page.Result {
		if cs.Type == queues.ConsumerTypeHTTPPull {
			c.mu.Lock()
			c.id = id
			c.mu.Unlock()
			return id, nil
		}
		what := string(cs.Type)
		if cs.ScriptName != "" {
			what += " (script " + cs.ScriptName + ")"
		}
		others = append(others, what)
	}
	has := "no consumer"
	if len(others) > 0 {
		has = "a consumer of type " + strings.Join(others, ", ")
	}
	return "", platform.Permanent(fmt.Errorf("queue %s has %s on Cloudflare, not http_pull: duilie pulls its messages over HTTP; add an HTTP pull consumer (wrangler queues consumer http add %s)", c.name, has, c.name))
}

// pull asks for up to n messages, leased for the visibility timeout.
func (c *consumer) pull(ctx context.Context, id string, n int) ([]platform.Delivery, error) {
	var params queues.MessagePullParams
	params.AccountID.Value, params.AccountID.Present = c.p.cfg.AccountID, true
	params.BatchSize.Value, params.BatchSize.Present = float64(n), true
	params.VisibilityTimeoutMs.Value, params.VisibilityTimeoutMs.Present = float64(c.visibility.Milliseconds()), true
	res, err := c.p.api.Messages.Pull(ctx, id, params)
	if err != nil {
		return nil, c.p.refused(c.name, err)
	}
	ds := make([]platform.Delivery, 0, len(res.Messages))
	for _, m := range res.Messages {
		body, ct := decodeBody(m)
		ds = append(ds, platform.Delivery{
			Message: platform.Message{ID: m.ID, Timestamp: int64(m.TimestampMs), Attempts: int(m.Attempts), Body: body, ContentType: ct},
			Token:   m.LeaseID,
		})
	}
	return ds, nil
}

// decodeBody reads a pulled body by its metadata["CF-Content-Type"]: json and bytes are
// base64-encoded, text is as it is. A json body that is not base64 of a JSON text is taken as it
// stands, as Cloudflare's own examples show it: a JSON text in the string, the string itself, or
// a JSON value in place of the string; base64 of bytes that are no JSON stays those bytes.
func decodeBody(m queues.MessagePullResponseMessage) ([]byte, platform.ContentType) {
	ct := platform.Bytes
	if md, ok := m.Metadata.(map[string]any); ok {
		if s, ok := md["CF-Content-Type"].(string); ok && s != "" {
			ct = platform.ContentType(s)
		}
	}
	raw := strings.TrimSpace(m.JSON.Body.Raw())
	if raw != "" && raw[0] != '"' && json.Valid([]byte(raw)) { // a JSON value in place of the string
		if ct == platform.Text || ct == platform.JSON {
			return []byte(raw), platform.JSON
		}
		return []byte(raw), ct
	}
	s := m.Body
	switch ct {
	case platform.Text:
		return []byte(s), ct
	case platform.JSON:
		b, err := base64.StdEncoding.DecodeString(s)
		switch {
		case err == nil && json.Valid(b):
			return b, ct
		case json.Valid([]byte(s)): // a plain JSON text ("true" is base64 too, of no JSON)
			return []byte(s), ct
		case err == nil: // base64 of bytes that are no JSON: ReadBatch says so to the program
			return b, ct
		}
		q, _ := json.Marshal(s) // a plain string, as in Cloudflare's example {"body":"hello"}
		return q, ct
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, ct
	}
	return []byte(s), ct
}

// InProgress does nothing: Cloudflare cannot extend a lease. The visibility timeout asked for
// at each pull covers the host's whole ack wait instead.
func (c *consumer) InProgress(ctx context.Context, ds []platform.Delivery) error { return nil }

// Settle acks and retries a batch's messages in one ack call. Done (and Drop) is an ack;
// Redeliver a retry, with delay_seconds when the program asked for a delay (else Cloudflare
// applies the consumer's retry_delay); Release a retry without delay. Cloudflare counts the
// attempts and dead-letters by its consumer's max_retries. A temporary failure is tried again
// twice, after Retry-After or a short backoff; messages left unsettled come back when their
// lease ends.
func (c *consumer) Settle(ctx context.Context, s platform.Settlement) error {
	var params queues.MessageAckParams
	params.AccountID.Value, params.AccountID.Present = c.p.cfg.AccountID, true
	var acks []queues.MessageAckParamsAck
	var retries []queues.MessageAckParamsRetry
	for _, r := range s.Messages {
		lease, _ := r.Token.(string)
		if lease == "" {
			continue
		}
		switch r.Action.Kind {
		case platform.Done, platform.Drop:
			var a queues.MessageAckParamsAck
			a.LeaseID.Value, a.LeaseID.Present = lease, true
			acks = append(acks, a)
		default: // Redeliver, Release; DeadLetter: Cloudflare dead-letters once its retries are spent
			var rt queues.MessageAckParamsRetry
			rt.LeaseID.Value, rt.LeaseID.Present = lease, true
			if d := r.Action.Delay; d > 0 || r.Action.Kind == platform.Release {
				rt.DelaySeconds.Value, rt.DelaySeconds.Present = float64((d+time.Second-1)/time.Second), true
			}
			retries = append(retries, rt)
		}
	}
	if len(acks)+len(retries) == 0 {
		return nil
	}
	if acks != nil {
		params.Acks.Value, params.Acks.Present = acks, true
	}
	if retries != nil {
		params.Retries.Value, params.Retries.Present = retries, true
	}
	id, err := c.queueID(ctx)
	if err != nil {
		return err
	}
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := c.p.api.Messages.Ack(ctx, id, params)
		if err == nil {
			return warnings(c.name, res.Warnings)
		}
		err = c.p.refused(c.name, err)
		var ae *apiError
		if attempt == 3 || platform.IsPermanent(err) || ctx.Err() != nil {
			return fmt.Errorf("ack and retry on %s: %w", c.name, err)
		}
		if errors.As(err, &ae) && ae.retryAfter > 0 {
			wait = min(ae.retryAfter, 10*time.Second)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait *= 2
	}
}

// warnings reports the leases Cloudflare did not settle, with its reasons.
func warnings(queue string, w map[string]string) error {
	if len(w) == 0 {
		return nil
	}
	var parts []string
	for lease, why := range w {
		parts = append(parts, lease+": "+why)
		if len(parts) == 3 {
			break
		}
	}
	return fmt.Errorf("ack and retry on %s: Cloudflare left %s unsettled (they come back when their lease ends): %s",
		queue, plural(len(w), "lease"), strings.Join(parts, "; "))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Close stops pulling. Leased messages come back when their lease ends.
func (c *consumer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
