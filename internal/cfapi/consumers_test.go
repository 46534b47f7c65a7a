package cfapi_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// received collects what a program's queue events read.
type received struct {
	mu      sync.Mutex
	batches []string
}

func (r *received) handle(ev *duilie.Event) error {
	b, err := duilie.ReadBatch(ev)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return nil
}

func (r *received) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.batches...)
}

// The same JSON values, as a REST client writes them and as the interface normalizes them.
var exchanged = []struct{ rest, norm string }{
	{`{"kind":"page","url":"/release/x","version":"v8","refresh":true}`, `{"kind":"page","url":"/release/x","version":"v8","refresh":true}`},
	{`{"b":1E2,"a":[-0,1e21,0.000001],"b":"last","7":null,"__proto__":"\u00e9\/\ud83d\ude00"}`, `{"7":null,"b":"last","a":[0,1e+21,0.000001],"__proto__":"é/😀"}`},
	{`"a string with ],[ and \"quotes\" and \\"`, `"a string with ],[ and \"quotes\" and \\"`},
	{`12345678901234567890`, `12345678901234567000`},
}

// TestRESTProducerProgramConsumer: messages pushed over REST are consumed by a duilie program
// on the same queue, as the same JSON values byte for byte; a text push reads as a JSON string.
func TestRESTProducerProgramConsumer(t *testing.T) {
	t.Parallel()
	var got received
	cc := host.DefaultConsumerConfig("mixed")
	cc.MaxBatchTimeout = host.NoBatchTimeout
	e := start(t, server.Config{Consumers: []host.ConsumerConfig{cc}, Program: &duilie.Program{Queue: got.handle}})
	id := cfapi.QueueID("mixed")
	path := "/accounts/" + account + "/queues/" + id + "/messages"
	for _, m := range exchanged {
		if status, body := e.raw("POST", path, "Bearer "+token, `{"body":`+m.rest+`,"content_type":"json"}`); status != 200 {
			t.Fatalf("push %s: %d %s", m.rest, status, body)
		}
	}
	if _, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBodyMqQueueMessageText{
		Body: cloudflare.F("text, \"read\" as a JSON string"), ContentType: cloudflare.F(queues.MessagePushParamsBodyMqQueueMessageTextContentTypeText)}}); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	eventually(t, 10*time.Second, "five messages consumed", func() bool {
		bodies = nil
		for _, b := range got.all() {
			bodies = append(bodies, bodiesOf(t, b)...)
		}
		return len(bodies) == 5
	})
	for i, m := range exchanged {
		if bodies[i] != m.norm {
			t.Errorf("message %d read as %s, want %s", i, bodies[i], m.norm)
		}
	}
	if bodies[4] != `"text, \"read\" as a JSON string"` {
		t.Errorf("the text message read as %s", bodies[4])
	}
	// The queue's consumer is the program: a worker consumer, read-only over the API.
	list, err := e.q.Consumers.List(e.ctx, id, queues.ConsumerListParams{AccountID: acc})
	if err != nil || len(list.Result) != 1 || list.Result[0].Type != queues.ConsumerTypeWorker || list.Result[0].ScriptName != "duilie" {
		t.Fatalf("consumers: %+v, %v", list, err)
	}
	_, err = e.q.Consumers.Delete(e.ctx, id, list.Result[0].ConsumerID, queues.ConsumerDeleteParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusConflict, 10256)
	_, err = e.q.Messages.Pull(e.ctx, id, queues.MessagePullParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusConflict, 10255)
}

// bodiesOf takes a ReadBatch result apart: each message's body, as its normalized text.
func bodiesOf(t *testing.T, batch string) []string {
	t.Helper()
	var out []string
	// {"queue":"…","messages":[{"id":…,"attempts":…,"timestamp":…,"body":<json>},…]}
	const key = `,"body":`
	rest := batch
	for {
		i := indexOf(rest, key)
		if i < 0 {
			return out
		}
		rest = rest[i+len(key):]
		end := matchEnd(rest)
		out = append(out, rest[:end])
		rest = rest[end:]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// matchEnd is the length of the JSON value at the start of s (normalized text).
func matchEnd(s string) int {
	depth, inStr := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
			if !inStr && depth == 0 {
				return i + 1
			}
		case inStr:
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case c == ',' && depth == 0:
			return i
		}
	}
	return len(s)
}

