package cfapi_test

// These tests drive Cloudflare's Queues REST API served by duilie with Cloudflare's official Go
// SDK (github.com/cloudflare/cloudflare-go/v6), against a real listener of a running server on
// the embedded engine. The SDK retries 408, 409, 429 and 5xx up to 10 times by default; every
// client here says how many retries it means.

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/serve"

	"github.com/cloudflare/cloudflare-go/v6"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/server"
)

const (
	account = "0123456789abcdef0123456789abcdef"
	token   = "test-token-of-the-api"
)

var quiet = slog.New(slog.DiscardHandler)

// env is a running server with Cloudflare's API and an SDK client of it.
type env struct {
	t   *testing.T
	ctx context.Context
	srv *serve.Server
	q   *queues.QueueService
	url string // the API's base URL, http://<addr>/client/v4
}

// start runs cfg (with the API on a free loopback port, the embedded engine in a temporary
// directory unless cfg has a platform) and returns its env.
func start(t *testing.T, cfg server.Config) *env {
	t.Helper()
	if cfg.Platform == nil {
		cfg.Platform = &jetstream.Config{DataDir: t.TempDir()}
	}
	cfg.CloudflareAPI.Listen = "127.0.0.1:0"
	cfg.CloudflareAPI.AccountID = account
	cfg.CloudflareAPI.Token = token
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	e := &env{t: t, ctx: ctx, srv: srv, url: "http://" + srv.CloudflareAPIAddr() + "/client/v4"}
	e.q = e.client(0)
	return e
}

// client is an SDK client of the API that retries what the SDK retries, retries times.
func (e *env) client(retries int, opts ...option.RequestOption) *queues.QueueService {
	return queues.NewQueueService(append([]option.RequestOption{
		option.WithBaseURL(e.url), option.WithAPIToken(token), option.WithMaxRetries(retries),
	}, opts...)...)
}

var acc = cloudflare.F(account)

// create makes a queue over the API and returns its id.
func (e *env) create(name string) string {
	e.t.Helper()
	q, err := e.q.New(e.ctx, queues.QueueNewParams{AccountID: acc, QueueName: cloudflare.F(name)})
	if err != nil {
		e.t.Fatalf("create queue %s: %v", name, err)
	}
	return q.QueueID
}

// pullConsumer adds an http_pull consumer to the queue.
func (e *env) pullConsumer(id string, settings queues.ConsumerNewParamsBodyMqHTTPConsumerRequestSettings, dlq string) {
	e.t.Helper()
	body := queues.ConsumerNewParamsBodyMqHTTPConsumerRequest{
		Type:     cloudflare.F(queues.ConsumerNewParamsBodyMqHTTPConsumerRequestTypeHTTPPull),
		Settings: cloudflare.F(settings),
	}
	if dlq != "" {
		body.DeadLetterQueue = cloudflare.F(dlq)
	}
	if _, err := e.q.Consumers.New(e.ctx, id, queues.ConsumerNewParams{AccountID: acc, Body: body}); err != nil {
		e.t.Fatalf("add an http_pull consumer: %v", err)
	}
}

func (e *env) pushJSON(id string, body any, delay float64) {
	e.t.Helper()
	p := queues.MessagePushParamsBodyMqQueueMessageJson{
		Body:        cloudflare.F(body),
		ContentType: cloudflare.F(queues.MessagePushParamsBodyMqQueueMessageJsonContentTypeJson),
	}
	if delay > 0 {
		p.DelaySeconds = cloudflare.F(delay)
	}
	if _, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: p}); err != nil {
		e.t.Fatalf("push: %v", err)
	}
}

func (e *env) pull(id string, batch int, vt time.Duration) []queues.MessagePullResponseMessage {
	e.t.Helper()
	res, err := e.q.Messages.Pull(e.ctx, id, queues.MessagePullParams{AccountID: acc,
		BatchSize: cloudflare.F(float64(batch)), VisibilityTimeoutMs: cloudflare.F(float64(vt.Milliseconds()))})
	if err != nil {
		e.t.Fatalf("pull: %v", err)
	}
	return res.Messages
}

// pullN pulls until n messages have come (a delayed or redelivered message becomes ready a
// moment after its time), within a generous deadline.
func (e *env) pullN(id string, n int, vt time.Duration, within time.Duration) []queues.MessagePullResponseMessage {
	e.t.Helper()
	var got []queues.MessagePullResponseMessage
	deadline := time.Now().Add(within)
	for len(got) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("pulled %d messages within %v, want %d", len(got), within, n)
		}
		got = append(got, e.pull(id, n-len(got), vt)...)
	}
	return got
}

func (e *env) ack(id string, acks []string, retries map[string]float64) *queues.MessageAckResponse {
	e.t.Helper()
	p := queues.MessageAckParams{AccountID: acc}
	var as []queues.MessageAckParamsAck
	for _, l := range acks {
		as = append(as, queues.MessageAckParamsAck{LeaseID: cloudflare.F(l)})
	}
	var rs []queues.MessageAckParamsRetry
	for l, d := range retries {
		r := queues.MessageAckParamsRetry{LeaseID: cloudflare.F(l)}
		if d >= 0 {
			r.DelaySeconds = cloudflare.F(d)
		}
		rs = append(rs, r)
	}
	if as != nil {
		p.Acks = cloudflare.F(as)
	}
	if rs != nil {
		p.Retries = cloudflare.F(rs)
	}
	res, err := e.q.Messages.Ack(e.ctx, id, p)
	if err != nil {
		e.t.Fatalf("ack: %v", err)
	}
	return res
}

// stats is the server's count of the queue's messages.
func (e *env) stats(name string) server.QueueInfo {
	e.t.Helper()
	all, err := e.srv.Client().Queues(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range all {
		if s.Queue == name {
			return s
		}
	}
	e.t.Fatalf("no queue %s in the stats", name)
	return server.QueueInfo{}
}

// eventually waits, up to a generous deadline, until cond holds.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiErr is the Cloudflare error an SDK call failed with.
func apiErr(t *testing.T, err error) (status, code int, message string) {
	t.Helper()
	var ae *cloudflare.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an API error", err)
	}
	if len(ae.Errors) != 1 {
		t.Fatalf("errors %+v, want one", ae.Errors)
	}
	return ae.StatusCode, int(ae.Errors[0].Code), ae.Errors[0].Message
}

func wantAPIErr(t *testing.T, err error, status, code int) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d with code %d", status, code)
	}
	s, c, m := apiErr(t, err)
	if s != status || c != code {
		t.Fatalf("got %d with code %d (%s), want %d with code %d", s, c, m, status, code)
	}
}

func decodeJSON(t *testing.T, m queues.MessagePullResponseMessage) string {
	t.Helper()
	md, _ := m.Metadata.(map[string]any)
	if md["CF-Content-Type"] != "json" {
		t.Fatalf("metadata %v, want CF-Content-Type json", m.Metadata)
	}
	b, err := base64.StdEncoding.DecodeString(m.Body)
	if err != nil {
		t.Fatalf("body %q is not base64: %v", m.Body, err)
	}
	return string(b)
}

// raw sends a request without the SDK and returns the status and body.
func (e *env) raw(method, path, auth, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var _ = host.DefaultConsumerConfig
var _ = cfapi.QueueID

func optionToken(tok string) option.RequestOption { return option.WithAPIToken(tok) }
