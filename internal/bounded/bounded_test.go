package bounded

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func serve(t *testing.T, cfg Config) (*Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitIdle waits until n of s's connections are idle.
func waitIdle(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.lim.mu.Lock()
		idle := len(s.lim.idle)
		s.lim.mu.Unlock()
		if idle >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections idle after 10 s, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedWithin waits until the server closes c, and says how long after start that was.
func closedWithin(t *testing.T, c net.Conn, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %v", limit)
	}
	return time.Since(start)
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

// A connection that sends nothing is closed at the header timeout; so is one that sends its
// headers too slowly.
func TestHeaderTimeout(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, Config{Handler: ok, HeaderTimeout: 300 * time.Millisecond})
	start := time.Now()
	silent := dial(t, s)
	slow := dial(t, s)
	go func() {
		for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: 1") {
			if _, err := slow.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for _, c := range []net.Conn{silent, slow} {
		if took := closedWithin(t, c, start, 10*time.Second); took < 250*time.Millisecond {
			t.Errorf("closed after %v, before the 300 ms header timeout", took)
		}
	}
}

// A request whose body arrives too slowly is cut off at the header timeout plus the body
// timeout: the handler's read fails and the connection is closed.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	s, _ := serve(t, Config{HeaderTimeout: 200 * time.Millisecond, BodyTimeout: 300 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.Copy(io.Discard, r.Body)
			readErr <- err
		})})
	c := dial(t, s)
	start := time.Now()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	go func() {
		for range 1000 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case err := <-readErr:
		took := time.Since(start)
		if err == nil {
			t.Fatal("the slow body was read whole")
		}
		if took < 400*time.Millisecond {
			t.Errorf("cut off after %v, before the 500 ms of header and body timeouts", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow body was still being read after 10 s")
	}
	closedWithin(t, c, start, 10*time.Second)
}

// A client that stops reading its response is cut off at the write timeout, however long the
// handler took before it began to answer.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	writeErr := make(chan error, 1)
	s, _ := serve(t, Config{WriteTimeout: 300 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(500 * time.Millisecond) // longer than the write timeout, before any write
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range 256 {
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		})})
	c := dial(t, s)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Read the status line only, so the answer has begun, then stop reading.
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("256 MiB were written to a client that does not read")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write to a client that does not read was still blocked after 10 s")
	}
}

// A kept-alive connection is closed at the idle timeout.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, Config{Handler: ok, IdleTimeout: 300 * time.Millisecond})
	c := dial(t, s)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if took := closedWithin(t, c, time.Now(), 10*time.Second); took < 250*time.Millisecond {
		t.Errorf("closed after %v, before the 300 ms idle timeout", took)
	}
}

// Connections beyond MaxConns, while every connection has a request in progress, wait until
// one closes; then they are served.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s, _ := serve(t, Config{MaxConns: 3, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})})
	for range 3 {
		c := dial(t, s) // closed by the test's cleanup
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	}
	client := &http.Client{Timeout: SlowHeaders + 300*time.Millisecond}
	url := "http://" + s.Addr().String() + "/"
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("a fourth connection was served while three requests ran")
	}
	close(release)
	client.Timeout = 10 * time.Second
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("once the requests answered: %v", err)
	}
	resp.Body.Close()
}

// At the cap, with no idle connection, a new connection closes the one that has been sending
// its headers the longest, once that is SlowHeaders: a slow-connection flood costs each of its
// connections SlowHeaders, not the header timeout. A younger one is left alone.
func TestMaxConnsClosesSlowHeaders(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, Config{Handler: ok, MaxConns: 2})
	older := dial(t, s)
	fmt.Fprintf(older, "GET / HTTP/1.1\r\nHost: x\r\n") // and no more
	younger := dial(t, s)
	fmt.Fprintf(younger, "GET / HTTP/1.1\r\n")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + s.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a third connection while two held their headers back: %v", err)
	}
	resp.Body.Close()
	closedWithin(t, older, time.Now(), 10*time.Second)
	_ = younger.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var ne net.Error
	if _, err := younger.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the younger connection was closed too: %v", err)
	}
}

