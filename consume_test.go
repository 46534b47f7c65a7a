package duilie_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/duilietest"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// runBatch runs fn as a queue event on a hand-made batch and returns the event's failure.
func runBatch(t *testing.T, queue string, msgs []platform.Message, fn duilie.Handler) error {
	t.Helper()
	h, err := host.New(host.Config{Platform: memory.New(memory.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	ds := make([]platform.Delivery, len(msgs))
	for i, m := range msgs {
		ds[i] = platform.Delivery{Message: m}
	}
	cc := server.DefaultConsumerConfig("q")
	cc.Queue = queue // ReadBatch reports any name a platform gives
	_, err = h.RunBatch(context.Background(), cc, ds, fn)
	return err
}

// readBatch returns ReadBatch's text and error for a hand-made batch.
func readBatch(t *testing.T, queue string, msgs []platform.Message) (string, error) {
	t.Helper()
	var text string
	var readErr error
	failure := runBatch(t, queue, msgs, func(ev *duilie.Event) error {
		text, readErr = duilie.ReadBatch(ev)
		return nil
	})
	var ab *duilie.Abort
	if errors.As(readErr, &ab) && !errors.Is(failure, readErr) {
		t.Errorf("ReadBatch aborted with %v but the event ended with %v", readErr, failure)
	}
	return text, readErr
}

func jsonMsg(id string, body string) platform.Message {
	return platform.Message{ID: id, Timestamp: 1700000000123, Attempts: 1, Body: []byte(body), ContentType: platform.JSON}
}

func TestReadBatchEmpty(t *testing.T) {
	text, err := readBatch(t, "q", nil)
	if err != nil || text != `{"queue":"q","messages":[]}` {
		t.Fatalf("got %q, %v", text, err)
	}
}

func TestReadBatchShape(t *testing.T) {
	msgs := []platform.Message{
		{ID: "a", Timestamp: 1, Attempts: 1, Body: []byte(`{"z":1,"a":2,"1":3}`), ContentType: platform.JSON},
		{ID: "b", Timestamp: 1700000000123, Attempts: 7, Body: []byte(" [1E2, -0, \"\\u2028\"] "), ContentType: platform.JSON},
		{ID: "c", Timestamp: 9007199254740991, Attempts: 100, Body: []byte("plain \"text\"\n\u2028 文字"), ContentType: platform.Text},
	}
	text, err := readBatch(t, "page-render", msgs)
	want := `{"queue":"page-render","messages":[` +
		`{"id":"a","attempts":1,"timestamp":1,"body":{"1":3,"z":1,"a":2}},` +
		`{"id":"b","attempts":7,"timestamp":1700000000123,"body":[100,0,"` + "\u2028" + `"]},` +
		`{"id":"c","attempts":100,"timestamp":9007199254740991,"body":"plain \"text\"\n` + "\u2028" + ` 文字"}]}`
	if err != nil || text != want {
		t.Fatalf("got  %s (%v)\nwant %s", text, err, want)
	}
}

// Queue names and ids are whatever the platform reports, encoded as JSON.stringify would.
func TestReadBatchStrangeNames(t *testing.T) {
	long := strings.Repeat("长", 2000)
	for _, tc := range []struct{ name, want string }{
		{`quote"back\slash`, `"quote\"back\\slash"`},
		{"ctl\x00\x01\x1f\x7f", `"ctl\u0000\u0001\u001f` + "\x7f\""},
		{"line\u2028para\u2029", "\"line\u2028para\u2029\""},
		{"emoji 😀 \t\n", "\"emoji 😀 \\t\\n\""},
		{long, `"` + long + `"`},
	} {
		text, err := readBatch(t, tc.name, []platform.Message{jsonMsg(tc.name, "1")})
		want := `{"queue":` + tc.want + `,"messages":[{"id":` + tc.want + `,"attempts":1,"timestamp":1700000000123,"body":1}]}`
		if err != nil || text != want {
			t.Errorf("name %q:\n got %s (%v)\nwant %s", tc.name, text, err, want)
		}
	}
}

func TestReadBatchSizes(t *testing.T) {
	for _, n := range []int{3, 100, 1000} {
		msgs := make([]platform.Message, n)
		for i := range msgs {
			msgs[i] = jsonMsg(fmt.Sprintf("%032x", i), fmt.Sprintf(`{"i":%d}`, i))
		}
		text, err := readBatch(t, "q", msgs)
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Queue    string
			Messages []struct {
				ID   string
				Body struct{ I int }
			}
		}
		if err := json.Unmarshal([]byte(text), &b); err != nil || len(b.Messages) != n {
			t.Fatalf("n=%d: %v, %d messages", n, err, len(b.Messages))
		}
		for i, m := range b.Messages {
			if m.ID != fmt.Sprintf("%032x", i) || m.Body.I != i {
				t.Fatalf("n=%d: message %d is %+v", n, i, m)
			}
		}
	}
}

// The first message that is not a JSON value decides, at its index.
func TestReadBatchNotJSON(t *testing.T) {
	ok := jsonMsg("ok", `"fine"`)
	for _, tc := range []struct {
		name string
		bad  platform.Message
	}{
		{"bytes", platform.Message{ID: "x", Body: []byte("1"), ContentType: platform.Bytes}},
		{"v8", platform.Message{ID: "x", Body: []byte{0xff, 0x0d}, ContentType: platform.V8}},
		{"unknown content type", platform.Message{ID: "x", Body: []byte("1"), ContentType: "xml"}},
		{"broken json", jsonMsg("x", `{"a":`)},
		{"invalid utf-8", jsonMsg("x", "\"\xc3\x28\"")},
		{"marker", jsonMsg("x", `{"$未定义":null}`)},
		{"escaped marker", jsonMsg("x", `{"k":1,"\u0024大整数":"9"}`)},
		{"nested marker", jsonMsg("x", `[[{"a":{"$数字":"Infinity"}}]]`)},
		{"infinity", jsonMsg("x", `1e999`)},
		{"nested -infinity", jsonMsg("x", `{"a":[-1e400]}`)},
	} {
		for _, at := range []int{0, 2} {
			msgs := []platform.Message{ok, ok, ok}
			msgs[at] = tc.bad
			if at == 0 {
				msgs[2] = platform.Message{ID: "y", Body: []byte("{"), ContentType: platform.JSON} // a later problem does not decide
			}
			_, err := readBatch(t, "q", msgs)
			var ex *duilie.Exception
			if !errors.As(err, &ex) || ex.Message != fmt.Sprintf("队列消息正文不是 JSON 值：序号 %d", at) {
				t.Errorf("%s at %d: got %v", tc.name, at, err)
			}
		}
	}
}

// 32 levels are readable; 33 abort the event with 宿主结果嵌套过深, unless an earlier message
// is not a JSON value.
func TestReadBatchNesting(t *testing.T) {
	deep := func(n int) string {
		return strings.Repeat(`{"a":[`, n/2) + strings.Repeat("[", n%2) + "0" + strings.Repeat("]", n%2) + strings.Repeat("]}", n/2)
	}
	text, err := readBatch(t, "q", []platform.Message{jsonMsg("a", deep(32))})
	if err != nil || !strings.Contains(text, deep(32)) {
		t.Fatalf("32 levels: %v", err)
	}
	var ab *duilie.Abort
	_, err = readBatch(t, "q", []platform.Message{jsonMsg("a", "1"), jsonMsg("b", deep(33)), jsonMsg("c", "{")})
	if !errors.As(err, &ab) || ab.Reason != "宿主结果嵌套过深" {
		t.Fatalf("33 levels: got %v, want the abort 宿主结果嵌套过深", err)
	}
	// Within one body, nesting beyond 32 is judged before markers, as when sending.
	_, err = readBatch(t, "q", []platform.Message{jsonMsg("a", strings.Replace(deep(33), "0", `{"$句柄":1}`, 1))})
	if !errors.As(err, &ab) || ab.Reason != "宿主结果嵌套过深" {
		t.Fatalf("33 levels with a marker: got %v, want the abort", err)
	}
	_, err = readBatch(t, "q", []platform.Message{jsonMsg("a", "{"), jsonMsg("b", deep(33))})
	var ex *duilie.Exception
	if !errors.As(err, &ex) || ex.Message != "队列消息正文不是 JSON 值：序号 0" {
		t.Fatalf("a bad body before a deep one: got %v", err)
	}
	// After the abort, every call returns it and the event fails.
	var later []error
	failure := runBatch(t, "q", []platform.Message{jsonMsg("b", deep(40))}, func(ev *duilie.Event) error {
		_, first := duilie.ReadBatch(ev)
		later = append(later, first, duilie.Ack(ev, 0), duilie.Send(ev, "X", "1", 0))
		return nil
	})
	if !errors.As(failure, &ab) || ab.Reason != "宿主结果嵌套过深" {
		t.Fatalf("event ended with %v", failure)
	}
	for _, err := range later {
		if !errors.As(err, &ab) || ab.Reason != "宿主结果嵌套过深" {
			t.Errorf("later call returned %v", err)
		}
	}
}

func TestReadBatchOf(t *testing.T) {
	type task struct {
		Kind string `json:"kind"`
		N    int    `json:"n"`
	}
	msgs := []platform.Message{
		{ID: "a", Timestamp: 1700000000123, Attempts: 2, Body: []byte(`{"kind":"page","n":1E2}`), ContentType: platform.JSON},
		{ID: "b\u2028", Timestamp: 5, Attempts: 1, Body: []byte(`{"kind":"release"}`), ContentType: platform.JSON},
	}
	var got *duilie.Batch[task]
	var err error
	runBatch(t, "q", msgs, func(ev *duilie.Event) error { got, err = duilie.ReadBatchOf[task](ev); return nil })
	if err != nil || got.Queue != "q" || len(got.Messages) != 2 {
		t.Fatalf("got %+v, %v", got, err)
	}
	m := got.Messages[0]
	if m.ID != "a" || m.Attempts != 2 || m.Timestamp.UnixMilli() != 1700000000123 || m.Body != (task{"page", 100}) {
		t.Errorf("message 0: %+v", m)
	}
	if got.Messages[1].ID != "b\u2028" || got.Messages[1].Body.Kind != "release" {
		t.Errorf("message 1: %+v", got.Messages[1])
	}
	// The same checks as ReadBatch.
	runBatch(t, "q", []platform.Message{jsonMsg("x", "{")}, func(ev *duilie.Event) error { _, err = duilie.ReadBatchOf[task](ev); return nil })
	var ex *duilie.Exception
	if !errors.As(err, &ex) || ex.Message != "队列消息正文不是 JSON 值：序号 0" {
		t.Errorf("bad body: %v", err)
	}
	// A body that does not fit T is an ordinary error naming its index.
	runBatch(t, "q", []platform.Message{jsonMsg("x", `{"kind":1}`)}, func(ev *duilie.Event) error { _, err = duilie.ReadBatchOf[task](ev); return nil })
	if err == nil || errors.As(err, &ex) || !strings.Contains(err.Error(), "message 0") {
		t.Errorf("mistyped body: %v", err)
	}
	runBatch(t, "q", nil, func(ev *duilie.Event) error { _, err = duilie.ReadBatchOf[task](ev); return nil })
	if err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

// SPEC §6 and §12 row 11: an index outside the batch (checked first) and a retry delay outside
// 0–43200 are catchable exceptions, and the platform gets no call for them; calls in range are
// recorded, the first one on a message winning.
func TestAckRetryBounds(t *testing.T) {
	var errs []error
	res := duilietest.RunQueue(func(ev *duilie.Event) error {
		errs = []error{
			duilie.Ack(ev, 3), duilie.Ack(ev, -1),
			duilie.Retry(ev, 3, 0), duilie.Retry(ev, -1, 5), duilie.Retry(ev, 3, 99999),
			duilie.Retry(ev, 0, -1), duilie.Retry(ev, 0, 43201),
			duilie.Ack(ev, 1), duilie.Retry(ev, 2, 43200),
			duilie.Ack(ev, 1), duilie.Retry(ev, 1, 5), // repeated calls are no errors; the first counts
		}
		return nil
	}, duilietest.Config{}, duilietest.Message{Body: "0"}, duilietest.Message{Body: "1"}, duilietest.Message{Body: "2"})
	for i, want := range []string{"队列消息序号越界", "队列消息序号越界", "队列消息序号越界", "队列消息序号越界", "队列消息序号越界",
		"延迟秒数须在 0 至 43200 之间", "延迟秒数须在 0 至 43200 之间", "", "", "", ""} {
		if want == "" {
			if errs[i] != nil {
				t.Errorf("call %d: %v", i, errs[i])
			}
			continue
		}
		wantException(t, errs[i], want)
	}
	if res.Outcome != server.OK || fmt.Sprint(res.Acks) != "[1]" || fmt.Sprint(res.Retries) != "[{2 43200}]" {
		t.Fatalf("outcome %s, acks %v, retries %v", res.Outcome, res.Acks, res.Retries)
	}
	if c := res.Messages[0].Call; c.Kind != platform.NoCall {
		t.Errorf("message 0, whose calls were all refused, has the call %+v", c)
	}
}

// SPEC §12 row 13: the consumer functions in a plain HTTP request are the catchable
// 当前事件不是队列事件, and the event goes on.
func TestConsumerFunctionsInFetch(t *testing.T) {
	var kind duilie.Kind
	var errs []error
	resp, res := duilietest.RunFetch(func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		kind = ev.Kind()
		_, err := duilie.ReadBatch(ev)
		_, typed := duilie.ReadBatchOf[any](ev)
		errs = append(errs, err, typed, duilie.Ack(ev, 0), duilie.Retry(ev, 0, 0))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}, duilietest.Config{}, httptest.NewRequest("GET", "/", nil))
	if kind != duilie.FetchEvent || resp.StatusCode != http.StatusNoContent || res.Outcome != server.OK {
		t.Fatalf("kind %q, status %d, outcome %s (%v)", kind, resp.StatusCode, res.Outcome, res.Err)
	}
	for _, err := range errs {
		wantException(t, err, "当前事件不是队列事件")
	}
}
