package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/serve"

	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
	"github.com/duilie/duilie/examples/pagetask"
	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/server"
)

const token = "page-task-token"

// syncBuffer is a log the test reads while the program writes it.
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

// The page-task example runs on the Cloudflare platform from cloudflare/duilie.toml (kind =
// "cloudflare"), against a duilie serving Cloudflare's API from cloudflare/wrangler.toml, which
// stands in for the account: tasks sent through the program's fetch handler and through
// `send` are pushed over the REST API, pulled by the program's HTTP pull consumer, rendered,
// acked, found stale, or retried; and the task that always fails is dead-lettered by the
// account's consumer (Cloudflare's max_retries), not by duilie's host.
func TestPageTaskOnCloudflare(t *testing.T) {
	t.Setenv("DUILIE_CF_TOKEN", token)
	t.Setenv("PAGE_VERSION", "v8")

	// The account: duilie serving Cloudflare's API, as the wrangler file says, on a free port.
	acct, err := server.LoadConfig(filepath.Join("cloudflare", "wrangler.toml"))
	if err != nil {
		t.Fatal(err)
	}
	acct.Platform.(*jetstream.Config).DataDir = t.TempDir()
	acct.CloudflareAPI.Listen = "127.0.0.1:0"
	for i := range acct.CloudflareAPI.PullConsumers {
		if acct.CloudflareAPI.PullConsumers[i].Queue == "page-render" {
			acct.CloudflareAPI.PullConsumers[i].MaxRetries = 1 // fail twice, then dead-letter
		}
	}
	acct.Logger = slog.New(slog.DiscardHandler)
	api, err := serve.New(*acct)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := api.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer api.Shutdown(context.Background())
	baseURL := "http://" + api.CloudflareAPIAddr() + "/client/v4"

	// The program's configuration, pointed at that API and a free fetch port.
	text, err := os.ReadFile(filepath.Join("cloudflare", "duilie.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fetch := ln.Addr().String()
	ln.Close()
	conf := regexp.MustCompile(`(?m)^base_url = "[^"]*"`).ReplaceAllString(string(text), `base_url = "`+baseURL+`"`)
	conf = regexp.MustCompile(`(?m)^listen = "[^"]*"`).ReplaceAllString(conf, `listen = "`+fetch+`"`)
	if !strings.Contains(conf, baseURL) || !strings.Contains(conf, fetch) || !strings.Contains(conf, `kind = "cloudflare"`) {
		t.Fatalf("configuration not rewritten:\n%s", conf)
	}
	path := filepath.Join(t.TempDir(), "duilie.toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	consumer := &pagetask.Consumer{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Backoff: func(int) int { return 1 }}
	program := duilie.Program{Queue: consumer.Queue, Fetch: pagetask.Fetch}
	served := make(chan int, 1)
	var serveErr syncBuffer
	go func() {
		served <- app.Run(ctx, program, []string{"serve", "--config", path}, nil, &serveErr, &serveErr)
	}()

	post := func(body string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.Post("http://"+fetch+"/tasks", "application/json", strings.NewReader(body))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					return
				}
				t.Fatalf("POST /tasks %s: %s", body, resp.Status)
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST /tasks: %v\nserve: %s", err, serveErr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	post(`{"kind":"page","url":"/a","version":"v8"}`)
	post(`{"kind":"release","url":"/b","version":"v7"}`)
	post(`{"kind":"page","url":"/c","version":"v8","fail":true}`)
	var out, errOut bytes.Buffer
	if code := app.Run(ctx, program, []string{"send", "--binding", "PAGE_QUEUE", "--config", path},
		strings.NewReader(`{"kind":"page","url":"/d","version":"v8"}`), &out, &errOut); code != 0 {
		t.Fatalf("send: exit %d: %s", code, errOut.String())
	}

	want := []*regexp.Regexp{
		regexp.MustCompile(`msg=rendered .*attempts=1 kind=page url=/a`),
		regexp.MustCompile(`msg="stale task: acked" .*url=/b version=v7`),
		regexp.MustCompile(`msg="render failed: retry" .*attempts=1 kind=page url=/c`),
		regexp.MustCompile(`msg="render failed: retry" .*attempts=2 kind=page url=/c`),
		regexp.MustCompile(`msg=rendered .*attempts=1 kind=page url=/d`),
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, w := range want {
		for !w.MatchString(logs.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line %s; the program logged:\n%s\nserve:\n%s", w, logs.String(), serveErr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The account dead-lettered the task that failed twice; duilie's host did not.
	q := queues.NewQueueService(option.WithBaseURL(baseURL), option.WithAPIToken(token), option.WithMaxRetries(0))
	var params queues.MessagePullParams
	params.AccountID.Value, params.AccountID.Present = acct.CloudflareAPI.AccountID, true
	for {
		res, err := q.Messages.Pull(ctx, cfapi.QueueID("page-dlq"), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 1 {
			if m := res.Messages[0]; m.Attempts != 1 || !strings.Contains(logs.String(), "id="+m.ID) {
				t.Errorf("dead-lettered %+v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing dead-lettered in page-dlq; the program logged:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Count(logs.String(), "url=/c") != 2 {
		t.Errorf("the failing task ran %d times, want 2 (max_retries 1 on the account's consumer)", strings.Count(logs.String(), "url=/c"))
	}

	cancel()
	select {
	case code := <-served:
		if code != 0 {
			t.Errorf("serve exited %d: %s", code, serveErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}
