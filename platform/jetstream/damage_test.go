package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// filled is a data directory with n messages in queue q, closed cleanly, and the path of its
// stream's directory. The messages are sent one by one (in a pipeline): a batch's envelope in
// the damaged part of a block would be finished again at the next open (see batch.go), which
// is not what these tests count.
func filled(t *testing.T, n int) (dir, stream string) {
	t.Helper()
	dir = t.TempDir()
	p := open(t, Config{DataDir: dir})
	q, err := p.queue(context.Background(), "q")
	if err != nil {
		t.Fatal(err)
	}
	queueOf(t, p, "other")
	for i := range n {
		m := q.message(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()}, fmt.Appendf(nil, `{"i":%d,"pad":"%0100d"}`, i, 0), 0)
		if _, err := p.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("the messages were not all acknowledged within 10 s")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(streamsDir(dir), streamName("q"))
}

// reopen opens dir again, logging to the returned buffer, and returns q's stats.
func reopen(t *testing.T, dir string) (*Platform, platform.QueueStats, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	p := open(t, Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(log, nil))})
	for _, s := range stats(t, p) {
		if s.Queue == "q" {
			return p, s, log
		}
	}
	t.Fatalf("no queue q in %+v", stats(t, p))
	return nil, platform.QueueStats{}, nil
}

// A block file cut in half loses the messages past the cut: the engine rebuilds the stream
// from what is left without a word; duilie counts them against the last clean close, logs an
// ERROR with the count and the sequences, and reports them in Stats, at every later open too.
func TestDamageCutBlock(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 20)
	blk := filepath.Join(stream, "msgs", "1.blk")
	info, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blk, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	p, s, log := reopen(t, dir)
	lost := int64(20) - s.Ready
	if lost < 5 || s.Lost != lost || !strings.Contains(s.Damage, fmt.Sprintf("%d messages lost (sequences %d–20)", lost, 21-lost)) {
		t.Errorf("stats %+v; want the %d lost messages", s, lost)
	}
	if want := fmt.Sprintf(`level=ERROR msg="jetstream: queue damaged" queue=q lost=%d damage="%d messages lost (sequences %d–20), missing since duilie last stopped cleanly`, lost, lost, 21-lost); !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant %s", log, want)
	}
	p.Close()
	// Reported at every open, until lost.json is deleted; logged only when found.
	p, again, log := reopen(t, dir)
	if again.Lost != lost || strings.Contains(log.String(), "queue damaged") {
		t.Errorf("at the next open: %+v, log:\n%s", again, log)
	}
	p.Close()
	os.Remove(filepath.Join(dir, lostFileName))
	_, cleared, _ := reopen(t, dir)
	if cleared.Lost != 0 || cleared.Damage != "" {
		t.Errorf("after lost.json was deleted: %+v", cleared)
	}
}

// 4 KiB of garbage in the middle of a block file: the messages from there on in that block
// are lost, and counted.
func TestDamageGarbageInBlock(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 2000)
	blk := filepath.Join(stream, "msgs", "1.blk")
	info, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(blk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i * 7)
	}
	f.WriteAt(junk, info.Size()/2)
	f.Close()
	_, s, log := reopen(t, dir)
	if s.Lost == 0 || s.Lost != 2000-s.Ready || !strings.Contains(log.String(), "queue damaged") {
		t.Errorf("stats %+v (of 2000 messages); log:\n%s", s, log)
	}
}

// A stream whose metadata is damaged is not loaded: the queue is reported as one that cannot
// be loaded, and no send creates it anew over its stored messages; once its file is restored
// it loads again, with every message.
func TestDamageMetadata(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 20)
	meta := filepath.Join(stream, "meta.inf")
	good, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(meta, []byte("{garbage"), 0o600)
	p, s, log := reopen(t, dir)
	if !strings.Contains(s.Damage, "its stored messages cannot be loaded") || !strings.Contains(s.Damage, "checksums do not match") {
		t.Errorf("stats %+v", s)
	}
	if !strings.Contains(log.String(), `level=ERROR msg="jetstream: queue damaged" queue=q lost=0`) {
		t.Errorf("log:\n%s", log)
	}
	_, err = p.Queue(context.Background(), "q")
	if err == nil || !platform.IsPermanent(err) || !strings.Contains(err.Error(), "duilie will not create it anew over them") {
		t.Errorf("Queue(q) = %v", err)
	}
	if other, err := p.Queue(context.Background(), "other"); err != nil || other.Send(context.Background(), []byte("1"), platform.SendOptions{ContentType: platform.JSON}) != nil {
		t.Errorf("another queue: %v", err)
	}
	p.Close()
	os.WriteFile(meta, good, 0o600)
	_, s, _ = reopen(t, dir)
	if s.Ready != 20 || s.Damage != "" {
		t.Errorf("restored: %+v", s)
	}
}

