package event

import (
	"context"
	"testing"
)

// An event whose context has ended is aborted with the time limit from that moment: a call
// that comes after the deadline, before the host has recorded the abort, must not reach a
// platform. An abort that came first stands.
func TestEndedContextIsTheTimeLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ev := New(ctx, nil, FetchEvent, nil)
	if err := ev.Err(); err != nil {
		t.Fatalf("a running event: %v", err)
	}
	cancel()
	if err := ev.Err(); err == nil || err.Error() != TimeLimit.Reason {
		t.Fatalf("after its context ended: %v, want %s", err, TimeLimit.Reason)
	}
	if err := AbortWith(ev, &Abort{Reason: "later"}); err.Error() != TimeLimit.Reason {
		t.Errorf("a later abort replaced the time limit: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	ev = New(ctx, nil, FetchEvent, nil)
	AbortWith(ev, NotPermitted.With("B", ""))
	cancel()
	if err := ev.Err(); err.Error() != NotPermitted.Reason+"B" {
		t.Errorf("the time limit replaced an earlier abort: %v", err)
	}
}
