package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// shortHolding holds delays over a second, in buckets of 500 ms moved 500 ms before they begin,
// so that tests see the whole path in seconds.
func shortHolding(p *Platform) {
	p.holding = holding{after: time.Second, bucket: 500 * time.Millisecond, horizon: 500 * time.Millisecond, every: 50 * time.Millisecond, chunk: 2}
}

// countSubject counts the queue's stream messages matching filter.
func countSubject(t testing.TB, p *Platform, queue, filter string) int {
	t.Helper()
	n := 0
	var from uint64 = 1
	for {
		ms, err := p.scan(context.Background(), queue, filter, from, scanBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return n
		}
		n += len(ms)
		from = ms[len(ms)-1].seq + 1
	}
}

func schedules(queue string) string { return subjectPrefix + queue + ".s.>" }

// A delay longer than holding.after is stored on a holding subject, not as a schedule; it is
// counted and listed as delayed with its due time, survives a restart, and is delivered never
// before its due time, with its id, timestamp and attempts.
func TestHeldDelay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := open(t, Config{DataDir: dir})
	shortHolding(p)
	q := queueOf(t, p, "q")
	start := time.Now()
	send(t, q, `"held"`, 3)
	send(t, q, `"scheduled"`, 1) // not over holding.after
	if h, s := countSubject(t, p, "q", holdFilter("q")), countSubject(t, p, "q", schedules("q")); h != 1 || s != 1 {
		t.Fatalf("%d held and %d schedules, want 1 and 1", h, s)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: 2})
	page, err := p.Browse(context.Background(), "q", platform.BrowseOptions{State: platform.Delayed})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 {
		t.Fatalf("browsed %d delayed messages, want 2", len(page.Messages))
	}
	var held platform.StoredMessage
	for _, m := range page.Messages {
		if string(m.Body) == `"held"` {
			held = m
		}
	}
	if due := time.UnixMilli(held.Due); held.State != platform.Delayed || due.Before(start.Add(3*time.Second)) || due.After(time.Now().Add(3*time.Second)) {
		t.Fatalf("held message listed as %+v", held)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = open(t, Config{DataDir: dir})
	shortHolding(p)
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: 2})
	c := consume(t, p, "q", time.Minute)
	for _, want := range []string{`"scheduled"`, `"held"`} {
		d := receive(t, c, 1, 5*time.Second)[0]
		if string(d.Body) != want {
			t.Fatalf("received %s, want %s", d.Body, want)
		}
		if want == `"held"` {
			if now := time.Now(); now.Before(time.UnixMilli(held.Due)) {
				t.Errorf("held message delivered %v before its due time", time.UnixMilli(held.Due).Sub(now))
			}
			if d.ID != held.ID || d.Timestamp != held.Timestamp || d.Attempts != 1 {
				t.Errorf("held message delivered as %+v, listed as %+v", d.Message, held)
			}
		}
		settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q"})
	if h := countSubject(t, p, "q", holdFilter("q")); h != 0 {
		t.Errorf("%d messages left on the holding subjects", h)
	}
}

// A mover stopped after publishing a chunk and before removing it (as a crash would) leaves the
// chunk held; the next pass publishes it again, and the stream drops the copies as duplicates:
// each message is delivered once.
func TestHeldMoveStoppedBeforeRemoval(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	shortHolding(p)
	var stops atomic.Int32
	p.holding.testHookMoved = func() error {
		if stops.Add(1) <= 2 {
			return errors.New("stopped between publish and removal")
		}
		return nil
	}
	q := queueOf(t, p, "q")
	const n = 5
	for i := range n {
		send(t, q, fmt.Sprint(i), 2)
	}
	c := consume(t, p, "q", time.Minute)
	seen := map[string]bool{}
	for len(seen) < n {
		for _, d := range receive(t, c, n, 10*time.Second) {
			if seen[d.ID] {
				t.Errorf("message %s delivered twice", d.Body)
			}
			seen[d.ID] = true
			settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
		}
	}
	if stops.Load() < 3 {
		t.Fatalf("the mover stopped %d times, want 2 stops and then a removal", stops.Load())
	}
	nothing(t, c, time.Second)
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}

// Two movers moving the same bucket at once (two processes consuming the queue) store each
// message once.
func TestHeldTwoMovers(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	shortHolding(p)
	p.holding.horizon = time.Hour // every bucket is due to move
	q, err := p.queue(context.Background(), "q")
	if err != nil {
		t.Fatal(err)
	}
	const n = 7
	for i := range n {
		send(t, q, fmt.Sprint(i), 60)
	}
	// The second mover runs whole while the first has published its first chunk and not yet
	// removed it.
	var nested atomic.Bool
	p.holding.testHookMoved = func() error {
		if nested.CompareAndSwap(false, true) {
			if err := p.moveDue(context.Background(), q); err != nil {
				t.Errorf("second mover: %v", err)
			}
		}
		return nil
	}
	if err := p.moveDue(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if !nested.Load() {
		t.Fatal("the second mover did not run")
	}
	if h, s := countSubject(t, p, "q", holdFilter("q")), countSubject(t, p, "q", schedules("q")); h != 0 || s != n {
		t.Fatalf("%d held and %d schedules, want 0 and %d", h, s, n)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: n})
}

