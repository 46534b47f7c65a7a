package duilietest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

// read returns a handler that reads its batch into *text and then runs then.
func read(text *string, then duilie.Handler) duilie.Handler {
	return func(ev *duilie.Event) error {
		var err error
		if *text, err = duilie.ReadBatch(ev); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(ev)
	}
}

// A Message's zero fields have their documented defaults; given ones reach the program as they
// are.
func TestMessages(t *testing.T) {
	var text string
	stamp := time.UnixMilli(1234567890123)
	res := duilietest.RunQueue(read(&text, nil), duilietest.Config{},
		duilietest.Message{Body: ` {"a" : 1E2} `},
		duilietest.Message{ID: "given", Body: "plain text", Attempts: 3, Timestamp: stamp, ContentType: platform.Text},
		duilietest.Message{Attempts: -2, Body: "[]"})
	want := `{"queue":"queue","messages":[` +
		`{"id":"m0","attempts":1,"timestamp":1700000000000,"body":{"a":100}},` +
		`{"id":"given","attempts":3,"timestamp":1234567890123,"body":"plain text"},` +
		`{"id":"m2","attempts":1,"timestamp":1700000000000,"body":[]}]}`
	if text != want {
		t.Errorf("ReadBatch:\n got %s\nwant %s", text, want)
	}
	if !duilietest.DefaultTimestamp.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("DefaultTimestamp %v", duilietest.DefaultTimestamp)
	}
	if res.Outcome != server.OK || res.Err != nil || res.Acks != nil || res.Retries != nil || res.Sends != nil {
		t.Errorf("result %+v", res)
	}
	for i, m := range res.Messages {
		if m.ID != []string{"m0", "given", "m2"}[i] || m.Call.Kind != platform.NoCall || m.Action.Kind != platform.Done {
			t.Errorf("message %d: %+v, want done without a call", i, m)
		}
	}
}

// Bindings name the queues a handler may send to, all permitted; sends come back normalized,
// with their delays, in order.
func TestBindings(t *testing.T) {
	cfg := duilietest.Config{Bindings: map[string]string{"AUDIT": "audit", "TASKS": "tasks"}}
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		if err := duilie.Send(ev, "TASKS", `{ "url" : "/a" }`, 0); err != nil {
			return err
		}
		if err := duilie.SendBatch(ev, "AUDIT", `[{"body":1,"delaySeconds":1e1},{"body":"two"}]`); err != nil {
			return err
		}
		return duilie.SendValue(ev, "TASKS", map[string]int{"n": 3}, 30)
	}, cfg, duilietest.Message{Body: "1"})
	want := []duilietest.Send{
		{Queue: "tasks", Body: `{"url":"/a"}`},
		{Queue: "audit", Body: "1", DelaySeconds: 10, Batch: true},
		{Queue: "audit", Body: `"two"`, Batch: true},
		{Queue: "tasks", Body: `{"n":3}`, DelaySeconds: 30},
	}
	if res.Err != nil || fmt.Sprint(res.Sends) != fmt.Sprint(want) {
		t.Errorf("sends %+v (%v), want %+v", res.Sends, res.Err, want)
	}
	// A binding the deployment lacks aborts; a check that fails first is an exception.
	var checked error
	res = duilietest.RunQueue(func(ev *duilie.Event) error {
		checked = duilie.Send(ev, "ELSEWHERE", "{", 0)
		return duilie.Send(ev, "ELSEWHERE", "1", 0)
	}, cfg, duilietest.Message{Body: "1"})
	var ex *duilie.Exception
	if !errors.As(checked, &ex) || ex.Message != "消息体不是有效的 JSON 文字" {
		t.Errorf("a bad body to an unknown binding: %v", checked)
	}
	wantAbort(t, res, "未授权的QUEUE绑定：ELSEWHERE")
}

