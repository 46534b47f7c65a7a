package platformtest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
)

// Concurrent events share nothing: each event's calls act on its own batch only.
func testConcurrentEvents(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	const n = 60
	for i := 0; i < n; i += 20 {
		parts := make([]string, 20)
		for j := range parts {
			parts[j] = fmt.Sprintf(`{"body":%d}`, i+j)
		}
		if err := e.sendBatch("[" + strings.Join(parts, ",") + "]"); err != nil {
			t.Fatal(err)
		}
	}
	cc := config(queueName)
	cc.MaxBatchSize, cc.MaxConcurrency = 4, 4
	var mu sync.Mutex
	running, peak := 0, 0
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		time.Sleep(30 * time.Millisecond)
		for i, m := range b.Messages {
			var v int
			fmt.Sscan(string(m.Body), &v)
			if v%2 == 0 || m.Attempts > 1 {
				if err := duilie.Ack(ev, i); err != nil {
					return err
				}
			} else if err := duilie.Retry(ev, i, 0); err != nil {
				return err
			}
		}
		return errors.New("fail the event: acks stand, retries come back")
	})
	ms := c.messages(n+n/2, 20*time.Second)
	c.none(300 * time.Millisecond)
	deliveries := map[string][]int{}
	for _, m := range ms {
		deliveries[string(m.Body)] = append(deliveries[string(m.Body)], m.Attempts)
	}
	for i := range n {
		want := "[1]"
		if i%2 == 1 {
			want = "[1 2]"
		}
		if got := fmt.Sprint(deliveries[fmt.Sprint(i)]); got != want {
			t.Errorf("message %d delivered with attempts %s, want %s", i, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > cc.MaxConcurrency {
		t.Errorf("%d events ran at once, max_concurrency is %d", peak, cc.MaxConcurrency)
	}
	t.Logf("peak concurrency %d", peak)
}
