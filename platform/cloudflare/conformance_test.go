package cloudflare_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/serve"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/platformtest"
	"github.com/duilie/duilie/server"
)

const (
	account = "0123456789abcdef0123456789abcdef"
	token   = "conformance-token"
)

var quiet = slog.New(slog.DiscardHandler)

// serveAPI runs a duilie server on the embedded engine, in a directory of its own, serving
// Cloudflare's Queues API on a loopback port with an http_pull consumer on each of queues, and
// returns the API's base URL. It stops when the test ends.
func serveAPI(t testing.TB, queues ...string) string {
	t.Helper()
	cfg := server.Config{
		Platform:      &jetstream.Config{DataDir: t.TempDir()},
		CloudflareAPI: server.CloudflareAPI{Listen: "127.0.0.1:0", AccountID: account, Token: token},
		Logger:        quiet,
	}
	for _, q := range queues {
		cfg.CloudflareAPI.PullConsumers = append(cfg.CloudflareAPI.PullConsumers, server.DefaultPullConsumer(q))
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + srv.CloudflareAPIAddr() + "/client/v4"
}

// serveHarness gives every test its own duilie serve exposing Cloudflare's API, and a Cloudflare
// platform pointed at it: every call goes through the SDK over HTTP. It records no calls and
// injects nothing (the API pushes json and text only), and nothing outlives a serve.
type serveHarness struct{}

func (serveHarness) MakePlatform(ctx context.Context, t testing.TB) (platform.Platform, error) {
	url := serveAPI(t, platformtest.Queues()...)
	return cloudflare.Open(ctx, cloudflare.Config{AccountID: account, Token: token, BaseURL: url,
		MaxPullInterval: 50 * time.Millisecond, Logger: quiet})
}

func (serveHarness) Close() {}

func TestConformance(t *testing.T) {
	platformtest.RunConformanceTests(t, func(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
		return serveHarness{}, nil
	})
}
