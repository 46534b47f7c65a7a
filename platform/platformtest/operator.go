package platformtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// testOperator runs the tests of platform.Operator, each in parallel, on a platform that
// implements it; it skips them, with a reason, on one that does not.
func testOperator(t *testing.T, hn Harness) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"BrowseByState", testBrowseByState},
		{"BrowsePages", testBrowsePages},
		{"GetAndDelete", testGetAndDelete},
		{"DeleteInFlight", testDeleteInFlight},
		{"Purge", testPurge},
		{"PurgeFillingBatch", testPurgeFillingBatch}, // gone.go
		{"DeleteFillingBatch", testDeleteFillingBatch},
		{"RemovedWhileRunning", testRemovedWhileRunning},
		{"MoveDeadLetters", testMoveDeadLetters},
		{"MoveSelectedWithDelay", testMoveSelectedWithDelay},
		{"MoveRefuses", testMoveRefuses},
		{"PauseResume", testPauseResume},
		{"PauseKeptAcrossRestart", testPauseKeptAcrossRestart},
		{"NoSuchQueue", testNoSuchQueue},
		{"DeleteQueue", testDeleteQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, hn)
		})
	}
}

// stats returns one queue's stats, for conditions polled with eventually; a failing Stats call
// reads as counts that match no condition.
func (e *env) stats(queue string) platform.QueueStats {
	for _, s := range e.allStats(e.t) {
		if s.Queue == queue {
			return s
		}
	}
	return platform.QueueStats{Queue: queue, Ready: -1, Delayed: -1, InFlight: -1}
}

// operator returns the platform's operator operations, or skips the test. An operation the
// platform has no API for (an error wrapping errors.ErrUnsupported) skips the test with its
// reason.
func (e *env) operator() platform.Operator {
	e.t.Helper()
	op, ok := e.p.(platform.Operator)
	if !ok {
		e.t.Skip("the platform has no operator operations (platform.Operator)")
	}
	return supported{op, e.t}
}

// supported skips its test when the platform cannot carry out an operation.
type supported struct {
	op platform.Operator
	t  *testing.T
}

func (s supported) check(err error) {
	if errors.Is(err, errors.ErrUnsupported) {
		s.t.Skipf("the platform has no API for this operation: %v", err)
	}
}

func (s supported) Browse(ctx context.Context, q string, o platform.BrowseOptions) (platform.MessagePage, error) {
	p, err := s.op.Browse(ctx, q, o)
	s.check(err)
	return p, err
}

func (s supported) Get(ctx context.Context, q, id string) (platform.StoredMessage, error) {
	m, err := s.op.Get(ctx, q, id)
	s.check(err)
	return m, err
}

func (s supported) Delete(ctx context.Context, q, id string) error {
	err := s.op.Delete(ctx, q, id)
	s.check(err)
	return err
}

func (s supported) Purge(ctx context.Context, q string) (int64, error) {
	n, err := s.op.Purge(ctx, q)
	s.check(err)
	return n, err
}

func (s supported) Move(ctx context.Context, from, to string, o platform.MoveOptions) (int, error) {
	n, err := s.op.Move(ctx, from, to, o)
	s.check(err)
	return n, err
}

func (s supported) Pause(ctx context.Context, q string) error {
	err := s.op.Pause(ctx, q)
	s.check(err)
	return err
}

func (s supported) Resume(ctx context.Context, q string) error {
	err := s.op.Resume(ctx, q)
	s.check(err)
	return err
}

func (s supported) DeleteQueue(ctx context.Context, q string) error {
	err := s.op.DeleteQueue(ctx, q)
	s.check(err)
	return err
}

// browseAll pages through a queue's messages in state ("" for all), limit at a time.
func (e *env) browseAll(queue string, state platform.State, limit int) []platform.StoredMessage {
	e.t.Helper()
	op := e.operator()
	var all []platform.StoredMessage
	cursor := ""
	for range 10000 {
		page, err := op.Browse(e.ctx, queue, platform.BrowseOptions{State: state, Limit: limit, Cursor: cursor})
		if err != nil {
			e.t.Fatalf("Browse(%s, %q): %v", queue, state, err)
		}
		if len(page.Messages) > limit {
			e.t.Fatalf("Browse returned %d messages, limit %d", len(page.Messages), limit)
		}
		all = append(all, page.Messages...)
		if page.Next == "" {
			return all
		}
		if len(page.Messages) == 0 {
			e.t.Fatalf("Browse returned an empty page with a next cursor %q", page.Next)
		}
		cursor = page.Next
	}
	e.t.Fatal("Browse never ended")
	return nil
}

