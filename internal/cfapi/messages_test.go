package cfapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie/server"
)

func pullSettings(batch, retries int, vt time.Duration) queues.ConsumerNewParamsBodyMqHTTPConsumerRequestSettings {
	return queues.ConsumerNewParamsBodyMqHTTPConsumerRequestSettings{
		BatchSize: cloudflare.F(float64(batch)), MaxRetries: cloudflare.F(float64(retries)),
		VisibilityTimeoutMs: cloudflare.F(float64(vt.Milliseconds())),
	}
}

// TestPushPullAck: json and text pushes, a bulk push, a pull with leases, acks.
func TestPushPullAck(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("work")
	e.pullConsumer(id, pullSettings(10, 3, 30*time.Second), "")

	// json goes through the interface's normalization: V8's JSON.stringify(JSON.parse(…)).
	e.pushJSON(id, map[string]any{"b": 1e2, "a": []any{1.5, "é/"}}, 0)
	if _, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBodyMqQueueMessageText{
		Body: cloudflare.F("plain <text> \"quoted\""), ContentType: cloudflare.F(queues.MessagePushParamsBodyMqQueueMessageTextContentTypeText)}}); err != nil {
		t.Fatal(err)
	}
	// Without content_type a message is json.
	if _, err := e.q.Messages.Push(e.ctx, id, queues.MessagePushParams{AccountID: acc, Body: queues.MessagePushParamsBody{Body: cloudflare.F[any](7)}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.q.Messages.BulkPush(e.ctx, id, queues.MessageBulkPushParams{AccountID: acc, Messages: cloudflare.F([]queues.MessageBulkPushParamsMessageUnion{
		queues.MessageBulkPushParamsMessagesMqQueueMessageJson{Body: cloudflare.F[any]([]any{1, 2}), ContentType: cloudflare.F(queues.MessageBulkPushParamsMessagesMqQueueMessageJsonContentTypeJson)},
		queues.MessageBulkPushParamsMessagesMqQueueMessageText{Body: cloudflare.F("two"), ContentType: cloudflare.F(queues.MessageBulkPushParamsMessagesMqQueueMessageTextContentTypeText)},
	})})
	if err != nil || res.Metadata.Metrics.BacklogCount != 5 {
		t.Fatalf("bulk push: %+v, %v", res, err)
	}

	ms := e.pullN(id, 5, 30*time.Second, 10*time.Second)
	if s := e.stats("work"); s.InFlight != 5 || s.Ready != 0 {
		t.Errorf("after the pull: %+v, want 5 in flight", s)
	}
	want := []struct{ ct, body string }{
		{"json", `{"a":[1.5,"é/"],"b":100}`}, {"text", `plain <text> "quoted"`}, {"json", `7`}, {"json", `[1,2]`}, {"text", "two"},
	}
	var leases []string
	for i, m := range ms {
		md, _ := m.Metadata.(map[string]any)
		body := m.Body
		if md["CF-Content-Type"] == "json" {
			body = decodeJSON(t, m)
		}
		if md["CF-Content-Type"] != want[i].ct || body != want[i].body {
			t.Errorf("message %d: %v %q, want %s %q", i, md, body, want[i].ct, want[i].body)
		}
		if len(m.ID) != 32 || m.Attempts != 1 || m.LeaseID == "" || m.TimestampMs < float64(time.Now().Add(-time.Minute).UnixMilli()) {
			t.Errorf("message %d: %+v", i, m)
		}
		leases = append(leases, m.LeaseID)
	}
	if more := e.pull(id, 10, time.Second); len(more) != 0 {
		t.Errorf("leased messages pulled again: %+v", more)
	}
	ack := e.ack(id, leases, nil)
	if ack.AckCount != 5 || ack.RetryCount != 0 || len(ack.Warnings) != 0 {
		t.Errorf("ack: %+v", ack)
	}
	eventually(t, 10*time.Second, "the queue empty", func() bool { s := e.stats("work"); return s.Ready+s.InFlight+s.Delayed == 0 })
	// An unknown lease is a warning, not a failure.
	ack = e.ack(id, []string{"garbage!"}, nil)
	if ack.AckCount != 0 || ack.Warnings["garbage!"] == "" {
		t.Errorf("ack of garbage: %+v", ack)
	}
}

// TestLeases: a lease that runs out makes the message deliverable again with attempts + 1; an
// ack or retry with a lease that has ended (or was never issued, or is of another queue, or is
// given twice) changes nothing and is named in the warnings; a lease longer than the consumer's
// visibility timeout holds.
func TestLeases(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("leased")
	other := e.create("other")
	e.pullConsumer(id, pullSettings(10, 5, 2*time.Second), "")
	e.pullConsumer(other, pullSettings(10, 5, 2*time.Second), "")
	e.pushJSON(id, "once", 0)

	first := e.pull(id, 1, 300*time.Millisecond)
	if len(first) != 1 || first[0].Attempts != 1 {
		t.Fatalf("first pull: %+v", first)
	}
	second := e.pullN(id, 1, time.Minute, 10*time.Second) // after the 300 ms lease ran out
	if second[0].ID != first[0].ID || second[0].Attempts != 2 || second[0].LeaseID == first[0].LeaseID {
		t.Fatalf("after the lease ran out: %+v, want %s with attempts 2 and a new lease", second[0], first[0].ID)
	}
	// The second lease (a minute) outlives the consumer's 2 s visibility timeout, and the
	// platform's ack wait: nothing is delivered again meanwhile.
	time.Sleep(8 * time.Second)
	if more := e.pull(id, 10, time.Second); len(more) != 0 {
		t.Fatalf("a message under a live lease was delivered again: %+v", more)
	}
	// The first lease has ended: its ack changes nothing. Forged ids and the live lease given
	// on another queue change nothing either.
	forged := "AAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct {
		queue string
		acks  []string
	}{
		{id, []string{first[0].LeaseID}},
		{id, []string{forged, "not base64 at all!"}},
		{other, []string{second[0].LeaseID}},
	} {
		ack := e.ack(c.queue, c.acks, nil)
		if ack.AckCount != 0 || len(ack.Warnings) != len(c.acks) {
			t.Fatalf("%v on %s: %+v", c.acks, c.queue, ack)
		}
	}
	if s := e.stats("leased"); s.InFlight != 1 {
		t.Fatalf("after leases that were not live: %+v", s)
	}
	// The live lease, given twice: acked once, with a warning for the second.
	if ack := e.ack(id, []string{second[0].LeaseID, second[0].LeaseID}, nil); ack.AckCount != 1 || len(ack.Warnings) != 1 {
		t.Fatalf("ack: %+v", ack)
	}
	eventually(t, 10*time.Second, "the queue empty", func() bool { s := e.stats("leased"); return s.Ready+s.InFlight+s.Delayed == 0 })
	if ack := e.ack(id, []string{second[0].LeaseID}, nil); ack.AckCount != 0 || len(ack.Warnings) != 1 {
		t.Errorf("an ack replayed: %+v", ack)
	}

	// A retry after its lease ended changes nothing, with a warning.
	e.pushJSON(id, "thrice", 0)
	lease := e.pull(id, 1, 200*time.Millisecond)[0].LeaseID
	again := e.pullN(id, 1, time.Minute, 10*time.Second)[0]
	ack := e.ack(id, nil, map[string]float64{lease: -1})
	if ack.RetryCount != 0 || ack.Warnings[lease] == "" {
		t.Errorf("late retry: %+v", ack)
	}
	if ack := e.ack(id, []string{again.LeaseID}, nil); ack.AckCount != 1 {
		t.Errorf("ack: %+v", ack)
	}
}

