package cfapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/duilie/duilie/server"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/jsonvalue"
)

// metricsJSON is the best-effort backlog Cloudflare reports with a push or a pull. duilie
// counts messages but not their bytes, and reports 0 (Cloudflare's "unknown") for both the
// bytes and the oldest message's time.
type metricsJSON struct {
	BacklogCount             int64 `json:"backlog_count"`
	BacklogBytes             int64 `json:"backlog_bytes"`
	OldestMessageTimestampMs int64 `json:"oldest_message_timestamp_ms"`
}

type metadataJSON struct {
	Metrics metricsJSON `json:"metrics"`
}

type pushJSON struct {
	Metadata metadataJSON `json:"metadata"`
}

// backlog is the queue's unacknowledged messages: ready, delayed and in flight.
func (a *API) backlog(ctx context.Context, name string) metricsJSON {
	q, err := a.stat(ctx, name)
	if err != nil {
		return metricsJSON{}
	}
	return backlogOf(q)
}

func backlogOf(q server.QueueInfo) metricsJSON {
	if q.Backlog != nil {
		return metricsJSON{BacklogCount: *q.Backlog}
	}
	return metricsJSON{BacklogCount: q.Ready + q.Delayed + q.InFlight}
}

// item reads one message of a push or bulk push: {body, content_type?, delay_seconds?}. A json
// body goes through the interface's normalization and limits; a text body must be a JSON
// string, stored as its UTF-8 text with the text content type. Without delay_seconds, the
// batch's delay applies (batch), else the queue's delivery delay.
func item(o object, batch *int) (server.PushMessage, error) {
	it := server.PushMessage{ContentType: "json"}
	if batch != nil {
		it.DelaySeconds, it.HasDelay = *batch, true
	}
	if v, present := o.m["content_type"]; present {
		switch ct, _ := jsonvalue.Unquote(v); ct {
		case "json", "text":
			it.ContentType = ct
		default:
			return it, errMetadata(o.path + `content_type must be "json" or "text", not ` + clip(v))
		}
	}
	if d, present, err := o.integer("delay_seconds", 0, MaxDelaySeconds, errMetadata); err != nil {
		return it, err
	} else if present {
		it.DelaySeconds, it.HasDelay = int(d), true
	}
	raw, present := o.m["body"]
	if !present {
		return it, errInvalid(o.path + "body is required")
	}
	if it.ContentType == "text" {
		s, ok := jsonvalue.Unquote(raw)
		switch {
		case raw[0] != '"':
			return it, errInvalid(o.path + "body of a text message must be a string")
		case !ok || !utf8.ValidString(s):
			return it, errInvalid(o.path + "body holds a lone surrogate, which text cannot carry")
		case len(s) > duilie.MaxBodyBytes:
			return it, errMessageSize("a message body is at most 128000 bytes")
		}
		it.Body = []byte(s)
		return it, nil
	}
	norm, err := duilie.CheckBody(raw, 0)
	if err != nil {
		if errors.Is(err, duilie.ErrBodyTooLarge) {
			return it, errMessageSize("a message body is at most 128000 bytes (" + err.Error() + ")")
		}
		return it, errInvalid(o.path + "body: " + err.Error())
	}
	it.Body = norm
	return it, nil
}

// sendErr maps a failure to store messages: temporary failures are Cloudflare's "overloaded,
// back off" (429), permanent ones internal errors.
func (a *API) sendErr(name string, err error) error {
	if server.IsPermanent(err) || errors.Is(err, server.ErrClosed) || errors.Is(err, server.ErrInvalid) {
		return a.clientErr("send to "+name, err)
	}
	return &apiError{http.StatusTooManyRequests, errOverloaded.code, errOverloaded.message + ": " + err.Error()}
}

// clientErr maps one of the client's errors: an argument out of range is Cloudflare's schema
// error, a queue that is not there its 10104, anything else an internal error.
func (a *API) clientErr(what string, err error) error {
	switch {
	case errors.Is(err, server.ErrInvalid):
		return errInvalid(err.Error())
	case errors.Is(err, server.ErrNoQueue):
		return errQueueNotFound
	}
	return a.internal(what, err)
}

// metrics answers the queue's best-effort metrics, as Cloudflare's GET …/queues/{id}/metrics
// does: its backlog.
func (a *API) metrics(w http.ResponseWriter, r *http.Request, name string) {
	q, err := a.stat(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, backlogOf(q))
}

func (a *API) push(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, false, errMessageSize("the request is over 4 MiB"))
	if err != nil {
		fail(w, err)
		return
	}
	it, err := item(body, nil)
	if err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	if err := a.c.Push(ctx, name, it); err != nil {
		fail(w, a.sendErr(name, err))
		return
	}
	ok(w, pushJSON{metadataJSON{a.backlog(ctx, name)}})
}

