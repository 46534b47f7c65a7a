package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// post makes one bridge call from this process and returns the reply.
func post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// inProcess runs fn as a queue event of a batch of n messages, with the event's bridge URL and a
// count of onAbort calls. It returns the platform and the event's failure.
func inProcess(t *testing.T, n int, fn func(ev *duilie.Event, url string, aborts *atomic.Int32) error) (*memory.Platform, error) {
	t.Helper()
	plat := memory.New(memory.Options{Record: true})
	t.Cleanup(func() { plat.Close() })
	h, err := host.New(host.Config{Platform: plat, Permissions: testPermissions, Bindings: testBindings, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ds := make([]platform.Delivery, n)
	for i := range ds {
		ds[i].Message = platform.Message{ID: fmt.Sprint(i), Attempts: 1, Body: []byte("1"), ContentType: platform.JSON}
	}
	_, err = h.RunBatch(context.Background(), host.DefaultConsumerConfig("in"), ds, func(ev *duilie.Event) error {
		var aborts atomic.Int32
		url, closeURL := s.Open(ev, func() { aborts.Add(1) })
		defer closeURL()
		return fn(ev, url, &aborts)
	})
	return plat, err
}

// TestAfterAbort: once a call aborted the event, every later call replies 500 with the same
// message, onAbort is called once, and nothing more reaches the platform.
func TestAfterAbort(t *testing.T) {
	plat, err := inProcess(t, 1, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		want := "桥接调用无效：未知的接口名 foo"
		for i, body := range []string{`["foo"]`, `["读取入站事件种类"]`, `["发送队列消息","Q","1",0]`, `["确认队列消息",0]`, `["bar"]`, `x`} {
			if status, text := post(t, url, body); status != 500 || text != want {
				t.Errorf("call %d %s: %d %q, want 500 %q", i, body, status, text, want)
			}
		}
		if n := aborts.Load(); n != 1 {
			t.Errorf("onAbort called %d times, want 1", n)
		}
		return nil // the event fails all the same
	})
	if err == nil || err.Error() != "桥接调用无效：未知的接口名 foo" {
		t.Errorf("event failure = %v", err)
	}
	if calls := plat.Calls(); len(calls) != 0 {
		t.Errorf("platform calls after the abort: %v", calls)
	}
}

// TestConcurrentCalls makes many calls on one event at once (run with -race): every ack and
// send is answered and recorded once.
func TestConcurrentCalls(t *testing.T) {
	const n = 50
	plat, err := inProcess(t, n, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if status, text := post(t, url, fmt.Sprintf(`["确认队列消息",%d]`, i)); status != 200 || text != "" {
					t.Errorf("ack %d: %d %q", i, status, text)
				}
			})
			wg.Go(func() {
				if status, text := post(t, url, fmt.Sprintf(`["发送队列消息","Q","%d",0]`, i)); status != 200 {
					t.Errorf("send %d: %d %q", i, status, text)
				}
			})
			wg.Go(func() {
				if status, text := post(t, url, `["读取队列批次"]`); status != 200 || !strings.HasPrefix(text, `{"queue":"in","messages":[`) {
					t.Errorf("read: %d %q", status, text)
				}
			})
		}
		wg.Wait()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sends := 0
	for _, c := range plat.Calls() {
		if c.Op == "send" {
			sends++
		}
	}
	if sends != n {
		t.Errorf("%d sends reached the platform, want %d", sends, n)
	}
}

// TestConcurrentAbort: calls racing with a malformed one either complete before it or get its
// abort; onAbort runs once.
func TestConcurrentAbort(t *testing.T) {
	_, err := inProcess(t, 1, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				body := `["读取入站事件种类"]`
				if i == 20 {
					body = `[1]`
				}
				status, text := post(t, url, body)
				if !(status == 200 && text == "queue") && !(status == 500 && text == "桥接调用无效：接口名须为字符串") {
					t.Errorf("%s: %d %q", body, status, text)
				}
			})
		}
		wg.Wait()
		if n := aborts.Load(); n != 1 {
			t.Errorf("onAbort called %d times, want 1", n)
		}
		return nil
	})
	if err == nil {
		t.Error("the event did not fail")
	}
}

// TestURLClosed: close() makes the URL answer 404 at once; other methods get 405 while open.
func TestURLClosed(t *testing.T) {
	_, _ = inProcess(t, 1, func(ev *duilie.Event, url string, aborts *atomic.Int32) error {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
			t.Errorf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
		return nil
	})
	s, err := Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url, closeURL := s.Open(nil, nil)
	closeURL()
	closeURL() // twice is fine
	if status, text := post(t, url, `["读取入站事件种类"]`); status != 404 || text != replyNotFound {
		t.Errorf("closed URL: %d %q", status, text)
	}
}

// TestListenLoopbackOnly: the bridge listens on loopback addresses only.
func TestListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0", "127.0.0.1"} {
		if s, err := Listen(addr, nil); err == nil {
			s.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
		s, err := Listen(addr, nil)
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		if !strings.HasPrefix(s.base, "http://127.") && !strings.HasPrefix(s.base, "http://[::1]") {
			t.Errorf("Listen(%q) serves at %s", addr, s.base)
		}
		s.Close()
	}
}