// Permissions, when given, is the allow-list: a binding must be listed and configured.
func TestPermissions(t *testing.T) {
	send := func(binding string) duilie.Handler {
		return func(ev *duilie.Event) error { return duilie.Send(ev, binding, "1", 0) }
	}
	cfg := duilietest.Config{Bindings: map[string]string{"BOTH": "both", "CONFIGURED": "configured"},
		Permissions: []string{"BOTH", "LISTED"}}
	if res := duilietest.RunQueue(send("BOTH"), cfg, duilietest.Message{Body: "1"}); res.Err != nil || len(res.Sends) != 1 || res.Sends[0].Queue != "both" {
		t.Errorf("permitted and configured: %v, sends %v", res.Err, res.Sends)
	}
	wantAbort(t, duilietest.RunQueue(send("CONFIGURED"), cfg, duilietest.Message{Body: "1"}), "未授权的QUEUE绑定：CONFIGURED")
	wantAbort(t, duilietest.RunQueue(send("LISTED"), cfg, duilietest.Message{Body: "1"}), "绑定不存在：LISTED")
	// An empty list permits nothing.
	cfg.Permissions = []string{}
	wantAbort(t, duilietest.RunQueue(send("BOTH"), cfg, duilietest.Message{Body: "1"}), "未授权的QUEUE绑定：BOTH")
}

func wantAbort(t *testing.T, res *duilietest.Result, reason string) {
	t.Helper()
	var ab *duilie.Abort
	if res.Outcome != server.Aborted || !errors.As(res.Err, &ab) || ab.Reason != reason {
		t.Errorf("outcome %s, err %v, want the abort %q", res.Outcome, res.Err, reason)
	}
	if res.Sends != nil {
		t.Errorf("an aborted send reached the platform: %v", res.Sends)
	}
}

// The consumer's settings decide each message's action by SPEC §7: acks are done, retries
// redelivered after their delay or retry_delay, and a failed event's messages redelivered,
// dead-lettered or dropped once max_retries is spent.
func TestConsumerDecisions(t *testing.T) {
	cc := server.DefaultConsumerConfig("tasks")
	cc.MaxRetries, cc.RetryDelay, cc.DeadLetterQueue = 2, 10*time.Second, "dead"
	var queue string
	calls := func(fail bool) duilie.Handler {
		return func(ev *duilie.Event) error {
			b, _ := duilie.ReadBatchOf[string](ev)
			queue = b.Queue
			for i, m := range b.Messages {
				switch m.Body {
				case "ack":
					_ = duilie.Ack(ev, i)
				case "retry 30":
					_ = duilie.Retry(ev, i, 30)
				case "retry":
					_ = duilie.Retry(ev, i, 0)
				}
			}
			if fail {
				return errors.New("render failed")
			}
			return nil
		}
	}
	msgs := []duilietest.Message{
		{Body: `"ack"`, Attempts: 3}, {Body: `"retry 30"`}, {Body: `"retry"`}, {Body: `"none"`},
		{Body: `"retry"`, Attempts: 3}, {Body: `"none"`, Attempts: 3},
	}
	redeliver := func(d time.Duration) platform.Action { return platform.Action{Kind: platform.Redeliver, Delay: d} }
	done, dead := platform.Action{Kind: platform.Done}, platform.Action{Kind: platform.DeadLetter, Queue: "dead"}
	for _, tc := range []struct {
		name    string
		fail    bool
		cc      server.ConsumerConfig
		actions []platform.Action
	}{
		{"ended normally", false, cc, []platform.Action{done, redeliver(30 * time.Second), redeliver(10 * time.Second), done, dead, done}},
		{"failed", true, cc, []platform.Action{done, redeliver(30 * time.Second), redeliver(10 * time.Second), redeliver(10 * time.Second), dead, dead}},
		{"failed without a dead-letter queue", true, func() server.ConsumerConfig { c := cc; c.DeadLetterQueue = ""; return c }(),
			[]platform.Action{done, redeliver(30 * time.Second), redeliver(10 * time.Second), redeliver(10 * time.Second), {Kind: platform.Drop}, {Kind: platform.Drop}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := duilietest.RunQueue(calls(tc.fail), duilietest.Config{Consumer: tc.cc}, msgs...)
			if queue != "tasks" {
				t.Errorf("the batch came from %q, want the consumer's queue", queue)
			}
			if fmt.Sprint(res.Acks) != "[0]" || fmt.Sprint(res.Retries) != "[{1 30} {2 0} {4 0}]" {
				t.Errorf("acks %v, retries %v", res.Acks, res.Retries)
			}
			if want := map[bool]server.Outcome{false: server.OK, true: server.Failed}[tc.fail]; res.Outcome != want {
				t.Errorf("outcome %s, want %s", res.Outcome, want)
			}
			for i, m := range res.Messages {
				if m.Action != tc.actions[i] {
					t.Errorf("message %d (%s, attempts %d): action %+v, want %+v", i, msgs[i].Body, msgs[i].Attempts, m.Action, tc.actions[i])
				}
			}
		})
	}
}

