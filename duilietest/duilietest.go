// Package duilietest runs a program's handlers in tests, the way River's rivertest does for
// workers: one call runs a queue handler on a batch you give it, or a fetch handler on an HTTP
// request, on the same host and interface as duilie serve (permissions, bindings, aborts, the
// time limit, SPEC §7's resolution), and returns what the program did.
//
//	res := duilietest.RunQueue(myQueueHandler, duilietest.Config{},
//		duilietest.Message{Body: `{"url":"/a"}`},
//		duilietest.Message{Body: `{"url":""}`, Attempts: 3})
//	// res.Outcome, res.Acks, res.Retries, res.Sends, res.Messages[i].Action
//
// Messages live in an in-memory platform for the one call; nothing is delivered again.
package duilietest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// DefaultTimestamp is the enqueue time of a Message that gives none: 2023-11-14T22:13:20Z.
var DefaultTimestamp = time.UnixMilli(1700000000000).UTC()

// Message is one message of a batch handed to RunQueue.
type Message struct {
	// ID is the message id; "" means m0, m1, … by index.
	ID string
	// Body is the message body: a JSON text (or, with ContentType, anything).
	Body string
	// Attempts is the delivery count, from 1; 0 means 1. A message with more attempts than the
	// consumer's max_retries + 1 runs too, though the consumer runtime would dead-letter or drop
	// it undelivered.
	Attempts int
	// Timestamp is the enqueue time; the zero time means DefaultTimestamp.
	Timestamp time.Time
	// ContentType is how Body is encoded; "" means JSON. Text, bytes and v8 bodies are what
	// foreign producers send (SPEC §6).
	ContentType platform.ContentType
}

// Config is the deployment a handler runs in. The zero value has no bindings, a batch from
// queue "queue" with the default consumer settings, and a 30 s time limit.
type Config struct {
	// Bindings maps the bindings the handler may send to onto their queues; all are permitted.
	Bindings map[string]string
	// Permissions, when not nil, is the allow-list instead: a binding in Bindings but not here
	// aborts (未授权的QUEUE绑定), one here but not in Bindings aborts too (绑定不存在).
	Permissions []string
	// Consumer is the consumer of the batch's queue: its name, max_retries, retry_delay and
	// dead_letter_queue decide each message's Action. Its zero settings are the defaults, and
	// an empty Queue is "queue".
	Consumer server.ConsumerConfig
	// TimeLimit is the event's time limit; 0 means 30 s.
	TimeLimit time.Duration
	// RejectSends makes sends to these queues fail with the given message, as a platform that
	// refuses them (队列发送失败：<message>).
	RejectSends map[string]string
}

// Result is what a handler did in its event.
type Result struct {
	// Outcome is how the event ended: server.OK, server.Failed or server.Aborted.
	Outcome server.Outcome
	// Err is why the event failed (a *duilie.Abort when aborted, a *server.PanicError when the
	// handler panicked); nil when it ended normally.
	Err error
	// Acks are the indexes of the messages the program acked, in index order.
	Acks []int
	// Retries are the messages the program retried, in index order.
	Retries []Retry
	// Messages is what became of each message of a queue event, in index order.
	Messages []MessageResult
	// Sends are the messages the platform accepted, in order, each with its normalized body.
	// Sends refused by Config.RejectSends are not among them.
	Sends []Send
}

// Retry is one explicit retry.
type Retry struct {
	Index        int
	DelaySeconds int // 0: retry() with no options, the consumer's retry_delay
}

// MessageResult is what became of one message: the program's first call on it and the
// host's decision (done, redeliver after a delay, dead-letter, drop).
type MessageResult struct {
	ID     string
	Call   platform.Call
	Action platform.Action
}

// Send is one message as the platform accepted it.
type Send struct {
	Queue        string
	Body         string // the normalized JSON text
	DelaySeconds int
	Batch        bool // sent by 批量发送队列消息
}

// env is one run's platform and host.
type env struct {
	p      *memory.Platform
	h      *host.Host
	cc     server.ConsumerConfig
	reject map[string]string
	mu     sync.Mutex
	report *server.EventReport
}

