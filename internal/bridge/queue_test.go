//go:build unix

package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

const textPlain = "text/plain; charset=utf-8"

// TestEveryFunction calls each of the six functions from a program, with results, exceptions
// and the accepted forms of integers, and checks every reply the program received and every
// call the platform received.
func TestEveryFunction(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies(`{"n":0}`, `{"s":"引号\"与\\反斜杠 😀","a":[1,null,true]}`, `"third"`)
	p, out := e.program(`
		call("读取入站事件种类")
		call("读取队列批次")
		call("发送队列消息", "Q", '{"kind":"page","url":"/release/x"}', 0)
		call("发送队列消息", "Q", ' [1E2, "\u2028"] ', 30)
		raw('["发送队列消息","Q","1",3e1]')
		raw(r'["\u53d1送队列消息","Q","2",-0]')
		call("发送队列消息", "Q", "{", 0)
		call("发送队列消息", "Q", "1", 43201)
		call("发送队列消息", "", "1", 0)
		call("发送队列消息", "FULL", "1", 0)
		call("发送队列消息", "Q", " " * (9 << 20), 0)
		call("批量发送队列消息", "Q", " " * (9 << 20))
		call("批量发送队列消息", "Q", '[{"body":{"x":"],["}},{"body":2,"delaySeconds":30.0}]')
		call("批量发送队列消息", "Q", "[]")
		call("批量发送队列消息", "Q", '[{"body":1,"contentType":"json"}]')
		call("确认队列消息", 0)
		call("确认队列消息", 3)
		call("确认队列消息", -1)
		raw('["重试队列消息",1,3e1]')
		call("重试队列消息", 2, 43201)
		call("重试队列消息", 9007199254740992, 0)
	`)
	if err := e.runQueue(3, p.Queue); err != nil {
		t.Fatalf("event failed: %v", err)
	}
	batch := `{"queue":"in","messages":[` +
		`{"id":"m0","attempts":1,"timestamp":1700000000000,"body":{"n":0}},` +
		`{"id":"m1","attempts":1,"timestamp":1700000000001,"body":{"s":"引号\"与\\反斜杠 😀","a":[1,null,true]}},` +
		`{"id":"m2","attempts":1,"timestamp":1700000000002,"body":"third"}]}`
	want := []exchange{
		{Status: 200, Body: "queue"},
		{Status: 200, Body: batch},
		{Status: 200}, {Status: 200}, {Status: 200}, {Status: 200},
		{Status: 400, Body: "消息体不是有效的 JSON 文字"},
		{Status: 400, Body: "延迟秒数须在 0 至 43200 之间"},
		{Status: 400, Body: "队列绑定名不得为空"},
		{Status: 400, Body: "队列发送失败：Queue is full"},
		{Status: 400, Body: "消息体超过 128000 字节"}, // a 9 MiB call: the interface's own limit, not a malformed call
		{Status: 400, Body: "批量消息文字超过 1 MiB"},
		{Status: 200},
		{Status: 400, Body: "批量消息不得为空"},
		{Status: 400, Body: "批量消息项只允许 body 与 delaySeconds 两个字段"},
		{Status: 200},
		{Status: 400, Body: "队列消息序号越界"},
		{Status: 400, Body: "队列消息序号越界"},
		{Status: 200},
		{Status: 400, Body: "延迟秒数须在 0 至 43200 之间"},
		{Status: 400, Body: "队列消息序号越界"},
	}
	got := out.replies()
	if len(got) != len(want) {
		t.Fatalf("the program got %d replies, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Status != w.Status || got[i].Body != w.Body || got[i].Type != textPlain {
			t.Errorf("reply %d: got %d %q (%s), want %d %q (%s)", i, got[i].Status, got[i].Body, got[i].Type, w.Status, w.Body, textPlain)
		}
	}
	wantCalls := []string{
		`out: send({"kind":"page","url":"/release/x"}, {"contentType":"json"})`,
		`out: send([100,"` + "\u2028" + `"], {"contentType":"json","delaySeconds":30})`,
		`out: send(1, {"contentType":"json","delaySeconds":30})`,
		`out: send(2, {"contentType":"json"})`,
		`full: send(1, {"contentType":"json"})`,
		`out: sendBatch([{"body":{"x":"],["},"contentType":"json"},{"body":2,"contentType":"json","delaySeconds":30}])`,
		`in: ack(m0)`,
		`in: retry(m1, {"delaySeconds":30})`,
	}
	if got := e.calls(); !slices.Equal(got, wantCalls) {
		t.Errorf("platform calls:\n got %q\nwant %q", got, wantCalls)
	}
	if s := e.lastSettlement(); s.Failed || s.Messages[2].Action.Kind != platform.Done {
		t.Errorf("the event ended normally and message 2 had no call, so it is done: %+v", s)
	}
}