// Past Config.TimeLimit the event is aborted with 执行超过时限, and its messages are delivered
// again; the default limit is 30 s.
func TestTimeLimit(t *testing.T) {
	late := make(chan error, 1)
	start := time.Now()
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		<-ev.Context().Done()
		late <- duilie.Send(ev, "LATE", "1", 0)
		return nil
	}, duilietest.Config{TimeLimit: 50 * time.Millisecond, Bindings: map[string]string{"LATE": "late"}}, duilietest.Message{Body: "1"})
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("a 50 ms limit ended the event after %v", d)
	}
	wantAbort(t, res, "执行超过时限")
	if err := <-late; err == nil || err.Error() != "执行超过时限" {
		t.Errorf("a send after the limit: %v", err)
	}
	if res.Messages[0].Action.Kind != platform.Redeliver {
		t.Errorf("action %+v", res.Messages[0].Action)
	}
	var deadline time.Time
	duilietest.RunQueue(func(ev *duilie.Event) error { deadline, _ = ev.Context().Deadline(); return nil },
		duilietest.Config{}, duilietest.Message{Body: "1"})
	if d := time.Until(deadline); d < 29*time.Second || d > 30*time.Second {
		t.Errorf("the default time limit ends the event in %v, want 30 s", d)
	}
}

// RejectSends makes a queue's platform refuse sends with the given message; refused sends are
// no Sends, other queues still accept.
func TestRejectSends(t *testing.T) {
	var errs []error
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		errs = append(errs, duilie.Send(ev, "FULL", "1", 0), duilie.SendBatch(ev, "FULL", `[{"body":1}]`), duilie.Send(ev, "OPEN", "2", 0))
		return nil
	}, duilietest.Config{Bindings: map[string]string{"FULL": "full", "OPEN": "open"}, RejectSends: map[string]string{"full": "Queue is full"}},
		duilietest.Message{Body: "1"})
	for i, want := range []string{"队列发送失败：Queue is full", "队列批量发送失败：Queue is full"} {
		var ex *duilie.Exception
		if !errors.As(errs[i], &ex) || ex.Message != want {
			t.Errorf("send %d: %v, want the exception %q", i, errs[i], want)
		}
	}
	if errs[2] != nil || res.Outcome != server.OK || fmt.Sprint(res.Sends) != fmt.Sprint([]duilietest.Send{{Queue: "open", Body: "2"}}) {
		t.Errorf("err %v, outcome %s, sends %+v", errs[2], res.Outcome, res.Sends)
	}
}

// A handler that panics fails its event as the host's runtime does: the panic is the failure,
// and the messages are delivered again.
func TestPanics(t *testing.T) {
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		_ = duilie.Ack(ev, 0)
		panic("render failed")
	}, duilietest.Config{}, duilietest.Message{Body: "1"}, duilietest.Message{Body: "2"})
	var pe *server.PanicError
	if res.Outcome != server.Failed || !errors.As(res.Err, &pe) || pe.Value != "render failed" || len(pe.Stack) == 0 {
		t.Fatalf("outcome %s, err %#v", res.Outcome, res.Err)
	}
	if res.Messages[0].Action.Kind != platform.Done || res.Messages[1].Action.Kind != platform.Redeliver {
		t.Errorf("messages %+v: the acked one done, the other redelivered", res.Messages)
	}
	resp, res := duilietest.RunFetch(func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		panic("no response")
	}, duilietest.Config{}, httptest.NewRequest("GET", "/", nil))
	if resp.StatusCode != http.StatusInternalServerError || res.Outcome != server.Failed || !errors.As(res.Err, &pe) {
		t.Errorf("fetch: status %d, outcome %s, err %v", resp.StatusCode, res.Outcome, res.Err)
	}
}

