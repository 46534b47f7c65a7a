package duilietest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
)

type task struct {
	URL string `json:"url"`
}

// handle renders each task: one without a URL is retried in 30 s; a rendered one is announced
// on the AUDIT queue and acked.
func handle(ev *duilie.Event) error {
	b, err := duilie.ReadBatchOf[task](ev)
	if err != nil {
		return err
	}
	for i, m := range b.Messages {
		if m.Body.URL == "" {
			if err := duilie.Retry(ev, i, 30); err != nil {
				return err
			}
			continue
		}
		if err := duilie.SendValue(ev, "AUDIT", map[string]any{"rendered": m.Body.URL, "attempts": m.Attempts}, 0); err != nil {
			return err
		}
		if err := duilie.Ack(ev, i); err != nil {
			return err
		}
	}
	return nil
}

// A queue handler runs on a batch given in the test, in the deployment the Config describes;
// the result says what it did and what the host decided for each message.
func ExampleRunQueue() {
	res := duilietest.RunQueue(handle, duilietest.Config{Bindings: map[string]string{"AUDIT": "audit"}},
		duilietest.Message{Body: `{"url":"/a"}`},
		duilietest.Message{Body: `{"url":""}`, Attempts: 2})
	fmt.Println("outcome:", res.Outcome)
	fmt.Println("acks:", res.Acks)
	fmt.Printf("retries: %+v\n", res.Retries)
	for _, s := range res.Sends {
		fmt.Println("sent to", s.Queue+":", s.Body)
	}
	fmt.Println("message 1 redelivered after", res.Messages[1].Action.Delay)

	// Without the AUDIT binding the send aborts the event, and the unacked messages come back.
	res = duilietest.RunQueue(handle, duilietest.Config{}, duilietest.Message{Body: `{"url":"/a"}`})
	fmt.Println("outcome:", res.Outcome, res.Err)
	// Output:
	// outcome: ok
	// acks: [0]
	// retries: [{Index:1 DelaySeconds:30}]
	// sent to audit: {"attempts":1,"rendered":"/a"}
	// message 1 redelivered after 30s
	// outcome: aborted 未授权的QUEUE绑定：AUDIT
}

// A fetch handler runs on an HTTP request; the response is the one a client would get.
func ExampleRunFetch() {
	post := func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		body, _ := io.ReadAll(r.Body)
		if err := duilie.Send(ev, "TASKS", string(body), 0); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return nil
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	cfg := duilietest.Config{Bindings: map[string]string{"TASKS": "tasks"}}
	for _, body := range []string{`{ "url": "/a" }`, `{"url":`} {
		resp, res := duilietest.RunFetch(post, cfg, httptest.NewRequest("POST", "/tasks", strings.NewReader(body)))
		text, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %q sends=%v\n", resp.StatusCode, text, res.Sends)
	}
	// Output:
	// 202 "" sends=[{tasks {"url":"/a"} 0 false}]
	// 400 "消息体不是有效的 JSON 文字\n" sends=[]
}