// waitListed waits until the queue lists n messages in state (a cluster's replicas may answer
// reads a moment behind a write), and returns them.
func (e *env) waitListed(queue string, state platform.State, n int) []platform.StoredMessage {
	e.t.Helper()
	var got []platform.StoredMessage
	eventually(e.t, 10*time.Second, fmt.Sprintf("%d %q messages listed in %s", n, state, queue), func() bool {
		got = e.browseAll(queue, state, 100)
		return len(got) == n
	})
	return got
}

func bodies(ms []platform.StoredMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

// holdInFlight starts a consumer of one message at a time whose handler keeps its batch until
// release is closed, and waits until a message is in flight. It returns the message's id as
// the program read it, and when the handler started. It skips the test first on a platform
// without operator operations, whose check would otherwise come with the batch still held.
func (e *env) holdInFlight(release chan struct{}) (*consumer, string, time.Time) {
	e.t.Helper()
	e.operator()
	started := make(chan seen, 1)
	cc := config(queueName)
	cc.MaxBatchSize = 1
	c := e.consume(cc, func(ev *duilie.Event, b batchText) error {
		select {
		case started <- seen{b, time.Now()}:
		default:
		}
		select {
		case <-release:
		case <-ev.Context().Done():
		}
		return nil
	})
	// A test that ends early (skipped: an operation the platform has no API for) releases
	// the batch, rather than leaving it to the event's time limit.
	e.t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	select {
	case s := <-started:
		return c, s.batch.Messages[0].ID, s.at
	case <-time.After(10 * time.Second):
		e.t.Fatal("no message went in flight within 10 s")
	}
	return nil, "", time.Time{}
}

// Every message is listed in its state, with id, timestamp, attempts and body; a delayed one
// with its due time, one in flight with its delivery time.
func testBrowseByState(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`{"n":"held"}`)
	release := make(chan struct{})
	before := time.Now().UnixMilli()
	c, heldID, _ := e.holdInFlight(release)
	after := time.Now().UnixMilli()
	e.mustSend(`{"n":1}`, `{"n":2}`)
	sentDelayed := time.Now()
	for _, b := range []string{`{"n":"d1"}`, `{"n":"d2"}`} {
		if err := e.send(b, 600); err != nil {
			t.Fatal(err)
		}
	}

	ready := e.waitListed(queueName, platform.Ready, 2)
	if got := bodies(ready); !slices.Equal(got, []string{`{"n":1}`, `{"n":2}`}) {
		t.Errorf("ready bodies %q, want n 1 then 2", got)
	}
	for _, m := range ready {
		if !idPattern.MatchString(m.ID) || m.Attempts != 0 || m.State != platform.Ready || m.ContentType != platform.JSON ||
			m.Timestamp < before || m.Timestamp > time.Now().UnixMilli() || m.Delivered != 0 {
			t.Errorf("ready message %+v", m)
		}
	}
	delayed := e.waitListed(queueName, platform.Delayed, 2)
	if got := bodies(delayed); !slices.Equal(got, []string{`{"n":"d1"}`, `{"n":"d2"}`}) {
		t.Errorf("delayed bodies %q", got)
	}
	for _, m := range delayed {
		due := time.UnixMilli(m.Due)
		if m.State != platform.Delayed || m.Attempts != 0 || due.Before(sentDelayed.Add(599*time.Second)) || due.After(time.Now().Add(601*time.Second)) {
			t.Errorf("delayed message %+v: due %v, want 600 s after the send", m, due)
		}
	}
	flying := e.waitListed(queueName, platform.InFlight, 1)
	if m := flying[0]; m.ID != heldID || string(m.Body) != `{"n":"held"}` || m.Attempts != 1 || m.State != platform.InFlight ||
		m.Delivered < before-1000 || m.Delivered > after+1000 {
		t.Errorf("in-flight message %+v, want id %s, attempts 1, delivered within [%d, %d]", m, heldID, before, after)
	}

	all := e.browseAll(queueName, "", 100)
	states := map[platform.State]int{}
	for _, m := range all {
		states[m.State]++
	}
	if len(all) != 5 || states[platform.Ready] != 2 || states[platform.Delayed] != 2 || states[platform.InFlight] != 1 {
		t.Errorf("all states: %d messages %v, want 5: 2 ready, 2 delayed, 1 in flight", len(all), states)
	}
	if s := e.stats(queueName); s.Ready != 2 || s.Delayed != 2 || s.InFlight != 1 || s.Paused {
		t.Errorf("stats %+v", s)
	}
	// Browsing changed nothing: the held message settles, the ready ones come as they were.
	close(release)
	c.next(10 * time.Second)
	for _, m := range c.messages(2, 10*time.Second) {
		if m.Attempts != 1 {
			t.Errorf("delivered %s with attempts %d after browsing", m.Body, m.Attempts)
		}
	}
}

