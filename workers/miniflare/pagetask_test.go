package miniflare_test

import (
	"strings"
	"testing"
)

// TestPageTask builds examples/page-go, unchanged, as a Worker and runs it as it would be
// deployed: one Worker, its fetch handler sending to page-render and its queue handler consuming
// it, with the consumer settings of examples/page-go/duilie.toml. Its lines reach the console by
// level, and the host writes none of its own.
func TestPageTask(t *testing.T) {
	needMiniflare(t)
	dir := worker(t, "../../examples/page-go")
	h := startHarness(t, spec{Workers: []workerSpec{{Name: "page-go", Dir: dir, Consume: true}}})

	if r := h.fetch("page-go", "GET", "/", ""); r.status != 200 || !strings.Contains(r.body, `<form method="post" action="/tasks">`) {
		t.Fatalf("GET / = %d %q", r.status, r.body)
	}

	// fetch /tasks enqueues; the consumer renders and acks.
	if r := h.fetch("page-go", "POST", "/tasks", `{"kind":"page","url":"/release/x","version":"v8"}`); r.status != 202 || r.body != "queued\n" {
		t.Fatalf("POST /tasks = %d %q", r.status, r.body)
	}
	h.waitLog("(info) rendered ", "queue=page-render", "attempts=1", "url=/release/x")

	// A failing task is retried with its backoff: 30 s after its first delivery.
	if r := h.fetch("page-go", "POST", "/tasks", `{"kind":"release","url":"/release/y","version":"v8","fail":true}`); r.status != 202 {
		t.Fatalf("POST /tasks = %d %q", r.status, r.body)
	}
	h.waitLog("(error) render failed: retry ", "attempts=1", "url=/release/y", "delay_s=30")

	// The interface's checks answer the client.
	if r := h.fetch("page-go", "POST", "/tasks", `{"$句柄":1}`); r.status != 400 || r.body != "消息体含有不属于 JSON 的值或宿主专用记号\n" {
		t.Fatalf("POST /tasks with a marker = %d %q", r.status, r.body)
	}
	if r := h.fetch("page-go", "POST", "/tasks?delay=43201", `{"kind":"page","url":"/z","version":"v8"}`); r.status != 400 || r.body != "延迟秒数须在 0 至 43200 之间\n" {
		t.Fatalf("POST /tasks?delay=43201 = %d %q", r.status, r.body)
	}

	// The calls reach the messages: the backoff grows with attempts, stale and rendered tasks
	// are acked.
	r := h.queue("page-go", "page-render",
		message{ID: "p1", Timestamp: 1, Attempts: 3, Body: map[string]any{"kind": "page", "url": "/a", "version": "v8", "fail": true}},
		message{ID: "p2", Timestamp: 1, Attempts: 1, Body: map[string]any{"kind": "page", "url": "/b", "version": "v7"}},
		message{ID: "p3", Timestamp: 1, Attempts: 1, Body: map[string]any{"kind": "release", "url": "/c", "version": "v8"}})
	if r.Outcome != "ok" || len(r.RetryMessages) != 1 || r.RetryMessages[0].MsgID != "p1" || r.RetryMessages[0].DelaySeconds == nil ||
		*r.RetryMessages[0].DelaySeconds != 120 || strings.Join(r.ExplicitAcks, ",") != "p2,p3" {
		t.Fatalf("result = %+v", r)
	}
	h.waitLog("(info) stale task: acked ", "id=p2", "version=v7", "current=v8")

	// duilie.toml does not turn the host's line per event on: the console is the program's.
	for _, l := range h.logs() {
		if strings.Contains(l, " event ") && strings.Contains(l, "outcome=") {
			t.Errorf("the host wrote a line per event: %q", l)
		}
	}
}