// RunFetch returns the handler's response and what it did; a failed event answers 500 unless
// the response had begun.
func TestRunFetch(t *testing.T) {
	cfg := duilietest.Config{Bindings: map[string]string{"TASKS": "tasks"}}
	body := func(resp *http.Response) string { b, _ := io.ReadAll(resp.Body); return string(b) }
	var kind duilie.Kind
	resp, res := duilietest.RunFetch(func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		kind = ev.Kind()
		text, _ := io.ReadAll(r.Body)
		if err := duilie.Send(ev, "TASKS", string(text), 5); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusAccepted)
		_, err := io.WriteString(w, "queued "+r.URL.Path)
		return err
	}, cfg, httptest.NewRequest("POST", "/tasks", strings.NewReader(`{ "url":"/a" }`)))
	if kind != duilie.FetchEvent || resp.StatusCode != http.StatusAccepted || body(resp) != "queued /tasks" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("kind %s, response %d %q %v", kind, resp.StatusCode, body(resp), resp.Header)
	}
	if res.Outcome != server.OK || res.Err != nil || fmt.Sprint(res.Sends) != fmt.Sprint([]duilietest.Send{{Queue: "tasks", Body: `{"url":"/a"}`, DelaySeconds: 5}}) || res.Messages != nil {
		t.Errorf("result %+v", res)
	}

	failure := errors.New("no renderer")
	for _, tc := range []struct {
		name    string
		handler duilie.FetchHandler
		status  int
		outcome server.Outcome
	}{
		{"error before a response", func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error { return failure }, 500, server.Failed},
		{"abort", func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			return duilie.Send(ev, "NOWHERE", "1", 0)
		}, 500, server.Aborted},
		{"abort swallowed", func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			_ = duilie.Send(ev, "NOWHERE", "1", 0)
			return nil
		}, 500, server.Aborted},
		{"error after the response began", func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusNoContent)
			return failure
		}, 204, server.Failed},
		{"nothing written", func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error { return nil }, 200, server.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, res := duilietest.RunFetch(tc.handler, cfg, httptest.NewRequest("GET", "/", nil))
			if resp.StatusCode != tc.status || res.Outcome != tc.outcome || (tc.outcome == server.OK) != (res.Err == nil) {
				t.Errorf("status %d, outcome %s (%v), want %d, %s", resp.StatusCode, res.Outcome, res.Err, tc.status, tc.outcome)
			}
			if tc.outcome == server.Failed && !errors.Is(res.Err, failure) {
				t.Errorf("err %v, want the handler's", res.Err)
			}
		})
	}
}

// A batch or a Config that cannot run is a mistake in the test: RunQueue panics, naming it.
func TestRunQueueMistakes(t *testing.T) {
	ok := func(ev *duilie.Event) error { return nil }
	many := make([]duilietest.Message, 101)
	for _, tc := range []struct {
		name string
		run  func()
		want string
	}{
		{"no messages", func() { duilietest.RunQueue(ok, duilietest.Config{}) }, "a batch has 1–100 messages, not 0"},
		{"101 messages", func() { duilietest.RunQueue(ok, duilietest.Config{}, many...) }, "a batch has 1–100 messages, not 101"},
		{"a consumer out of range", func() {
			duilietest.RunQueue(ok, duilietest.Config{Consumer: server.ConsumerConfig{Queue: "tasks", MaxBatchSize: 101}}, duilietest.Message{Body: "1"})
		}, "MaxBatchSize"},
		{"a time limit out of range", func() {
			duilietest.RunQueue(ok, duilietest.Config{TimeLimit: time.Hour}, duilietest.Message{Body: "1"})
		}, "TimeLimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.HasPrefix(s, "duilietest: ") || !strings.Contains(s, tc.want) {
					t.Errorf("panic %v, want one naming %q", p, tc.want)
				}
			}()
			tc.run()
		})
	}
}