// The account needs a clean close: after a crash (no state.json) nothing is counted, and an
// undamaged store reports nothing.
func TestNoDamage(t *testing.T) {
	t.Parallel()
	dir, _ := filled(t, 20)
	p, s, log := reopen(t, dir)
	if s.Lost != 0 || s.Damage != "" || strings.Contains(log.String(), "damaged") {
		t.Errorf("%+v\n%s", s, log)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json is kept while the engine runs: %v", err)
	}
	p.Close()
	if _, err := os.Stat(filepath.Join(dir, stateFileName)); err != nil {
		t.Errorf("no state.json after a clean close: %v", err)
	}
}

// What the engine reports lost (on a cluster, read at every Stats) becomes the queue's lost
// count and its description.
func TestEngineReport(t *testing.T) {
	found := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, ok := engineReport(nil, found); ok {
		t.Error("nothing lost, but a report")
	}
	f, ok := engineReport(&jetstream.LostStreamData{Msgs: []uint64{7, 5, 9}, Bytes: 300}, found)
	s := platform.QueueStats{Queue: "q"}
	damage{"q": {f}}.stats(&s, 0)
	if !ok || s.Lost != 3 || s.Damage != "3 messages lost (sequences 5–9), reported lost by the engine, found 2026-01-02T03:04:05Z" {
		t.Errorf("%v %+v", ok, s)
	}
}

// A stream the engine keeps offline (its metadata has a setting this engine does not know,
// written by a newer one, say) is listed but cannot be read: the queue is one that cannot be
// loaded, and the other queues are there as ever.
func TestStreamCannotBeRead(t *testing.T) {
	t.Parallel()
	dir, stream := filled(t, 5)
	meta := filepath.Join(stream, "meta.inf")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["a_setting_from_the_future"] = true
	b, _ = json.Marshal(cfg)
	os.WriteFile(meta, b, 0o600)
	key := sha256.Sum256([]byte(streamName("q")))
	hh, _ := highwayhash.NewDigest64(key[:])
	hh.Write(b)
	os.WriteFile(filepath.Join(stream, "meta.sum"), []byte(hex.EncodeToString(hh.Sum(nil))), 0o600)

	p := open(t, Config{DataDir: dir})
	got := map[string]string{}
	for _, s := range stats(t, p) {
		got[s.Queue] = s.Damage
	}
	if _, ok := got["other"]; !ok || !strings.Contains(got["q"], "its stored messages cannot be loaded (") || !strings.Contains(got["q"], "stream is offline") {
		t.Errorf("stats: %v", got)
	}
}

// On a cluster, a queue whose stream cannot be read (here: its only replica's server is down)
// gets a row saying so; the other queues' rows are there as ever.
func TestClusterStreamCannotBeRead(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 1)
	one := open(t, Config{URL: tc.url(0), Replicas: 1})
	three := open(t, Config{URL: tc.url(0), Replicas: 3})
	send(t, queueOf(t, one, "q"), "1", 0)
	send(t, queueOf(t, three, "other"), "1", 0)
	leader := tc.streamLeader(t, 0, "q")
	leader.Shutdown()
	leader.WaitForShutdown()
	eventually(t, 60*time.Second, func() error {
		all, err := three.Stats(context.Background()) // the meta group may be electing a leader
		if err != nil {
			return err
		}
		got := map[string]platform.QueueStats{}
		for _, s := range all {
			got[s.Queue] = s
		}
		if !strings.HasPrefix(got["q"].Damage, "its stream cannot be read: ") || got["other"].Ready != 1 {
			return fmt.Errorf("stats %+v", got)
		}
		return nil
	})
}

// A block file cut in half after a batch was stored can give back the batch's envelope (its
// deletion was in the cut part) with part of its messages: the damaged queue's batch is left
// unfinished, and reported, while lost.json records the damage; once it is deleted, the next
// open finishes the batch (here within the duplicate window: every message once).
func TestDamageCutBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := open(t, Config{DataDir: dir})
	q := queueOf(t, p, "q")
	items := make([]platform.BatchItem, 20)
	for i := range items {
		items[i] = platform.BatchItem{Body: fmt.Appendf(nil, `{"i":%d,"pad":"%0100d"}`, i, 0), ContentType: platform.JSON}
	}
	if err := q.SendBatch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	p.Close()
	blk := filepath.Join(streamsDir(dir), streamName("q"), "msgs", "1.blk")
	info, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blk, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	p, s, log := reopen(t, dir)
	if s.Lost == 0 || s.Ready+s.Lost != 20 || s.Delayed != 0 ||
		!strings.Contains(log.String(), `msg="jetstream: the stored batches of a damaged queue are left unfinished until lost.json is deleted" queue=q batches=1`) {
		t.Errorf("stats %+v; log:\n%s", s, log)
	}
	p.Close()
	os.Remove(filepath.Join(dir, lostFileName))
	_, s, log = reopen(t, dir)
	if s.Ready != 20 || s.Lost != 0 || !strings.Contains(log.String(), "are complete now") {
		t.Errorf("after lost.json was deleted: %+v; log:\n%s", s, log)
	}
}