// TestAbortKillsProgram makes calls that abort the event: the reply is 500 with the abort, the
// program and its grandchild are killed, the event fails with the abort and its batch is
// delivered again with attempts + 1. An ack made before the abort stands.
func TestAbortKillsProgram(t *testing.T) {
	for _, tc := range []struct{ binding, abort string }{
		{"X", "未授权的QUEUE绑定：X"},
		{"NOCONF", "绑定不存在：NOCONF"},
	} {
		t.Run(tc.binding, func(t *testing.T) {
			e := newEnv(t, 0)
			e.putBodies("1", "2")
			p, out := e.program(fmt.Sprintf(`
				pids(grandchild())
				call("确认队列消息", 0)
				call("发送队列消息", %q, "{}", 0)
				time.sleep(30)
				note("survived")
			`, tc.binding))
			start := time.Now()
			err := e.runQueue(2, p.Queue)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the event took %v: the program was not killed", took)
			}
			var abort *duilie.Abort
			if !errors.As(err, &abort) || abort.Reason != tc.abort {
				t.Fatalf("event failure = %v, want the abort %s", err, tc.abort)
			}
			last := e.rec.all()[len(e.rec.all())-1]
			if last.Status != 500 || last.Body != tc.abort || last.Type != textPlain {
				t.Errorf("the bridge replied %d %q (%s), want 500 %q", last.Status, last.Body, last.Type, tc.abort)
			}
			assertGone(t, out)
			if slices.Contains(out.notes(), any("survived")) {
				t.Error("the program ran on after the abort")
			}
			if s := e.lastSettlement(); !s.Failed || s.Messages[0].Action.Kind != platform.Done || s.Messages[1].Action.Kind != platform.Redeliver {
				t.Errorf("settlement %+v: want failed, message 0 done (acked), message 1 redelivered", s)
			}
			if ds := e.receive(1); ds[0].ID != "m1" || ds[0].Attempts != 2 {
				t.Errorf("redelivered %s with attempts %d, want m1 with attempts 2", ds[0].ID, ds[0].Attempts)
			}
		})
	}
}

