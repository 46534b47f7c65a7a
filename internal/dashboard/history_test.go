package dashboard

import (
	"errors"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// The charts' series count each second's reports in that second, compute lag percentiles per
// second, forget seconds older than the window, and list recent events newest first.
func TestHistory(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := newHistory()
	h.now = func() time.Time { return now }
	h.observe(&host.SendReport{Queue: "q", Messages: 3})
	h.observe(&host.SendReport{Queue: "q", Messages: 5, Err: errors.New("refused")}) // not sent
	var ms []host.MessageReport
	for i := range 100 {
		ms = append(ms, host.MessageReport{Lag: time.Duration(i+1) * time.Millisecond, Action: platform.Action{Kind: platform.Done}})
	}
	ms[0].Action = platform.Action{Kind: platform.Redeliver}
	ms[1].Action = platform.Action{Kind: platform.DeadLetter}
	for i := range ms {
		ms[i].Result = host.ResultOf(ms[i].Action)
	}
	h.observe(&host.EventReport{ID: "e1", Kind: host.QueueEvent, Queue: "q", Outcome: host.OK, Batch: 100, Messages: ms})
	now = now.Add(time.Second)
	h.observe(&host.SettleReport{Queue: "q", Messages: []host.MessageReport{{Action: platform.Action{Kind: platform.DeadLetter}, Result: host.DeadLettered}}})
	h.observe(&host.EventReport{ID: "e2", Kind: host.FetchEvent, Outcome: host.Failed, Err: errors.New("boom"), Status: 500})

	s := h.series("q", 3)
	if len(s.T) != 3 || s.T[2] != now.Unix() {
		t.Fatalf("series times %v", s.T)
	}
	if s.Sent[1] != 3 || s.Delivered[1] != 100 || s.Acked[1] != 98 || s.Retried[1] != 1 || s.Dead[1] != 1 || s.Dead[2] != 1 || s.Sent[0] != 0 {
		t.Errorf("series %+v", s)
	}
	if s.LagP50[1] == nil || *s.LagP50[1] != 51 || *s.LagP99[1] != 100 || s.LagP50[2] != nil {
		t.Errorf("lag percentiles p50 %v p99 %v", s.LagP50, s.LagP99)
	}
	if sent, settled := h.rates("q"); sent != 0.3 || settled != 10.1 {
		t.Errorf("rates %v/s sent, %v/s settled", sent, settled)
	}
	ev := h.recent("", 10)
	if len(ev) != 2 || ev[0].ID != "e2" || ev[0].Error != "boom" || ev[1].Acked != 98 || ev[1].Dead != 1 {
		t.Errorf("recent %+v", ev)
	}
	if ev := h.recent("q", 10); len(ev) != 1 || ev[0].ID != "e1" {
		t.Errorf("recent of q %+v", ev)
	}
	// A slot is reused once the window has passed: the old second is gone.
	now = now.Add(historySeconds * time.Second)
	h.observe(&host.SendReport{Queue: "q", Messages: 1})
	if s := h.series("q", historySeconds); s.Sent[historySeconds-1] != 1 || sum(s.Sent) != 1 || sum(s.Dead) != 0 {
		t.Errorf("after the window: sent %d, dead %d", sum(s.Sent), sum(s.Dead))
	}
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}
