package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// syncLog is a log a test reads while the server writes it.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A server built in code, on the memory platform and on the embedded engine: an HTTP request
// to the fetch listener is a fetch event that sends, the message is a queue event, and both
// are reported and logged.
func TestServerInCode(t *testing.T) {
	for name, pc := range map[string]platform.Opener{
		"memory":   &memory.Config{},
		"embedded": &jetstream.Config{DataDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := make(chan string, 1)
			reports := make(chan server.Report, 100)
			log := &syncLog{}
			srv, err := server.New(server.Config{
				Permissions: server.Permissions{Queue: []string{"TASKS"}},
				Bindings:    map[string]string{"TASKS": "tasks"},
				Consumers:   []server.ConsumerConfig{{Queue: "tasks", MaxBatchSize: 10, MaxConcurrency: 1}},
				Program: &duilie.Program{
					Queue: func(ev *duilie.Event) error {
						b, err := duilie.ReadBatch(ev)
						got <- b
						return err
					},
					Fetch: func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
						body, _ := io.ReadAll(r.Body)
						if err := duilie.Send(ev, "TASKS", string(body), 0); err != nil {
							http.Error(w, err.Error(), http.StatusBadRequest)
							return nil
						}
						w.WriteHeader(http.StatusAccepted)
						return nil
					},
				},
				Listen:    "127.0.0.1:0",
				Platform:  pc,
				Logger:    slog.New(slog.NewTextHandler(log, nil)),
				Observers: []server.Observer{func(r server.Report) { reports <- r }},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			if srv.Client() == nil || srv.FetchAddr() == "" {
				t.Fatal("no platform or fetch listener after Start")
			}
			resp, err := http.Post("http://"+srv.FetchAddr()+"/", "application/json", strings.NewReader(`{ "url" : "/a" }`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status %d", resp.StatusCode)
			}
			select {
			case b := <-got:
				if !strings.HasPrefix(b, `{"queue":"tasks","messages":[{"id":"`) || !strings.HasSuffix(b, `"body":{"url":"/a"}}]}`) {
					t.Errorf("batch %s", b)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the message was not consumed")
			}
			kinds := map[string]*server.EventReport{}
			for len(kinds) < 2 {
				select {
				case r := <-reports:
					if er, ok := r.(*server.EventReport); ok {
						kinds[string(er.Kind)] = er
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("reports: %v", kinds)
				}
			}
			if f := kinds["fetch"]; f.Status != http.StatusAccepted || f.Outcome != server.OK || f.Method != "POST" {
				t.Errorf("fetch report %+v", f)
			}
			if q := kinds["queue"]; q.Queue != "tasks" || q.Batch != 1 || q.Outcome != server.OK || q.Messages[0].Action.Kind != platform.Done {
				t.Errorf("queue report %+v", q)
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			text := log.String()
			for _, want := range []string{`msg="platform open"`, `msg="fetch event"`, `status=202 outcome=ok`,
				`msg="queue event"`, `queue=tasks batch=1 outcome=ok`, `msg=stopped`} {
				if !strings.Contains(text, want) {
					t.Errorf("no %s in the log:\n%s", want, text)
				}
			}
		})
	}
}

// Do runs code as a fetch event (sends from outside an HTTP request); Handler mounts a fetch
// handler in the service's own mux.
func TestDoAndHandler(t *testing.T) {
	srv, err := server.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Platform:    &memory.Config{},
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(ev *duilie.Event) error { return duilie.Send(ev, "TASKS", `1`, 0) }
	mux := http.NewServeMux()
	mux.Handle("POST /tasks", srv.Handler(func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
		if ev.Kind() != duilie.FetchEvent {
			t.Errorf("a request's event is %s", ev.Kind())
		}
		body, _ := io.ReadAll(r.Body)
		if err := duilie.Send(ev, "TASKS", string(body), 0); err != nil {
			return err
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}))
	service := httptest.NewServer(mux)
	defer service.Close()
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(service.URL+"/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if err := srv.Client().Do(context.Background(), send); !errors.Is(err, server.ErrNotStarted) {
		t.Errorf("Do before Start: %v", err)
	}
	if code, body := post(`2`); code != http.StatusServiceUnavailable || body != "duilie is not started\n" {
		t.Errorf("Handler before Start: %d %q", code, body)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if err := srv.Client().Do(context.Background(), send); err != nil {
		t.Fatal(err)
	}
	if code, body := post(`2`); code != http.StatusAccepted {
		t.Errorf("Handler: %d %q", code, body)
	}
	// A handler that returns an error (here the exception of a body that is not JSON) fails its
	// event: 500.
	if code, _ := post(`{`); code != http.StatusInternalServerError {
		t.Errorf("Handler, a body that is not JSON: %d, want 500", code)
	}
	var ab *duilie.Abort
	if err := srv.Client().Do(context.Background(), func(ev *duilie.Event) error { return duilie.Send(ev, "NOPE", `1`, 0) }); !errors.As(err, &ab) {
		t.Errorf("an unpermitted binding: %v", err)
	}
	stats, err := srv.Client().Queues(context.Background())
	if err != nil || len(stats) != 1 || stats[0].Ready != 2 {
		t.Errorf("queues %+v %v", stats, err)
	}
}

// A configuration made in Go is checked as a file is, with the same rules, and its mistakes
// name its Go fields.
func TestNewChecks(t *testing.T) {
	_, err := server.New(server.Config{
		Consumers: []server.ConsumerConfig{{Queue: "q", MaxBatchSize: -1}, server.DefaultConsumerConfig("q")},
		TimeLimit: time.Hour,
		Listen:    "nowhere",
		Platform:  &jetstream.Config{Replicas: 2},
		Program:   &duilie.Program{},
	})
	var ce *server.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		"Consumers[0].MaxBatchSize = -1: must be 1–100",
		"Consumers[1].Queue = \"q\": has a consumer already; a queue has one consumer",
		"Listen = \"nowhere\": must be a host:port to listen on for fetch events, like \"127.0.0.1:8787\"",
		"TimeLimit = 1h0m0s: must be 1–900000 (milliseconds)",
		"Platform.Replicas = 2: must be 1, 3 or 5",
		"Consumers: this program has no queue handler (Program.Queue) to run their batches",
		"Listen: this program has no fetch handler (Program.Fetch) to run HTTP requests",
	}
	if got := strings.Join(ce.Mistakes, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("mistakes:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// With no program nor command, the Go field to set is named.
	_, err = server.New(server.Config{Consumers: []server.ConsumerConfig{{Queue: "q"}}, Platform: &memory.Config{}})
	if err == nil || !strings.HasPrefix(err.Error(), "Program: missing; set it to the Go handlers") {
		t.Errorf("no program: %v", err)
	}
}

// A configuration made in Go lists each binding once: Permissions left unset permit every
// binding. Set, they must be the bindings exactly.
func TestNewBindings(t *testing.T) {
	prog := &duilie.Program{Queue: func(*duilie.Event) error { return nil }}
	srv, err := server.New(server.Config{Bindings: map[string]string{"TASKS": "tasks"}, Program: prog, Platform: &memory.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	if err := srv.Client().Send(ctx, "TASKS", `1`, 0); err != nil {
		t.Errorf("a configured binding with Permissions unset: %v", err)
	}
	_, err = server.New(server.Config{Bindings: map[string]string{"TASKS": "tasks", "OTHER": "other"},
		Permissions: server.Permissions{Queue: []string{"TASKS", "GHOST"}}, Program: prog, Platform: &memory.Config{}})
	want := "Bindings[\"OTHER\"]: not permitted: list it in Permissions.Queue, or leave Permissions unset to permit every binding\n" +
		"Permissions.Queue: \"GHOST\" is permitted but not configured: map it to its queue in Bindings"
	if err == nil || err.Error() != want {
		t.Errorf("mismatched bindings: %v\nwant:\n%s", err, want)
	}
}

// broken is a platform configuration whose consumers fail permanently.
type broken struct{ memory.Config }

func (b *broken) OpenOwner(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	p, err := b.Config.OpenOwner(ctx, o)
	return &brokenPlatform{p}, err
}

type brokenPlatform struct{ platform.Platform }

func (brokenPlatform) Consume(ctx context.Context, name string, o platform.ConsumerOptions) (platform.Consumer, error) {
	return nil, platform.Permanent(errors.New("credentials refused (10106)"))
}

// When every consumer has stopped for good, Run ends with an error naming them.
func TestNoConsumerLeft(t *testing.T) {
	log := &syncLog{}
	srv, err := server.New(server.Config{
		Consumers: []server.ConsumerConfig{server.DefaultConsumerConfig("a"), server.DefaultConsumerConfig("b")},
		Program:   &duilie.Program{Queue: func(*duilie.Event) error { return nil }},
		Platform:  &broken{},
		Logger:    slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no consumer is left") || !strings.Contains(err.Error(), "consume a:") ||
			!strings.Contains(err.Error(), "consume b:") || !platform.IsPermanent(err) {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on with no consumer")
	}
	if !strings.Contains(log.String(), `level=ERROR msg="every consumer has stopped; shutting down"`) {
		t.Errorf("log:\n%s", log.String())
	}
}

// A message whose retries ran out before it could be delivered (a crash redelivered it once
// too often) has a log line: it is dead-lettered without any event.
func TestExhaustedLogLine(t *testing.T) {
	log := &syncLog{}
	cc := server.DefaultConsumerConfig("q")
	cc.MaxRetries, cc.DeadLetterQueue, cc.MaxBatchTimeout = server.NoRetries, "dead", server.NoBatchTimeout
	settled := make(chan struct{}, 1)
	mp := memory.New(memory.Options{})
	srv, err := server.New(server.Config{
		Consumers: []server.ConsumerConfig{cc},
		Program:   &duilie.Program{Queue: func(*duilie.Event) error { return nil }},
		Platform:  &memory.Config{Platform: mp},
		Logger:    slog.New(slog.NewTextHandler(log, nil)),
		Observers: []server.Observer{func(r server.Report) {
			if _, ok := r.(*server.SettleReport); ok {
				settled <- struct{}{}
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	mp.Put("q", platform.Message{ID: "x", Attempts: 2, Body: []byte("1"), ContentType: platform.JSON})
	select {
	case <-settled:
	case <-time.After(10 * time.Second):
		t.Fatal("not settled")
	}
	srv.Shutdown(context.Background())
	want := `level=WARN msg="retries exhausted before delivery: dead-lettered or dropped undelivered" queue=q messages=1 dead=1 dropped=0`
	if !strings.Contains(log.String(), want) {
		t.Errorf("no line %s in:\n%s", want, log.String())
	}
}
