// Package duilie is the message-queue interface 消息队列 0.1.0 for Go programs: send JSON
// messages to permitted queues and, in queue events, read the current batch and ack or retry
// each message, with the same bytes and the same messages as the reference host on Cloudflare
// Workers.
//
// # Events
//
// A program runs once per event. Every function takes the current *Event, which carries its
// context as http.Request does; ev.Kind() is "queue" for a batch delivery and "fetch" for an
// HTTP request (读取入站事件种类). Events are made by the host (package host), which also
// holds the permissions ({"QUEUE":["PAGE_QUEUE"]}) and maps bindings to queues.
//
// # Producing
//
// Send and SendBatch check the body, normalize it to exactly what JavaScript's
// JSON.stringify(JSON.parse(text)) gives in V8, and hand it to the platform:
//
//	err := duilie.Send(ev, "PAGE_QUEUE", `{"kind":"page","url":"/release/x"}`, 0)
//
// SendValue encodes a Go value with encoding/json and sends it the same way. Numbers are
// doubles, as in JavaScript: integers beyond 2^53−1 lose precision, so send them as strings.
//
// # Consuming
//
// In a queue event, ReadBatch returns the batch as JSON text, ReadBatchOf decodes it into Go
// values, and Ack and Retry settle messages by index:
//
//	b, err := duilie.ReadBatchOf[Task](ev)
//	for i, m := range b.Messages {
//		if err := render(m.Body); err != nil {
//			duilie.Retry(ev, i, 30) // again in 30 s
//			continue
//		}
//		duilie.Ack(ev, i)
//	}
//
// A message with no call succeeds when the program returns nil and is delivered again when
// it returns an error or panics; an acked message stays acked even then. Every redelivery
// raises the message's attempts and counts toward the consumer's max_retries, after which the
// message goes to the dead-letter queue. Delivery is at least once: consumers must be
// idempotent.
//
// # Errors
//
// Failures are one of two types, told apart with errors.As. An *Exception (豫言异常) is
// catchable: a bad body, a delay out of range, a platform that refused. An *Abort is a host
// abort: an unpermitted or unconfigured binding, a body nested beyond what the host carries,
// the event's time limit. After an abort every call in the event returns the same abort and the
// event fails whatever the program returns. In both, Error() is the spec's message verbatim,
// such as 消息体超过 128000 字节 or 队列发送失败：Queue is full.
package duilie