// At the cap, a new connection closes the one idle (kept alive after its response) the
// longest, rather than waiting for it to time out.
func TestMaxConnsClosesIdle(t *testing.T) {
	t.Parallel()
	s, _ := serve(t, Config{Handler: ok, MaxConns: 2})
	var kept []net.Conn
	for i := range 2 {
		c := dial(t, s)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		kept = append(kept, c)
		// The server marks a connection idle a moment after its response: wait for it, so
		// that the first is idle the longer.
		waitIdle(t, s, i+1)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + s.Addr().String() + "/")
	if err != nil {
		t.Fatalf("a third connection while two were idle: %v", err)
	}
	resp.Body.Close()
	closedWithin(t, kept[0], time.Now(), 10*time.Second) // the idlest went
}

// A connection that arrives while every slot is taken by a request in progress is served as
// soon as one of them has answered and sits idle, not when its idle timeout ends.
func TestMaxConnsWaitsForIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s, _ := serve(t, Config{MaxConns: 2, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})})
	for range 2 {
		c := dial(t, s)
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n") // kept alive afterwards
	}
	got := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Get("http://" + s.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the third connection waits for a slot
	start := time.Now()
	close(release)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("served %v after the others went idle", took)
	}
}

// Requests beyond the limit wait briefly for a slot; those that get none are answered 503
// with Retry-After and never reach the handler.
func TestLimit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	running, most := 0, 0
	h := Limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		if r.URL.Path == "/hold" {
			<-release
		}
		mu.Lock()
		running--
		mu.Unlock()
		_, _ = io.WriteString(w, "ran")
	}), 2, 300*time.Millisecond)
	s, _ := serve(t, Config{Handler: h})
	url := "http://" + s.Addr().String()
	var holders sync.WaitGroup
	for range 2 {
		holders.Go(func() {
			if resp, err := http.Get(url + "/hold"); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return running == 2 })
	start := time.Now()
	resp, err := http.Get(url + "/other")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || strings.Contains(string(body), "ran") {
		t.Errorf("beyond the limit: %d, Retry-After %q, %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("answered 503 after %v, without waiting for a slot", took)
	}
	// A slot that frees while a request waits is its.
	go func() { time.Sleep(100 * time.Millisecond); release <- struct{}{} }()
	resp, err = http.Get(url + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a request that got a freed slot: %d", resp.StatusCode)
	}
	close(release)
	holders.Wait()
	if most > 2 {
		t.Errorf("%d requests ran at once, limit 2", most)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Headers over MaxHeaderBytes are answered 431 without reaching the handler.
func TestMaxHeaderBytes(t *testing.T) {
	t.Parallel()
	var reached atomic.Bool
	s, _ := serve(t, Config{MaxHeaderBytes: 8 << 10, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Store(true) })})
	req, _ := http.NewRequest("GET", "http://"+s.Addr().String()+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 431 || reached.Load() {
		t.Errorf("%d, handler reached %v", resp.StatusCode, reached.Load())
	}
}

// A listener that is not loopback-only is logged at WARN with its address; a loopback one is
// not.
func TestWarnBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		warn bool
	}{{"127.0.0.1:0", false}, {"localhost:0", false}, {"[::1]:0", false}, {":0", true}, {"0.0.0.0:0", true}} {
		s, logs := serve(t, Config{Addr: tc.addr, Handler: ok, Name: "fetch events"})
		line := fmt.Sprintf(`level=WARN msg="listening beyond loopback: every host that can reach this address can use it" listener="fetch events" addr=%s`, s.Addr())
		if got := strings.Contains(logs.String(), line); got != tc.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tc.addr, got, tc.warn, logs)
		}
	}
}

// Shutdown waits for a running request; Close does not.
func TestShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	s, _ := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})})
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := <-got; b != "done" {
		t.Errorf("the running request got %q", b)
	}
}

// One rule of what stays on this machine, for listen addresses, listeners' addresses and Host
// headers alike.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8789": true, "127.0.0.2": true, "[::1]:80": true, "::1": true, "localhost:1": true, "LocalHost": true,
		"0.0.0.0:8789": false, "[::]:80": false, ":8789": false, "10.0.0.1:80": false, "example.com:80": false,
		"localhost.example.com": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
