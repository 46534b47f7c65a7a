package pagetask_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
	"github.com/duilie/duilie/examples/pagetask"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

var quiet = slog.New(slog.DiscardHandler)

func TestBackoff(t *testing.T) {
	// min(300, 15·2^min(attempts,4))
	for attempts, want := range map[int]int{1: 30, 2: 60, 3: 120, 4: 240, 5: 240, 100: 240} {
		if got := pagetask.Backoff(attempts); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", attempts, got, want)
		}
	}
}

// One batch with every kind of task: an ack for the rendered, stale and malformed tasks and a
// retry after the backoff for the failed ones.
func TestConsumer(t *testing.T) {
	t.Setenv("PAGE_VERSION", "v9")
	c := &pagetask.Consumer{Logger: quiet}
	res := duilietest.RunQueue(c.Queue, duilietest.Config{},
		duilietest.Message{ID: "rendered", Body: `{"kind":"page","url":"/a","version":"v9"}`},
		duilietest.Message{ID: "stale", Body: `{"kind":"release","url":"/b","version":"v8"}`},
		duilietest.Message{ID: "failed1", Body: `{"kind":"page","url":"/c","version":"v9","fail":true}`},
		duilietest.Message{ID: "failed3", Attempts: 3, Body: `{"kind":"page","url":"/d","version":"v9","fail":true}`},
		duilietest.Message{ID: "malformed", Body: `"just a string"`},
		duilietest.Message{ID: "nokind", Body: `{"url":"/e","version":"v9"}`},
	)
	if res.Outcome != server.OK {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if got := res.Acks; len(got) != 4 || got[0] != 0 || got[1] != 1 || got[2] != 4 || got[3] != 5 {
		t.Errorf("acks %v, want [0 1 4 5]", got)
	}
	want := []duilietest.Retry{{Index: 2, DelaySeconds: 30}, {Index: 3, DelaySeconds: 120}}
	if len(res.Retries) != 2 || res.Retries[0] != want[0] || res.Retries[1] != want[1] {
		t.Errorf("retries %v, want %v", res.Retries, want)
	}
	if a := res.Messages[3].Action; a.Kind != platform.Redeliver || a.Delay.Seconds() != 120 {
		t.Errorf("failed3 action %+v", a)
	}
}

// The default version is v8, and a Render error is a retry like "fail".
func TestConsumerDefaults(t *testing.T) {
	t.Setenv("PAGE_VERSION", "")
	c := &pagetask.Consumer{Logger: quiet, Backoff: func(int) int { return 1 },
		Render: func(ctx context.Context, t pagetask.Task, attempts int) error { return errors.New("no renderer") }}
	res := duilietest.RunQueue(c.Queue, duilietest.Config{},
		duilietest.Message{ID: "v8", Body: `{"kind":"page","url":"/a","version":"v8"}`},
		duilietest.Message{ID: "v7", Attempts: 2, Body: `{"kind":"page","url":"/b","version":"v7"}`},
	)
	if len(res.Retries) != 1 || res.Retries[0] != (duilietest.Retry{Index: 0, DelaySeconds: 1}) || len(res.Acks) != 1 || res.Acks[0] != 1 {
		t.Errorf("retries %v acks %v", res.Retries, res.Acks)
	}
}

// The fetch handler: a form, a task sent as JSON or as form fields, the interface's exception
// as 400, an abort failing the event.
func TestFetch(t *testing.T) {
	deployed := duilietest.Config{Bindings: map[string]string{"PAGE_QUEUE": "page-render"}}
	var contentTypeOut string
	serve := func(cfg duilietest.Config, method, target, contentType, body string) (int, string, *duilietest.Result) {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		resp, res := duilietest.RunFetch(pagetask.Fetch, cfg, r)
		text, _ := io.ReadAll(resp.Body)
		contentTypeOut = resp.Header.Get("Content-Type")
		return resp.StatusCode, string(text), res
	}
	for _, c := range []struct {
		method, target, contentType, body string
		code                              int
		text                              string
		send                              string
		delay                             int
	}{
		{"POST", "/tasks", "application/json", `{"kind":"page", "url":"/a", "version":"v8"}`, 202, "queued\n", `{"kind":"page","url":"/a","version":"v8"}`, 0},
		{"POST", "/tasks?delay=30", "application/x-www-form-urlencoded", `{"kind":"page","url":"/b","version":"v8"}`, 202, "queued\n", `{"kind":"page","url":"/b","version":"v8"}`, 30},
		{"POST", "/tasks", "application/x-www-form-urlencoded", `kind=release&url=%2Fc&version=v8&fail=1`, 202, "queued\n", `{"kind":"release","url":"/c","version":"v8","fail":true}`, 0},
		{"POST", "/tasks", "", `{"kind":`, 400, "消息体不是有效的 JSON 文字\n", "", 0},
		{"POST", "/tasks?delay=43201", "", `{}`, 400, "延迟秒数须在 0 至 43200 之间\n", "", 0},
		{"POST", "/tasks?delay=soon", "", `{}`, 400, "delay must be an integer number of seconds\n", "", 0},
		{"GET", "/tasks", "", "", 405, "method not allowed\n", "", 0},
		{"GET", "/nothing", "", "", 404, "404 page not found\n", "", 0},
	} {
		code, text, res := serve(deployed, c.method, c.target, c.contentType, c.body)
		if res.Err != nil || code != c.code || text != c.text {
			t.Errorf("%s %s %s: %v %d %q", c.method, c.target, c.body, res.Err, code, text)
		}
		switch {
		case c.send == "" && len(res.Sends) != 0:
			t.Errorf("%s %s: sent %v", c.method, c.target, res.Sends)
		case c.send != "" && (len(res.Sends) != 1 || res.Sends[0] != duilietest.Send{Queue: "page-render", Body: c.send, DelaySeconds: c.delay}):
			t.Errorf("%s %s: sent %v, want %s delay %d", c.method, c.target, res.Sends, c.send, c.delay)
		}
	}

	code, text, _ := serve(deployed, "GET", "/", "", "")
	if code != 200 || !strings.Contains(text, `<form method="post" action="/tasks">`) || contentTypeOut != "text/html; charset=utf-8" {
		t.Errorf("GET /: %d %s", code, text)
	}

	// A deployment without the binding: the send aborts and the event fails.
	code, _, res := serve(duilietest.Config{}, "POST", "/tasks", "", `{"kind":"page","url":"/a","version":"v8"}`)
	var abort *duilie.Abort
	if code != 500 || res.Outcome != server.Aborted || !errors.As(res.Err, &abort) || abort.Reason != "未授权的QUEUE绑定：PAGE_QUEUE" {
		t.Errorf("unpermitted: %d %s %v", code, res.Outcome, res.Err)
	}
}
