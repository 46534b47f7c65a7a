package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/platform/memory"
)

// Every surface attached to a server (the dashboard, Cloudflare's API) is bounded as the fetch
// listener is: a flood of connections that send nothing is cut off at the header timeout
// (shortened here to 300 ms), and no more than the connection cap are held at once, so that no
// client of theirs can take the file descriptors events need.
func TestEveryListenerBounded(t *testing.T) {
	t.Parallel()
	const headerTimeout, maxConns = 300 * time.Millisecond, 8
	cfg := Config{
		Platform:  &memory.Config{},
		Logger:    slog.New(slog.DiscardHandler),
		Consumers: []ConsumerConfig{DefaultConsumerConfig("jobs")},
		Program:   &duilie.Program{Queue: func(*duilie.Event) error { return nil }},
	}
	cfg.listenerBounds = bounded.Config{HeaderTimeout: headerTimeout, MaxConns: maxConns}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	a, err := srv.Attach(Surface{Name: "one surface", Addr: "127.0.0.1:0", Handler: ok})
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.Attach(Surface{Name: "another", Addr: "127.0.0.1:0", Handler: ok})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for name, addr := range map[string]string{"one surface": a.Addr(), "another": b.Addr()} {
		var conns []net.Conn
		for range 3 * maxConns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns = append(conns, c)
		}
		start := time.Now()
		for i, c := range conns {
			_ = c.SetReadDeadline(start.Add(5 * time.Second)) // half the default header timeout
			_, err := io.Copy(io.Discard, c)                  // ends when the server closes the connection
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s: connection %d, idle, still open after 5 s", name, i)
			}
		}
		// Held at most maxConns at a time, each for the header timeout: the last of
		// 3 × maxConns waited two turns.
		if took := time.Since(start); took < 2*headerTimeout {
			t.Errorf("%s: %d idle connections cut off within %v: more than %d held at once?", name, len(conns), took, maxConns)
		}
	}
}