// Pages of any size list every message exactly once, oldest first.
func testBrowsePages(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	var want []string
	for i := range 23 {
		b := fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, b)
		e.mustSend(b)
	}
	if err := e.sendBatch(`[{"body":{"i":23}},{"body":{"i":24}}]`); err != nil {
		t.Fatal(err)
	}
	want = append(want, `{"i":23}`, `{"i":24}`)
	e.waitListed(queueName, "", 25)
	for _, limit := range []int{1, 3, 10, 25, 1000} {
		got := e.browseAll(queueName, platform.Ready, limit)
		if !slices.Equal(bodies(got), want) {
			t.Errorf("pages of %d: %q", limit, bodies(got))
		}
		seenIDs := map[string]bool{}
		for _, m := range got {
			if seenIDs[m.ID] {
				t.Errorf("pages of %d: message %s listed twice", limit, m.ID)
			}
			seenIDs[m.ID] = true
		}
	}
	op := e.operator()
	page, err := op.Browse(e.ctx, queueName, platform.BrowseOptions{})
	if err != nil || len(page.Messages) != 25 || page.Next != "" {
		t.Errorf("default page: %d messages, next %q, %v", len(page.Messages), page.Next, err)
	}
	page, err = op.Browse(e.ctx, queueName, platform.BrowseOptions{State: platform.Delayed})
	if err != nil || len(page.Messages) != 0 || page.Next != "" {
		t.Errorf("no delayed messages: %+v, %v", page, err)
	}
	if _, err := op.Browse(e.ctx, queueName, platform.BrowseOptions{Cursor: "not a cursor"}); !errors.Is(err, platform.ErrCursor) {
		t.Errorf("a cursor the platform did not make: %v, want ErrCursor", err)
	}
}

// Get finds a message by id in any state; Delete removes it, and it is never delivered.
func testGetAndDelete(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`"a"`, `"b"`, `"c"`)
	if err := e.send(`"later"`, 600); err != nil {
		t.Fatal(err)
	}
	ready := e.waitListed(queueName, platform.Ready, 3)
	delayed := e.waitListed(queueName, platform.Delayed, 1)
	op := e.operator()
	b := ready[1]
	got, err := op.Get(e.ctx, queueName, b.ID)
	if err != nil || got.ID != b.ID || string(got.Body) != `"b"` || got.State != platform.Ready || got.Timestamp != b.Timestamp || got.Attempts != 0 {
		t.Fatalf("Get(%s) = %+v, %v", b.ID, got, err)
	}
	if got, err := op.Get(e.ctx, queueName, delayed[0].ID); err != nil || got.State != platform.Delayed || string(got.Body) != `"later"` {
		t.Errorf("Get(delayed) = %+v, %v", got, err)
	}
	if _, err := op.Get(e.ctx, queueName, platform.NewMessageID()); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Get(unknown id) error %v, want ErrNotFound", err)
	}
	for _, id := range []string{b.ID, delayed[0].ID} {
		if err := op.Delete(e.ctx, queueName, id); err != nil {
			t.Fatalf("Delete(%s): %v", id, err)
		}
	}
	if err := op.Delete(e.ctx, queueName, b.ID); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Delete twice: %v, want ErrNotFound", err)
	}
	eventually(t, 10*time.Second, "deleted messages gone", func() bool {
		_, err := op.Get(e.ctx, queueName, b.ID)
		s := e.stats(queueName)
		return errors.Is(err, platform.ErrNotFound) && s.Ready == 2 && s.Delayed == 0
	})
	c := e.consume(config(queueName), nil)
	ms := c.messages(2, 10*time.Second)
	if ms[0].Body == nil || string(ms[0].Body) != `"a"` || string(ms[len(ms)-1].Body) != `"c"` || len(ms) != 2 {
		t.Errorf("delivered %+v, want a and c", ms)
	}
	c.none(500 * time.Millisecond)
}

