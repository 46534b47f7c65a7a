package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// flip inverts n bytes of blk starting off bytes into the payload of message i of filled's queue,
// and returns the stream sequence of that message. With keepTime the file keeps its modification
// time, as a disk that rots keeps it.
func flip(t *testing.T, blk string, i, off, n int, keepTime bool) uint64 {
	t.Helper()
	info, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, fmt.Appendf(nil, `{"i":%d,`, i))
	if at < 0 {
		t.Fatalf("message %d is not in %s", i, blk)
	}
	for k := range n {
		b[at+off+k] ^= 0xff
	}
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if keepTime {
		os.Chtimes(blk, info.ModTime(), info.ModTime())
	}
	return uint64(i) + 1 // filled sends nothing else to q first
}

// drain receives and acks every message the consumer has to give, and returns how many.
func drain(t *testing.T, p *Platform) int {
	t.Helper()
	c, err := p.Consume(context.Background(), "q", platform.ConsumerOptions{MaxBatchSize: 100, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ds, err := c.Receive(ctx, 100)
		cancel()
		if err != nil {
			return n
		}
		n += len(ds)
		if err := settleAll(c, ds); err != nil {
			t.Fatal(err)
		}
	}
}

// 20 bytes flipped in the middle of one message's record, with the engine stopped: the engine
// would go on counting the message and never deliver it. The next open checks the block file
// that changed, counts the message lost, names its sequence, logs an ERROR, and no longer counts
// it as ready; the 299 others are delivered.
func TestDamageRecord(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 300)
	seq := flip(t, filepath.Join(stream, "msgs", "1.blk"), 150, 10, 20, false)
	p, s, log := reopen(t, dir)
	want := fmt.Sprintf("1 message lost (sequence %d), its stored records do not match their checksums (1.blk at byte ", seq)
	if s.Ready != 299 || s.Lost != 1 || !strings.Contains(s.Damage, want) {
		t.Errorf("stats %+v; want 299 ready and %q", s, want)
	}
	if !strings.Contains(log.String(), `level=ERROR msg="jetstream: queue damaged" queue=q lost=1 damage="`+want) {
		t.Errorf("log:\n%s", log)
	}
	if n := drain(t, p); n != 299 {
		t.Errorf("%d delivered, want 299", n)
	}
	if s := statsOf(t, p, "q"); s.Ready != 0 || s.InFlight != 0 || s.Lost != 1 {
		t.Errorf("after the rest was consumed: %+v", s)
	}
	p.Close()
	// Reported at the next open too, and not found twice.
	_, s, log = reopen(t, dir)
	if s.Ready != 0 || s.Lost != 1 || strings.Contains(log.String(), "queue damaged") {
		t.Errorf("at the next open: %+v\n%s", s, log)
	}
}

// A record whose length is damaged: the records from there on in the block cannot be told apart,
// and every message among them is lost, named by its sequences.
func TestDamageRecordLength(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 300)
	blk := filepath.Join(stream, "msgs", "1.blk")
	b, _ := os.ReadFile(blk)
	at := bytes.Index(b, []byte(`{"i":200,`))
	// Back to the record's start: its subject comes 22 bytes after it, and the headers after that.
	rec := bytes.LastIndex(b[:at], []byte(readySubject("q"))) - recordHeaderSize
	b[rec+3] = 0x7f // a length of over 2 GB
	os.WriteFile(blk, b, 0o600)
	info, _ := os.Stat(blk)
	bad, _, lastGood, err := checkBlock(streamName("q"), blockFile{1, blk, info})
	if err != nil || len(bad) != 1 || !bad[0].cut || bad[0].offset != int64(rec) || lastGood != 200 {
		t.Errorf("checkBlock: %+v, last good %d, %v; want the rest cut from byte %d after sequence 200", bad, lastGood, err, rec)
	}
	// The engine notices this one itself, and drops the rest of the block.
	p, s, _ := reopen(t, dir)
	if s.Lost < 1 || s.Ready+s.Lost != 300 {
		t.Errorf("stats %+v", s)
	}
	if n := drain(t, p); int64(n) != s.Ready {
		t.Errorf("%d delivered, %d ready", n, s.Ready)
	}
}

// A disk that rots leaves the file's modification time: the open does not look, but the serving
// process's sweep, once the damaged message is the first of its stream (everything before it
// consumed), finds it, records it and logs an ERROR.
func TestDamageRecordFoundServing(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 50)
	seq := flip(t, filepath.Join(stream, "msgs", "1.blk"), 20, 10, 20, true)
	log := &syncBuffer{}
	p := open(t, Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if s := statsOf(t, p, "q"); s.Lost != 0 || s.Ready != 50 {
		t.Fatalf("at open: %+v", s)
	}
	if n := drain(t, p); n != 49 {
		t.Errorf("%d delivered, want 49", n)
	}
	if err := p.checkFirstMessages(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := statsOf(t, p, "q")
	if s.Lost != 1 || s.Ready != 0 || !strings.Contains(s.Damage, fmt.Sprintf("(sequence %d), its stored records do not match their checksums, found when its first message could not be read", seq)) {
		t.Errorf("after the sweep: %+v", s)
	}
	if strings.Count(log.String(), `level=ERROR msg="jetstream: queue damaged" queue=q lost=1`) != 1 {
		t.Errorf("log:\n%s", log)
	}
	// Found once.
	if err := p.checkFirstMessages(context.Background()); err != nil || strings.Count(log.String(), "queue damaged") != 1 {
		t.Errorf("a second sweep: %v\n%s", err, log)
	}
}

func statsOf(t *testing.T, p *Platform, queue string) platform.QueueStats {
	t.Helper()
	for _, s := range stats(t, p) {
		if s.Queue == queue {
			return s
		}
	}
	t.Fatalf("no queue %s", queue)
	return platform.QueueStats{}
}