// TestMalformedCalls sends one malformed call of each kind from a program: the reply is 500
// with 桥接调用无效：…, the program is killed and the event fails with that abort.
func TestMalformedCalls(t *testing.T) {
	e := newEnv(t, 0)
	for _, tc := range []struct {
		name, body, wrong string // body: a Python expression
	}{
		{"empty body", `b""`, "调用不是有效的 JSON 文字"},
		{"not JSON", `'["读取队列批次"'`, "调用不是有效的 JSON 文字"},
		{"trailing garbage", `'["读取队列批次"] x'`, "调用不是有效的 JSON 文字"},
		{"invalid UTF-8", `b'["\xff"]'`, "调用不是有效的 JSON 文字"},
		{"object", `'{"name":"读取队列批次"}'`, "调用须为 JSON 数组"},
		{"bare string", `'"读取队列批次"'`, "调用须为 JSON 数组"},
		{"empty array", `'[]'`, "调用数组为空"},
		{"name not a string", `'[["读取队列批次"]]'`, "接口名须为字符串"},
		{"name with a lone surrogate", `'["\\ud800"]'`, "接口名含有不成对的代理项"},
		{"unknown name", `'["foo"]'`, "未知的接口名 foo"},
		{"long unknown name", `'["' + "名" * 100 + '"]'`, "未知的接口名 " + strings.Repeat("名", 64) + "…"},
		{"too few arguments", `'["确认队列消息"]'`, "确认队列消息需要 1 个参数，收到 0 个"},
		{"too many arguments", `'["读取队列批次",0]'`, "读取队列批次需要 0 个参数，收到 1 个"},
		{"string for integer", `'["确认队列消息","0"]'`, "确认队列消息的第 1 个参数须为整数"},
		{"fraction", `'["重试队列消息",0,1.5]'`, "重试队列消息的第 2 个参数须为整数"},
		{"infinity", `'["确认队列消息",1e999]'`, "确认队列消息的第 1 个参数超出 ±2^53"},
		{"2^53+1", `'["确认队列消息",9007199254740993]'`, "确认队列消息的第 1 个参数超出 ±2^53"},
		{"near 1", `'["确认队列消息",1.0000000000000000001]'`, "确认队列消息的第 1 个参数须为整数"},
		{"nested", `'[' * (20 << 20)`, "调用嵌套超过 2 层"},
		{"beyond 2^53", `'["确认队列消息",9007199254740994]'`, "确认队列消息的第 1 个参数超出 ±2^53"},
		{"below -2^53", `'["确认队列消息",-1e300]'`, "确认队列消息的第 1 个参数超出 ±2^53"},
		{"number for string", `'["发送队列消息","Q",{"a":1},0]'`, "发送队列消息的第 2 个参数须为字符串"},
		{"string with a lone surrogate", `'["批量发送队列消息","Q","\\udc00"]'`, "批量发送队列消息的第 2 个参数含有不成对的代理项"},
		{"over 64 MiB", `'["发送队列消息","Q","' + " " * (64 << 20) + '",0]'`, "调用超过 64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.putBodies("1")
			p, out := e.program(`
				raw(` + tc.body + `)
				time.sleep(30)
				note("survived")
			`)
			want := event.BadCall.Reason + tc.wrong
			err := e.runQueue(1, p.Queue)
			var abort *duilie.Abort
			if !errors.As(err, &abort) || abort.Reason != want {
				t.Fatalf("event failure = %v, want the abort %s", err, want)
			}
			all := e.rec.all()
			if last := all[len(all)-1]; last.Status != 500 || last.Body != want {
				t.Errorf("the bridge replied %d %q, want 500 %q", last.Status, last.Body, want)
			}
			if slices.Contains(out.notes(), any("survived")) {
				t.Error("the program ran on after the abort")
			}
			ds := e.receive(1)
			if ds[0].Attempts != 2 {
				t.Errorf("redelivered with attempts %d, want 2", ds[0].Attempts)
			}
			e.settle(ds)
		})
	}
}

// TestTimeLimit runs a program past the event's time limit: the whole process group is
// killed, the event fails with 执行超过时限 and the batch is delivered again. (The limit leaves
// a loaded machine time to start Python and note the pids; TestFetchTimeLimit uses 500 ms.)
func TestTimeLimit(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	e.putBodies("1")
	p, out := e.program(`
		pids(grandchild())
		time.sleep(30)
		note("survived")
	`)
	start := time.Now()
	err := e.runQueue(1, p.Queue)
	if took := time.Since(start); took < 2*time.Second || took > 7*time.Second {
		t.Errorf("the event took %v, want the 2 s limit", took)
	}
	var abort *duilie.Abort
	if !errors.As(err, &abort) || !errors.Is(abort, duilie.ErrTimeLimit) {
		t.Fatalf("event failure = %v, want the abort %s", err, duilie.ErrTimeLimit)
	}
	assertGone(t, out)
	if ds := e.receive(1); ds[0].Attempts != 2 {
		t.Errorf("redelivered with attempts %d, want 2", ds[0].Attempts)
	}
}