// A message deleted while in flight is gone: it is not delivered again after its ack wait.
func testDeleteInFlight(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`"held"`)
	release := make(chan struct{})
	c, id, _ := e.holdInFlight(release)
	e.waitListed(queueName, platform.InFlight, 1)
	if err := e.operator().Delete(e.ctx, queueName, id); err != nil {
		t.Fatalf("Delete(in flight): %v", err)
	}
	e.waitListed(queueName, "", 0)
	close(release)
	c.next(10 * time.Second)
	eventually(t, 10*time.Second, "nothing left", func() bool {
		s := e.stats(queueName)
		return s.Ready+s.Delayed+s.InFlight == 0
	})
	c.none(500 * time.Millisecond)
}

// Purge removes every message in every state; later sends are delivered as usual.
func testPurge(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	e.mustSend(`1`, `2`, `3`)
	for _, d := range []int{1, 600} {
		if err := e.send(`"delayed"`, d); err != nil {
			t.Fatal(err)
		}
	}
	e.waitListed(queueName, "", 5)
	n, err := e.operator().Purge(e.ctx, queueName)
	if err != nil || n != 5 {
		t.Fatalf("Purge = %d, %v; want 5", n, err)
	}
	e.waitListed(queueName, "", 0)
	if s := e.stats(queueName); s.Ready+s.Delayed+s.InFlight != 0 {
		t.Errorf("stats after purge %+v", s)
	}
	e.mustSend(`"after"`)
	c := e.consume(config(queueName), nil)
	if m := c.next(10 * time.Second).batch.Messages; len(m) != 1 || string(m[0].Body) != `"after"` {
		t.Errorf("delivered %+v, want only the message sent after the purge", m)
	}
	c.none(1500 * time.Millisecond) // the purged 1 s message stays gone
	if n, err := e.operator().Purge(e.ctx, queueName); err != nil || n != 0 {
		t.Errorf("Purge of an empty queue = %d, %v", n, err)
	}
}

