package host_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// observed is a host on a memory platform whose reports a test reads.
type observed struct {
	t *testing.T
	p *memory.Platform
	h *host.Host

	mu      sync.Mutex
	reports []host.Report
	added   chan struct{}
}

func newObserved(t *testing.T, limit time.Duration) *observed {
	o := &observed{t: t, p: memory.New(memory.Options{}), added: make(chan struct{}, 100)}
	h, err := host.New(host.Config{Platform: o.p, TimeLimit: limit, Logger: quiet(),
		Permissions: host.Permissions{Queue: []string{"A", "GHOST"}}, Bindings: map[string]string{"A": "qa"},
		Observer: func(r host.Report) {
			o.mu.Lock()
			o.reports = append(o.reports, r)
			o.mu.Unlock()
			o.added <- struct{}{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	o.h = h
	return o
}

// consume runs a consumer of qa with handler until n reports have come, then stops it and
// returns every report.
func (o *observed) consume(cc host.ConsumerConfig, n int, handler host.Handler) []host.Report {
	o.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- o.h.Consume(ctx, cc, handler) }()
	for range n {
		select {
		case <-o.added:
		case <-time.After(10 * time.Second):
			o.t.Fatalf("%d reports of %d", len(o.all()), n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		o.t.Fatal(err)
	}
	return o.all()
}

func (o *observed) all() []host.Report {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]host.Report(nil), o.reports...)
}

func (o *observed) put(msgs ...platform.Message) { o.p.Put("qa", msgs...) }

func jsonMessage(id string, attempts int) platform.Message {
	return platform.Message{ID: id, Attempts: attempts, Timestamp: time.Now().Add(-time.Second).UnixMilli(),
		Body: []byte(`{"n":1}`), ContentType: platform.JSON}
}

func consumerOf(retries int, dlq string) host.ConsumerConfig {
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxBatchTimeout, cc.MaxRetries, cc.DeadLetterQueue, cc.RetryDelay = host.NoBatchTimeout, retries, dlq, 5*time.Second
	if retries == 0 {
		cc.MaxRetries = host.NoRetries
	}
	return cc
}

// One report per queue event, for every way it can end, with the fields of every message.
func TestEventReports(t *testing.T) {
	cases := []struct {
		name     string
		limit    time.Duration
		attempts int
		retries  int
		dlq      string
		handler  host.Handler
		outcome  host.Outcome
		err      string
		call     platform.Call
		action   platform.Action
	}{
		{"ok", 0, 1, 3, "", func(ev *host.Event) error { return nil }, host.OK, "",
			platform.Call{}, platform.Action{Kind: platform.Done}},
		{"acked", 0, 1, 3, "", func(ev *host.Event) error { return duilie.Ack(ev, 0) }, host.OK, "",
			platform.Call{Kind: platform.AckCall}, platform.Action{Kind: platform.Done}},
		{"retried", 0, 1, 3, "", func(ev *host.Event) error { return duilie.Retry(ev, 0, 30) }, host.OK, "",
			platform.Call{Kind: platform.RetryCall, DelaySeconds: 30}, platform.Action{Kind: platform.Redeliver, Delay: 30 * time.Second}},
		{"failed", 0, 1, 3, "", func(ev *host.Event) error { return errors.New("broken") }, host.Failed, "broken",
			platform.Call{}, platform.Action{Kind: platform.Redeliver, Delay: 5 * time.Second}},
		{"panicked", 0, 1, 3, "", func(ev *host.Event) error { panic("boom") }, host.Failed, "panic: boom",
			platform.Call{}, platform.Action{Kind: platform.Redeliver, Delay: 5 * time.Second}},
		{"aborted", 0, 1, 3, "", func(ev *host.Event) error { return duilie.Send(ev, "B", "1", 0) }, host.Aborted, "未授权的QUEUE绑定：B",
			platform.Call{}, platform.Action{Kind: platform.Redeliver, Delay: 5 * time.Second}},
		{"time limit", 50 * time.Millisecond, 1, 3, "", func(ev *host.Event) error { <-ev.Context().Done(); return nil }, host.Aborted, "执行超过时限",
			platform.Call{}, platform.Action{Kind: platform.Redeliver, Delay: 5 * time.Second}},
		{"dead-lettered", 0, 2, 1, "dead", func(ev *host.Event) error { return errors.New("again") }, host.Failed, "again",
			platform.Call{}, platform.Action{Kind: platform.DeadLetter, Queue: "dead"}},
		{"dropped", 0, 2, 1, "", func(ev *host.Event) error { return duilie.Retry(ev, 0, 0) }, host.OK, "",
			platform.Call{Kind: platform.RetryCall}, platform.Action{Kind: platform.Drop}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := newObserved(t, c.limit)
			o.put(jsonMessage("m1", c.attempts))
			start := time.Now()
			n := 2 // the event's start, and its end
			if c.name == "aborted" {
				n = 3 // the send is reported too
			}
			reports := o.consume(consumerOf(c.retries, c.dlq), n, c.handler)
			r, ok := reports[n-1].(*host.EventReport)
			if !ok {
				t.Fatalf("report %T", reports[n-1])
			}
			if s, ok := reports[0].(*host.StartReport); !ok || s.ID != r.ID || s.Kind != host.QueueEvent || s.Queue != "qa" ||
				s.Batch != 1 || s.Start.Before(r.Start) || s.Start.After(r.Start.Add(r.Duration)) {
				t.Errorf("first report %#v, want the start of event %s", reports[0], r.ID)
			}
			if r.Kind != host.QueueEvent || r.Queue != "qa" || r.Batch != 1 || len(r.ID) != 16 || r.Outcome != c.outcome ||
				r.Start.Before(start) || r.Duration <= 0 || r.Duration > 5*time.Second || r.SettleErr != nil {
				t.Errorf("report %+v", r)
			}
			if c.err == "" && r.Err != nil || c.err != "" && (r.Err == nil || !strings.HasPrefix(r.Err.Error(), c.err)) {
				t.Errorf("err %v, want %q", r.Err, c.err)
			}
			if c.name == "panicked" {
				var pe *host.PanicError
				if !errors.As(r.Err, &pe) || !strings.Contains(string(pe.Stack), "observer_test.go") {
					t.Errorf("a panic's failure carries its stack: %#v", r.Err)
				}
			}
			m := r.Messages[0]
			if m.ID != "m1" || m.Attempts != c.attempts || m.Call != c.call || m.Action != c.action ||
				m.Lag <= 0 || m.Lag > 5*time.Second {
				t.Errorf("message report %+v, want call %+v action %+v", m, c.call, c.action)
			}
		})
	}
}

// Messages resolved without an event are reported too: exhausted before delivery, and
// released at a halt.
func TestSettleReports(t *testing.T) {
	o := newObserved(t, 0)
	o.put(jsonMessage("old", 5))
	reports := o.consume(consumerOf(1, ""), 1, func(*host.Event) error { t.Error("the program ran"); return nil })
	r, ok := reports[0].(*host.SettleReport)
	if !ok || r.Queue != "qa" || r.Reason != host.Exhausted || len(r.Messages) != 1 || r.Err != nil ||
		r.Messages[0] != (host.MessageReport{ID: "old", Attempts: 5, Action: platform.Action{Kind: platform.Drop}, Result: host.Dropped}) {
		t.Fatalf("report %#v", reports[0])
	}

	// Halted while a batch fills: its messages go back, reported as released.
	o = newObserved(t, 0)
	o.put(jsonMessage("late", 1))
	cc := consumerOf(3, "")
	cc.MaxBatchSize, cc.MaxBatchTimeout = 10, time.Second
	done := make(chan error)
	go func() { done <- o.h.Consume(context.Background(), cc, func(*host.Event) error { return nil }) }()
	time.Sleep(200 * time.Millisecond) // the batch is filling
	o.h.Halt()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all := o.all()
	if len(all) != 1 {
		t.Fatalf("reports %v", all)
	}
	if r, ok := all[0].(*host.SettleReport); !ok || r.Reason != host.Halting || r.Messages[0].ID != "late" ||
		r.Messages[0].Action.Kind != platform.Release {
		t.Fatalf("report %#v", all[0])
	}
}

// Every send that passed its checks is reported, accepted or not; fetch events are reported
// with their request and status.
func TestSendAndFetchReports(t *testing.T) {
	o := newObserved(t, 0)
	o.p.RejectSends("qa", "Queue is full")
	h := o.h.Fetch(func(ev *host.Event, w http.ResponseWriter, r *http.Request) error {
		if err := duilie.SendBatch(ev, "A", `[{"body":{"a":1}},{"body":[2],"delaySeconds":5}]`); err == nil {
			t.Error("the platform refused, but the send succeeded")
		}
		o.p.Accept("qa")
		if err := duilie.Send(ev, "A", ` {"x" : 1} `, 30); err != nil {
			return err
		}
		if err := duilie.Send(ev, "A", "not json", 0); err == nil {
			t.Error("a body that is not JSON was sent")
		}
		w.WriteHeader(http.StatusAccepted)
		return duilie.Send(ev, "GHOST", "1", 0)
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/tasks", nil))
	if w.Code != http.StatusAccepted {
		t.Errorf("status %d", w.Code)
	}
	var sends []*host.SendReport
	var fetch *host.EventReport
	for _, r := range o.all() {
		switch r := r.(type) {
		case *host.SendReport:
			sends = append(sends, r)
		case *host.EventReport:
			fetch = r
		}
	}
	if len(sends) != 3 {
		t.Fatalf("%d send reports, want 3 (a body that fails its checks reaches no binding)", len(sends))
	}
	batch, one, ghost := sends[0], sends[1], sends[2]
	if !batch.Batch || batch.Queue != "qa" || batch.Binding != "A" || batch.Messages != 2 || batch.Bytes != len(`{"a":1}`)+len(`[2]`) ||
		batch.Delayed != 1 || batch.Err == nil || batch.Err.Error() != "队列批量发送失败：Queue is full" || batch.Event != fetch.ID {
		t.Errorf("batch report %+v", batch)
	}
	if one.Batch || one.Queue != "qa" || one.Messages != 1 || one.Bytes != len(`{"x":1}`) || one.Delayed != 1 || one.Err != nil {
		t.Errorf("send report %+v", one)
	}
	var ab *duilie.Abort
	if ghost.Queue != "" || ghost.Binding != "GHOST" || !errors.As(ghost.Err, &ab) {
		t.Errorf("aborted send report %+v", ghost)
	}
	if fetch.Kind != host.FetchEvent || fetch.Method != "POST" || fetch.Path != "/tasks" || fetch.Status != http.StatusAccepted ||
		fetch.Outcome != host.Aborted || fetch.Err.Error() != "绑定不存在：GHOST" {
		t.Errorf("fetch report %+v", fetch)
	}
}

// A message's lag runs from when it became deliverable: its enqueue time, or the end of its
// delay.
func TestLag(t *testing.T) {
	o := newObserved(t, 0)
	if err := o.h.Do(context.Background(), func(ev *host.Event) error {
		if err := duilie.Send(ev, "A", `"now"`, 0); err != nil {
			return err
		}
		return duilie.Send(ev, "A", `"later"`, 1)
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cc := consumerOf(3, "")
	cc.MaxBatchSize = 1
	lags := map[int]time.Duration{}
	for _, r := range o.consume(cc, 4, func(*host.Event) error { return nil }) {
		if r, ok := r.(*host.EventReport); ok {
			lags[len(lags)] = r.Messages[0].Lag
		}
	}
	// The first waited 300 ms from its enqueue; the second was handled as soon as it was due.
	if lags[0] < 300*time.Millisecond || lags[0] > 2*time.Second || lags[1] > 300*time.Millisecond {
		t.Errorf("lags %v", lags)
	}
}

// A platform that pushes its batches (a Worker's queue handler) hands them to Deliver, which
// settles and reports them exactly as Consume does.
func TestDeliverSettlesAndReports(t *testing.T) {
	p := memory.New(memory.Options{Record: true})
	var reports []host.Report
	h, err := host.New(host.Config{Platform: p, Logger: quiet(), Observer: func(r host.Report) { reports = append(reports, r) }})
	if err != nil {
		t.Fatal(err)
	}
	p.Put("qa", jsonMessage("m0", 1), jsonMessage("m1", 1))
	c, err := p.Consume(context.Background(), "qa", platform.ConsumerOptions{MaxBatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ds, err := c.Receive(context.Background(), 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("received %d, %v", len(ds), err)
	}
	boom := errors.New("boom")
	err = h.Deliver(context.Background(), host.DefaultConsumerConfig("qa"), c, ds, func(ev *host.Event) error {
		if err := duilie.Ack(ev, 0); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Deliver = %v, want the event's failure", err)
	}
	s := p.Settlements()
	if len(s) != 1 || !s[0].Failed || s[0].Messages[0].Action.Kind != platform.Done || s[0].Messages[1].Action.Kind != platform.Redeliver {
		t.Fatalf("settlements = %+v", s)
	}
	if len(reports) != 2 {
		t.Fatalf("reports = %+v", reports)
	}
	r, ok := reports[1].(*host.EventReport)
	if !ok || r.Kind != host.QueueEvent || r.Outcome != host.Failed || r.Batch != 2 || r.Queue != "qa" || !errors.Is(r.Err, boom) {
		t.Fatalf("report = %+v", reports[1])
	}
	if s, ok := reports[0].(*host.StartReport); !ok || s.ID != r.ID || s.Batch != 2 {
		t.Fatalf("first report = %+v, want the event's start", reports[0])
	}
}
