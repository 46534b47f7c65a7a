package cloudflare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/platform"
)

// Platform is Cloudflare Queues reached over Cloudflare's REST API. Its methods are safe for
// concurrent use.
type Platform struct {
	cfg  Config
	api  *queues.QueueService
	http *http.Client // the SDK's, and for the request it has no method for
	log  *slog.Logger

	mu     sync.Mutex
	ids    map[string]string // queue name → queue_id, as the account's list last said
	closed bool
}

var (
	_ platform.Platform = (*Platform)(nil)
	_ platform.Capable  = (*Platform)(nil)
)

// Open makes a platform on cfg's account. It makes no request: queue ids are looked up when a
// queue is first used.
func Open(ctx context.Context, cfg Config) (*Platform, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: requestTimeout}
	api := queues.NewQueueService(
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIToken(cfg.Token),
		option.WithHTTPClient(client),
		// duilie's policy decides what is tried again, and when (Retry-After included).
		option.WithMaxRetries(0),
	)
	return &Platform{cfg: cfg, api: api, http: client, log: cfg.Logger, ids: map[string]string{}}, nil
}

// Capabilities reports that Cloudflare counts deliveries, applies its consumers' max_retries
// and retry_delay, and moves exhausted messages to their dead-letter queue.
func (p *Platform) Capabilities() platform.Capabilities {
	return platform.Capabilities{Retries: true}
}

// LogAttrs says which account and API p uses, for the host's "platform open" log line.
func (p *Platform) LogAttrs() []any {
	return []any{"kind", Kind, "account_id", p.cfg.AccountID, "base_url", p.cfg.BaseURL}
}

// Close releases the platform: its consumers deliver nothing more. Leased messages come back
// once their visibility timeout ends.
func (p *Platform) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.http.CloseIdleConnections()
	return nil
}

func (p *Platform) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// queueID returns the id of the named queue, listing the account's queues when it has not seen
// the name yet. A queue the account does not have is a permanent error naming it.
func (p *Platform) queueID(ctx context.Context, name string) (string, error) {
	p.mu.Lock()
	id, ok := p.ids[name]
	closed := p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return "", platform.ErrClosed
	case ok:
		return id, nil
	}
	if _, err := p.list(ctx); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids[name]; ok {
		return id, nil
	}
	return "", platform.Permanent(&noQueueError{p.cfg.AccountID, name})
}

// noQueueError is a queue the account does not have.
type noQueueError struct{ account, queue string }

func (e *noQueueError) Error() string {
	return fmt.Sprintf("account %s has no queue named %q: create it (wrangler queues create %s)", e.account, e.queue, e.queue)
}

// Is makes it platform.ErrNoQueue.
func (e *noQueueError) Is(target error) bool { return target == platform.ErrNoQueue }

