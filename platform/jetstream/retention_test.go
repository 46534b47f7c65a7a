package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// expire removes the ready messages stored before the cutoff, counts them in one WARN line
// per queue, and leaves newer messages and delayed ones (whose retention counts from their
// due time) alone.
func TestExpire(t *testing.T) {
	t.Parallel()
	log := &syncBuffer{}
	p := open(t, Config{Logger: slog.New(slog.NewTextHandler(log, nil))})
	q := queueOf(t, p, "q")
	for range 3 {
		send(t, q, `"old"`, 0)
	}
	send(t, q, `"later"`, 60)
	time.Sleep(10 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(10 * time.Millisecond)
	send(t, q, `"new"`, 0)
	send(t, q, `"new"`, 0)
	if err := p.expire(context.Background(), cutoff); err != nil {
		t.Fatal(err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 2, Delayed: 1})
	if want := `level=WARN msg="messages dropped: their retention passed before a consumer took them" queue=q messages=3 retention=96h0m0s`; !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant %s", log, want)
	}
	// Nothing older: nothing removed, nothing logged.
	if err := p.expire(context.Background(), cutoff); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "messages dropped"); n != 1 {
		t.Errorf("%d lines after a sweep with nothing to drop", n)
	}
	// Every ready message is older than a cutoff after the last.
	if err := p.expire(context.Background(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: 1})
}

// A serving process sweeps at its start and every sweepEvery; any other keeps what it finds.
func TestSweepWhileServing(t *testing.T) {
	sweepEvery, sweepClock = 50*time.Millisecond, func() time.Time { return time.Now().Add(DefaultRetention + time.Minute) }
	defer func() { sweepEvery, sweepClock = time.Minute, time.Now }()
	dir := t.TempDir()
	p := open(t, Config{DataDir: dir})
	send(t, queueOf(t, p, "q"), "1", 0)
	time.Sleep(200 * time.Millisecond)
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 1}) // not serving: no sweep
	p.Close()
	log := &syncBuffer{}
	p = open(t, Config{DataDir: dir, Serve: true, Logger: slog.New(slog.NewTextHandler(log, nil))})
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(log.String(), "queue=q messages=1 ") {
			return fmt.Errorf("not swept yet")
		}
		return nil
	})
	send(t, queueOf(t, p, "q"), "2", 0)
	eventually(t, 5*time.Second, func() error {
		if n := strings.Count(log.String(), "queue=q messages=1 "); n != 2 {
			return fmt.Errorf("%d sweeps logged", n)
		}
		return nil
	})
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}
