package dashboard

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/duilie/duilie/internal/buildinfo"
	"github.com/duilie/duilie/server"

	"github.com/duilie/duilie"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Prometheus metrics of one server, in a registry of their own. Every counter
// and histogram is fed by the host's reports (observe); the queue gauges are read from the
// platform's counts at each scrape. Labels are queue names, kinds, outcomes, results, interface
// names and statuses: never a message id or an error's text.
type metrics struct {
	reg *prometheus.Registry

	sent      *prometheus.CounterVec
	delivered *prometheus.CounterVec
	settled   *prometheus.CounterVec
	events    *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	lag       *prometheus.HistogramVec
	batch     *prometheus.HistogramVec
	inFlight  *prometheus.GaugeVec
	bridge    *prometheus.CounterVec
}

func newMetrics(c *server.Client, consumers []string) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duilie_messages_sent_total",
			Help: "Messages the platform accepted from 发送队列消息 and 批量发送队列消息."}, []string{"queue"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duilie_messages_delivered_total",
			Help: "Messages delivered to a program in a queue event."}, []string{"queue"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duilie_messages_settled_total",
			Help: "Messages settled, by result: acked (done), retried, dead_lettered, dropped."}, []string{"queue", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duilie_events_total",
			Help: "Events that ended, by kind (queue, fetch), queue (\"\" for fetch) and outcome (ok, failed, aborted)."}, []string{"kind", "queue", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "duilie_event_duration_seconds",
			Help: "How long events ran.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}, []string{"kind", "queue"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "duilie_delivery_lag_seconds",
			Help:    "From when a message became deliverable (enqueue, or the end of its delay) to the start of its handler.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 16)}, []string{"queue"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "duilie_batch_messages",
			Help: "Messages per queue event.", Buckets: []float64{1, 2, 5, 10, 20, 50, 100}}, []string{"queue"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "duilie_consumer_batches_in_flight",
			Help: "Queue events running now."}, []string{"queue"}),
		bridge: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duilie_bridge_calls_total",
			Help: "Calls of programs over the bridge, by interface name (\"invalid\" for a malformed call) and reply status."}, []string{"name", "status"}),
	}
	version := buildinfo.Read().Version
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "duilie_build_info",
		Help: "duilie's version and the Go version it was built with; always 1."}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(m.sent, m.delivered, m.settled, m.events, m.duration, m.lag, m.batch, m.inFlight, m.bridge, build,
		&queueCollector{c: c}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, q := range consumers {
		m.inFlight.WithLabelValues(q) // 0 from the start, not absent
	}
	return m
}

// observe counts one report.
func (m *metrics) observe(r server.Report) {
	switch r := r.(type) {
	case *server.SendReport:
		if r.Err == nil && r.Queue != "" {
			m.sent.WithLabelValues(r.Queue).Add(float64(r.Messages))
		}
	case *server.StartReport:
		m.inFlight.WithLabelValues(r.Queue).Inc()
	case *server.EventReport:
		kind := string(r.Kind)
		m.events.WithLabelValues(kind, r.Queue, string(r.Outcome)).Inc()
		m.duration.WithLabelValues(kind, r.Queue).Observe(r.Duration.Seconds())
		for c, n := range r.BridgeCalls {
			name := c.Name
			if name == "" {
				name = "invalid"
			}
			m.bridge.WithLabelValues(name, statusLabel(c.Status)).Add(float64(n))
		}
		if r.Kind != duilie.QueueEvent {
			return
		}
		m.inFlight.WithLabelValues(r.Queue).Dec()
		m.delivered.WithLabelValues(r.Queue).Add(float64(r.Batch))
		m.batch.WithLabelValues(r.Queue).Observe(float64(r.Batch))
		for _, msg := range r.Messages {
			m.lag.WithLabelValues(r.Queue).Observe(msg.Lag.Seconds())
			m.settle(r.Queue, msg)
		}
	case *server.PullReport:
		m.delivered.WithLabelValues(r.Queue).Add(float64(len(r.Messages)))
		for _, msg := range r.Messages {
			m.lag.WithLabelValues(r.Queue).Observe(msg.Lag.Seconds())
		}
	case *server.SettleReport:
		for _, msg := range r.Messages {
			m.settle(r.Queue, msg)
		}
	}
}

func (m *metrics) settle(queue string, msg server.MessageReport) {
	if msg.Result != server.Released { // given back undelivered: nothing was settled
		m.settled.WithLabelValues(queue, string(msg.Result)).Inc()
	}
}

func statusLabel(status int) string {
	switch status {
	case 200:
		return "200"
	case 400:
		return "400"
	case 500:
		return "500"
	}
	return "other"
}

// queueCollector reports duilie_queue_messages and duilie_queue_lost_messages from the
// platform's counts at each scrape.
type queueCollector struct{ c *server.Client }

var queueDesc = prometheus.NewDesc("duilie_queue_messages",
	"Messages in each queue now, by state: ready, delayed, in_flight.", []string{"queue", "state"}, nil)

var lostDesc = prometheus.NewDesc("duilie_queue_lost_messages",
	"Messages of each queue that damaged storage lost, as recorded until an operator clears the record (lost.json).", []string{"queue"}, nil)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc; ch <- lostDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs, err := c.c.Queues(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		return // a platform that cannot count
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDesc, err)
		return
	}
	for _, q := range qs {
		if q.Backlog != nil {
			continue // counted only as a backlog (Cloudflare)
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(q.Ready), q.Queue, "ready")
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(q.Delayed), q.Queue, "delayed")
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(q.InFlight), q.Queue, "in_flight")
		ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.GaugeValue, float64(q.Lost), q.Queue)
	}
}
