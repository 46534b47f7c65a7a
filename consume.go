package duilie

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/jsonvalue"
	"github.com/duilie/duilie/platform"
)

// batch returns the current queue event's batch, or the exception for any other event.
func batch(ev *Event) (*event.Batch, error) {
	if err := ev.Err(); err != nil {
		return nil, err
	}
	b := event.BatchOf(ev)
	if ev.Kind() != QueueEvent || b == nil {
		return nil, ErrNotQueueEvent
	}
	return b, nil
}

// ReadBatch is 读取队列批次: it returns the current batch as JSON text, with no whitespace and
// keys in exactly this order:
//
//	{"queue":"<name>","messages":[{"id":"<id>","attempts":<n>,"timestamp":<ms>,"body":<json>},…]}
//
// Message order is the index order of Ack and Retry, from 0. Reading acks or retries nothing.
// The first message whose body is not a JSON value (bytes, JSON that does not parse, a host
// marker or a non-finite number) makes it an *Exception naming that index; the first whose body
// is nested deeper than 32 levels aborts the event instead. In any event but a queue event it
// is the exception 当前事件不是队列事件.
func ReadBatch(ev *Event) (string, error) {
	b, err := batch(ev)
	if err != nil {
		return "", err
	}
	size := 64 + len(b.Queue())
	for i := range b.Len() {
		size += 96 + len(b.Message(i).Body) // the id, attempts and timestamp with their names
	}
	out := make([]byte, 0, size)
	out = append(out, `{"queue":`...)
	out = jsonvalue.AppendString(out, b.Queue())
	out = append(out, `,"messages":[`...)
	for i := range b.Len() {
		m := b.Message(i)
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"id":`...)
		out = jsonvalue.AppendString(out, m.ID)
		out = append(out, `,"attempts":`...)
		out = strconv.AppendInt(out, int64(m.Attempts), 10)
		out = append(out, `,"timestamp":`...)
		out = strconv.AppendInt(out, m.Timestamp, 10)
		out = append(out, `,"body":`...)
		if out, err = appendBody(ev, out, m, i); err != nil {
			return "", err
		}
		out = append(out, '}')
	}
	out = append(out, "]}"...)
	// out is not written again: the string can share its bytes, as strings.Builder's does.
	return unsafe.String(unsafe.SliceData(out), len(out)), nil
}

// appendBody appends message i's body as a JSON value (SPEC §6).
func appendBody(ev *Event, out []byte, m *platform.Message, i int) ([]byte, error) {
	switch m.ContentType {
	case platform.JSON:
		n := len(out)
		out, st, err := jsonvalue.Append(out, m.Body)
		// As for a body being sent (SPEC §3), nesting beyond what the host carries is judged
		// before host markers.
		switch {
		case err != nil:
			return out[:n], ErrMessageNotJSON.with(strconv.Itoa(i), "its json body does not parse: "+syntaxDetail(err))
		case st.Depth > MaxHostDepth:
			return out[:n], event.AbortWith(ev, ErrResultTooDeep)
		case st.Marker:
			return out[:n], ErrMessageNotJSON.with(strconv.Itoa(i), "its body holds a number JSON cannot carry or a host marker")
		}
		return out, nil
	case platform.Text:
		return jsonvalue.AppendString(out, string(m.Body)), nil
	default:
		return out, ErrMessageNotJSON.with(strconv.Itoa(i), "its content type is "+string(m.ContentType))
	}
}

// Ack is 确认队列消息: it acknowledges message index of the current batch, so it is done even if
// the event fails later. An index outside the batch is the exception 队列消息序号越界. The
// platform hears of it when the event ends; only the first ack or retry of a message counts.
func Ack(ev *Event, index int) error {
	b, err := batch(ev)
	if err != nil {
		return err
	}
	if index < 0 || index >= b.Len() {
		return ErrIndexRange.detailed("index %d, a batch of %d", index, b.Len())
	}
	b.Record(index, platform.Call{Kind: platform.AckCall})
	return nil
}

// Retry is 重试队列消息: it asks for message index of the current batch to be delivered again
// after delaySeconds (1–43200), or, for 0, after the consumer's retry_delay. An index outside
// the batch is 队列消息序号越界, checked first; a delay outside 0–43200 is
// 延迟秒数须在 0 至 43200 之间. Only the first ack or retry of a message counts.
func Retry(ev *Event, index, delaySeconds int) error {
	b, err := batch(ev)
	if err != nil {
		return err
	}
	if index < 0 || index >= b.Len() {
		return ErrIndexRange.detailed("index %d, a batch of %d", index, b.Len())
	}
	if delaySeconds < 0 || delaySeconds > MaxDelaySeconds {
		return ErrDelayRange.detailed("%d seconds", delaySeconds)
	}
	b.Record(index, platform.Call{Kind: platform.RetryCall, DelaySeconds: delaySeconds})
	return nil
}

// Message is one message of a typed batch.
type Message[T any] struct {
	ID        string
	Attempts  int       // deliveries so far, from 1
	Timestamp time.Time // when it was enqueued, to the millisecond
	Body      T
}

// Batch is a typed batch, as ReadBatchOf returns it.
type Batch[T any] struct {
	Queue    string
	Messages []Message[T]
}

// ReadBatchOf reads the current batch as ReadBatch does, with the same checks, exceptions and
// aborts, and decodes each body into a T with encoding/json. A body that does not decode into
// T is an ordinary error naming its index.
func ReadBatchOf[T any](ev *Event) (*Batch[T], error) {
	text, err := ReadBatch(ev)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Messages []struct{ Body json.RawMessage }
	}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("duilie: decode batch: %w", err)
	}
	b := event.BatchOf(ev)
	out := &Batch[T]{Queue: b.Queue(), Messages: make([]Message[T], b.Len())}
	for i := range out.Messages {
		m := b.Message(i)
		out.Messages[i] = Message[T]{ID: m.ID, Attempts: m.Attempts, Timestamp: time.UnixMilli(m.Timestamp)}
		if err := json.Unmarshal(raw.Messages[i].Body, &out.Messages[i].Body); err != nil {
			return nil, fmt.Errorf("duilie: decode message %d: %w", i, err)
		}
	}
	return out, nil
}
