package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

var ctx = context.Background()

func receive(t *testing.T, c platform.Consumer, max int) []platform.Delivery {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, max)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return ds
}

func settle(t *testing.T, c platform.Consumer, failed bool, ds []platform.Delivery, calls []platform.Call, actions []platform.Action) {
	t.Helper()
	s := platform.Settlement{Queue: "q", Failed: failed}
	for i, d := range ds {
		s.Messages = append(s.Messages, platform.Resolution{Delivery: d, Call: calls[i], Action: actions[i]})
	}
	if err := c.Settle(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func TestMiniflareRedeliversAcked(t *testing.T) {
	for _, miniflare := range []bool{false, true} {
		p := memory.New(memory.Options{Miniflare: miniflare})
		q, _ := p.Queue(ctx, "q")
		q.SendBatch(ctx, []platform.BatchItem{{Body: []byte("1"), ContentType: platform.JSON}, {Body: []byte("2"), ContentType: platform.JSON}})
		c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{})
		ds := receive(t, c, 10)
		settle(t, c, true, ds,
			[]platform.Call{{Kind: platform.AckCall}, {}},
			[]platform.Action{{Kind: platform.Done}, {Kind: platform.Redeliver}})
		again := receive(t, c, 10)
		want := 1
		if miniflare {
			want = 2
		}
		if len(again) != want || again[len(again)-1].Attempts != 2 {
			t.Errorf("miniflare=%v: redelivered %d messages %+v, want %d", miniflare, len(again), again, want)
		}
	}
}

func TestAckWaitRedelivers(t *testing.T) {
	p := memory.New(memory.Options{})
	q, _ := p.Queue(ctx, "q")
	q.Send(ctx, []byte(`"x"`), platform.SendOptions{ContentType: platform.JSON})
	c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{AckWait: 150 * time.Millisecond})
	first := receive(t, c, 1)
	// InProgress restarts the wait.
	time.Sleep(100 * time.Millisecond)
	c.InProgress(ctx, first)
	time.Sleep(100 * time.Millisecond)
	if s, _ := p.Stats(ctx); s[0].InFlight != 1 {
		t.Fatalf("expired despite InProgress: %+v", s)
	}
	again := receive(t, c, 1)
	if again[0].ID != first[0].ID || again[0].Attempts != 2 {
		t.Fatalf("after the ack wait: %+v", again)
	}
	// Settling the stale delivery changes nothing; the new one is settled normally.
	settle(t, c, false, first, []platform.Call{{}}, []platform.Action{{Kind: platform.Done}})
	if s, _ := p.Stats(ctx); s[0].InFlight != 1 {
		t.Fatalf("a stale settlement removed the live delivery: %+v", s)
	}
	settle(t, c, false, again, []platform.Call{{}}, []platform.Action{{Kind: platform.Done}})
	if s, _ := p.Stats(ctx); s[0] != (platform.QueueStats{Queue: "q"}) {
		t.Fatalf("stats %+v", s)
	}
}

func TestRejectAndAccept(t *testing.T) {
	p := memory.New(memory.Options{Record: true})
	q, _ := p.Queue(ctx, "q")
	p.RejectSends("q", "Queue is full")
	err := q.Send(ctx, []byte("1"), platform.SendOptions{ContentType: platform.JSON, DelaySeconds: 3})
	if err == nil || err.Error() != "Queue is full" {
		t.Fatalf("got %v", err)
	}
	p.Accept("q")
	if err := q.SendBatch(ctx, []platform.BatchItem{{Body: []byte("[1]"), ContentType: platform.JSON, DelaySeconds: 5}}); err != nil {
		t.Fatal(err)
	}
	calls := p.Calls()
	if len(calls) != 2 || calls[0].String() != `send(1, {"contentType":"json","delaySeconds":3})` ||
		calls[1].String() != `sendBatch([{"body":[1],"contentType":"json","delaySeconds":5}])` {
		t.Errorf("calls %v", calls)
	}
	if s, _ := p.Stats(ctx); s[0].Delayed != 1 || s[0].Ready != 0 {
		t.Errorf("a rejected send was stored: %+v", s)
	}
}

func TestRecordsSettledCalls(t *testing.T) {
	p := memory.New(memory.Options{Record: true})
	p.Put("q", platform.Message{ID: "a", Body: []byte("1"), ContentType: platform.JSON}, platform.Message{ID: "b", Body: []byte("2"), ContentType: platform.JSON}, platform.Message{ID: "c", Body: []byte("3"), ContentType: platform.JSON})
	c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{})
	ds := receive(t, c, 3)
	settle(t, c, false, ds,
		[]platform.Call{{Kind: platform.AckCall}, {Kind: platform.RetryCall}, {Kind: platform.RetryCall, DelaySeconds: 30}},
		[]platform.Action{{Kind: platform.Done}, {Kind: platform.Redeliver}, {Kind: platform.Redeliver, Delay: 30 * time.Second}})
	var got []string
	for _, c := range p.Calls() {
		got = append(got, c.String())
	}
	want := []string{"ack(a)", "retry(b)", `retry(c, {"delaySeconds":30})`}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("calls %q, want %q", got, want)
	}
	if len(p.Settlements()) != 1 {
		t.Errorf("settlements %+v", p.Settlements())
	}
}

func TestPutKeepsMessagesAsGiven(t *testing.T) {
	p := memory.New(memory.Options{})
	p.Put("q", platform.Message{ID: "any id \"", Timestamp: 42, Attempts: 5, Body: []byte{0, 1}, ContentType: platform.Bytes})
	c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{})
	d := receive(t, c, 1)[0]
	if d.ID != "any id \"" || d.Timestamp != 42 || d.Attempts != 5 || d.ContentType != platform.Bytes || string(d.Body) != "\x00\x01" {
		t.Errorf("got %+v", d.Message)
	}
}

func TestDeadLetterMove(t *testing.T) {
	p := memory.New(memory.Options{})
	q, _ := p.Queue(ctx, "q")
	q.Send(ctx, []byte(`{"a":1}`), platform.SendOptions{ContentType: platform.JSON})
	c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{})
	d := receive(t, c, 1)
	settle(t, c, true, d, []platform.Call{{}}, []platform.Action{{Kind: platform.DeadLetter, Queue: "dead"}})
	dc, _ := p.Consume(ctx, "dead", platform.ConsumerOptions{})
	dead := receive(t, dc, 1)[0]
	if dead.ID != d[0].ID || dead.Timestamp != d[0].Timestamp || string(dead.Body) != `{"a":1}` || dead.Attempts != 1 {
		t.Errorf("dead-lettered %+v from %+v", dead.Message, d[0].Message)
	}
}

func TestClose(t *testing.T) {
	p := memory.New(memory.Options{})
	c, _ := p.Consume(ctx, "q", platform.ConsumerOptions{})
	errc := make(chan error)
	go func() { _, err := c.Receive(ctx, 1); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	if err := <-errc; !errors.Is(err, platform.ErrClosed) {
		t.Errorf("a waiting Receive returned %v", err)
	}
	if _, err := p.Queue(ctx, "q"); !errors.Is(err, platform.ErrClosed) {
		t.Errorf("Queue after Close: %v", err)
	}
	if _, err := p.Queue(ctx, "Bad_Name"); err == nil {
		t.Error("a bad queue name was accepted")
	}
}
