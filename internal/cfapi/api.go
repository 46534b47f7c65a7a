// Package cfapi serves Cloudflare's Queues REST API on duilie's platforms, so that clients
// written for Cloudflare Queues (the official SDKs, curl scripts, wrangler-style tools) work
// against duilie unchanged: queues, messages (push, bulk push, pull with leases, ack and
// retry), consumers (http_pull and worker) and purge, under
// /client/v4/accounts/{account_id}/queues, with Cloudflare's paths, field names, envelope,
// error codes and statuses.
//
// The API is a surface over the platform's own operations (platform.Operator, platform.Stater)
// and the interface's rules: a json push is normalized and limited as 发送队列消息 is, a text
// push is stored with the text content type. An http_pull consumer is this package's own
// runtime: each pull leases messages for a visibility timeout, and a lease that runs out, a
// retry and an exhausted message are settled by the consumer's max_retries and dead-letter
// queue, as the host settles a program's batch. A worker consumer is the host's program
// consumer, started and stopped through Programs.
package cfapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// Limits of the API (Cloudflare's, where Cloudflare has one).
const (
	MaxDelaySeconds         = 86400 // push, bulk push, retry and delivery_delay (SPEC §14.5)
	MaxPullBatch            = 100
	DefaultPullBatch        = 5
	MaxVisibilityTimeout    = 12 * time.Hour
	DefaultVisibilityTimout = 30 * time.Second
	maxRequestBytes         = 4 << 20 // a request body; a bulk push of 100 messages fits
)

// Programs starts and stops the host's program consumers: a worker consumer created over the
// API runs the serve's program, as a [[queues.consumers]] table does.
type Programs interface {
	// StartConsumer starts consuming cc.Queue with the program; it fails when the serve runs
	// no program.
	StartConsumer(cc host.ConsumerConfig) error
	// StopConsumer stops the queue's program consumer and waits until its running events have
	// been settled.
	StopConsumer(ctx context.Context, queue string) error
}

// Pull is an http_pull consumer's settings.
type Pull struct {
	Queue             string
	BatchSize         int           // default batch of a pull, 1–100
	MaxRetries        int           // deliveries beyond the first before a message is dead-lettered or dropped, 0–100
	RetryDelay        time.Duration // the delay of a retry without one, 0–86400 s
	DeadLetterQueue   string        // "" for none
	VisibilityTimeout time.Duration // a pull's lease unless it asks for another, 1 ms – 12 h
}

// DefaultPull is an http_pull consumer's settings when none are given: Cloudflare's defaults.
func DefaultPull(queue string) Pull {
	return Pull{Queue: queue, BatchSize: DefaultPullBatch, MaxRetries: 3, VisibilityTimeout: DefaultVisibilityTimout}
}

// Config configures an API.
type Config struct {
	// AccountID is the account id clients put in paths. Required.
	AccountID string
	// Token is the bearer token every request must carry. Required.
	Token string
	// Platform holds the queues; it must implement platform.Stater and platform.Operator.
	Platform platform.Platform
	// Programs runs worker consumers; nil when the serve has no program.
	Programs Programs
	// Script names the serve's program in producer and worker consumer objects; "" means
	// "duilie".
	Script string
	// Configured lists the queues the configuration names; the API lists them and refuses to
	// delete them.
	Configured []string
	// Producers maps each queue that a configured binding sends to, to that binding.
	Producers map[string][]string
	// Workers are the configured program consumers, and Pulls the configured http_pull
	// consumers; the API lists them and refuses to change them.
	Workers []host.ConsumerConfig
	Pulls   []Pull
	// DeliveryDelays are the configured delivery delays, in seconds, by queue.
	DeliveryDelays map[string]int
	// Retention is how long the platform keeps an unconsumed message, reported as every
	// queue's message_retention_period; 0 means 4 days.
	Retention time.Duration
	// Logger receives the API's own failures; nil means slog.Default().
	Logger *slog.Logger
}

// API serves Cloudflare's Queues REST API. It is an http.Handler.
type API struct {
	cfg     Config
	log     *slog.Logger
	stats   platform.Stater
	op      platform.Operator
	started time.Time
	prefix  string // /client/v4/accounts/<account>/queues
	mux     *http.ServeMux

	mu     sync.Mutex
	queues map[string]*queueState // by name, for queues the API has seen
	closed bool
}