func newEnv(cfg Config) (*env, error) {
	p := memory.New(memory.Options{Record: true})
	for q, msg := range cfg.RejectSends {
		p.RejectSends(q, msg)
	}
	perms := cfg.Permissions
	if perms == nil {
		for b := range cfg.Bindings {
			perms = append(perms, b)
		}
		slices.Sort(perms)
	}
	e := &env{p: p, cc: cfg.Consumer, reject: cfg.RejectSends}
	if e.cc.Queue == "" {
		e.cc.Queue = "queue"
	}
	h, err := host.New(host.Config{
		Platform:    p,
		Permissions: server.Permissions{Queue: perms},
		Bindings:    cfg.Bindings,
		TimeLimit:   cfg.TimeLimit,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: func(r server.Report) {
			if er, ok := r.(*server.EventReport); ok {
				e.mu.Lock()
				e.report = er
				e.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	e.h = h
	return e, nil
}

// RunQueue runs handler as one queue event on a batch of msgs (1–100 of them, as the consumer
// runtime delivers) and returns what it did. A Config or batch that cannot run panics: it is a
// mistake in the test.
func RunQueue(handler duilie.Handler, cfg Config, msgs ...Message) *Result {
	if len(msgs) == 0 || len(msgs) > 100 {
		panic(fmt.Sprintf("duilietest: a batch has 1–100 messages, not %d", len(msgs)))
	}
	e, err := newEnv(cfg)
	if err != nil {
		panic("duilietest: " + err.Error())
	}
	if err := e.cc.Validate(); err != nil {
		panic("duilietest: " + err.Error())
	}
	ds := make([]platform.Delivery, len(msgs))
	for i, m := range msgs {
		d := platform.Message{ID: m.ID, Body: []byte(m.Body), Attempts: max(m.Attempts, 1), ContentType: m.ContentType}
		if d.ID == "" {
			d.ID = fmt.Sprintf("m%d", i)
		}
		ts := m.Timestamp
		if ts.IsZero() {
			ts = DefaultTimestamp
		}
		d.Timestamp = ts.UnixMilli()
		if d.ContentType == "" {
			d.ContentType = platform.JSON
		}
		ds[i] = platform.Delivery{Message: d}
	}
	s, failure := e.h.RunBatch(context.Background(), e.cc, ds, handler)
	res := e.result(failure)
	for i, r := range s.Messages {
		res.Messages = append(res.Messages, MessageResult{ID: r.ID, Call: r.Call, Action: r.Action})
		switch r.Call.Kind {
		case platform.AckCall:
			res.Acks = append(res.Acks, i)
		case platform.RetryCall:
			res.Retries = append(res.Retries, Retry{Index: i, DelaySeconds: r.Call.DelaySeconds})
		}
	}
	return res
}

// RunFetch runs handler as one fetch event for the request r, through the same runtime as the
// fetch listener (a failed event answers 500 unless the response had begun), and returns the
// response and what the handler did.
func RunFetch(handler duilie.FetchHandler, cfg Config, r *http.Request) (*http.Response, *Result) {
	e, err := newEnv(cfg)
	if err != nil {
		panic("duilietest: " + err.Error())
	}
	w := httptest.NewRecorder()
	e.h.Fetch(handler).ServeHTTP(w, r)
	e.mu.Lock()
	rep := e.report
	e.mu.Unlock()
	var failure error
	if rep != nil {
		failure = rep.Err
	}
	return w.Result(), e.result(failure)
}

// result is the outcome and the sends of a run, which it ends: the platform is closed.
func (e *env) result(failure error) *Result {
	defer e.p.Close()
	res := &Result{Outcome: host.OutcomeOf(failure), Err: failure}
	for _, c := range e.p.Calls() {
		if _, refused := e.reject[c.Queue]; refused {
			continue // the platform recorded the call and refused it
		}
		switch c.Op {
		case "send":
			res.Sends = append(res.Sends, Send{Queue: c.Queue, Body: string(c.Body), DelaySeconds: c.Options.DelaySeconds})
		case "sendBatch":
			for _, it := range c.Items {
				res.Sends = append(res.Sends, Send{Queue: c.Queue, Body: string(it.Body), DelaySeconds: it.DelaySeconds, Batch: true})
			}
		}
	}
	return res
}