// TestProgramProducerRESTConsumer: messages a duilie program sends are pulled over REST with
// exactly the bytes the interface normalized.
func TestProgramProducerRESTConsumer(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{
		Permissions: host.Permissions{Queue: []string{"OUT"}},
		Bindings:    map[string]string{"OUT": "outbox"},
		CloudflareAPI: server.CloudflareAPI{PullConsumers: []server.PullConsumer{
			func() server.PullConsumer {
				pc := server.DefaultPullConsumer("outbox")
				pc.MaxBatchSize = 10
				return pc
			}()}},
	})
	err := e.srv.Client().Do(e.ctx, func(ev *duilie.Event) error {
		for _, m := range exchanged {
			if err := duilie.Send(ev, "OUT", m.rest, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id := cfapi.QueueID("outbox")
	ms := e.pullN(id, len(exchanged), time.Minute, 10*time.Second)
	for i, m := range exchanged {
		if got := decodeJSON(t, ms[i]); got != m.norm {
			t.Errorf("pulled %s, want %s", got, m.norm)
		}
	}
	// The configured http_pull consumer, read-only over the API.
	c, err := e.q.Consumers.Get(e.ctx, id, consumerIDOf(t, e, id), queues.ConsumerGetParams{AccountID: acc})
	if err != nil || c.Type != queues.ConsumerTypeHTTPPull {
		t.Fatalf("get consumer: %+v, %v", c, err)
	}
	s := c.Settings.(queues.ConsumerMqHTTPConsumerResponseSettings)
	if s.BatchSize != 10 || s.MaxRetries != 3 || s.VisibilityTimeoutMs != 30000 {
		t.Errorf("settings %+v", s)
	}
	q, err := e.q.Get(e.ctx, id, queues.QueueGetParams{AccountID: acc})
	if err != nil || q.ProducersTotalCount != 1 || q.ConsumersTotalCount != 1 || q.Consumers[0].Type != queues.ConsumerTypeHTTPPull {
		t.Errorf("queue %+v, %v", q, err)
	}
}

func consumerIDOf(t *testing.T, e *env, queueID string) string {
	t.Helper()
	list, err := e.q.Consumers.List(e.ctx, queueID, queues.ConsumerListParams{AccountID: acc})
	if err != nil || len(list.Result) != 1 {
		t.Fatalf("consumers: %+v, %v", list, err)
	}
	return list.Result[0].ConsumerID
}

// TestConsumers: create, get, update (PUT, which also creates), delete, one per queue; a worker
// consumer made over the API runs the serve's program until it is deleted.
func TestConsumers(t *testing.T) {
	t.Parallel()
	var got received
	e := start(t, server.Config{Program: &duilie.Program{Queue: got.handle}})
	id := e.create("jobs")
	dlq := e.create("jobs-dead")

	worker := queues.ConsumerNewParamsBodyMqWorkerConsumerRequest{
		Type:            cloudflare.F(queues.ConsumerNewParamsBodyMqWorkerConsumerRequestTypeWorker),
		ScriptName:      cloudflare.F("page-worker"),
		DeadLetterQueue: cloudflare.F("jobs-dead"),
		Settings: cloudflare.F(queues.ConsumerNewParamsBodyMqWorkerConsumerRequestSettings{
			BatchSize: cloudflare.F(2.0), MaxRetries: cloudflare.F(1.0), MaxWaitTimeMs: cloudflare.F(0.0), RetryDelay: cloudflare.F(0.0)}),
	}
	c, err := e.q.Consumers.New(e.ctx, id, queues.ConsumerNewParams{AccountID: acc, Body: worker})
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Settings.(queues.ConsumerMqWorkerConsumerResponseSettings)
	if c.Type != queues.ConsumerTypeWorker || c.ScriptName != "page-worker" || c.DeadLetterQueue != "jobs-dead" || c.QueueName != "jobs" ||
		ws.BatchSize != 2 || ws.MaxRetries != 1 || ws.MaxWaitTimeMs != 0 || ws.MaxConcurrency != 1 || len(c.ConsumerID) != 32 {
		t.Fatalf("worker consumer %+v %+v", c, ws)
	}
	// One consumer per queue.
	_, err = e.q.Consumers.New(e.ctx, id, queues.ConsumerNewParams{AccountID: acc, Body: worker})
	wantAPIErr(t, err, http.StatusConflict, 11004)

	e.pushJSON(id, map[string]any{"n": 1}, 0)
	eventually(t, 10*time.Second, "the program consumed the push", func() bool { return len(got.all()) == 1 })

	// PUT turns it into an http_pull consumer: the program stops consuming.
	pull := queues.ConsumerUpdateParamsBodyMqHTTPConsumerRequest{
		Type: cloudflare.F(queues.ConsumerUpdateParamsBodyMqHTTPConsumerRequestTypeHTTPPull),
		Settings: cloudflare.F(queues.ConsumerUpdateParamsBodyMqHTTPConsumerRequestSettings{
			BatchSize: cloudflare.F(3.0), VisibilityTimeoutMs: cloudflare.F(5000.0)}),
	}
	c, err = e.q.Consumers.Update(e.ctx, id, c.ConsumerID, queues.ConsumerUpdateParams{AccountID: acc, Body: pull})
	if err != nil || c.Type != queues.ConsumerTypeHTTPPull || c.DeadLetterQueue != "" {
		t.Fatalf("update: %+v, %v", c, err)
	}
	e.pushJSON(id, map[string]any{"n": 2}, 0)
	if ms := e.pullN(id, 1, time.Minute, 10*time.Second); decodeJSON(t, ms[0]) != `{"n":2}` {
		t.Errorf("pulled %s", decodeJSON(t, ms[0]))
	}
	if n := len(got.all()); n != 1 {
		t.Errorf("the program ran %d batches after its consumer was replaced", n)
	}
	got2, err := e.q.Consumers.Get(e.ctx, id, c.ConsumerID, queues.ConsumerGetParams{AccountID: acc})
	if err != nil || got2.Settings.(queues.ConsumerMqHTTPConsumerResponseSettings).VisibilityTimeoutMs != 5000 {
		t.Fatalf("get: %+v, %v", got2, err)
	}

	// Delete: the leased message is deliverable again; the queue has no consumer.
	if _, err := e.q.Consumers.Delete(e.ctx, id, c.ConsumerID, queues.ConsumerDeleteParams{AccountID: acc}); err != nil {
		t.Fatal(err)
	}
	list, err := e.q.Consumers.List(e.ctx, id, queues.ConsumerListParams{AccountID: acc})
	if err != nil || len(list.Result) != 0 {
		t.Fatalf("after delete: %+v, %v", list, err)
	}
	eventually(t, 10*time.Second, "the leased message ready again", func() bool { return e.stats("jobs").Ready == 1 })
	_, err = e.q.Consumers.Get(e.ctx, id, c.ConsumerID, queues.ConsumerGetParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusNotFound, 11001)
	_, err = e.q.Consumers.Get(e.ctx, id, "nope", queues.ConsumerGetParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusBadRequest, 10107)

	// PUT creates one too; deleting the queue stops it.
	if _, err := e.q.Consumers.Update(e.ctx, dlq, consumerIDFor("jobs-dead"), queues.ConsumerUpdateParams{AccountID: acc, Body: pull}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Delete(e.ctx, dlq, queues.QueueDeleteParams{AccountID: acc}); err != nil {
		t.Fatal(err)
	}

	// Bad consumers.
	for _, body := range []string{`{}`, `{"type":"push"}`, `{"type":"worker"}`, `{"type":"http_pull","settings":{"batch_size":101}}`,
		`{"type":"http_pull","settings":{"visibility_timeout_ms":43200001}}`, `{"type":"http_pull","dead_letter_queue":"jobs"}`,
		`{"type":"worker","script_name":"w","settings":{"max_wait_time_ms":60001}}`} {
		status, res := e.raw("POST", "/accounts/"+account+"/queues/"+id+"/consumers", "Bearer "+token, body)
		if status != 400 || !containsCode(res, 10207) {
			t.Errorf("consumer %s: %d %s", body, status, res)
		}
	}
}

func consumerIDFor(queue string) string {
	// The API's consumer id of a queue is stable, like its queue id; any 32-hex id creates.
	return cfapi.QueueID(queue)
}

func containsCode(body string, code int) bool {
	return indexOf(body, `"code":`+itoa(code)+`,`) >= 0
}

// TestNoProgramNoWorker: a serve without a program refuses worker consumers.
func TestNoProgramNoWorker(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("idle")
	status, body := e.raw("POST", "/accounts/"+account+"/queues/"+id+"/consumers", "Bearer "+token, `{"type":"worker","script_name":"w"}`)
	if status != 400 || !containsCode(body, 10207) {
		t.Errorf("worker without a program: %d %s", status, body)
	}
}

// TestOverloaded: a platform that fails to store a message for now is Cloudflare's "queue
// overloaded": 429 with code 10250, so clients back off. (The in-memory platform can be told to
// refuse sends; the engine cannot.)
func TestOverloaded(t *testing.T) {
	t.Parallel()
	mp := memory.New(memory.Options{})
	e := start(t, server.Config{Platform: &memory.Config{Platform: mp}})
	id := e.create("busy")
	mp.RejectSends("busy", "Queue is full")
	_, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBody{Body: cloudflare.F[any](1)}})
	wantAPIErr(t, err, http.StatusTooManyRequests, 10250)
	// The SDK retries a 429 as many times as it is told to (after the Retry-After second the
	// API sends): two retries, three requests.
	var requests atomic.Int32
	count := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		requests.Add(1)
		return next(r)
	})
	_, err = e.client(2, count).Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBody{Body: cloudflare.F[any](1)}})
	wantAPIErr(t, err, http.StatusTooManyRequests, 10250)
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	mp.Accept("busy")
	if _, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBody{Body: cloudflare.F[any](1)}}); err != nil {
		t.Fatal(err)
	}
	if s := e.stats("busy"); s.Ready != 1 {
		t.Errorf("stats %+v", s)
	}
}