// list lists the account's queues, and remembers their ids.
func (p *Platform) list(ctx context.Context) ([]queues.Queue, error) {
	var params queues.QueueListParams
	params.AccountID.Value, params.AccountID.Present = p.cfg.AccountID, true
	page, err := p.api.List(ctx, params, option.WithQuery("per_page", "1000"))
	if err != nil {
		return nil, fmt.Errorf("list the queues of account %s: %w", p.cfg.AccountID, refusal(err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range page.Result {
		p.ids[q.QueueName] = q.QueueID
	}
	return page.Result, nil
}

// forget drops a queue's cached id, after Cloudflare said the id is no queue's.
func (p *Platform) forget(name string) {
	p.mu.Lock()
	delete(p.ids, name)
	p.mu.Unlock()
}

// Queue returns the producer side of the named queue, which must exist on Cloudflare.
func (p *Platform) Queue(ctx context.Context, name string) (platform.Queue, error) {
	id, err := p.queueID(ctx, name)
	if err != nil {
		return nil, err
	}
	return &queue{p: p, name: name, id: id}, nil
}

// queue is a producer: push and bulk push.
type queue struct {
	p        *Platform
	name, id string
}

// Send pushes one message. The body, the interface's normalized JSON text, is sent as the JSON
// value it is.
func (q *queue) Send(ctx context.Context, body []byte, opts platform.SendOptions) error {
	var m queues.MessagePushParamsBody
	m.Body.Value, m.Body.Present = bodyValue(body, opts.ContentType), true
	m.ContentType.Value, m.ContentType.Present = queues.MessagePushParamsBodyContentType(contentType(opts.ContentType)), true
	if opts.DelaySeconds > 0 {
		m.DelaySeconds.Value, m.DelaySeconds.Present = float64(opts.DelaySeconds), true
	}
	params := queues.MessagePushParams{Body: m}
	params.AccountID.Value, params.AccountID.Present = q.p.cfg.AccountID, true
	_, err := q.p.api.Messages.Push(ctx, q.id, params)
	return q.p.refused(q.name, err)
}

// SendBatch bulk-pushes the items in one request. Whether a refused bulk push was partly
// enqueued is Cloudflare's business.
func (q *queue) SendBatch(ctx context.Context, items []platform.BatchItem) error {
	msgs := make([]queues.MessageBulkPushParamsMessageUnion, len(items))
	for i, it := range items {
		var m queues.MessageBulkPushParamsMessage
		m.Body.Value, m.Body.Present = bodyValue(it.Body, it.ContentType), true
		m.ContentType.Value, m.ContentType.Present = queues.MessageBulkPushParamsMessagesContentType(contentType(it.ContentType)), true
		if it.DelaySeconds > 0 {
			m.DelaySeconds.Value, m.DelaySeconds.Present = float64(it.DelaySeconds), true
		}
		msgs[i] = m
	}
	var params queues.MessageBulkPushParams
	params.AccountID.Value, params.AccountID.Present = q.p.cfg.AccountID, true
	params.Messages.Value, params.Messages.Present = msgs, true
	_, err := q.p.api.Messages.BulkPush(ctx, q.id, params)
	return q.p.refused(q.name, err)
}

// bodyValue is a body as the SDK sends it: JSON bytes as the raw JSON value, text as a string.
func bodyValue(body []byte, ct platform.ContentType) any {
	if ct == platform.Text {
		return string(body)
	}
	return json.RawMessage(body)
}

// contentType is the content_type Cloudflare's push takes: json, or text.
func contentType(ct platform.ContentType) string {
	if ct == platform.Text {
		return string(platform.Text)
	}
	return string(platform.JSON)
}

// refused turns a failed request into the error a caller sees, and forgets the queue's id when
// Cloudflare says it is no queue's.
func (p *Platform) refused(name string, err error) error {
	err = refusal(err)
	var ae *apiError
	if errors.As(err, &ae) && ae.gone() {
		p.forget(name)
	}
	return err
}

// Cloudflare's error codes that decide what duilie does
// (developers.cloudflare.com/queues/reference/error-codes), and the message of a pull from a
// paused queue (409).
const (
	codeAuth       = 10000 // authentication error
	codeQueueGone  = 10104 // the queue does not exist
	codeBadToken   = 10106 // the token is not valid for this account
	codeOverloaded = 10250 // the queue is overloaded: back off
	pausedMessage  = "queue_delivery_paused"
)

// The failure policy.
const (
	requestTimeout  = 30 * time.Second
	defaultBackoff  = time.Second     // the first wait after a temporary failure without Retry-After; it doubles to a minute
	maxRetryAfter   = 5 * time.Minute // the longest Retry-After honoured: Cloudflare's global limit blocks for 5 minutes
	maxErrorsInText = 5               // of an envelope's errors, in an error's text
)

// apiError is a request Cloudflare refused: its status, its errors as Cloudflare wrote them,
// and how long it asked us to wait.
type apiError struct {
	status     int
	codes      []int64
	text       string
	retryAfter time.Duration // 0: not said
}

// Error is Cloudflare's text with its code, "Queue is overloaded. Please back off. (10250)".
func (e *apiError) Error() string { return e.text }

func (e *apiError) has(code int64) bool {
	for _, c := range e.codes {
		if c == code {
			return true
		}
	}
	return false
}

// temporary: trying again later may succeed (429, 10250, 408, 5xx).
func (e *apiError) temporary() bool {
	return e.status == http.StatusTooManyRequests || e.has(codeOverloaded) ||
		e.status == http.StatusRequestTimeout || e.status >= 500
}

// gone: the queue id is no queue's any more.
func (e *apiError) gone() bool { return e.has(codeQueueGone) }

// Is makes a queue that is gone platform.ErrNoQueue.
func (e *apiError) Is(target error) bool { return target == platform.ErrNoQueue && e.gone() }

// paused: a pull from a queue whose delivery is paused.
func (e *apiError) paused() bool {
	return e.status == http.StatusConflict && strings.Contains(e.text, pausedMessage)
}

// refusal makes an SDK error an *apiError with Cloudflare's own text. Failures to reach
// Cloudflare at all (connection refused, a timeout) pass through as they are: temporary.
func refusal(err error) error {
	var se *queues.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	errs := make([]errorEntry, len(se.Errors))
	for i, d := range se.Errors {
		errs[i] = errorEntry{d.Code, d.Message}
	}
	var h http.Header
	if se.Response != nil {
		h = se.Response.Header
	}
	return newAPIError(se.StatusCode, errs, h)
}

// errorEntry is one entry of the errors of Cloudflare's envelope.
type errorEntry struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// newAPIError is a refusal with its status, errors and headers; one that trying again will
// not mend is marked platform.Permanent.
func newAPIError(status int, errs []errorEntry, h http.Header) error {
	e := &apiError{status: status}
	var parts []string
	for i, d := range errs {
		e.codes = append(e.codes, d.Code)
		if i < maxErrorsInText {
			parts = append(parts, d.Message+" ("+strconv.FormatInt(d.Code, 10)+")")
		}
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d %s", status, http.StatusText(status)))
	}
	e.text = strings.Join(parts, "; ")
	e.retryAfter = retryAfter(h.Get("Retry-After"))
	if !e.temporary() && !e.paused() {
		return platform.Permanent(e)
	}
	return e
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), maxRetryAfter)
}
