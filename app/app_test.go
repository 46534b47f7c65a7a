//go:build !(js && wasm)

package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
)

// syncBuffer is a log that the serve writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the log matches re and returns the submatches.
func (s *syncBuffer) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := rx.FindStringSubmatch(s.String()); m != nil {
			return m
		}
	}
	t.Fatalf("no %s in the log:\n%s", re, s.String())
	return nil
}

type delivery struct {
	N        int
	Attempts int
}

// An in-process program gets the same events, functions and outcomes as one run through the
// bridge: fetch events per HTTP request, queue events per batch, a panic or an error failing
// its event, the time limit aborting it, and the interface's exceptions catchable.
func TestInProcessProgram(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "duilie.toml")
	os.WriteFile(config, []byte(`
[permissions]
QUEUE = ["JOBS"]
[[queues.producers]]
binding = "JOBS"
queue = "jobs"
[[queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
retry_delay = 1
[app]
listen = "127.0.0.1:0"
time_limit_ms = 500
shutdown_grace_ms = 2000
`), 0o644)

	deliveries := make(chan delivery, 10)
	lateWrite := make(chan error, 1)
	program := duilie.Program{
		Queue: func(ev *duilie.Event) error {
			b, err := duilie.ReadBatchOf[struct {
				N     int  `json:"n"`
				Panic bool `json:"panic"`
			}](ev)
			if err != nil {
				return err
			}
			for _, m := range b.Messages {
				deliveries <- delivery{m.Body.N, m.Attempts}
				if m.Body.Panic && m.Attempts == 1 {
					panic("the first attempt panics")
				}
			}
			return nil
		},
		Fetch: func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			switch r.URL.Path {
			case "/kind":
				fmt.Fprint(w, ev.Kind())
			case "/send":
				body, _ := io.ReadAll(r.Body)
				if err := duilie.Send(ev, "JOBS", string(body), 0); err != nil {
					return err
				}
				w.WriteHeader(http.StatusAccepted)
			case "/ack":
				err := duilie.Ack(ev, 0)
				var ex *duilie.Exception
				if errors.As(err, &ex) {
					http.Error(w, ex.Message, http.StatusBadRequest)
					return nil
				}
				return err
			case "/unpermitted":
				return duilie.Send(ev, "OTHER", "{}", 0)
			case "/panic":
				panic("boom")
			case "/created-then-error":
				w.WriteHeader(http.StatusCreated)
				return errors.New("failed after the response began")
			case "/slow":
				<-ev.Context().Done() // the time limit
				time.Sleep(50 * time.Millisecond)
				_, err := w.Write([]byte("too late"))
				lateWrite <- err
				return err
			}
			return nil
		},
	}

	ctx, stop := context.WithCancel(context.Background())
	var log syncBuffer
	served := make(chan int, 1)
	go func() {
		served <- app.Run(ctx, program, []string{"serve", "--config", config}, nil, io.Discard, &log)
	}()
	base := log.waitFor(t, `listening for fetch events" url=(http://[^ ]+)/`)[1]

	get := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(method, path, body string, code int, text string) {
		t.Helper()
		if c, b := get(method, path, body); c != code || b != text {
			t.Errorf("%s %s: %d %q, want %d %q", method, path, c, b, code, text)
		}
	}

	expect("GET", "/kind", "", 200, "fetch")
	expect("GET", "/ack", "", 400, "当前事件不是队列事件\n")
	expect("GET", "/unpermitted", "", 500, "Internal Server Error\n")
	log.waitFor(t, `msg="fetch event" event=\w+ method=GET path=/unpermitted status=500 outcome=aborted .*err=未授权的QUEUE绑定：OTHER`)
	expect("GET", "/panic", "", 500, "Internal Server Error\n")
	log.waitFor(t, `msg="fetch event" event=\w+ method=GET path=/panic status=500 outcome=failed .*err="panic: boom`)
	expect("GET", "/created-then-error", "", 201, "")
	log.waitFor(t, `path=/created-then-error status=201 outcome=failed`)
	start := time.Now()
	expect("GET", "/slow", "", 500, "Internal Server Error\n")
	if took := time.Since(start); took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("the slow event answered after %v; its time limit is 500 ms", took)
	}
	if err := <-lateWrite; err == nil {
		t.Error("a write after the event ended succeeded")
	}
	log.waitFor(t, `path=/slow status=500 outcome=aborted .*err=执行超过时限`)

	expect("POST", "/send", `{"n":1}`, 202, "")
	if d := <-deliveries; d != (delivery{1, 1}) {
		t.Errorf("delivery %+v", d)
	}
	expect("POST", "/send", `{"n":2,"panic":true}`, 202, "")
	for _, want := range []delivery{{2, 1}, {2, 2}} {
		select {
		case d := <-deliveries:
			if d != want {
				t.Errorf("delivery %+v, want %+v", d, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no delivery %+v", want)
		}
	}
	log.waitFor(t, `msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=failed .*retried=1 .*err="panic: the first attempt panics`)

	// The program's own send command reaches the serve running in this process.
	var stderr bytes.Buffer
	if code := app.Run(ctx, program, []string{"send", "--binding", "JOBS", "--config", config}, strings.NewReader(`{"n":3}`), io.Discard, &stderr); code != 0 {
		t.Fatalf("send: exit %d, %s", code, stderr.String())
	}
	if d := <-deliveries; d != (delivery{3, 1}) {
		t.Errorf("delivery %+v", d)
	}

	stop()
	select {
	case code := <-served:
		if code != 0 {
			t.Errorf("serve exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if t.Failed() {
		t.Logf("log:\n%s", log.String())
	}
}

// A configuration that asks for a handler the program lacks is a configuration error.
func TestMissingHandler(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "duilie.toml")
	os.WriteFile(config, []byte("[[queues.consumers]]\nqueue = \"jobs\"\n[app]\nlisten = \"127.0.0.1:0\"\n"), 0o644)
	var stderr bytes.Buffer
	code := app.Run(context.Background(), duilie.Program{}, []string{"serve", "--config", config}, nil, io.Discard, &stderr)
	want := config + ": queues.consumers: this program has no queue handler (Program.Queue) to run their batches\n" +
		config + ": app.listen: this program has no fetch handler (Program.Fetch) to run HTTP requests\n"
	if code != 78 || stderr.String() != want {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