// Operators see held messages as delayed and can get, delete, move and purge them; a batch
// holds its long delays, all or nothing; a retry with a long delay is held too.
func TestHeldOperatorBatchRetry(t *testing.T) {
	t.Parallel()
	p := open(t, Config{})
	shortHolding(p)
	p.holding.every = time.Hour // the mover looks once, when the consumer starts
	ctx := context.Background()
	q := queueOf(t, p, "q")
	err := q.SendBatch(ctx, []platform.BatchItem{
		{Body: []byte(`"a"`), ContentType: platform.JSON, DelaySeconds: 600},
		{Body: []byte(`"b"`), ContentType: platform.JSON, DelaySeconds: 600},
		{Body: []byte(`"c"`), ContentType: platform.JSON, DelaySeconds: 600},
		{Body: []byte(`"now"`), ContentType: platform.JSON},
	})
	if err != nil {
		t.Fatal(err)
	}
	if h := countSubject(t, p, "q", holdFilter("q")); h != 3 {
		t.Fatalf("%d held, want 3", h)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Ready: 1, Delayed: 3})
	page, err := p.Browse(ctx, "q", platform.BrowseOptions{State: platform.Delayed})
	if err != nil || len(page.Messages) != 3 {
		t.Fatalf("browse: %v, %d delayed", err, len(page.Messages))
	}
	byBody := map[string]platform.StoredMessage{}
	for _, m := range page.Messages {
		byBody[string(m.Body)] = m
	}
	if got, err := p.Get(ctx, "q", byBody[`"a"`].ID); err != nil || got.State != platform.Delayed || got.Due != byBody[`"a"`].Due || got.Due == 0 {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if err := p.Delete(ctx, "q", byBody[`"a"`].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Move(ctx, "q", "other", platform.MoveOptions{IDs: []string{byBody[`"b"`].ID}}); err != nil || n != 1 {
		t.Fatalf("move: %d, %v", n, err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "other", Ready: 1}, platform.QueueStats{Queue: "q", Ready: 1, Delayed: 1})

	c := consume(t, p, "q", time.Minute)
	d := receive(t, c, 1, 5*time.Second)
	settle(t, c, "q", platform.Action{Kind: platform.Redeliver, Delay: 600 * time.Second}, d...)
	if h := countSubject(t, p, "q", holdFilter("q")); h != 2 {
		t.Fatalf("%d held after a retry of 600 s, want 2", h)
	}
	page, err = p.Browse(ctx, "q", platform.BrowseOptions{State: platform.Delayed})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("browse: %v, %d delayed", err, len(page.Messages))
	}
	for _, m := range page.Messages {
		if string(m.Body) == `"now"` && (m.Attempts != 1 || m.ID != d[0].ID) {
			t.Errorf("held retry listed as %+v", m)
		}
	}
	if n, err := p.Purge(ctx, "q"); err != nil || n != 2 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	wantStats(t, p, platform.QueueStats{Queue: "other", Ready: 1}, platform.QueueStats{Queue: "q"})
}

// farHolding is shortHolding with far buckets of 2 s, held again on near buckets 2 s before
// they begin, 3 messages a pass.
func farHolding(p *Platform) {
	shortHolding(p)
	p.holding.farBucket, p.holding.farHorizon, p.holding.pace = 2*time.Second, 2*time.Second, 3
}

// farQueue opens an engine with farHolding and its queue "q".
func farQueue(t *testing.T) (*Platform, *queue) {
	t.Helper()
	p := open(t, Config{})
	farHolding(p)
	q, err := p.queue(context.Background(), "q")
	if err != nil {
		t.Fatal(err)
	}
	return p, q
}

// held counts the messages of queue "q" held on far and on near buckets.
func held(t *testing.T, p *Platform) (far, near int) {
	t.Helper()
	return countSubject(t, p, "q", farFilter("q")), countSubject(t, p, "q", holdFilter("q"))
}

