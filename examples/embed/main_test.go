package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
)

// The service runs as it would in production, on a real listener, once on each platform:
// POST /tasks sends through the service's own handler, the in-process consumer does the tasks.
func TestService(t *testing.T) {
	for name, pc := range map[string]platform.Opener{
		"memory":   &memory.Config{},
		"embedded": &jetstream.Config{DataDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- run(ctx, ln, pc, slog.New(slog.DiscardHandler)) }()
			base := "http://" + ln.Addr().String()
			for _, body := range []string{`{"url":"/a"}`, `{"url":"/b"}`} {
				resp, err := http.Post(base+"/tasks", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("POST %s: %d", body, resp.StatusCode)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				resp, err := http.Get(base + "/done")
				if err != nil {
					t.Fatal(err)
				}
				var urls []string
				_ = json.NewDecoder(resp.Body).Decode(&urls)
				resp.Body.Close()
				slices.Sort(urls)
				if slices.Equal(urls, []string{"/a", "/b"}) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("done: %v", urls)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
