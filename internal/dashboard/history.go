package dashboard

import (
	"slices"
	"sync"
	"time"

	"github.com/duilie/duilie/server"

	"github.com/duilie/duilie"
)

// history keeps what the dashboard's charts and event list show, from the host's reports: per
// queue and per second, over the last historySeconds, messages sent, delivered, acked, retried
// and dead-lettered, and delivery lags; and the last recentEvents events.
type history struct {
	mu     sync.Mutex
	queues map[string]*ring
	events []eventRow // newest last
	now    func() time.Time
}

const (
	historySeconds = 300
	recentEvents   = 200
	lagSamples     = 256 // per queue and second; enough for p99 to mean something
)

// second is one second of one queue.
type second struct {
	at                                    int64 // Unix seconds; 0 for a slot never written
	sent, delivered, acked, retried, dead int
	lags                                  []float64 // ms
}

type ring [historySeconds]second

// eventRow is one recent event as the dashboard lists it.
type eventRow struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Queue      string  `json:"queue,omitempty"`
	Outcome    string  `json:"outcome"`
	Start      int64   `json:"start"` // Unix ms
	DurationMS float64 `json:"duration_ms"`
	Batch      int     `json:"batch,omitempty"`
	Acked      int     `json:"acked"`
	Retried    int     `json:"retried"`
	Dead       int     `json:"dead_lettered"`
	Method     string  `json:"method,omitempty"`
	Path       string  `json:"path,omitempty"`
	Status     int     `json:"status,omitempty"`
	Error      string  `json:"error,omitempty"`
	// For an exception or abort: its code, and in English what it means and where.
	Code   string `json:"code,omitempty"`
	Gloss  string `json:"gloss,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func newHistory() *history {
	return &history{queues: map[string]*ring{}, now: time.Now}
}

// slot returns the queue's current second, emptied if it held an older one. h.mu must be held.
func (h *history) slot(queue string) *second {
	r := h.queues[queue]
	if r == nil {
		r = new(ring)
		h.queues[queue] = r
	}
	t := h.now().Unix()
	s := &r[t%historySeconds]
	if s.at != t {
		*s = second{at: t}
	}
	return s
}

func (h *history) observe(r server.Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r := r.(type) {
	case *server.SendReport:
		if r.Err == nil && r.Queue != "" {
			h.slot(r.Queue).sent += r.Messages
		}
	case *server.EventReport:
		row := eventRow{ID: r.ID, Kind: string(r.Kind), Queue: r.Queue, Outcome: string(r.Outcome),
			Start: r.Start.UnixMilli(), DurationMS: float64(r.Duration.Microseconds()) / 1000, Batch: r.Batch,
			Method: r.Method, Path: r.Path, Status: r.Status}
		if r.Err != nil {
			row.Error = r.Err.Error()
			row.Code, row.Gloss, row.Detail, _ = duilie.Explain(r.Err)
		}
		if r.Kind == duilie.QueueEvent {
			s := h.slot(r.Queue)
			s.delivered += r.Batch
			for _, m := range r.Messages {
				h.settle(s, m)
				if len(s.lags) < lagSamples {
					s.lags = append(s.lags, float64(m.Lag.Microseconds())/1000)
				}
				switch m.Result {
				case server.Acked:
					row.Acked++
				case server.Retried:
					row.Retried++
				case server.DeadLettered:
					row.Dead++
				}
			}
		}
		if h.events = append(h.events, row); len(h.events) > recentEvents {
			h.events = slices.Delete(h.events, 0, len(h.events)-recentEvents)
		}
	case *server.PullReport:
		s := h.slot(r.Queue)
		s.delivered += len(r.Messages)
		for _, m := range r.Messages {
			if len(s.lags) < lagSamples {
				s.lags = append(s.lags, float64(m.Lag.Microseconds())/1000)
			}
		}
	case *server.SettleReport:
		s := h.slot(r.Queue)
		for _, m := range r.Messages {
			h.settle(s, m)
		}
	}
}

func (h *history) settle(s *second, m server.MessageReport) {
	switch m.Result {
	case server.Acked:
		s.acked++
	case server.Retried:
		s.retried++
	case server.DeadLettered:
		s.dead++
	}
}

// series is a queue's last n seconds, oldest first, as the charts draw them: per-second counts
// and lag percentiles in milliseconds (null for a second without deliveries).
type series struct {
	T         []int64    `json:"t"`
	Sent      []int      `json:"sent"`
	Delivered []int      `json:"delivered"`
	Acked     []int      `json:"acked"`
	Retried   []int      `json:"retried"`
	Dead      []int      `json:"dead_lettered"`
	LagP50    []*float64 `json:"lag_p50_ms"`
	LagP99    []*float64 `json:"lag_p99_ms"`
}

func (h *history) series(queue string, n int) series {
	h.mu.Lock()
	defer h.mu.Unlock()
	n = min(max(n, 1), historySeconds)
	now := h.now().Unix()
	r := h.queues[queue]
	var out series
	for t := now - int64(n) + 1; t <= now; t++ {
		var s second
		if r != nil && r[t%historySeconds].at == t {
			s = r[t%historySeconds]
		}
		out.T = append(out.T, t)
		out.Sent = append(out.Sent, s.sent)
		out.Delivered = append(out.Delivered, s.delivered)
		out.Acked = append(out.Acked, s.acked)
		out.Retried = append(out.Retried, s.retried)
		out.Dead = append(out.Dead, s.dead)
		out.LagP50 = append(out.LagP50, percentile(s.lags, 0.50))
		out.LagP99 = append(out.LagP99, percentile(s.lags, 0.99))
	}
	return out
}

// rates are a queue's messages sent and settled per second over the last 10 s.
func (h *history) rates(queue string) (sent, settled float64) {
	const window = 10
	s := h.series(queue, window)
	for i := range s.T {
		sent += float64(s.Sent[i])
		settled += float64(s.Acked[i] + s.Retried[i] + s.Dead[i])
	}
	return sent / window, settled / window
}

func percentile(xs []float64, p float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	v := s[min(int(p*float64(len(s))), len(s)-1)]
	return &v
}

// recent returns the last events, newest first; of one queue when queue is not "".
func (h *history) recent(queue string, n int) []eventRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []eventRow{}
	for i := len(h.events) - 1; i >= 0 && len(out) < n; i-- {
		if queue == "" || h.events[i].Queue == queue {
			out = append(out, h.events[i])
		}
	}
	return out
}
