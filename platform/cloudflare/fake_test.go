package cloudflare

// These tests run the driver against an independent fake of Cloudflare's Queues API written
// with net/http/httptest from Cloudflare's documentation
// (developers.cloudflare.com/queues/configuration/pull-consumers, /api/resources/queues), not
// against duilie's own server: its envelope, its base64 and plain bodies, its leases, and its
// refusals (429 with Retry-After, 10104, 403, a paused queue's 409).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

const (
	fakeAccount = "023e105f4ecef8ad9ca31a8372d0c353"
	fakeToken   = "fake-token"
	fakeQueueID = "5e5f1f4a2b7c4d3e9f0a1b2c3d4e5f60"
)

// fakeMessage is a message as the fake stores it: body and metadata exactly as a pull shows them.
type fakeMessage struct {
	ID          string          `json:"id"`
	Body        json.RawMessage `json:"body"`
	Attempts    int             `json:"attempts"`
	LeaseID     string          `json:"lease_id"`
	Metadata    map[string]any  `json:"metadata"`
	TimestampMs int64           `json:"timestamp_ms"`

	leasedUntil time.Time
}

// fakeAnswer is a refusal the fake gives instead of the next answer of a path's kind.
type fakeAnswer struct {
	status     int
	code       int
	message    string
	retryAfter string
}

// request is one request the fake received.
type request struct {
	at   time.Time
	path string // the part after /queues/<id>, or "list"
	body string
}

// fake is Cloudflare's Queues API for one account with one queue, "jobs".
type fake struct {
	t           *testing.T
	srv         *httptest.Server
	consumer    string // the queue's consumer type
	mu          sync.Mutex
	msgs        []*fakeMessage
	requests    []request
	refusals    map[string][]fakeAnswer // by kind: "pull", "push", "batch", "ack"
	paused      bool
	leaseSerial int
}