// TestRetriesIntoDeadLetters: retries (with and without a delay) and leases that run out count
// toward max_retries; an exhausted message goes to the consumer's dead-letter queue, with its
// id and body, attempts from 1.
func TestRetriesIntoDeadLetters(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("flaky")
	dlq := e.create("flaky-dead")
	e.pullConsumer(id, pullSettings(10, 2, 30*time.Second), "flaky-dead")
	e.pullConsumer(dlq, pullSettings(10, 0, 30*time.Second), "")
	e.pushJSON(id, map[string]any{"n": 1}, 0)

	m := e.pull(id, 1, time.Minute)[0]
	start := time.Now()
	if ack := e.ack(id, nil, map[string]float64{m.LeaseID: 1}); ack.RetryCount != 1 {
		t.Fatalf("retry: %+v", ack)
	}
	if early := e.pull(id, 1, time.Minute); len(early) != 0 {
		t.Fatalf("retried with a 1 s delay, pulled at once: %+v", early)
	}
	m = e.pullN(id, 1, 300*time.Millisecond, 10*time.Second)[0]
	if m.Attempts != 2 || time.Since(start) < time.Second {
		t.Fatalf("after the retry: attempts %v after %v", m.Attempts, time.Since(start))
	}
	// The 300 ms lease runs out: the third delivery is the last max_retries 2 allows.
	m = e.pullN(id, 1, time.Minute, 10*time.Second)[0]
	if m.Attempts != 3 {
		t.Fatalf("after the lease ran out: attempts %v, want 3", m.Attempts)
	}
	if ack := e.ack(id, nil, map[string]float64{m.LeaseID: -1}); ack.RetryCount != 1 {
		t.Fatalf("last retry: %+v", ack)
	}
	dead := e.pullN(dlq, 1, time.Minute, 10*time.Second)[0]
	if dead.ID != m.ID || dead.Attempts != 1 || decodeJSON(t, dead) != `{"n":1}` {
		t.Fatalf("dead letter: %+v, want %s with attempts 1", dead, m.ID)
	}
	if s := e.stats("flaky"); s.Ready+s.Delayed+s.InFlight != 0 {
		t.Errorf("the exhausted message is still in its queue: %+v", s)
	}
	// Without a dead-letter queue an exhausted message is dropped.
	e.pushJSON(dlq, "last", 0)
	m = e.pull(dlq, 1, time.Minute)[0]
	e.ack(dlq, nil, map[string]float64{m.LeaseID: 0})
	eventually(t, 10*time.Second, "the dropped message gone", func() bool { s := e.stats("flaky-dead"); return s.Ready+s.Delayed+s.InFlight == 1 })
}

