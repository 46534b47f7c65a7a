package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// A serving process finishes, at its sweeps, a batch whose sender stopped after storing its
// envelope (a local command attached to the serve, killed half-way), once the envelope is
// staleBatch old; until then it leaves it to its sender.
func TestSweepFinishesStaleBatch(t *testing.T) {
	sweepEvery = 50 * time.Millisecond
	defer func() { sweepEvery = time.Minute; staleBatch.Store(int64(30 * time.Second)) }()
	log := &syncBuffer{}
	p := open(t, Config{Serve: true, Logger: slog.New(slog.NewTextHandler(log, nil))})
	q := queueOf(t, p, "q")
	items := make([]platform.BatchItem, 10)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
	}
	testHookFanOut = func(i int, m *nats.Msg) error {
		if i == 4 {
			return errors.New("stopped")
		}
		return nil
	}
	err := q.SendBatch(context.Background(), items)
	testHookFanOut = nil
	if err == nil {
		t.Fatal("the stopped batch succeeded")
	}
	time.Sleep(300 * time.Millisecond) // several sweeps: the envelope is younger than staleBatch
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 4})
	staleBatch.Store(int64(100 * time.Millisecond))
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 10})
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(log.String(), "are complete now\" batches=1") {
			return fmt.Errorf("not logged:\n%s", log)
		}
		return nil
	})
}

// SendBatch deletes its envelope without waiting for the engine's answer; the envelope is gone
// soon after, and Close waits for the deletions still unanswered, so that the next open has no
// batch to finish (which would deliver again any of its messages consumed meanwhile).
func TestSendBatchDropsEnvelope(t *testing.T) {
	dir := t.TempDir()
	p := open(t, Config{DataDir: dir})
	q := queueOf(t, p, "q")
	items := make([]platform.BatchItem, 20)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
	}
	ctx := context.Background()
	if err := q.SendBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if n := envelopesOf(t, p, "q"); n != 0 {
			return fmt.Errorf("%d envelopes after the batch", n)
		}
		return nil
	})

	for range 50 {
		if err := q.SendBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil { // at once: some deletions are still unanswered
		t.Fatal(err)
	}
	log := &syncBuffer{}
	p = open(t, Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if strings.Contains(log.String(), "complete now") {
		t.Fatalf("the open after Close found batches to finish:\n%s", log)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 51 * 20})
}

// envelopesOf is how many batch envelopes the queue's stream holds.
func envelopesOf(t testing.TB, p *Platform, queue string) uint64 {
	t.Helper()
	st, err := p.js.Stream(context.Background(), streamName(queue))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(envelopeSubject(queue)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[envelopeSubject(queue)]
}

func TestDropErr(t *testing.T) {
	answer := func(data string) *nats.Msg { return &nats.Msg{Data: []byte(data)} }
	status := &nats.Msg{Header: nats.Header{"Status": []string{"503"}}}
	for _, c := range []struct {
		m    *nats.Msg
		want string // "" for nil
	}{
		{answer(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","success":true}`), ""},
		{answer(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","error":{"code":404,"err_code":10037,"description":"no message found"}}`), ""},
		{answer(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`), ""},
		{answer(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","error":{"code":500,"err_code":10057,"description":"message delete failed"}}`), "message delete failed"},
		{answer(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response"}`), "neither made nor refused"},
		{answer(`{"success":`), "unreadable answer"},
		{answer(``), "empty answer"},
		{status, "status 503"},
	} {
		err := dropErr(c.m)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("dropErr(%q, %v) = %v, want %q", c.m.Data, c.m.Header, err, c.want)
		}
	}
}

// A deletion whose answer a lost connection took is forgotten at once: Close does not wait for
// it, and the log says the envelope may be left for the next open.
func TestEnvelopeDropsDisconnected(t *testing.T) {
	p := open(t, Config{})
	nc, err := p.Dial()
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	d, err := newEnvelopeDrops(nc, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.seq++
	d.pending[d.seq] = droppedEnvelope{"q", 7} // asked for, never answered
	d.mu.Unlock()
	start := time.Now()
	nc.Close()
	if n := d.wait(10 * time.Second); n != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("after the connection closed: %d unanswered, waited %v", n, time.Since(start))
	}
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(log.String(), "envelopes=1") {
			return fmt.Errorf("not logged:\n%s", log)
		}
		return nil
	})
}

// wait returns when the last deletion asked for is answered, or after its limit with the
// number still unanswered.
func TestEnvelopeDropsWait(t *testing.T) {
	p := open(t, Config{})
	d, err := newEnvelopeDrops(p.nc, quiet)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.pending[1], d.pending[2] = droppedEnvelope{"q", 1}, droppedEnvelope{"q", 2}
	d.mu.Unlock()
	if n := d.wait(100 * time.Millisecond); n != 2 {
		t.Fatalf("wait with nothing answered: %d unanswered, want 2", n)
	}
	time.AfterFunc(100*time.Millisecond, func() { d.done(1, nil) })
	time.AfterFunc(300*time.Millisecond, func() { d.done(2, nil) })
	start := time.Now()
	if n := d.wait(10 * time.Second); n != 0 {
		t.Fatalf("wait: %d unanswered, want 0", n)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("wait returned after %v, want when the last answer came (300ms)", waited)
	}
}
