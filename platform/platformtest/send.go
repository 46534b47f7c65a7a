package platformtest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// Storing: what the interface sends reaches the platform exactly, and the platform gives every
// body back byte for byte, with its content type.

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

const pageTask = `{"kind":"page","url":"/release/x","version":"v8","refresh":true}`

// Row 1: the platform's send gets the same value, options exactly {"contentType":"json"}, and
// delivers it with a fresh id, attempts 1 and its enqueue time.
func testRow01SendSameValue(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	before := time.Now().UnixMilli()
	e.mustSend(pageTask)
	after := time.Now().UnixMilli()
	e.wantCalls(`send(` + pageTask + `, {"contentType":"json"})`)
	m := e.consume(config(queueName), nil).next(10 * time.Second).batch.Messages[0]
	if string(m.Body) != pageTask {
		t.Errorf("delivered body %s, want %s", m.Body, pageTask)
	}
	if !idPattern.MatchString(m.ID) || m.Attempts != 1 || m.Timestamp < before || m.Timestamp > after {
		t.Errorf("delivered id %q attempts %d timestamp %d, want 32 hex, 1, within [%d, %d]", m.ID, m.Attempts, m.Timestamp, before, after)
	}
}

// Row 2: delays 30 and 43200 reach the platform as options and hold the messages back. (The
// refused delays, -1 and 43201, are the interface's: TestConformanceRowsRefused in package duilie.)
func testRow02DelaysReachPlatform(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	for _, d := range []int{30, 43200} {
		if err := e.send(`1`, d); err != nil {
			t.Fatalf("delay %d: %v", d, err)
		}
	}
	e.wantCalls(`send(1, {"contentType":"json","delaySeconds":30})`, `send(1, {"contentType":"json","delaySeconds":43200})`)
	e.eventuallyStats("two delayed messages", func(s platform.QueueStats) bool { return s.Delayed == 2 && s.Ready == 0 })
	e.consume(config(queueName), nil).none(300 * time.Millisecond)
}

// Row 4: a body of exactly 128000 bytes is stored and delivered whole. (One byte more is the
// interface's exception.)
func testRow04BodyOf128000Bytes(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	exact := `"` + strings.Repeat("a", 127998) + `"`
	e.mustSend(exact)
	e.wantCalls(`send(` + exact + `, {"contentType":"json"})`)
	m := e.consume(config(queueName), nil).next(10 * time.Second).batch.Messages[0]
	if string(m.Body) != exact {
		t.Errorf("128000-byte body came back as %d bytes", len(m.Body))
	}
}

// items returns a sendBatch text of n items with bodies 0..n-1, and the sendBatch call the
// platform receives for it.
func items(n int) (text, call string) {
	in, out := make([]string, n), make([]string, n)
	for i := range in {
		in[i] = fmt.Sprintf(`{"body":%d}`, i)
		out[i] = fmt.Sprintf(`{"body":%d,"contentType":"json"}`, i)
	}
	return "[" + strings.Join(in, ",") + "]", "sendBatch([" + strings.Join(out, ",") + "])"
}

// Row 5: batches of 1 and 100 items are stored and delivered, each message once. (0 and 101
// items are the interface's exceptions.)
func testRow05BatchesOf1And100(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	var calls []string
	for _, n := range []int{1, 100} {
		text, call := items(n)
		if err := e.sendBatch(text); err != nil {
			t.Fatalf("batch of %d: %v", n, err)
		}
		calls = append(calls, call)
	}
	e.wantCalls(calls...)
	ms := e.consume(config(queueName), nil).messages(101, 10*time.Second)
	counts := map[string]int{}
	for _, m := range ms {
		counts[string(m.Body)]++
	}
	if counts["0"] != 2 || counts["99"] != 1 || len(counts) != 100 {
		t.Errorf("delivered bodies %v", counts)
	}
}

// Row 7: bodies that look like batch syntax, and strings with quotes, backslashes and escapes,
// come back byte for byte, never split.
func testRow07BodiesRestored(t *testing.T, hn Harness) {
	e := newEnv(t, hn)
	bodies := []string{`"],["`, `{"body":1}`, `"say \"hi\" \\ back\\\\slash"`, `[["],[",{"body":"],["}]]`, `"\u2028\ud800"`}
	want := []string{`"],["`, `{"body":1}`, `"say \"hi\" \\ back\\\\slash"`, `[["],[",{"body":"],["}]]`, "\"\u2028\\ud800\""}
	in, out := make([]string, len(bodies)), make([]string, len(want))
	for i := range bodies {
		in[i] = `{"body":` + bodies[i] + `}`
		out[i] = `{"body":` + want[i] + `,"contentType":"json"}`
	}
	if err := e.sendBatch("[" + strings.Join(in, ",") + "]"); err != nil {
		t.Fatal(err)
	}
	e.wantCalls("sendBatch([" + strings.Join(out, ",") + "])")
	ms := e.consume(batched(len(want)), nil).messages(len(want), 10*time.Second)
	for i, m := range ms {
		if string(m.Body) != want[i] {
			t.Errorf("body %d: got %s, want %s", i, m.Body, want[i])
		}
	}
}

// Messages of foreign producers keep their content type and body bytes, whatever they hold:
// the interface judges them when a program reads them (package duilie's TestReadBatch tests).
func testContentTypesRestored(t *testing.T, hn Harness) {
	inj, ok := hn.(Injector)
	if !ok {
		t.Skip("the harness cannot place foreign messages on its platform (platformtest.Injector)")
	}
	e := newEnv(t, hn)
	msgs := []platform.Message{
		{Body: []byte(` { "b" : 1E2 , "a" : -0 } `), ContentType: platform.JSON}, // not normalized by the platform
		{Body: []byte("{"), ContentType: platform.JSON},
		{Body: []byte("a \"quoted\"\n\u2028 文字"), ContentType: platform.Text},
		{Body: []byte{0, 1, 0xff, '\n', 0x80}, ContentType: platform.Bytes},
		{Body: []byte{0xff, 0x0f, 0x54}, ContentType: platform.V8},
		{Body: []byte(nested(40, "0")), ContentType: platform.JSON},
	}
	inj.Inject(e.p, queueName, msgs...)
	c := e.contract(queueName, time.Minute)
	got := receive(t, c, len(msgs), 10*time.Second)
	ids := map[string]bool{}
	for i, d := range got {
		if string(d.Body) != string(msgs[i].Body) || d.ContentType != msgs[i].ContentType {
			t.Errorf("message %d: %s %q, want %s %q", i, d.ContentType, d.Body, msgs[i].ContentType, msgs[i].Body)
		}
		if d.ID == "" || ids[d.ID] || d.Attempts != 1 {
			t.Errorf("message %d: id %q, attempts %d", i, d.ID, d.Attempts)
		}
		ids[d.ID] = true
	}
	settle(t, c, queueName, platform.Action{Kind: platform.Done}, got...)
}

// nested returns inner nested n arrays deep.
func nested(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}
