package platformtest

import (
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// Restart: what a platform holds survives closing it and opening its store again. Ready,
// delayed and retried messages keep their ids, timestamps, bodies and attempts; a message in
// flight when the platform closed comes back with attempts + 1, after its ack wait, or at once
// on a platform that is its store's only consumer (Reclaimer); a dead letter stays in its queue.
func testRestart(t *testing.T, hn Harness) {
	r, ok := hn.(Restarter)
	if !ok {
		t.Skip("the platform keeps no store that outlives it (platformtest.Restarter)")
	}
	e := newEnv(t, hn)
	const (
		ackWait = 4 * time.Second
		delay   = 3 * time.Second
	)
	// Four messages are delivered before the restart and settled in four ways.
	e.mustSend(`"in flight"`, `"retried"`, `"retried later"`, `"dead"`)
	c := e.contract(queueName, ackWait)
	before := map[string]platform.Delivery{}
	var received time.Time // when the platform may have delivered "in flight", at the earliest
	for len(before) < 4 {
		asked := time.Now()
		for _, d := range receive(t, c, 1, 10*time.Second) {
			before[string(d.Body)] = d
			if string(d.Body) == `"in flight"` {
				received = asked
			}
		}
	}
	settle(t, c, queueName, platform.Action{Kind: platform.Redeliver}, before[`"retried"`])
	retriedLater := time.Now()
	settle(t, c, queueName, platform.Action{Kind: platform.Redeliver, Delay: delay}, before[`"retried later"`])
	settle(t, c, queueName, platform.Action{Kind: platform.DeadLetter, Queue: dlqName}, before[`"dead"`])
	// Two are sent and never delivered before it.
	sent := time.Now()
	e.mustSend(`"ready"`)
	if err := e.send(`"delayed"`, int(delay/time.Second)); err != nil {
		t.Fatal(err)
	}
	afterSend := time.Now()

	e.restart(r)
	reopened := time.Now()
	e.eventuallyStats("after the restart: 2 ready, 2 delayed, 1 in flight", func(s platform.QueueStats) bool {
		return s.Ready == 2 && s.Delayed == 2 && s.InFlight == 1
	})

	c = e.contract(queueName, ackWait)
	after := map[string]platform.Delivery{}
	at := map[string]time.Time{}
	for len(after) < 5 {
		for _, d := range receive(t, c, 1, 15*time.Second) {
			if _, again := after[string(d.Body)]; again {
				t.Fatalf("%s delivered twice after the restart", d.Body)
			}
			after[string(d.Body)], at[string(d.Body)] = d, time.Now()
			settle(t, c, queueName, platform.Action{Kind: platform.Done}, d)
		}
	}
	for body, attempts := range map[string]int{`"in flight"`: 2, `"retried"`: 2, `"retried later"`: 2} {
		b, a := before[body], after[body]
		if a.ID != b.ID || a.Timestamp != b.Timestamp || a.ContentType != b.ContentType || a.Attempts != attempts {
			t.Errorf("%s: before the restart %+v, after it %+v with attempts %d, want the same message with attempts %d",
				body, b.Message, a.Message, a.Attempts, attempts)
		}
	}
	for _, body := range []string{`"ready"`, `"delayed"`} {
		a := after[body]
		if !idPattern.MatchString(a.ID) || a.Attempts != 1 || a.Timestamp < sent.UnixMilli() || a.Timestamp > afterSend.UnixMilli() {
			t.Errorf("%s: after the restart %+v, want a fresh id, attempts 1 and its send time", body, a.Message)
		}
	}
	// Never early, and not much later than the later of due and reopen (a loaded machine is slow).
	// A platform may restore a delivery's time to the second, so the ack wait may end up to a
	// second early after a restart.
	inFlightDue := received.Add(ackWait - time.Second)
	if rc, ok := hn.(Reclaimer); ok && rc.ReclaimsFlights() {
		inFlightDue = reopened
	}
	for body, due := range map[string]time.Time{
		`"delayed"`:       time.UnixMilli(after[`"delayed"`].Timestamp).Add(delay),
		`"retried later"`: retriedLater.Add(delay),
		`"in flight"`:     inFlightDue,
		`"ready"`:         reopened,
		`"retried"`:       reopened,
	} {
		if at[body].Before(due.Add(-time.Millisecond)) {
			t.Errorf("%s delivered %v before it was due", body, due.Sub(at[body]))
		}
		if late := at[body].Sub(laterOf(due, reopened)); late > 5*time.Second {
			t.Errorf("%s delivered %v after it was due", body, late)
		}
	}
	dlq := e.contract(dlqName, ackWait)
	dead := receive(t, dlq, 1, 10*time.Second)[0]
	if b := before[`"dead"`]; dead.ID != b.ID || dead.Timestamp != b.Timestamp || string(dead.Body) != `"dead"` || dead.Attempts != 1 {
		t.Errorf("dead letter after the restart: %+v, want %+v with attempts 1", dead.Message, b.Message)
	}
	settle(t, dlq, dlqName, platform.Action{Kind: platform.Done}, dead)
	e.eventuallyEmpty()
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
