package server

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/platform/memory"
)

// The dashboard and Cloudflare's API are bounded as the fetch listener is: a flood of
// connections that send nothing is cut off at the header timeout (shortened here to 300 ms),
// and no more than the connection cap are held at once, so that no client of theirs can take
// the file descriptors events need.
func TestEveryListenerBounded(t *testing.T) {
	t.Parallel()
	const headerTimeout, maxConns = 300 * time.Millisecond, 8
	cfg := Config{
		Platform:      &memory.Config{},
		Logger:        quietLog(),
		Consumers:     []ConsumerConfig{DefaultConsumerConfig("jobs")},
		Program:       &duilie.Program{Queue: func(*duilie.Event) error { return nil }},
		Dashboard:     DashboardConfig{Listen: "127.0.0.1:0"},
		CloudflareAPI: CloudflareAPI{Listen: "127.0.0.1:0", AccountID: "a", Token: "t"},
	}
	cfg.listenerBounds = bounded.Config{HeaderTimeout: headerTimeout, MaxConns: maxConns}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for name, addr := range map[string]string{"the dashboard": srv.DashboardAddr(), "Cloudflare's API": srv.CloudflareAPIAddr()} {
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
