package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's answers to a publish, as nats-server writes them, read as stored or not.
func TestPubAckErr(t *testing.T) {
	for _, tc := range []struct {
		data   string
		header nats.Header
		err    string // "" when stored
	}{
		{data: `{"stream":"duilie-q","seq":1}`},
		{data: `{"stream":"duilie-q","domain":"hub","seq":18446744073709551615}`},
		{data: `{"stream":"duilie-q","seq":42,"duplicate":true}`},
		{data: `{"stream":"duilie-q", "seq":42}`}, // not the usual spelling: decoded in full
		{data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"},"stream":"duilie-q","seq":0}`, err: "wrong last sequence: 7"},
		{data: `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`, err: "maximum messages exceeded"},
		{data: `{"stream":"","seq":3}`, err: "names no stream"},
		{data: `{"stream":"x","seq":`, err: "unreadable answer"},
		{data: ``, header: nats.Header{"Status": {"503"}}, err: "no responders"},
		{data: ``, header: nats.Header{"Status": {"408"}, "Description": {"Request Timeout"}}, err: "status 408 Request Timeout"},
		{data: ``, err: "empty answer"},
	} {
		err := pubAckErr(&nats.Msg{Data: []byte(tc.data), Header: tc.header})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v, want stored", tc.data, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.data, err, tc.err)
		}
	}
}

// FuzzStoredAck: whatever storedAck takes for a stored message's acknowledgement, decoding it
// in full says so too. Seeds are in testdata/fuzz/FuzzStoredAck.
func FuzzStoredAck(f *testing.F) {
	f.Add([]byte(`{"stream":"duilie-q","seq":1}`))
	f.Add([]byte(`{"stream":"duilie-q","domain":"hub","seq":7,"duplicate":true}`))
	f.Add([]byte(`{"stream":"q","seq":99999999999999999999}`))
	f.Add([]byte(`{"error":{"code":503,"err_code":10077,"description":"x"},"stream":"q","seq":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !storedAck(data) {
			return
		}
		var ack struct {
			Error  json.RawMessage `json:"error"`
			Stream string          `json:"stream"`
			Seq    uint64          `json:"seq"`
		}
		if err := json.Unmarshal(data, &ack); err != nil || ack.Error != nil || ack.Stream == "" {
			t.Fatalf("%q taken as stored; decoded: %+v, %v", data, ack, err)
		}
	})
}

// A batch's wait ends when every message it published is answered, refused or not; a lost
// connection ends it at once, the unanswered messages of unknown fate; answers that come after
// change nothing.
func TestBatchAcksWait(t *testing.T) {
	a := &batchAcks{prefix: "_INBOX.t.", waits: map[string]*ackWait{}}
	stored := []byte(`{"stream":"s","seq":1}`)
	refused := []byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}`)

	token, w := a.start([]int{0, 2, 3}, 4) // index 1 is not published this time
	a.reply(&nats.Msg{Subject: a.subject(token, 0), Data: stored})
	a.reply(&nats.Msg{Subject: a.subject(token, 0), Data: refused}) // a second answer is ignored
	a.reply(&nats.Msg{Subject: a.subject(token, 1), Data: refused}) // not one of the batch's
	a.reply(&nats.Msg{Subject: a.subject(token, 3), Data: refused})
	select {
	case <-w.done:
		t.Fatal("done before index 2 was answered")
	default:
	}
	a.disconnected()
	select {
	case <-w.done:
	default:
		t.Fatal("a lost connection did not end the wait")
	}
	if len(w.refused) != 2 || w.refused[0] != 3 || w.refused[1] != 2 || !errors.Is(w.last, nats.ErrDisconnected) {
		t.Errorf("refused %v, last %v; want [3 2] and ErrDisconnected", w.refused, w.last)
	}
	a.reply(&nats.Msg{Subject: a.subject(token, 2), Data: stored}) // late: no panic, no change
	if len(a.waits) != 0 {
		t.Errorf("%d waits left", len(a.waits))
	}

	token, w = a.start(nil, 4)
	select {
	case <-w.done:
	default:
		t.Error("a wait for nothing is not done at once")
	}
	a.unsent(token, w, 0, errors.New("x")) // nothing to settle: no panic
}

// A single publish that no server answers for (no stream takes its subject yet, as while a
// cluster elects a stream's leader) is made again after a quarter second, twice, as
// js.PublishMsg does; then it fails saying so.
func TestPublishOneNoResponders(t *testing.T) {
	p := open(t, Config{})
	start := time.Now()
	err := p.publishOne(context.Background(), &nats.Msg{Subject: "nowhere", Data: []byte("1")})
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("publish to no stream: %v, want no responders", err)
	}
	if took := time.Since(start); took < 2*publishRetryWait || took > 5*time.Second {
		t.Errorf("gave up after %v, want after %d retries %v apart", took, publishRetries, publishRetryWait)
	}

	time.AfterFunc(300*time.Millisecond, func() {
		if _, err := p.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "LATER", Subjects: []string{"later"}, Storage: jetstream.MemoryStorage}); err != nil {
			t.Error(err)
		}
	})
	if err := p.publishOne(context.Background(), &nats.Msg{Subject: "later", Data: []byte("1")}); err != nil {
		t.Fatalf("publish to a stream made during the retries: %v", err)
	}
	st, err := p.js.Stream(context.Background(), "LATER")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("the stream holds %d messages, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.publishOne(ctx, &nats.Msg{Subject: "nowhere"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish whose ctx ends while retrying: %v", err)
	}
}