// deadLetter consumes the test's queue with max_retries 0 and the dead-letter queue, retrying
// every delivery for which fail is true: such a message goes to the dead-letter queue at once.
func (e *env) deadLetter(fail func(messageText) bool) *consumer {
	cc := config(queueName)
	cc.MaxRetries, cc.DeadLetterQueue = host.NoRetries, dlqName
	return e.consume(cc, func(ev *duilie.Event, b batchText) error {
		for i, m := range b.Messages {
			if fail(m) {
				if err := duilie.Retry(ev, i, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Dead-lettered messages are listed with their bodies; Move sends them back with the same id,
// timestamp and body, attempts from 1, up to its limit.
func testMoveDeadLetters(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	var mu sync.Mutex
	moved := map[string]bool{}
	done := make(chan messageText, 10)
	e.deadLetter(func(m messageText) bool {
		mu.Lock()
		defer mu.Unlock()
		if moved[m.ID] {
			done <- m
			return false
		}
		return true
	})
	e.mustSend(`{"t":1}`, `{"t":2}`, `{"t":3}`)
	dead := e.waitListed(dlqName, platform.Ready, 3)
	if got := bodies(dead); !slices.Equal(got, []string{`{"t":1}`, `{"t":2}`, `{"t":3}`}) {
		t.Fatalf("dead letters %q", got)
	}
	for _, m := range dead {
		if m.Attempts != 0 || !idPattern.MatchString(m.ID) {
			t.Errorf("dead letter %+v, want attempts 0", m)
		}
	}
	mu.Lock()
	for _, m := range dead[:2] {
		moved[m.ID] = true
	}
	mu.Unlock()
	n, err := e.operator().Move(e.ctx, dlqName, queueName, platform.MoveOptions{Limit: 2})
	if err != nil || n != 2 {
		t.Fatalf("Move(limit 2) = %d, %v", n, err)
	}
	for i := range 2 {
		select {
		case m := <-done:
			want := dead[i]
			if m.ID != want.ID || m.Attempts != 1 || m.Timestamp != want.Timestamp || string(m.Body) != string(want.Body) {
				t.Errorf("replayed %+v, want id %s, attempts 1, timestamp %d, body %s", m, want.ID, want.Timestamp, want.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a moved message was not delivered within 10 s")
		}
	}
	left := e.waitListed(dlqName, "", 1)
	if left[0].ID != dead[2].ID {
		t.Errorf("left in the dead-letter queue: %+v, want %s", left[0], dead[2].ID)
	}
}

// Move with ids moves only those; with a delay they arrive delayed.
func testMoveSelectedWithDelay(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	q, err := e.p.Queue(e.ctx, dlqName)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{`"a"`, `"b"`, `"c"`} {
		if err := q.Send(e.ctx, []byte(b), platform.SendOptions{ContentType: platform.JSON}); err != nil {
			t.Fatal(err)
		}
	}
	dead := e.waitListed(dlqName, platform.Ready, 3)
	op := e.operator()
	start := time.Now()
	n, err := op.Move(e.ctx, dlqName, queueName, platform.MoveOptions{IDs: []string{dead[2].ID, dead[0].ID, platform.NewMessageID()}, Delay: 2 * time.Second})
	if err != nil || n != 2 {
		t.Fatalf("Move(ids) = %d, %v; want 2", n, err)
	}
	later := e.waitListed(queueName, platform.Delayed, 2)
	for _, m := range later {
		if m.ID != dead[0].ID && m.ID != dead[2].ID || m.Due < start.Add(2*time.Second).UnixMilli()-1 {
			t.Errorf("moved %+v, want a or c due 2 s after the move", m)
		}
	}
	if left := e.waitListed(dlqName, "", 1); left[0].ID != dead[1].ID {
		t.Errorf("left %+v", left)
	}
	c := e.consume(config(queueName), nil)
	ms := c.messages(2, 10*time.Second)
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("moved messages delivered %v after the move, want ≥ 2 s", took)
	}
	for _, m := range ms {
		if m.Attempts != 1 {
			t.Errorf("moved message delivered with attempts %d", m.Attempts)
		}
	}
}

// Move refuses a queue moved to itself, and an unknown source.
func testMoveRefuses(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	op := e.operator()
	e.mustSend(`1`)
	if _, err := op.Move(e.ctx, queueName, queueName, platform.MoveOptions{}); err == nil {
		t.Error("Move to the queue itself succeeded")
	}
	if _, err := op.Move(e.ctx, "conf-none", queueName, platform.MoveOptions{}); !errors.Is(err, platform.ErrNoQueue) {
		t.Errorf("Move from an unknown queue: %v, want ErrNoQueue", err)
	}
	if _, err := op.Move(e.ctx, queueName, "Not A Queue", platform.MoveOptions{}); err == nil {
		t.Error("Move to an invalid queue name succeeded")
	}
	if n, err := op.Move(e.ctx, dlqName, queueName, platform.MoveOptions{}); err != nil || n != 0 {
		t.Errorf("Move from an empty queue = %d, %v", n, err)
	}
	e.waitListed(queueName, platform.Ready, 1)
}

// A paused queue accepts sends and delivers nothing; Resume delivers them. Pausing works
// before any consumer exists, and pausing twice changes nothing.
func testPauseResume(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	op := e.operator()
	for range 2 {
		if err := op.Pause(e.ctx, queueName); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	}
	e.mustSend(`"p1"`)
	if err := e.sendBatch(`[{"body":"p2"},{"body":"p3"}]`); err != nil {
		t.Fatalf("a paused queue refused a batch: %v", err)
	}
	eventually(t, 10*time.Second, "paused with 3 ready", func() bool {
		s := e.stats(queueName)
		return s.Paused && s.Ready == 3
	})
	c := e.consume(config(queueName), nil)
	c.none(1500 * time.Millisecond)
	if err := op.Resume(e.ctx, queueName); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if ms := c.messages(3, 10*time.Second); len(ms) != 3 {
		t.Errorf("delivered %d after resume", len(ms))
	}
	if s := e.stats(queueName); s.Paused {
		t.Errorf("still paused after Resume: %+v", s)
	}
	// Pausing again stops delivery to the running consumer.
	if err := op.Pause(e.ctx, queueName); err != nil {
		t.Fatal(err)
	}
	e.mustSend(`"p4"`)
	c.none(1500 * time.Millisecond)
	if err := op.Resume(e.ctx, queueName); err != nil {
		t.Fatal(err)
	}
	c.messages(1, 10*time.Second)
}

// A paused queue stays paused when its platform restarts.
func testPauseKeptAcrossRestart(t *testing.T, hn Harness) {
	r, ok := hn.(Restarter)
	if !ok {
		t.Skip("the platform keeps no store that outlives it (platformtest.Restarter)")
	}
	e := newEnv(t, hn)
	// A consumer has existed, as it has under duilie serve, before the pause.
	e.mustSend(`"first"`)
	c := e.consume(config(queueName), nil)
	c.messages(1, 10*time.Second)
	if err := e.operator().Pause(e.ctx, queueName); err != nil {
		t.Fatal(err)
	}
	e.mustSend(`"while paused"`)
	c.stop()
	e.restart(r)
	eventually(t, 10*time.Second, "still paused after the restart", func() bool {
		s := e.stats(queueName)
		return s.Paused && s.Ready == 1
	})
	c2 := e.consume(config(queueName), nil)
	c2.none(1500 * time.Millisecond)
	if err := e.operator().Resume(e.ctx, queueName); err != nil {
		t.Fatal(err)
	}
	if m := c2.messages(1, 10*time.Second); string(m[0].Body) != `"while paused"` {
		t.Errorf("delivered %+v", m)
	}
}

// Operations on a queue the platform does not have fail with ErrNoQueue.
func testNoSuchQueue(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	op := e.operator()
	const none = "conf-nowhere"
	_, err1 := op.Browse(e.ctx, none, platform.BrowseOptions{})
	_, err2 := op.Get(e.ctx, none, platform.NewMessageID())
	err3 := op.Delete(e.ctx, none, platform.NewMessageID())
	_, err4 := op.Purge(e.ctx, none)
	err5 := op.Pause(e.ctx, none)
	err6 := op.Resume(e.ctx, none)
	err7 := op.DeleteQueue(e.ctx, none)
	for i, err := range []error{err1, err2, err3, err4, err5, err6, err7} {
		if !errors.Is(err, platform.ErrNoQueue) {
			t.Errorf("operation %d on an unknown queue: %v, want ErrNoQueue", i+1, err)
		}
	}
}

// testDeleteQueue: a deleted queue is gone from the stats with its messages in every state, and
// a queue of the same name created afterwards is empty and not paused.
func testDeleteQueue(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	op := e.operator()
	e.mustSend(`1`, `2`)
	if err := e.send(`"delayed"`, 600); err != nil {
		t.Fatal(err)
	}
	if err := op.Pause(e.ctx, queueName); err != nil {
		t.Fatal(err)
	}
	e.waitListed(queueName, "", 3)
	if err := op.DeleteQueue(e.ctx, queueName); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	for _, s := range e.allStats(t) {
		if s.Queue == queueName {
			t.Fatalf("stats still list the deleted queue: %+v", s)
		}
	}
	if _, err := op.Browse(e.ctx, queueName, platform.BrowseOptions{}); !errors.Is(err, platform.ErrNoQueue) {
		t.Errorf("Browse of the deleted queue: %v, want ErrNoQueue", err)
	}
	if err := op.DeleteQueue(e.ctx, queueName); !errors.Is(err, platform.ErrNoQueue) {
		t.Errorf("DeleteQueue again: %v, want ErrNoQueue", err)
	}
	// A producer's queue is looked up again: the host's, cached, stays that of the deleted queue.
	q, err := e.p.Queue(e.ctx, queueName)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Send(e.ctx, []byte(`"anew"`), platform.SendOptions{ContentType: platform.JSON}); err != nil {
		t.Fatal(err)
	}
	c := e.consume(config(queueName), nil)
	if m := c.next(10 * time.Second).batch.Messages; len(m) != 1 || string(m[0].Body) != `"anew"` {
		t.Errorf("delivered %+v, want only the message sent after the delete", m)
	}
	if s := e.stats(queueName); s.Paused {
		t.Errorf("the queue created anew is paused: %+v", s)
	}
}
