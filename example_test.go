package duilie_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
)

// A producer sends from any event: here a fetch event, an HTTP request. Bindings the host
// permits and configures name queues; a failed check is an exception the program can handle.
func ExampleSend() {
	handler := func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		if err := duilie.Send(ev, "PAGE_QUEUE", `{"kind":"page", "url":"/release/x", "n":1E2}`, 0); err != nil {
			return err
		}
		err := duilie.Send(ev, "PAGE_QUEUE", `{"kind":`, 0)
		var ex *duilie.Exception
		if errors.As(err, &ex) {
			fmt.Println("caught:", ex.Message, errors.Is(err, duilie.ErrBodyNotJSON))
		}
		return duilie.SendValue(ev, "PAGE_QUEUE", map[string]string{"kind": "release"}, 30)
	}
	_, res := duilietest.RunFetch(handler, duilietest.Config{Bindings: map[string]string{"PAGE_QUEUE": "page-render"}},
		httptest.NewRequest("POST", "/", nil))
	for _, s := range res.Sends {
		fmt.Println(s.Queue, s.Body, s.DelaySeconds)
	}
	// Output:
	// caught: 消息体不是有效的 JSON 文字 true
	// page-render {"kind":"page","url":"/release/x","n":100} 0
	// page-render {"kind":"release"} 30
}

// A consumer reads its batch in a queue event and acks or retries each message. A message with
// no call succeeds when the handler returns nil.
func ExampleReadBatchOf() {
	type task struct {
		Kind string `json:"kind"`
		URL  string `json:"url"`
	}
	handler := func(ev *duilie.Event) error {
		b, err := duilie.ReadBatchOf[task](ev)
		if err != nil {
			return err
		}
		for i, m := range b.Messages {
			fmt.Printf("%s %s attempt %d\n", b.Queue, m.Body.URL, m.Attempts)
			if m.Body.URL == "/b" {
				if err := duilie.Retry(ev, i, 30); err != nil {
					return err
				}
				continue
			}
			if err := duilie.Ack(ev, i); err != nil {
				return err
			}
		}
		return nil
	}
	res := duilietest.RunQueue(handler, duilietest.Config{},
		duilietest.Message{Body: `{"kind":"page","url":"/a"}`}, duilietest.Message{Body: `{"kind":"page","url":"/b"}`})
	fmt.Println("acks", res.Acks, "retries", res.Retries)
	// Output:
	// queue /a attempt 1
	// queue /b attempt 1
	// acks [0] retries [{1 30}]
}

// ReadBatch gives the batch as the JSON text every host returns; outside a queue event it is
// the exception 当前事件不是队列事件.
func ExampleReadBatch() {
	_, _ = duilietest.RunFetch(func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		_, err := duilie.ReadBatch(ev)
		fmt.Println(err, errors.Is(err, duilie.ErrNotQueueEvent))
		return nil
	}, duilietest.Config{}, httptest.NewRequest("GET", "/", nil))
	// Output:
	// 当前事件不是队列事件 true
}