func newFake(t *testing.T) *fake {
	f := &fake{t: t, consumer: "http_pull", refusals: map[string][]fakeAnswer{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// platform opens the driver on the fake, pulling at most maxInterval apart when idle.
func (f *fake) platform(maxInterval time.Duration, log *slog.Logger) *Platform {
	f.t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := Open(context.Background(), Config{AccountID: fakeAccount, Token: fakeToken,
		BaseURL: f.srv.URL + "/client/v4", MaxPullInterval: maxInterval, Logger: log})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { p.Close() })
	return p
}

func (f *fake) refuse(kind string, a fakeAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusals[kind] = append(f.refusals[kind], a)
}

func (f *fake) put(m *fakeMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, m)
}

// sent returns the bodies of the requests of a kind so far.
func (f *fake) sent(path string) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []request
	for _, r := range f.requests {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+fakeToken {
		writeEnvelope(w, http.StatusForbidden, nil, fakeAnswer{code: 10000, message: "Authentication error"})
		return
	}
	prefix := "/client/v4/accounts/" + fakeAccount + "/queues"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		writeEnvelope(w, http.StatusNotFound, nil, fakeAnswer{code: 7003, message: "No route for the URI"})
		return
	}
	body, _ := io.ReadAll(r.Body)
	path := "list"
	if rest != "" {
		id, p, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		if id != fakeQueueID {
			writeEnvelope(w, http.StatusNotFound, nil, fakeAnswer{code: 10104, message: "Queue does not exist"})
			return
		}
		path = p
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, request{at: time.Now(), path: path, body: string(body)})
	if rs := f.refusals[path]; len(rs) > 0 {
		f.refusals[path] = rs[1:]
		writeEnvelope(w, rs[0].status, nil, rs[0])
		return
	}
	switch path {
	case "list":
		writeEnvelope(w, 200, []any{map[string]any{"queue_id": fakeQueueID, "queue_name": "jobs", "created_on": "2024-01-01T00:00:00Z",
			"modified_on": "2024-01-01T00:00:00Z", "producers": []any{}, "producers_total_count": 0, "consumers": []any{}, "consumers_total_count": 1,
			"settings": map[string]any{"delivery_delay": 0, "delivery_paused": f.paused, "message_retention_period": 345600}}})
	case "consumers":
		c := map[string]any{"consumer_id": "a7e1c8c1f7c04b7a9f6c8a1b2c3d4e5f", "created_on": "2024-01-01T00:00:00Z", "queue_name": "jobs",
			"type": f.consumer, "settings": map[string]any{"batch_size": 10, "max_retries": 3, "retry_delay": 0, "visibility_timeout_ms": 30000}}
		if f.consumer == "worker" {
			c["script_name"] = "jobs-worker"
		}
		writeEnvelope(w, 200, []any{c})
	case "": // PATCH: the queue's settings
		var req struct {
			Settings struct {
				DeliveryPaused *bool `json:"delivery_paused"`
			} `json:"settings"`
		}
		_ = json.Unmarshal(body, &req)
		if r.Method == http.MethodPatch && req.Settings.DeliveryPaused != nil {
			f.paused = *req.Settings.DeliveryPaused
		}
		writeEnvelope(w, 200, map[string]any{"queue_id": fakeQueueID, "queue_name": "jobs", "settings": map[string]any{"delivery_paused": f.paused}})
	case "purge":
		f.msgs = nil
		writeEnvelope(w, 200, map[string]any{"queue_id": fakeQueueID, "queue_name": "jobs"})
	case "metrics":
		writeEnvelope(w, 200, map[string]any{"backlog_count": len(f.msgs), "backlog_bytes": 0, "oldest_message_timestamp_ms": 0})
	case "messages", "messages/batch":
		writeEnvelope(w, 200, map[string]any{"metadata": map[string]any{"metrics": map[string]any{"backlog_count": len(f.msgs), "backlog_bytes": 0, "oldest_message_timestamp_ms": 0}}})
	case "messages/pull":
		if f.paused {
			writeEnvelope(w, http.StatusConflict, nil, fakeAnswer{code: 10253, message: "queue_delivery_paused"})
			return
		}
		var req struct {
			BatchSize           int `json:"batch_size"`
			VisibilityTimeoutMs int `json:"visibility_timeout_ms"`
		}
		_ = json.Unmarshal(body, &req)
		now := time.Now()
		out := []*fakeMessage{}
		for _, m := range f.msgs {
			if len(out) == req.BatchSize {
				break
			}
			if !m.leasedUntil.IsZero() {
				if now.Before(m.leasedUntil) {
					continue
				}
				m.Attempts++ // the lease ran out: delivered again
			}
			f.leaseSerial++
			m.LeaseID = fmt.Sprintf("lease-%d", f.leaseSerial)
			m.leasedUntil = now.Add(time.Duration(req.VisibilityTimeoutMs) * time.Millisecond)
			out = append(out, m)
		}
		writeEnvelope(w, 200, map[string]any{"message_backlog_count": len(f.msgs), "messages": out})
	case "messages/ack":
		var req struct {
			Acks []struct {
				LeaseID string `json:"lease_id"`
			} `json:"acks"`
			Retries []struct {
				LeaseID string `json:"lease_id"`
			} `json:"retries"`
		}
		_ = json.Unmarshal(body, &req)
		acked := map[string]bool{}
		for _, a := range req.Acks {
			acked[a.LeaseID] = true
		}
		kept := f.msgs[:0]
		for _, m := range f.msgs {
			if !acked[m.LeaseID] {
				kept = append(kept, m)
			}
		}
		f.msgs = kept
		writeEnvelope(w, 200, map[string]any{"ackCount": len(req.Acks), "retryCount": len(req.Retries), "warnings": map[string]string{}})
	default:
		writeEnvelope(w, http.StatusNotFound, nil, fakeAnswer{code: 7003, message: "No route for the URI"})
	}
}

// writeEnvelope answers in Cloudflare's envelope: the result, or one error.
func writeEnvelope(w http.ResponseWriter, status int, result any, e ...fakeAnswer) {
	env := map[string]any{"success": status < 400, "errors": []any{}, "messages": []any{}, "result": result}
	if len(e) > 0 {
		env["errors"] = []any{map[string]any{"code": e[0].code, "message": e[0].message}}
		if e[0].retryAfter != "" {
			w.Header().Set("Retry-After", e[0].retryAfter)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(env)
}

func b64(s string) json.RawMessage {
	q, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(s)))
	return q
}

func str(s string) json.RawMessage {
	q, _ := json.Marshal(s)
	return q
}

func meta(ct string) map[string]any {
	return map[string]any{"CF-sourceMessageSource": "api", "CF-Content-Type": ct}
}

// consume returns a consumer of "jobs" with batches of 10 and the given ack wait.
func consume(t *testing.T, p *Platform, ackWait time.Duration) platform.Consumer {
	t.Helper()
	c, err := p.Consume(context.Background(), "jobs", platform.ConsumerOptions{MaxBatchSize: 10, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func receive(t *testing.T, c platform.Consumer, within time.Duration) ([]platform.Delivery, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.Receive(ctx, 10)
}