// New makes an API on cfg's platform and starts the configured http_pull consumers.
func New(ctx context.Context, cfg Config) (*API, error) {
	if cfg.AccountID == "" || cfg.Token == "" {
		return nil, errors.New("cloudflare api: an account id and a token are required")
	}
	st, ok1 := cfg.Platform.(platform.Stater)
	op, ok2 := cfg.Platform.(platform.Operator)
	if !ok1 || !ok2 {
		return nil, errors.New("cloudflare api: the platform must count its queues and have operator operations")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Script == "" {
		cfg.Script = "duilie"
	}
	if cfg.Retention == 0 {
		cfg.Retention = 96 * time.Hour
	}
	a := &API{cfg: cfg, log: cfg.Logger, stats: st, op: op, started: time.Now().UTC(),
		prefix: "/client/v4/accounts/" + cfg.AccountID + "/queues", queues: map[string]*queueState{}}
	for q, d := range cfg.DeliveryDelays {
		a.state(q).delay = d
	}
	for _, w := range cfg.Workers {
		a.state(w.Queue).consumer = &consumerState{kind: workerType, configured: true, created: a.started, script: cfg.Script, worker: w}
	}
	for _, pc := range cfg.Pulls {
		pl, err := a.newPuller(ctx, pc)
		if err != nil {
			a.Close()
			return nil, err
		}
		a.state(pc.Queue).consumer = &consumerState{kind: pullType, configured: true, created: a.started, pull: pl}
	}
	a.routes()
	return a, nil
}

// Close stops the http_pull consumers. Messages still leased return once their platform ack
// wait ends, with one more attempt, as after a crash.
func (a *API) Close() error {
	a.mu.Lock()
	a.closed = true
	var ps []*puller
	for _, q := range a.queues {
		if q.consumer != nil && q.consumer.pull != nil {
			ps = append(ps, q.consumer.pull)
		}
	}
	a.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
	return nil
}

// DeliveryDelay is the queue's delivery_delay in seconds: the delay of every message sent to
// it without a delay of its own.
func (a *API) DeliveryDelay(queue string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q, ok := a.queues[queue]; ok {
		return q.delay
	}
	return 0
}

// QueueID is the queue's queue_id: 32 lowercase hex characters, the same for a name always.
func QueueID(name string) string {
	sum := sha256.Sum256([]byte("duilie queue " + name))
	return hex.EncodeToString(sum[:16])
}

// consumerID is the consumer_id of a queue's consumer (a queue has one at most).
func consumerID(queue string) string {
	sum := sha256.Sum256([]byte("duilie consumer " + queue))
	return hex.EncodeToString(sum[:16])
}

func (a *API) routes() {
	m := http.NewServeMux()
	p := a.prefix
	m.HandleFunc("GET "+p, a.listQueues)
	m.HandleFunc("POST "+p, a.createQueue)
	m.HandleFunc("GET "+p+"/{queue}", a.withQueue(a.getQueue))
	m.HandleFunc("PUT "+p+"/{queue}", a.withQueue(a.updateQueue))
	m.HandleFunc("PATCH "+p+"/{queue}", a.withQueue(a.editQueue))
	m.HandleFunc("DELETE "+p+"/{queue}", a.withQueue(a.deleteQueue))
	m.HandleFunc("POST "+p+"/{queue}/messages", a.withQueue(a.push))
	m.HandleFunc("POST "+p+"/{queue}/messages/batch", a.withQueue(a.bulkPush))
	m.HandleFunc("POST "+p+"/{queue}/messages/pull", a.withQueue(a.pull))
	m.HandleFunc("POST "+p+"/{queue}/messages/ack", a.withQueue(a.ack))
	m.HandleFunc("GET "+p+"/{queue}/metrics", a.withQueue(a.metrics))
	m.HandleFunc("POST "+p+"/{queue}/purge", a.withQueue(a.purge))
	m.HandleFunc("GET "+p+"/{queue}/purge", a.withQueue(a.purgeStatus))
	m.HandleFunc("GET "+p+"/{queue}/consumers", a.withQueue(a.listConsumers))
	m.HandleFunc("POST "+p+"/{queue}/consumers", a.withQueue(a.createConsumer))
	m.HandleFunc("GET "+p+"/{queue}/consumers/{consumer}", a.withQueue(a.getConsumer))
	m.HandleFunc("PUT "+p+"/{queue}/consumers/{consumer}", a.withQueue(a.updateConsumer))
	m.HandleFunc("DELETE "+p+"/{queue}/consumers/{consumer}", a.withQueue(a.deleteConsumer))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, errNoRoute(r.URL.Path))
	})
	a.mux = m
}

// ServeHTTP answers one request: 403 with Cloudflare's code 10000 without the bearer token,
// else the endpoint's answer in Cloudflare's envelope.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.authorized(r) {
		fail(w, &apiError{status: http.StatusForbidden, code: 10000, message: "Authentication error"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	a.mux.ServeHTTP(w, r)
}

func (a *API) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(a.cfg.Token)) == 1
}

// withQueue resolves the path's queue id to a queue the platform has: 10107 for an id that is
// not 32 hex characters, 10104 for one of no queue.
func (a *API) withQueue(h func(w http.ResponseWriter, r *http.Request, q string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("queue")
		if !isID(id) {
			fail(w, errMalformedID)
			return
		}
		name, err := a.queueByID(r.Context(), id)
		if err != nil {
			fail(w, err)
			return
		}
		h(w, r, name)
	}
}

func isID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// queueNames lists the platform's queues with their stats, by name.
func (a *API) queueNames(ctx context.Context) ([]platform.QueueStats, error) {
	all, err := a.stats.Stats(ctx)
	if err != nil {
		return nil, a.internal("list queues", err)
	}
	return all, nil
}

func (a *API) queueByID(ctx context.Context, id string) (string, error) {
	all, err := a.queueNames(ctx)
	if err != nil {
		return "", err
	}
	id = strings.ToLower(id)
	for _, s := range all {
		if QueueID(s.Queue) == id {
			return s.Queue, nil
		}
	}
	return "", errQueueNotFound
}

// stat returns the platform's stats of one queue.
func (a *API) stat(ctx context.Context, name string) (platform.QueueStats, error) {
	all, err := a.queueNames(ctx)
	if err != nil {
		return platform.QueueStats{}, err
	}
	for _, s := range all {
		if s.Queue == name {
			return s, nil
		}
	}
	return platform.QueueStats{}, errQueueNotFound
}

// internal logs a platform failure and returns Cloudflare's internal error.
func (a *API) internal(what string, err error) error {
	a.log.Error("cloudflare api: "+what, "err", err)
	return &apiError{status: http.StatusInternalServerError, code: 10001, message: fmt.Sprintf("Internal error: %s: %v", what, err)}
}
