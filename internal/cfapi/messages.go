package cfapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/jsonvalue"
	"github.com/duilie/duilie/platform"
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
	s, err := a.stat(ctx, name)
	if err != nil {
		return metricsJSON{}
	}
	return backlogOf(s)
}

func backlogOf(s platform.QueueStats) metricsJSON {
	return metricsJSON{BacklogCount: s.Ready + s.Delayed + s.InFlight}
}

// item reads one message of a push or bulk push: {body, content_type?, delay_seconds?}. A json
// body goes through the interface's normalization and limits; a text body must be a JSON
// string, stored as its UTF-8 text with the text content type. delay is the delay of a message
// without delay_seconds.
func item(o object, delay int) (platform.BatchItem, error) {
	it := platform.BatchItem{ContentType: platform.JSON, DelaySeconds: delay}
	if v, present := o.m["content_type"]; present {
		switch ct, _ := jsonvalue.Unquote(v); platform.ContentType(ct) {
		case platform.JSON, platform.Text:
			it.ContentType = platform.ContentType(ct)
		default:
			return it, errMetadata(o.path + `content_type must be "json" or "text", not ` + clip(v))
		}
	}
	if d, present, err := o.integer("delay_seconds", 0, MaxDelaySeconds, errMetadata); err != nil {
		return it, err
	} else if present {
		it.DelaySeconds = int(d)
	}
	raw, present := o.m["body"]
	if !present {
		return it, errInvalid(o.path + "body is required")
	}
	if it.ContentType == platform.Text {
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

// sendErr maps a platform's failure to store messages: temporary failures are Cloudflare's
// "overloaded, back off" (429), permanent ones internal errors.
func (a *API) sendErr(name string, err error) error {
	if platform.IsPermanent(err) || errors.Is(err, platform.ErrClosed) {
		return a.internal("send to "+name, err)
	}
	return &apiError{http.StatusTooManyRequests, errOverloaded.code, errOverloaded.message + ": " + err.Error()}
}

// metrics answers the queue's best-effort metrics, as Cloudflare's GET …/queues/{id}/metrics
// does: its backlog.
func (a *API) metrics(w http.ResponseWriter, r *http.Request, name string) {
	s, err := a.stat(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, backlogOf(s))
}

func (a *API) push(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, false, errMessageSize("the request is over 4 MiB"))
	if err != nil {
		fail(w, err)
		return
	}
	it, err := item(body, a.DeliveryDelay(name))
	if err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	q, err := a.cfg.Platform.Queue(ctx, name)
	if err == nil {
		err = q.Send(ctx, it.Body, platform.SendOptions{ContentType: it.ContentType, DelaySeconds: it.DelaySeconds})
	}
	if err != nil {
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
	delay := a.DeliveryDelay(name)
	if d, present, err := body.integer("delay_seconds", 0, MaxDelaySeconds, errBatchDelay); err != nil {
		fail(w, err)
		return
	} else if present {
		delay = int(d)
	}
	raw, present := body.m["messages"]
	if !present || raw[0] != '[' {
		fail(w, errInvalid("messages must be an array of messages"))
		return
	}
	var items []platform.BatchItem
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
	q, err := a.cfg.Platform.Queue(ctx, name)
	if err == nil {
		err = q.SendBatch(ctx, items)
	}
	if err != nil {
		fail(w, a.sendErr(name, err))
		return
	}
	ok(w, pushJSON{metadataJSON{a.backlog(ctx, name)}})
}

func itoa(n int) string { return strconv.Itoa(n) }