// A message due in a far bucket that begins beyond the far horizon is held there, counted and
// listed as delayed, then held again on its near bucket, then delivered never early, once,
// with its id, timestamp and attempts.
func TestFarHeldDelay(t *testing.T) {
	t.Parallel()
	p, q := farQueue(t)
	ctx := context.Background()
	const n = 7
	for i := range n {
		send(t, q, fmt.Sprint(i), 6)
	}
	if f, h := held(t, p); f != n || h != 0 {
		t.Fatalf("%d far and %d near held, want %d and 0", f, h, n)
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: n})
	page, err := p.Browse(ctx, "q", platform.BrowseOptions{State: platform.Delayed})
	if err != nil || len(page.Messages) != n {
		t.Fatalf("browse: %v, %d delayed", err, len(page.Messages))
	}
	listed := map[string]platform.StoredMessage{}
	for _, m := range page.Messages {
		if m.Due < time.Now().Add(4*time.Second).UnixMilli() {
			t.Errorf("far-held message listed due %v from now", time.Until(time.UnixMilli(m.Due)))
		}
		listed[m.ID] = m
	}
	// Its far bucket begins 4 s or more from now, beyond the far horizon: it stays.
	if err := p.moveDue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if f := countSubject(t, p, "q", farFilter("q")); f != n {
		t.Fatalf("%d far held after a pass before the far horizon, want %d", f, n)
	}

	c := consume(t, p, "q", time.Minute)
	for len(listed) > 0 {
		for _, d := range receive(t, c, n, 15*time.Second) {
			want, ok := listed[d.ID]
			if !ok {
				t.Fatalf("delivered %s (%s), not listed or delivered twice", d.ID, d.Body)
			}
			delete(listed, d.ID)
			if now := time.Now(); now.Before(time.UnixMilli(want.Due)) {
				t.Errorf("delivered %v before its due time", time.UnixMilli(want.Due).Sub(now))
			}
			if d.Timestamp != want.Timestamp || d.Attempts != 1 || string(d.Body) != string(want.Body) {
				t.Errorf("delivered as %+v, listed as %+v", d.Message, want)
			}
			settle(t, c, "q", platform.Action{Kind: platform.Done}, d)
		}
	}
	nothing(t, c, time.Second)
	wantStats(t, p, platform.QueueStats{Queue: "q"})
}

// A far bucket is held again on near buckets holding.pace messages a pass; a pass stopped
// between publishing and removing (as a crash would) is done again by the next without a
// second copy.
func TestFarHeldPaced(t *testing.T) {
	t.Parallel()
	p, q := farQueue(t)
	ctx := context.Background()
	const n = 7
	for i := range n {
		send(t, q, fmt.Sprint(i), 60)
	}
	p.holding.farHorizon = time.Hour // every far bucket is due to be held again
	stopped := false
	p.holding.testHookMoved = func() error {
		if !stopped {
			stopped = true
			return errors.New("stopped between publish and removal")
		}
		return nil
	}
	if err := p.moveDue(ctx, q); err == nil {
		t.Fatal("the stopped pass reported no error")
	}
	if f, h := held(t, p); f != n || h != 3 {
		t.Fatalf("after the stopped pass: %d far and %d near held, want %d and 3", f, h, n)
	}
	for _, want := range [][2]int{{4, 3}, {1, 6}, {0, 7}, {0, 7}} {
		if err := p.moveDue(ctx, q); err != nil {
			t.Fatal(err)
		}
		if f, h := held(t, p); f != want[0] || h != want[1] {
			t.Fatalf("%d far and %d near held, want %d and %d", f, h, want[0], want[1])
		}
	}
	wantStats(t, p, platform.QueueStats{Queue: "q", Delayed: n})
	page, err := p.Browse(ctx, "q", platform.BrowseOptions{State: platform.Delayed})
	if err != nil || len(page.Messages) != n {
		t.Fatalf("browse: %v, %d delayed", err, len(page.Messages))
	}
	for _, m := range page.Messages {
		if d := time.Until(time.UnixMilli(m.Due)); d < 55*time.Second || d > 60*time.Second {
			t.Errorf("held again, listed due %v from now", d)
		}
	}
}

// The mover starts each pass where it left a bucket, but not in a stream made again under the
// same name: there the bucket's messages start from sequence 1 again.
func TestFarHeldQueueMadeAgain(t *testing.T) {
	t.Parallel()
	p, q := farQueue(t)
	p.holding.farBucket, p.holding.pace = time.Minute, 5
	ctx := context.Background()
	// All due at one time, in a far bucket: the same holding subject before and after.
	due := time.Now().Truncate(time.Minute).Add(3*time.Minute + 30*time.Second)
	sendDue := func(q *queue, n int) {
		for i := range n {
			m := q.messageDue(envelope{id: platform.NewMessageID(), time: time.Now().UnixMilli()}, []byte(fmt.Sprint(i)), due)
			if _, err := p.js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	sendDue(q, 7)
	if f := countSubject(t, p, "q", farFilter("q")); f != 7 {
		t.Fatalf("%d far held, want 7", f)
	}
	p.holding.farHorizon = time.Hour
	if err := p.moveDue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if f := countSubject(t, p, "q", farFilter("q")); f != 2 {
		t.Fatalf("%d far held after a pass, want 2", f)
	}
	if err := p.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	var err error
	if q, err = p.queue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	p.holding.farHorizon = 2 * time.Second
	sendDue(q, 3)
	p.holding.farHorizon = time.Hour
	if err := p.moveDue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if f, h := held(t, p); f != 0 || h != 3 {
		t.Fatalf("in the queue made again: %d far and %d near held, want 0 and 3", f, h)
	}
}