func (a *API) bulkPush(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, false, errBatchSize("the request is over 4 MiB"))
	if err != nil {
		fail(w, err)
		return
	}
	var delay *int
	if d, present, err := body.integer("delay_seconds", 0, MaxDelaySeconds, errBatchDelay); err != nil {
		fail(w, err)
		return
	} else if present {
		n := int(d)
		delay = &n
	}
	raw, present := body.m["messages"]
	if !present || raw[0] != '[' {
		fail(w, errInvalid("messages must be an array of messages"))
		return
	}
	var items []server.PushMessage
	total := 0
	i := 0
	for el := range jsonvalue.Elements(raw) {
		if el[0] != '{' {
			fail(w, errInvalid("messages["+itoa(i)+"] must be an object"))
			return
		}
		it, err := item(members("messages["+itoa(i)+"].", el), delay)
		if err != nil {
			fail(w, err)
			return
		}
		items = append(items, it)
		total += len(it.Body)
		i++
	}
	switch {
	case len(items) == 0:
		fail(w, errBatchCount("a batch holds 1–100 messages, not 0"))
		return
	case len(items) > duilie.MaxBatchItems:
		fail(w, errBatchCount("a batch holds 1–100 messages, not "+itoa(len(items))))
		return
	case total > duilie.MaxBatchBodyBytes:
		fail(w, errBatchSize("a batch's bodies are at most 256000 bytes in all, not "+itoa(total)))
		return
	}
	ctx := r.Context()
	if err := a.c.Push(ctx, name, items...); err != nil {
		fail(w, a.sendErr(name, err))
		return
	}
	ok(w, pushJSON{metadataJSON{a.backlog(ctx, name)}})
}

func itoa(n int) string { return strconv.Itoa(n) }

// pulledJSON is a pulled message as Cloudflare returns it: a json body base64-encoded, a text
// body as it is.
type pulledJSON struct {
	ID          string            `json:"id"`
	Body        string            `json:"body"`
	Attempts    int               `json:"attempts"`
	LeaseID     string            `json:"lease_id"`
	Metadata    map[string]string `json:"metadata"`
	TimestampMs int64             `json:"timestamp_ms"`
}

type pullJSON struct {
	MessageBacklogCount int64        `json:"message_backlog_count"`
	Messages            []pulledJSON `json:"messages"`
	Metadata            metadataJSON `json:"metadata"`
}

// errNoPull is what a pull or an ack of a queue without an http_pull consumer gets.
func errNoPull(name string) error {
	return errConflict(10255, "Queue "+name+" has no http_pull consumer: add one (type \"http_pull\") to pull its messages")
}

func (a *API) pull(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, true, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	batch := 0
	if n, present, err := body.integer("batch_size", 1, server.MaxPullBatch, errInvalid); err != nil {
		fail(w, err)
		return
	} else if present {
		batch = int(n)
	}
	var vt time.Duration
	// Cloudflare's API names it visibility_timeout_ms; its own guide writes visibility_timeout.
	for _, key := range []string{"visibility_timeout", "visibility_timeout_ms"} {
		if ms, present, err := body.integer(key, 1, int64(server.MaxVisibilityTimeout/time.Millisecond), errInvalid); err != nil {
			fail(w, err)
			return
		} else if present {
			vt = time.Duration(ms) * time.Millisecond
		}
	}
	ctx := r.Context()
	q, err := a.stat(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	if q.Paused {
		fail(w, errPaused)
		return
	}
	leased, err := a.c.Pull(ctx, name, batch, vt)
	switch {
	case errors.Is(err, server.ErrNoPullConsumer):
		fail(w, errNoPull(name))
		return
	case err != nil && ctx.Err() != nil:
		return // the client went away
	case err != nil:
		fail(w, a.clientErr("pull from "+name, err))
		return
	}
	out := make([]pulledJSON, len(leased))
	for i, l := range leased {
		out[i] = pulled(l)
	}
	m := a.backlog(ctx, name)
	ok(w, pullJSON{MessageBacklogCount: m.BacklogCount, Messages: out, Metadata: metadataJSON{m}})
}

func pulled(l server.Leased) pulledJSON {
	m := pulledJSON{ID: l.ID, Attempts: l.Attempts, LeaseID: l.LeaseID, TimestampMs: l.Timestamp,
		Metadata: map[string]string{"CF-Content-Type": l.ContentType}}
	if l.ContentType == "text" {
		m.Body = string(l.Raw)
	} else {
		m.Body = base64.StdEncoding.EncodeToString(l.Raw)
	}
	return m
}

type ackJSON struct {
	AckCount   int               `json:"ackCount"`
	RetryCount int               `json:"retryCount"`
	Warnings   map[string]string `json:"warnings"`
}

// ack acks and retries leased messages. Every lease given is answered: counted, or named in
// warnings with the reason (a lease id this serve did not issue for this queue, or one that has
// ended, changes nothing).
func (a *API) ack(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, true, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	var acks []string
	var retries []server.LeaseRetry
	for _, key := range []string{"acks", "retries"} {
		raw, present := body.m[key]
		if !present {
			continue
		}
		if raw[0] != '[' {
			fail(w, errInvalid(key+" must be an array"))
			return
		}
		i := 0
		for el := range jsonvalue.Elements(raw) {
			path := key + "[" + strconv.Itoa(i) + "]."
			i++
			if el[0] != '{' {
				fail(w, errInvalid(path[:len(path)-1]+" must be an object"))
				return
			}
			o := members(path, el)
			id, present, err := o.str("lease_id")
			if err == nil && !present {
				err = errInvalid(path + "lease_id is required")
			}
			if err != nil {
				fail(w, err)
				return
			}
			if key == "acks" {
				acks = append(acks, id)
				continue
			}
			d, given, err := o.integer("delay_seconds", 0, MaxDelaySeconds, errMetadata)
			if err != nil {
				fail(w, err)
				return
			}
			retries = append(retries, server.LeaseRetry{Lease: id, Delay: time.Duration(d) * time.Second, HasDelay: given})
		}
	}
	res, err := a.c.SettleLeases(r.Context(), name, acks, retries)
	switch {
	case errors.Is(err, server.ErrNoPullConsumer):
		fail(w, errNoPull(name))
		return
	case err != nil:
		fail(w, a.clientErr("ack messages of "+name, err))
		return
	}
	ok(w, ackJSON{AckCount: res.Acked, RetryCount: res.Retried, Warnings: res.Warnings})
}
