package duilie

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/platform"
)

// Send is 发送队列消息: it sends one message, the JSON text body, to the queue that binding
// names, delivered after delaySeconds (0–43200; 0 means at once).
//
// The body is checked and normalized first (SPEC §3): the platform receives exactly
// JSON.stringify(JSON.parse(body)) as V8 prints it, with options {"contentType":"json"} and,
// when delaySeconds > 0, "delaySeconds". A failed check or a platform failure is an *Exception;
// a binding the permissions do not list, or that the deployment does not configure, is an
// *Abort, raised only once the body has passed its checks.
//
// Numbers in the body are doubles, as in JavaScript: integers beyond 2^53−1 lose precision, so
// send them as strings.
func Send(ev *Event, binding, body string, delaySeconds int) error {
	return send(ev, binding, []byte(body), delaySeconds)
}

func send(ev *Event, binding string, body []byte, delaySeconds int) error {
	if err := ev.Err(); err != nil {
		return err
	}
	if binding == "" {
		return ErrEmptyBinding
	}
	norm, err := CheckBody(body, delaySeconds)
	if err != nil {
		return err
	}
	s := event.Send{Binding: binding, Messages: 1, Bytes: len(norm), Start: time.Now()}
	if delaySeconds > 0 {
		s.Delayed = 1
	}
	q, name, err := event.Queue(ev, binding)
	if err == nil {
		opts := platform.SendOptions{ContentType: platform.JSON, DelaySeconds: delaySeconds}
		err = q.Send(ev.Context(), norm, opts)
	}
	err = platformFailure(ev, err, ErrSendFailed)
	sent(ev, s, name, err)
	return err
}

// sent reports a send that passed its checks to the event's host.
func sent(ev *Event, s event.Send, queue string, err error) {
	s.Queue, s.Err, s.Duration = queue, err, time.Since(s.Start)
	event.Sent(ev, s)
}

// platformFailure turns what the platform said into the exception the program sees: prefix and
// the platform's own message, verbatim. An abort stays an abort, including one that came while
// the platform worked (the event ran out of time).
func platformFailure(ev *Event, err error, prefix *Exception) error {
	if err == nil {
		return nil
	}
	if abort := ev.Err(); abort != nil { // an ended event's context is its time limit
		return abort
	}
	return prefix.with(err.Error(), "")
}

// SendBatch is 批量发送队列消息: it sends a batch given as the JSON text of an array of 1–100
// items {"body": any JSON value, "delaySeconds": optional integer 0–43200}. Nothing is sent
// unless every item passes its checks (SPEC §4); the platform then receives the items in order,
// each body normalized as Send normalizes it. Errors are as for Send.
func SendBatch(ev *Event, binding, items string) error {
	if err := ev.Err(); err != nil {
		return err
	}
	if binding == "" {
		return ErrEmptyBinding
	}
	checked, err := CheckBatch([]byte(items))
	if err != nil {
		return err
	}
	s := event.Send{Binding: binding, Batch: true, Messages: len(checked), Start: time.Now()}
	for _, it := range checked {
		s.Bytes += len(it.Body)
		if it.DelaySeconds > 0 {
			s.Delayed++
		}
	}
	q, name, err := event.Queue(ev, binding)
	if err == nil {
		err = q.SendBatch(ev.Context(), checked)
	}
	err = platformFailure(ev, err, ErrBatchSendFailed)
	sent(ev, s, name, err)
	return err
}

// SendValue sends v, encoded with encoding/json, as Send sends a JSON text: the same checks,
// normalization, messages and aborts apply. An error from encoding/json is returned as it is.
func SendValue(ev *Event, binding string, v any, delaySeconds int) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("duilie: encode message body: %w", err)
	}
	return send(ev, binding, body, delaySeconds)
}
