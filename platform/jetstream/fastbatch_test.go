package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

func numberedItems(n int) []platform.BatchItem {
	items := make([]platform.BatchItem, n)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, "%d", i), ContentType: platform.JSON}
	}
	return items
}

// watchReplies records the reply subjects of the messages published on the queue's ready
// subject, as another subscriber sees them.
func watchReplies(t *testing.T, p *Platform, queue string) func() []string {
	t.Helper()
	nc, err := p.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	var replies []string
	if _, err := nc.Subscribe(readySubject(queue), func(m *nats.Msg) {
		mu.Lock()
		replies = append(replies, m.Reply)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), replies...)
	}
}

// A batch's messages go as one fast batch: each names, in its reply subject, the batch, its
// place in it and whether it starts, continues or ends it; the batch is stored whole, in
// order, each message once.
func TestFastBatch(t *testing.T) { testFastBatch(t, open(t, Config{})) }

// On a cluster, where each message of a fast batch is a proposal of the stream's raft group.
func TestClusterFastBatch(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts a 3-node cluster")
	}
	tc := startCluster(t, 1)
	testFastBatch(t, open(t, Config{URL: tc.url(tc.account(t)), Replicas: 3}))
}

func testFastBatch(t *testing.T, p *Platform) {
	q := queueOf(t, p, "q").(*queue)
	if !q.fast.Load() {
		t.Fatal("the queue's stream takes no fast batches")
	}
	replies := watchReplies(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	if err := q.SendBatch(context.Background(), numberedItems(100)); err != nil {
		t.Fatal(err)
	}
	ds := receiveAll(t, c, 100, 3*time.Second)
	for i, d := range ds {
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d is %s", i, d.Body)
		}
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	nothing(t, c, 300*time.Millisecond)

	got := replies()
	if len(got) != 100 {
		t.Fatalf("%d messages published, want 100", len(got))
	}
	batch := ""
	for k, r := range got {
		token, seq, ok := parseFastReply(r, p.acks.Load().fprefix)
		op := fastBatchAppend
		switch k {
		case 0:
			op = fastBatchStart
		case 99:
			op = fastBatchCommit
		}
		if batch == "" {
			batch = token
		}
		if !ok || token != batch || seq != k+1 || !strings.HasSuffix(r, "."+op+fastBatchSuffix) {
			t.Fatalf("message %d's reply subject %q: want batch %s, sequence %d, operation %s", k, r, batch, k+1, op)
		}
	}
}

// A stream that takes no fast batches (a server older than them, or one that stopped allowing
// them) refuses the batch at its start and stores none of it; its messages are then published
// one by one, each once, and the queue does not try again.
func TestFastBatchRefusedAtStart(t *testing.T) {
	log := &syncBuffer{}
	p := open(t, Config{Logger: slog.New(slog.NewTextHandler(log, nil))})
	q := queueOf(t, p, "q").(*queue)
	cfg := p.streamConfig("q")
	cfg.AllowBatchPublish = false
	if _, err := p.js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	replies := watchReplies(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	for range 2 {
		if err := q.SendBatch(context.Background(), numberedItems(20)); err != nil {
			t.Fatal(err)
		}
		ds := receiveAll(t, c, 20, 3*time.Second)
		for i, d := range ds {
			if string(d.Body) != fmt.Sprint(i) {
				t.Fatalf("message %d is %s", i, d.Body)
			}
		}
		settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
		nothing(t, c, 300*time.Millisecond)
	}
	if q.fast.Load() {
		t.Error("the queue still sends fast batches to a stream that refuses them")
	}
	if !strings.Contains(log.String(), "takes no fast batches") {
		t.Errorf("not logged:\n%s", log)
	}
	// The first batch: one fast batch, refused, then 20 one by one; the second: 20 one by one.
	fast := 0
	for _, r := range replies() {
		if strings.HasSuffix(r, fastBatchSuffix) {
			fast++
		}
	}
	if got := len(replies()); fast != 20 || got != 60 {
		t.Errorf("%d messages published, %d of them in fast batches; want 60 and 20", got, fast)
	}
}

// A message the engine refuses ends the fast batch there: its acknowledgement counts the
// messages stored before it, and the rest are published again, each once.
func TestFastBatchStopsAtRefusal(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", time.Minute)
	refused := 0
	testHookFanOut = func(i int, m *nats.Msg) error {
		if i == 30 && refused == 0 {
			refused++
			m.Header.Set("Nats-Expected-Last-Sequence", "1")
		}
		return nil
	}
	defer func() { testHookFanOut = nil }()
	if err := q.SendBatch(context.Background(), numberedItems(60)); err != nil || refused != 1 {
		t.Fatalf("batch with message 30 refused once: %v (refused %d)", err, refused)
	}
	testHookFanOut = nil
	ds := receiveAll(t, c, 60, 3*time.Second)
	seen := map[string]bool{}
	for k, d := range ds {
		if seen[string(d.Body)] {
			t.Fatalf("message %s delivered twice", d.Body)
		}
		seen[string(d.Body)] = true
		if k < 30 && string(d.Body) != fmt.Sprint(k) {
			t.Fatalf("message %d is %s, want the 30 stored before the refusal first, in order", k, d.Body)
		}
	}
	settle(t, c, "q", platform.Action{Kind: platform.Done}, ds...)
	nothing(t, c, 300*time.Millisecond)
}

func TestReadFastAnswer(t *testing.T) {
	answer := func(data string) *nats.Msg { return &nats.Msg{Data: []byte(data)} }
	for _, c := range []struct {
		m     *nats.Msg
		note  bool
		count int
		err   string // "" for none
	}{
		{answer(`{"type":"ack","seq":0,"msgs":500}`), true, 0, ""},
		{answer(`{"type":"gap","last_seq":3,"seq":5}`), true, 0, ""},
		{answer(`{"type":"err","seq":31,"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 100"}}`), true, 0, "wrong last sequence"},
		{answer(`{"stream":"DUILIE_q","seq":812,"batch":"abc","count":100}`), false, 100, ""},
		{answer(`{"stream":"DUILIE_q","domain":"hub","seq":812,"batch":"abc","count":30}`), false, 30, ""},
		{answer(`{"error":{"code":400,"err_code":10205,"description":"batch publish is disabled"},"stream":"DUILIE_q","seq":0}`), false, 0, "batch publish is disabled"},
		{answer(`{"stream":"DUILIE_q","seq":812}`), false, 0, "names no stream or count"},
		{answer(`{"stream":"DUILIE_q","seq":8`), false, 0, "unreadable answer"},
		{answer(``), false, 0, "empty answer"},
		{&nats.Msg{Header: nats.Header{"Status": []string{"503"}}}, false, 0, "status 503"},
	} {
		a := readFastAnswer(c.m)
		if a.note != c.note || a.count != c.count || (a.err == nil) != (c.err == "") || a.err != nil && !strings.Contains(a.err.Error(), c.err) {
			t.Errorf("readFastAnswer(%s) = %+v, want note %v, count %d, error %q", c.m.Data, a, c.note, c.count, c.err)
		}
	}
}

func TestParseFastReply(t *testing.T) {
	a := &batchAcks{fprefix: "_INBOX.x."}
	r := a.fastSubject("B1", 7, 100)
	if token, seq, ok := parseFastReply(r, a.fprefix); !ok || token != "B1" || seq != 7 {
		t.Fatalf("parseFastReply(%q) = %q, %d, %v", r, token, seq, ok)
	}
	for _, bad := range []string{
		"_INBOX.y.B1.500.fail.7.1.$FI", // another inbox
		"_INBOX.x.B1.500.fail.7.1",     // no suffix
		"_INBOX.x.B1.500.fail.0.1.$FI", // sequences start at 1
		"_INBOX.x.B1.500.fail.x.1.$FI",
		"_INBOX.x.B1.fail.7.1.$FI",
	} {
		if _, _, ok := parseFastReply(bad, a.fprefix); ok {
			t.Errorf("parseFastReply(%q) accepted", bad)
		}
	}
}

func TestRefusedAtStart(t *testing.T) {
	for code, want := range map[jetstream.ErrorCode][2]bool{
		errBatchDisabled:       {true, true},
		errBatchInvalidPattern: {true, true},
		errBatchInvalidID:      {true, false},
		errBatchTooManyInbound: {true, false},
		10071:                  {false, false}, // wrong last sequence: a message's own refusal
	} {
		err := fmt.Errorf("wrapped: %w", &jetstream.APIError{ErrorCode: code})
		if refusedAtStart(err) != want[0] || fastUnsupported(err) != want[1] {
			t.Errorf("code %d: refused at start %v, unsupported %v; want %v", code, refusedAtStart(err), fastUnsupported(err), want)
		}
	}
	if refusedAtStart(errors.New("plain")) {
		t.Error("a plain error counted as a refusal at the start")
	}
}

// A server that reads requests strictly refuses a stream naming a field it does not know, as
// one older than fast batches would refuse allow_batched; unknownField tells that refusal
// apart, here from a real server's answer, so that the queue is made without fast batches.
func TestUnknownField(t *testing.T) {
	p := open(t, Config{})
	req := []byte(`{"name":"STRICT","subjects":["strict"],"storage":"memory","allow_frobnicate":true}`)
	m, err := p.nc.Request("$JS.API.STREAM.CREATE.STRICT", req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error == nil {
		t.Fatalf("the server took an unknown field: %s (%v)", m.Data, err)
	}
	err = fmt.Errorf("create: %w", resp.Error)
	if !unknownField(err, "allow_frobnicate") {
		t.Errorf("unknownField(%v, allow_frobnicate) = false", err)
	}
	if unknownField(err, "allow_batched") || unknownField(errors.New(`invalid JSON: "allow_frobnicate"`), "allow_frobnicate") {
		t.Error("unknownField took another field, or an error that is not the server's")
	}
}