// TestPauseAndPurge: a paused queue answers pulls with 409 queue_delivery_paused and still
// accepts pushes; purge removes every message, leased ones included, and reports its status.
func TestPauseAndPurge(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("held")
	e.pullConsumer(id, pullSettings(10, 3, 30*time.Second), "")
	if _, err := e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryPaused: cloudflare.F(true)})}}); err != nil {
		t.Fatal(err)
	}
	e.pushJSON(id, 1, 0)
	e.pushJSON(id, 2, 0)
	_, err := e.q.Messages.Pull(e.ctx, id, queues.MessagePullParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusConflict, 10253)
	if _, _, msg := apiErr(t, err); msg != "queue_delivery_paused" {
		t.Errorf("message %q", msg)
	}
	if _, err := e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryPaused: cloudflare.F(false)})}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "resumed", func() bool { return !e.stats("held").Paused })
	leased := e.pullN(id, 1, time.Minute, 10*time.Second)
	e.pushJSON(id, 3, 600)

	q, err := e.q.Purge.Start(e.ctx, id, queues.PurgeStartParams{AccountID: acc, DeleteMessagesPermanently: cloudflare.F(true)})
	if err != nil || q.QueueName != "held" {
		t.Fatalf("purge: %+v, %v", q, err)
	}
	if s := e.stats("held"); s.Ready+s.Delayed+s.InFlight != 0 {
		t.Errorf("after the purge: %+v", s)
	}
	st, err := e.q.Purge.Status(e.ctx, id, queues.PurgeStatusParams{AccountID: acc})
	if err != nil || st.Completed != "true" || st.StartedAt == "" {
		t.Errorf("purge status: %+v, %v", st, err)
	}
	// The purged lease's ack changes nothing; nothing comes back.
	e.ack(id, []string{leased[0].LeaseID}, nil)
	if ms := e.pull(id, 10, time.Second); len(ms) != 0 {
		t.Errorf("pulled after the purge: %+v", ms)
	}
	_, err = e.q.Purge.Start(e.ctx, id, queues.PurgeStartParams{AccountID: acc})
	wantAPIErr(t, err, http.StatusBadRequest, 10207)
}

