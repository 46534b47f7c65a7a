package pagetask_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/examples/pagetask"
	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
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

// One batch with every kind of task: the platform hears an ack for the rendered, stale and
// malformed tasks and a retry after the backoff for the failed ones.
func TestConsumer(t *testing.T) {
	t.Setenv("PAGE_VERSION", "v9")
	p := memory.New(memory.Options{Record: true})
	h, _ := host.New(host.Config{Platform: p, Logger: quiet})
	msg := func(id string, attempts int, body string) platform.Message {
		return platform.Message{ID: id, Attempts: attempts, Timestamp: 1700000000000, Body: []byte(body), ContentType: platform.JSON}
	}
	p.Put("page-render",
		msg("rendered", 1, `{"kind":"page","url":"/a","version":"v9"}`),
		msg("stale", 1, `{"kind":"release","url":"/b","version":"v8"}`),
		msg("failed1", 1, `{"kind":"page","url":"/c","version":"v9","fail":true}`),
		msg("failed3", 3, `{"kind":"page","url":"/d","version":"v9","fail":true}`),
		msg("malformed", 1, `"just a string"`),
		msg("nokind", 1, `{"url":"/e","version":"v9"}`),
	)
	var outcomes []string
	c := &pagetask.Consumer{Logger: quiet, Observe: func(m *duilie.Message[pagetask.Task], o pagetask.Outcome) {
		outcomes = append(outcomes, m.ID+":"+string(o))
	}}
	cons, _ := p.Consume(context.Background(), "page-render", platform.ConsumerOptions{})
	ds, _ := cons.Receive(context.Background(), 10)
	if err := h.RunBatch(context.Background(), host.DefaultConsumerConfig("page-render"), cons, ds, c.Queue); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, call := range p.Calls() {
		calls = append(calls, call.String())
	}
	want := `ack(rendered) ack(stale) retry(failed1, {"delaySeconds":30}) retry(failed3, {"delaySeconds":120}) ack(malformed) ack(nokind)`
	if got := strings.Join(calls, " "); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.Join(outcomes, " "); got != "rendered:rendered stale:stale failed1:retried failed3:retried malformed:malformed nokind:malformed" {
		t.Errorf("outcomes: %s", got)
	}
}

// The default version is v8, and a Render error is a retry like "fail".
func TestConsumerDefaults(t *testing.T) {
	t.Setenv("PAGE_VERSION", "")
	p := memory.New(memory.Options{Record: true})
	h, _ := host.New(host.Config{Platform: p, Logger: quiet})
	p.Put("q",
		platform.Message{ID: "v8", Attempts: 1, Body: []byte(`{"kind":"page","url":"/a","version":"v8"}`), ContentType: platform.JSON},
		platform.Message{ID: "v7", Attempts: 2, Body: []byte(`{"kind":"page","url":"/b","version":"v7"}`), ContentType: platform.JSON},
	)
	c := &pagetask.Consumer{Logger: quiet, Backoff: func(int) int { return 1 },
		Render: func(ctx context.Context, t pagetask.Task, attempts int) error { return errors.New("no renderer") }}
	cons, _ := p.Consume(context.Background(), "q", platform.ConsumerOptions{})
	ds, _ := cons.Receive(context.Background(), 10)
	_ = h.RunBatch(context.Background(), host.DefaultConsumerConfig("q"), cons, ds, c.Queue)
	var calls []string
	for _, call := range p.Calls() {
		calls = append(calls, call.String())
	}
	if got := strings.Join(calls, " "); got != `retry(v8, {"delaySeconds":1}) ack(v7)` {
		t.Errorf("calls: %s", got)
	}
}

// The fetch handler: a form, a task sent as JSON or as form fields, the interface's exception
// as 400, an abort failing the event.
func TestFetch(t *testing.T) {
	p := memory.New(memory.Options{Record: true})
	h, _ := host.New(host.Config{Platform: p, Logger: quiet,
		Permissions: host.Permissions{Queue: []string{"PAGE_QUEUE"}}, Bindings: map[string]string{"PAGE_QUEUE": "page-render"}})
	serve := func(method, target, contentType, body string) (*httptest.ResponseRecorder, error) {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		err := h.Run(context.Background(), host.FetchEvent, nil, func(ev *host.Event) error { return pagetask.Fetch(ev, w, r) })
		return w, err
	}
	for _, c := range []struct {
		method, target, contentType, body string
		code                              int
		text                              string
	}{
		{"POST", "/tasks", "application/json", `{"kind":"page", "url":"/a", "version":"v8"}`, 202, "queued\n"},
		{"POST", "/tasks?delay=30", "application/x-www-form-urlencoded", `{"kind":"page","url":"/b","version":"v8"}`, 202, "queued\n"},
		{"POST", "/tasks", "application/x-www-form-urlencoded", `kind=release&url=%2Fc&version=v8&fail=1`, 202, "queued\n"},
		{"POST", "/tasks", "", `{"kind":`, 400, "消息体不是有效的 JSON 文字\n"},
		{"POST", "/tasks?delay=43201", "", `{}`, 400, "延迟秒数须在 0 至 43200 之间\n"},
		{"POST", "/tasks?delay=soon", "", `{}`, 400, "delay must be an integer number of seconds\n"},
		{"GET", "/tasks", "", "", 405, "method not allowed\n"},
		{"GET", "/nothing", "", "", 404, "404 page not found\n"},
	} {
		w, err := serve(c.method, c.target, c.contentType, c.body)
		if err != nil || w.Code != c.code || w.Body.String() != c.text {
			t.Errorf("%s %s %s: %v %d %q", c.method, c.target, c.body, err, w.Code, w.Body.String())
		}
	}
	var calls []string
	for _, call := range p.Calls() {
		calls = append(calls, call.String())
	}
	want := `send({"kind":"page","url":"/a","version":"v8"}, {"contentType":"json"})` + " " +
		`send({"kind":"page","url":"/b","version":"v8"}, {"contentType":"json","delaySeconds":30})` + " " +
		`send({"kind":"release","url":"/c","version":"v8","fail":true}, {"contentType":"json"})`
	if got := strings.Join(calls, " "); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}

	w, err := serve("GET", "/", "", "")
	if err != nil || w.Code != 200 || !strings.Contains(w.Body.String(), `<form method="post" action="/tasks">`) ||
		w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET /: %v %d %s", err, w.Code, w.Body.String())
	}

	// A deployment without the binding: the send aborts and the event fails.
	h2, _ := host.New(host.Config{Platform: p, Logger: quiet})
	r := httptest.NewRequest("POST", "/tasks", strings.NewReader(`{"kind":"page","url":"/a","version":"v8"}`))
	err = h2.Run(context.Background(), host.FetchEvent, nil, func(ev *host.Event) error { return pagetask.Fetch(ev, httptest.NewRecorder(), r) })
	var abort *host.Abort
	if !errors.As(err, &abort) || abort.Reason != "未授权的QUEUE绑定：PAGE_QUEUE" {
		t.Errorf("unpermitted: %v", err)
	}
}