// TestExitStatus: exit 0 with no calls is a normal end (every message done); any other exit,
// a signal included, fails the event and its messages are delivered again with attempts + 1.
func TestExitStatus(t *testing.T) {
	e := newEnv(t, 0)
	for _, tc := range []struct{ code, failure string }{
		{"pass", ""},
		{"sys.exit(0)", ""},
		{"sys.exit(3)", "program exited with status 3"},
		{"raise ValueError('boom')", "program exited with status 1"},
		{"os.kill(os.getpid(), 15)", "program ended by signal: terminated"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			e.putBodies("1", "2")
			p, _ := e.program(tc.code)
			err := e.runQueue(2, p.Queue)
			s := e.lastSettlement()
			if tc.failure == "" {
				if err != nil || s.Failed || s.Messages[0].Action.Kind != platform.Done || s.Messages[1].Action.Kind != platform.Done {
					t.Fatalf("event failure %v, settlement %+v: want a normal end, every message done", err, s)
				}
				st, _ := e.plat.Stats(t.Context())
				for _, q := range st {
					if q.Queue == "in" && q.Ready+q.InFlight+q.Delayed != 0 {
						t.Errorf("queue left with %+v", q)
					}
				}
				return
			}
			var ee interface{ ExitCode() int }
			if err == nil || !strings.HasPrefix(err.Error(), tc.failure) || !errors.As(err, &ee) {
				t.Fatalf("event failure = %v, want %s… wrapping the exit error", err, tc.failure)
			}
			ds := e.receive(2)
			if ds[0].Attempts != 2 || ds[1].Attempts != 2 {
				t.Errorf("redelivered with attempts %d, %d; want 2", ds[0].Attempts, ds[1].Attempts)
			}
			e.settle(ds)
		})
	}
}

// TestStraggler: a process that left the program's group and holds its stdout does not hold
// the event beyond OutputWait. Also: a relative command is run from Dir, and a program that
// cannot be started is the host's failure (a *host.StartError), whose message is released
// with its attempts unchanged.
func TestStraggler(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies("1")
	p, out := e.program(`
		p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"], start_new_session=True)
		pids(p)
	`)
	start := time.Now()
	if err := e.runQueue(1, p.Queue); err != nil {
		t.Fatalf("event failed: %v", err)
	}
	took := time.Since(start)
	for _, pid := range notedPids(t, out)[1:] {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if took < OutputWait || took > OutputWait+5*time.Second {
		t.Errorf("the event took %v, want a little over OutputWait (%v)", took, OutputWait)
	}

	// A relative command is found in Dir, as a config file's ["./app.sh"] is in its directory.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.sh"), []byte("#!/bin/sh\necho \"in $(pwd)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.putBodies("1")
	relative := &Runner{Command: []string{"./app.sh"}, Dir: dir, Bridge: e.bridge, Logger: e.log}
	if err := e.runQueue(1, relative.Queue); err != nil {
		t.Errorf("./app.sh in Dir: %v", err)
	}

	e.putBodies("1")
	missing := &Runner{Command: []string{"./no-such-program"}, Dir: t.TempDir(), Bridge: e.bridge, Logger: e.log}
	var se *host.StartError
	if err := e.runQueue(1, missing.Queue); !errors.As(err, &se) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("event failure = %v, want a start failure", err)
	}
	if ds := e.receive(1); ds[0].Attempts != 1 {
		t.Errorf("the message came back with attempts %d, want 1", ds[0].Attempts)
	} else {
		e.settle(ds)
	}
}