// TestDelays: delay_seconds of a push, of a bulk push and of its messages, 0–86400; the
// queue's delivery_delay for messages without one of their own.
func TestDelays(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("later")
	e.pullConsumer(id, pullSettings(10, 3, 30*time.Second), "")
	e.pushJSON(id, "a day", 86400)
	if _, err := e.q.Messages.BulkPush(e.ctx, id, queues.MessageBulkPushParams{AccountID: acc, DelaySeconds: cloudflare.F(600.0),
		Messages: cloudflare.F([]queues.MessageBulkPushParamsMessageUnion{
			queues.MessageBulkPushParamsMessagesMqQueueMessageJson{Body: cloudflare.F[any]("batch delay")},
			queues.MessageBulkPushParamsMessagesMqQueueMessageJson{Body: cloudflare.F[any]("now"), DelaySeconds: cloudflare.F(0.0)},
		})}); err != nil {
		t.Fatal(err)
	}
	if ms := e.pullN(id, 1, time.Minute, 10*time.Second); decodeJSON(t, ms[0]) != `"now"` {
		t.Errorf("pulled %s", decodeJSON(t, ms[0]))
	}
	page, err := e.srv.Client().Peek(e.ctx, "later", server.PeekOptions{State: "delayed"})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("delayed: %+v, %v", page.Messages, err)
	}
	now := time.Now()
	for _, m := range page.Messages {
		due := time.UnixMilli(m.Due).Sub(now)
		if body := string(m.Body); body == `"a day"` && (due < 86390*time.Second || due > 86400*time.Second) ||
			body == `"batch delay"` && (due < 590*time.Second || due > 600*time.Second) {
			t.Errorf("%s due in %v", body, due)
		}
	}
	// delivery_delay delays what comes without a delay of its own.
	if _, err := e.q.Edit(e.ctx, id, queues.QueueEditParams{AccountID: acc, Queue: queues.QueueParam{
		Settings: cloudflare.F(queues.QueueSettingsParam{DeliveryDelay: cloudflare.F(1.0)})}}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	e.pushJSON(id, "held a second", 0)
	if ms := e.pull(id, 1, time.Minute); len(ms) != 0 {
		t.Fatalf("delivery_delay 1: pulled at once %+v", ms)
	}
	e.pullN(id, 1, time.Minute, 10*time.Second)
	if time.Since(sent) < time.Second {
		t.Errorf("delivered after %v, want at least the queue's delivery_delay", time.Since(sent))
	}
}

