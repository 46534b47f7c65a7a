// Command embed is a Go HTTP service that embeds duilie: its own handlers send tasks to a
// queue, and the same process consumes them in batches, with retries and a dead-letter queue,
// on the embedded engine in ./.duilie (or in memory with -memory).
//
//	go run ./examples/embed -listen 127.0.0.1:8080
//	curl -d '{"url":"/a"}' http://127.0.0.1:8080/tasks
//	curl http://127.0.0.1:8080/done
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// Task is what the service queues.
type Task struct {
	URL string `json:"url"`
}

// service is the application: it records the tasks it has done.
type service struct {
	mu   sync.Mutex
	done []string
}

// handle is the queue handler: one call per batch of tasks.
func (s *service) handle(ev *duilie.Event) error {
	b, err := duilie.ReadBatchOf[Task](ev)
	if err != nil {
		return err
	}
	for i, m := range b.Messages {
		if m.Body.URL == "" {
			if err := duilie.Retry(ev, i, 30); err != nil { // again in 30 s, attempts + 1
				return err
			}
			continue
		}
		s.mu.Lock()
		s.done = append(s.done, m.Body.URL)
		s.mu.Unlock()
		if err := duilie.Ack(ev, i); err != nil {
			return err
		}
	}
	return nil
}

// postTask is one of the service's own HTTP handlers, run as a fetch event so that it can send.
func postTask(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
	var t Task
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
		http.Error(w, "a task is {\"url\": …}", http.StatusBadRequest)
		return nil
	}
	err := duilie.SendValue(ev, "TASKS", t, 0)
	var ex *duilie.Exception
	switch {
	case errors.As(err, &ex): // a catchable exception: the platform refused, say
		http.Error(w, ex.Message, http.StatusServiceUnavailable)
		return nil
	case err != nil: // an abort: the event fails and answers 500
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// run serves on ln until ctx ends.
func run(ctx context.Context, ln net.Listener, pc platform.Opener, logger *slog.Logger) error {
	svc := &service{}
	// The whole of duilie: permissions, a binding, a consumer, the handler, a platform.
	srv, err := server.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Consumers:   []server.ConsumerConfig{{Queue: "tasks", MaxBatchSize: 10, MaxBatchTimeout: time.Second, MaxRetries: 3, DeadLetterQueue: "tasks-dead", MaxConcurrency: 2}},
		Program:     &duilie.Program{Queue: svc.handle},
		Platform:    pc,
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.Handle("POST /tasks", srv.Handler(postTask))
	mux.HandleFunc("GET /done", func(w http.ResponseWriter, r *http.Request) {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		_ = json.NewEncoder(w).Encode(svc.done)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "where the service listens")
	inMemory := flag.Bool("memory", false, "keep the queues in memory (gone at exit) instead of ./.duilie")
	flag.Parse()
	var pc platform.Opener = &jetstream.Config{DataDir: ".duilie"}
	if *inMemory {
		pc = &memory.Config{}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, ln, pc, slog.Default()); err != nil {
		log.Fatal(err)
	}
}
