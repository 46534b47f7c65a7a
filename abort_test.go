package duilie_test

import (
	"errors"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

// A binding that is not permitted, or not configured, aborts the event (SPEC §8.2): the event
// fails even when the program swallows the abort, every later call returns the same abort, and
// nothing reaches the platform (§8.3).
func TestBindingAborts(t *testing.T) {
	d := newDeployment(t, 0)
	var later []error
	failure := d.run(func(ev *duilie.Event) error {
		first := duilie.Send(ev, forbidden, "1", 0)
		_, read := duilie.ReadBatch(ev)
		later = []error{first, duilie.Send(ev, binding, "1", 0), duilie.SendValue(ev, binding, 1, 0),
			duilie.SendBatch(ev, binding, `[{"body":1}]`), read, duilie.Ack(ev, 0), duilie.Retry(ev, 0, 0),
			duilie.Send(ev, binding, "{", 0), duilie.Send(ev, "", "1", 0)} // even a failing check returns the abort
		return nil
	})
	wantAbort(t, failure, "未授权的QUEUE绑定：SECRET")
	for _, err := range later {
		wantAbort(t, err, "未授权的QUEUE绑定：SECRET")
	}
	wantAbort(t, d.run(func(ev *duilie.Event) error { return duilie.SendBatch(ev, unbound, `[{"body":1}]`) }), "绑定不存在：GHOST")
	d.wantCalls(t)
	// The next event is not aborted: aborts belong to their event.
	if err := d.send(binding, "1", 0); err != nil {
		t.Fatalf("a send in the next event: %v", err)
	}
	d.wantCalls(t, `send(1, {"contentType":"json"})`)
}

// The first abort wins (SPEC §8.3): a second binding abort, the time limit and a handler's own
// error do not replace it.
func TestFirstAbortWins(t *testing.T) {
	d := newDeployment(t, 100*time.Millisecond)
	second := make(chan error, 1)
	failure := d.run(func(ev *duilie.Event) error {
		_ = duilie.Send(ev, forbidden, "1", 0)
		second <- duilie.Send(ev, unbound, "1", 0)
		<-ev.Context().Done() // past the time limit
		return errors.New("the handler's own failure")
	})
	wantAbort(t, failure, "未授权的QUEUE绑定：SECRET")
	wantAbort(t, <-second, "未授权的QUEUE绑定：SECRET")

	// In a queue event, an abort of ReadBatch stands against a later binding abort.
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		_, _ = duilie.ReadBatch(ev)
		return duilie.Send(ev, "NOWHERE", "1", 0)
	}, duilietest.Config{}, duilietest.Message{Body: nested(33, "0")})
	wantAbort(t, res.Err, "宿主结果嵌套过深")
}

// An abort fails a queue event whatever the handler returns: its acked messages are done and
// the others are delivered again (SPEC §7, §8.3).
func TestAbortFailsQueueEvent(t *testing.T) {
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		_ = duilie.Ack(ev, 0)
		_ = duilie.Send(ev, "NOWHERE", "1", 0)
		return nil
	}, duilietest.Config{}, duilietest.Message{Body: `"acked"`}, duilietest.Message{Body: `"left"`})
	wantAbort(t, res.Err, "未授权的QUEUE绑定：NOWHERE")
	if res.Outcome != server.Aborted {
		t.Errorf("outcome %s", res.Outcome)
	}
	if a := res.Messages[0].Action.Kind; a != platform.Done {
		t.Errorf("the acked message: action %v, want done", a)
	}
	if a := res.Messages[1].Action.Kind; a != platform.Redeliver {
		t.Errorf("the message left: action %v, want redeliver", a)
	}
}

// Past the time limit an event is aborted with 执行超过时限 and fails, queue and fetch events
// alike; the program's later calls return the abort (SPEC §8.1).
func TestTimeLimit(t *testing.T) {
	late := make(chan error, 1)
	start := time.Now()
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		<-ev.Context().Done()
		time.Sleep(20 * time.Millisecond)
		late <- duilie.Ack(ev, 0)
		return nil
	}, duilietest.Config{TimeLimit: 200 * time.Millisecond}, duilietest.Message{Body: `"slow"`})
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("the event ended after %v, before its time limit", d)
	}
	wantAbort(t, res.Err, "执行超过时限")
	wantAbort(t, <-late, "执行超过时限")
	if res.Outcome != server.Aborted || res.Messages[0].Action.Kind != platform.Redeliver || res.Messages[0].Call.Kind != platform.NoCall {
		t.Errorf("outcome %s, message %+v: want aborted, redelivered, the late ack not counted", res.Outcome, res.Messages[0])
	}

	d := newDeployment(t, 200*time.Millisecond)
	var lateSend error
	sent := make(chan struct{})
	failure := d.run(func(ev *duilie.Event) error {
		defer close(sent)
		<-ev.Context().Done()
		lateSend = duilie.Send(ev, binding, "1", 0)
		return nil
	})
	wantAbort(t, failure, "执行超过时限")
	<-sent
	wantAbort(t, lateSend, "执行超过时限")
	d.wantCalls(t)
}