// TestMessageErrors: each of Cloudflare's codes for bad pushes, pulls and acks.
func TestMessageErrors(t *testing.T) {
	t.Parallel()
	e := start(t, server.Config{})
	id := e.create("strict")
	path := "/accounts/" + account + "/queues/" + id + "/messages"
	for _, tc := range []struct {
		name, path, body string
		status, code     int
	}{
		{"not JSON", "", `{"body":`, 400, 10208},
		{"no body", "", `{"content_type":"json"}`, 400, 10207},
		{"a marker", "", `{"body":{"$句柄":1}}`, 400, 10207},
		{"nesting 25", "", `{"body":` + strings.Repeat("[", 25) + strings.Repeat("]", 25) + `}`, 400, 10207},
		{"text not a string", "", `{"body":1,"content_type":"text"}`, 400, 10207},
		{"bytes", "", `{"body":"AA==","content_type":"bytes"}`, 400, 10203},
		{"delay -1", "", `{"body":1,"delay_seconds":-1}`, 400, 10203},
		{"delay 86401", "", `{"body":1,"delay_seconds":86401}`, 400, 10203},
		{"delay 1.5", "", `{"body":1,"delay_seconds":1.5}`, 400, 10203},
		{"json 128001 bytes", "", `{"body":"` + strings.Repeat("x", 127999) + `"}`, 413, 10204},
		{"text 128001 bytes", "", `{"body":"` + strings.Repeat("x", 128001) + `","content_type":"text"}`, 413, 10204},
		{"batch delay 86401", "/batch", `{"delay_seconds":86401,"messages":[{"body":1}]}`, 400, 10202},
		{"batch of 0", "/batch", `{"messages":[]}`, 400, 10206},
		{"batch of 101", "/batch", `{"messages":[` + strings.Repeat(`{"body":1},`, 100) + `{"body":1}]}`, 400, 10206},
		{"batch of 256001 bytes", "/batch", `{"messages":[{"body":"` + strings.Repeat("x", 127998) + `"},{"body":"` + strings.Repeat("x", 127998) + `"},{"body":1}]}`, 413, 10205},
		{"batch item delay", "/batch", `{"messages":[{"body":1,"delay_seconds":"5"}]}`, 400, 10203},
		{"batch without messages", "/batch", `{}`, 400, 10207},
		{"pull without a consumer", "/pull", `{}`, 409, 10255},
	} {
		status, body := e.raw("POST", path+tc.path, "Bearer "+token, tc.body)
		if status != tc.status || !strings.Contains(body, `"code":`+itoa(tc.code)+`,`) || !strings.HasPrefix(body, `{"success":false,`) {
			t.Errorf("%s: %d %s, want %d with code %d", tc.name, status, clip(body), tc.status, tc.code)
		}
	}
	// Exactly 128000 bytes is a message; 256000 in all is a batch.
	if status, body := e.raw("POST", path, "Bearer "+token, `{"body":"`+strings.Repeat("x", 127998)+`"}`); status != 200 {
		t.Errorf("128000 bytes: %d %s", status, clip(body))
	}
	if status, body := e.raw("POST", path+"/batch", "Bearer "+token, `{"messages":[{"body":"`+strings.Repeat("x", 127998)+`"},{"body":"`+strings.Repeat("x", 127998)+`"}]}`); status != 200 {
		t.Errorf("256000 bytes: %d %s", status, clip(body))
	}
	e.pullConsumer(id, pullSettings(10, 3, 30*time.Second), "")
	for _, tc := range []struct{ name, path, body string }{
		{"batch_size 0", "/pull", `{"batch_size":0}`},
		{"batch_size 101", "/pull", `{"batch_size":101}`},
		{"visibility 0", "/pull", `{"visibility_timeout_ms":0}`},
		{"visibility over 12 h", "/pull", `{"visibility_timeout":43200001}`},
		{"acks not an array", "/ack", `{"acks":{}}`},
		{"ack without lease", "/ack", `{"acks":[{}]}`},
	} {
		status, body := e.raw("POST", path+tc.path, "Bearer "+token, tc.body)
		if status != 400 || !strings.Contains(body, `"code":10207,`) {
			t.Errorf("%s: %d %s, want 400 with code 10207", tc.name, status, clip(body))
		}
	}
	if status, body := e.raw("POST", path+"/ack", "Bearer "+token, `{"retries":[{"lease_id":"x","delay_seconds":86401}]}`); status != 400 || !strings.Contains(body, `"code":10203,`) {
		t.Errorf("retry delay 86401: %d %s", status, clip(body))
	}
	// Cloudflare's own guide writes visibility_timeout; both are read.
	vid := e.create("visible")
	e.pullConsumer(vid, pullSettings(10, 3, 30*time.Second), "")
	e.pushJSON(vid, "v", 0)
	status, body := e.raw("POST", "/accounts/"+account+"/queues/"+vid+"/messages/pull", "Bearer "+token, `{"visibility_timeout":200,"batch_size":1}`)
	if status != 200 || !strings.Contains(body, `"attempts":1`) {
		t.Fatalf("pull: %d %s", status, clip(body))
	}
	if again := e.pullN(vid, 1, time.Minute, 10*time.Second); again[0].Attempts != 2 {
		t.Errorf("visibility_timeout 200 ms: attempts %v", again[0].Attempts)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
