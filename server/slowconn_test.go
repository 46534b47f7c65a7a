package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 2,000 connections that send their headers a byte a second, and reconnect as soon as they
// are closed, hold the fetch listener (default bounds: 256 connections, 10 s for headers)
// at its cap; a normal request is still answered within 5 s, as the cap closes the
// connections slowest to send their headers to let new ones in.
func TestFetchSlowConnections(t *testing.T) {
	t.Parallel()
	srv, _, _, _ := programServer(t, nil)
	addr := srv.FetchAddr()
	ctx, stop := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	defer func() { stop(); flood.Wait() }()
	var open, dialed atomic.Int64
	for range 2000 {
		flood.Go(func() {
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				dialed.Add(1)
				open.Add(1)
				stopped := context.AfterFunc(ctx, func() { c.Close() })
				_, err = io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: x\r\n")
				for err == nil {
					select {
					case <-ctx.Done():
						err = ctx.Err()
					case <-time.After(time.Second):
						_, err = io.WriteString(c, "X")
					}
				}
				stopped()
				c.Close()
				open.Add(-1)
			}
		})
	}
	waitUntil(t, 30*time.Second, "2,000 slow connections open", func() bool { return open.Load() >= 2000 })
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range 3 {
		start := time.Now()
		resp, err := client.Get("http://" + addr + "/fast")
		if err != nil {
			t.Fatalf("request %d during the flood (%d slow connections dialed so far): %v", i, dialed.Load(), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "/fast\n" {
			t.Fatalf("request %d during the flood: %d %q", i, resp.StatusCode, b)
		}
		t.Logf("request %d answered in %v; %d slow connections open, %d dialed", i, time.Since(start).Round(time.Millisecond), open.Load(), dialed.Load())
	}
}
