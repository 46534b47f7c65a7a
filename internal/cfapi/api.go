// Package cfapi serves Cloudflare's Queues REST API on duilie's platforms, so that clients
// written for Cloudflare Queues (the official SDKs, curl scripts, wrangler) work against duilie
// unchanged: queues, messages (push, bulk push, pull with leases, ack and retry), consumers
// (http_pull and worker) and purge, under /client/v4/accounts/{account_id}/queues, with
// Cloudflare's paths, field names, envelope, error codes and statuses.
//
// The API is a thin adapter over the server's Client: it maps each request to one of the
// client's calls and its answer to Cloudflare's shapes. The rules live below it: a json push is
// normalized and limited as 发送队列消息 is (duilie.CheckBody), consumers' settings are checked
// by their own Validate, leases are the host's pull consumers', and every push, pull and
// settlement is reported to the server's observers (the log, /metrics, the dashboard).
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
	"os"
	"strings"
	"sync"
	"time"

	"github.com/duilie/duilie/server"
)

// Limits of the API (Cloudflare's, where Cloudflare has one).
const (
	MaxDelaySeconds = int64(server.MaxDeliveryDelay) // push, bulk push, retry and delivery_delay (SPEC §14.5)
	maxRequestBytes = 4 << 20                        // a request body; a bulk push of 100 messages fits
)

// Options configure an API.
type Options struct {
	// AccountID is the account id clients put in paths. Required.
	AccountID string
	// Token is the bearer token every request must carry. Required: duilie serve's is
	// [cloudflare_api] token_env's, or the token file's (server.SurfaceToken).
	Token string
	// Script names the serve's program in producer and worker consumer objects; "" means
	// "duilie".
	Script string
	// Logger receives the API's own failures; nil means slog.Default().
	Logger *slog.Logger
}

// API serves Cloudflare's Queues REST API. It is an http.Handler.
type API struct {
	o       Options
	c       *server.Client
	log     *slog.Logger
	started time.Time
	prefix  string // /client/v4/accounts/<account>/queues
	mux     *http.ServeMux

	mu     sync.Mutex
	queues map[string]*queueState // by name, for queues the API has seen
}

// Attach serves the API of srv's configuration ([cloudflare_api]) beside srv, unless it has
// none, from Start until Shutdown. It returns the attached surface (nil for none), whose Addr
// says where it listens once started.
func Attach(srv *server.Server) (*server.Attached, error) {
	c := srv.Client()
	cfg := c.Config()
	api := cfg.CloudflareAPI
	if api.Listen == "" {
		return nil, nil
	}
	token := api.Token
	if token == "" && api.TokenEnv != "" {
		token = os.Getenv(api.TokenEnv)
	}
	if token == "" {
		// None configured: the token only this user can read, in the data directory.
		var err error
		if token, err = cfg.SurfaceToken(); err != nil {
			return nil, err
		}
	}
	a, err := New(c, Options{AccountID: api.AccountID, Token: token, Script: cfg.Name, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	log := a.log
	return srv.Attach(server.Surface{Name: "Cloudflare's Queues API", Addr: api.Listen, Handler: a,
		Started: func(addr string) {
			attrs := []any{"url", "http://" + addr + "/client/v4", "account_id", api.AccountID}
			if !server.Loopback(addr) {
				log.Warn("Cloudflare's Queues API listens beyond this machine; every request needs the bearer token", attrs...)
			}
			log.Info("serving Cloudflare's Queues API", attrs...)
		}})
}

// New makes an API over c's queues.
func New(c *server.Client, o Options) (*API, error) {
	if o.AccountID == "" || o.Token == "" {
		return nil, errors.New("cloudflare api: an account id and a token are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Script == "" {
		o.Script = "duilie"
	}
	a := &API{o: o, c: c, log: o.Logger, started: time.Now().UTC(),
		prefix: "/client/v4/accounts/" + o.AccountID + "/queues", queues: map[string]*queueState{}}
	a.routes()
	return a, nil
}

// QueueID is the queue's queue_id: 32 lowercase hex characters, the same for a name always.
func QueueID(name string) string {
	sum := sha256.Sum256([]byte("duilie queue " + name))
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
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(a.o.Token)) == 1
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

// queueInfos lists the server's queues with their counts.
func (a *API) queueInfos(ctx context.Context) ([]server.QueueInfo, error) {
	all, err := a.c.Queues(ctx)
	if err != nil {
		return nil, a.internal("list queues", err)
	}
	return all, nil
}

func (a *API) queueByID(ctx context.Context, id string) (string, error) {
	all, err := a.queueInfos(ctx)
	if err != nil {
		return "", err
	}
	id = strings.ToLower(id)
	for _, q := range all {
		if QueueID(q.Queue) == id {
			return q.Queue, nil
		}
	}
	return "", errQueueNotFound
}

// stat returns one queue's counts.
func (a *API) stat(ctx context.Context, name string) (server.QueueInfo, error) {
	all, err := a.queueInfos(ctx)
	if err != nil {
		return server.QueueInfo{}, err
	}
	for _, q := range all {
		if q.Queue == name {
			return q, nil
		}
	}
	return server.QueueInfo{}, errQueueNotFound
}

// internal logs a failure of the server and returns Cloudflare's internal error.
func (a *API) internal(what string, err error) error {
	a.log.Error("cloudflare api: "+what, "err", err)
	return &apiError{status: http.StatusInternalServerError, code: 10001, message: fmt.Sprintf("Internal error: %s: %v", what, err)}
}