// TestBridgeURL: a live URL answers 405 to GET; once its event ended it answers 404, as
// does a URL with a token that was never handed out.
func TestBridgeURL(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies("1")
	p, out := e.program(`
		note(BRIDGE)
		request("GET")
		request("PUT", '["读取入站事件种类"]'.encode())
	`)
	if err := e.runQueue(1, p.Queue); err != nil {
		t.Fatal(err)
	}
	lines := out.lines()
	url := lines[0].Note.(string)
	for _, r := range lines[1:] {
		if r.Status != 405 || r.Allow == nil || *r.Allow != "POST" || r.Type != textPlain {
			t.Errorf("live URL, wrong method: got %d, Allow %v, want 405 with Allow: POST", r.Status, r.Allow)
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("bridge URL %s is not on 127.0.0.1", url)
	}
	token := url[strings.LastIndexByte(url, '/')+1:]
	if len(token) < 26 {
		t.Errorf("token %q is shorter than 26 base32 characters (128 bits)", token)
	}
	base := strings.TrimSuffix(url, token)
	for _, tc := range []struct{ method, url string }{
		{"POST", url},                            // its event ended
		{"GET", url},                             // …whatever the method
		{"POST", base + rand.Text()},             // never handed out
		{"POST", base},                           // no token
		{"POST", url + "/x"},                     // more than a token
		{"POST", strings.TrimSuffix(base, "e/")}, // elsewhere
		{"POST", base + strings.ToLower(token)},  // tokens are case-sensitive
	} {
		req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(`["读取入站事件种类"]`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s %s: %d, want 404", tc.method, tc.url, resp.StatusCode)
		}
	}
}

// TestOutputLogged: every line of the program's stdout and stderr is logged with the event id,
// the queue and the stream; a line longer than 64 KiB is logged in pieces.
func TestOutputLogged(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies("1")
	p, _ := e.program(`
		print("hello")
		print("wörld\r")
		print("oops", file=sys.stderr)
		sys.stdout.write("x" * 70000 + "\nno newline")
	`)
	var id string
	if err := e.runQueue(1, func(ev *duilie.Event) error { id = ev.ID(); return p.Queue(ev) }); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range e.logs.records("program output") {
		if r["event"] != id || r["queue"] != "in" || r["kind"] != "queue" {
			t.Errorf("record %v: want event %s, queue in, kind queue", r, id)
		}
		line := r["line"].(string)
		if len(line) > 20 {
			line = fmt.Sprintf("%c×%d", line[0], len(line))
		}
		got = append(got, r["stream"].(string)+": "+line)
	}
	slices.Sort(got) // stdout and stderr are read concurrently
	want := []string{"stderr: oops", "stdout: hello", "stdout: no newline", "stdout: wörld", "stdout: x×4464", "stdout: x×65536"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}

// TestConcurrentEvents runs three events at once (max_concurrency 3): each gets its own URL
// and reads its own batch only. Each program waits (up to 10 s) until all three have started,
// so that they overlap however slowly they start.
func TestConcurrentEvents(t *testing.T) {
	e := newEnv(t, 0)
	cc := host.DefaultConsumerConfig("in")
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxConcurrency = 2, host.NoBatchTimeout, 3
	p, out := e.program(`
		b = json.loads(call("读取队列批次")[1])
		note({"url": BRIDGE, "start": time.time(), "ids": [m["id"] for m in b["messages"]]})
		deadline = time.time() + 10
		while time.time() < deadline and open(os.environ["OUT"]).read().count('"start"') < 3:
			time.sleep(0.01)
		for i in range(len(b["messages"])):
			call("确认队列消息", i)
		note({"url": BRIDGE, "end": time.time()})
	`)
	for i := range 6 {
		e.put(platform.Message{ID: fmt.Sprintf("c%d", i), Timestamp: 1, Attempts: 1, Body: []byte("1"), ContentType: platform.JSON})
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.host.Consume(ctx, cc, p.Queue) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(e.plat.Settlements()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	starts, ends := map[string]float64{}, map[string]float64{}
	batches := map[string][]string{}
	for _, n := range out.notes() {
		m := n.(map[string]any)
		url := m["url"].(string)
		if s, ok := m["start"]; ok {
			if _, dup := starts[url]; dup {
				t.Errorf("two events got URL %s", url)
			}
			starts[url] = s.(float64)
			for _, id := range m["ids"].([]any) {
				batches[url] = append(batches[url], id.(string))
			}
		} else {
			ends[url] = m["end"].(float64)
		}
	}
	if len(starts) != 3 || len(ends) != 3 {
		t.Fatalf("%d events started and %d ended, want 3", len(starts), len(ends))
	}
	var lastStart, firstEnd float64 = 0, 1e18
	for url := range starts {
		lastStart, firstEnd = max(lastStart, starts[url]), min(firstEnd, ends[url])
	}
	if lastStart >= firstEnd {
		t.Errorf("the events did not overlap: the last started at %f, the first ended at %f", lastStart, firstEnd)
	}
	// Each program read exactly the batch of one settled event, and every message was acked.
	var settled [][]string
	for _, s := range e.plat.Settlements() {
		var ids []string
		for _, r := range s.Messages {
			ids = append(ids, r.ID)
			if r.Call.Kind != platform.AckCall {
				t.Errorf("message %s: call %+v, want an ack", r.ID, r.Call)
			}
		}
		settled = append(settled, ids)
	}
	for url, ids := range batches {
		if !slices.ContainsFunc(settled, func(s []string) bool { return slices.Equal(s, ids) }) {
			t.Errorf("the program at %s read %v, which is no event's batch (%v)", url, ids, settled)
		}
	}
}

// notedPids returns the pids a program noted with pids().
func notedPids(t *testing.T, out *outFile) []int {
	t.Helper()
	for _, n := range out.notes() {
		if m, ok := n.(map[string]any); ok && m["pids"] != nil {
			var pids []int
			for _, p := range m["pids"].([]any) {
				pids = append(pids, int(p.(float64)))
			}
			return pids
		}
	}
	t.Fatal("the program noted no pids")
	return nil
}

// assertGone checks that the program and its grandchild, whose pids it noted, are gone, and
// so is its process group.
func assertGone(t *testing.T, out *outFile) {
	t.Helper()
	pids := notedPids(t, out)
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d is still running", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := syscall.Kill(-pids[0], 0); !errors.Is(err, syscall.ESRCH) && !allZombies(pids) {
		t.Errorf("process group %d: kill 0 = %v, want ESRCH", pids[0], err)
	}
}

// gone reports whether pid is dead: no such process, or a zombie waiting to be reaped.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func allZombies(pids []int) bool {
	for _, p := range pids {
		if !gone(p) {
			return false
		}
	}
	return true
}

// TestCurlProgram runs a shell program that uses curl as the package documentation shows: it
// reads its batch, sends its first message on (escaped twice) and acks it; a 400 makes curl -f
// fail, and so the program and its event.
func TestCurlProgram(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	e := newEnv(t, 0)
	script := `
		batch=$(curl -fsS --noproxy '*' --data-binary '["读取队列批次"]' "$DUILIE_BRIDGE") || exit 1
		echo "$batch"
		curl -fsS --noproxy '*' --data-binary '["发送队列消息","Q","{\"kind\":\"page\",\"url\":\"/release/x\"}",30]' "$DUILIE_BRIDGE" || exit 1
		curl -fsS --noproxy '*' --data-binary '["确认队列消息",0]' "$DUILIE_BRIDGE" || exit 1
		curl -fsS --noproxy '*' --data-binary "[\"确认队列消息\",$BAD_INDEX]" "$DUILIE_BRIDGE" || exit 1
	`
	p := &Runner{Command: []string{"sh", "-c", dedent(script)}, Env: []string{"BAD_INDEX=0"}, Bridge: e.bridge, Logger: e.log}
	e.putBodies(`{"n":0}`)
	if err := e.runQueue(1, p.Queue); err != nil {
		t.Fatalf("event failed: %v", err)
	}
	want := []string{`out: send({"kind":"page","url":"/release/x"}, {"contentType":"json","delaySeconds":30})`, `in: ack(m0)`}
	if got := e.calls(); !slices.Equal(got, want) {
		t.Errorf("platform calls %q, want %q", got, want)
	}
	out := e.logs.records("program output")
	if len(out) != 1 || out[0]["line"] != `{"queue":"in","messages":[{"id":"m0","attempts":1,"timestamp":1700000000000,"body":{"n":0}}]}` {
		t.Errorf("logged %v", out)
	}

	p.Env = []string{"BAD_INDEX=1"} // out of range: 400, so curl -f fails
	e.putBodies(`{"n":0}`)
	if err := e.runQueue(1, p.Queue); err == nil || !strings.HasPrefix(err.Error(), "program exited with status 1") {
		t.Errorf("event failure = %v, want exit status 1", err)
	}
}

// TestHaltAndWait: when the host halts, the running event is aborted at once; Runner.Wait
// returns once the program is reaped and its group killed, so a host that exits after Wait
// leaves no program behind.
func TestHaltAndWait(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies("1")
	p, out := e.program(`
		pids(grandchild())
		time.sleep(30)
	`)
	done := make(chan error, 1)
	go func() { done <- e.runQueue(1, p.Queue) }()
	for deadline := time.Now().Add(10 * time.Second); len(out.notes()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program did not start")
		}
	}
	e.host.Halt()
	var abort *duilie.Abort
	if err := <-done; !errors.As(err, &abort) {
		t.Errorf("event failure = %v, want an abort", err)
	}
	p.Wait()
	if pid := notedPids(t, out)[0]; !gone(pid) {
		t.Errorf("the program (%d) is still running after Wait", pid)
	}
	assertGone(t, out)
}
