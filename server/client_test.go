package server_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// opsRecorder keeps the operation reports a client makes.
type opsRecorder struct {
	mu  sync.Mutex
	ops []*server.OperationReport
}

func (r *opsRecorder) observe(rep server.Report) {
	if op, ok := rep.(*server.OperationReport); ok {
		r.mu.Lock()
		r.ops = append(r.ops, op)
		r.mu.Unlock()
	}
}

func (r *opsRecorder) last() *server.OperationReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ops) == 0 {
		return nil
	}
	return r.ops[len(r.ops)-1]
}

// Every operator operation, through the client, on the in-memory platform (a running server's
// client) and on the embedded engine (a client that does not serve): each does what it says
// and is reported to the observers.
func TestClientOperations(t *testing.T) {
	t.Parallel()
	base := server.Config{
		Bindings:  map[string]string{"TASKS": "tasks", "DEAD": "tasks-dead"},
		Consumers: []server.ConsumerConfig{{Queue: "tasks", DeadLetterQueue: "tasks-dead"}},
		Logger:    slog.New(slog.DiscardHandler),
	}
	open := map[string]func(t *testing.T, cfg server.Config) *server.Client{
		"memory": func(t *testing.T, cfg server.Config) *server.Client {
			cfg.Platform = &memory.Config{}
			// A program that never settles: nothing the test sends is consumed.
			cfg.Program = &duilie.Program{Queue: func(ev *duilie.Event) error { <-ev.Context().Done(); return nil }}
			srv, err := server.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Halt(); srv.Shutdown(context.Background()) })
			if err := srv.Client().Pause(context.Background(), "tasks"); err != nil {
				t.Fatal(err)
			}
			return srv.Client()
		},
		"embedded engine": func(t *testing.T, cfg server.Config) *server.Client {
			cfg.Platform = &jetstream.Config{DataDir: t.TempDir()}
			c, err := server.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if err := c.Pause(context.Background(), "tasks"); err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
	for name, open := range open {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &opsRecorder{}
			cfg := base
			cfg.Observers = []server.Observer{rec.observe}
			c := open(t, cfg)
			ctx := context.Background()
			wantOp := func(op server.Op, queue string, n int64) {
				t.Helper()
				r := rec.last()
				if r == nil || r.Op != op || r.Queue != queue || r.Messages != n || r.Err != nil {
					t.Errorf("last operation %+v, want %s of %s, %d messages", r, op, queue, n)
				}
			}
			qs, err := c.Queues(ctx)
			if err != nil || len(qs) != 2 || qs[0].Queue != "tasks" || !qs[0].Paused || qs[0].DeadLetterQueue != "tasks-dead" ||
				!slices.Equal(qs[1].Sources, []string{"tasks"}) {
				t.Fatalf("queues: %+v, %v", qs, err)
			}
			if err := c.SendBatch(ctx, "DEAD", `[{"body":1},{"body":2},{"body":3}]`); err != nil {
				t.Fatal(err)
			}
			page, err := c.Peek(ctx, "tasks-dead", server.PeekOptions{})
			if err != nil || len(page.Messages) != 3 {
				t.Fatalf("peek: %+v, %v", page, err)
			}
			wantOp(server.OpPeek, "tasks-dead", 3)
			if n, err := c.Delete(ctx, "tasks-dead", page.Messages[0].ID); n != 1 || err != nil {
				t.Errorf("delete: %d, %v", n, err)
			}
			wantOp(server.OpDelete, "tasks-dead", 1)
			if _, err := c.Delete(ctx, "tasks-dead", page.Messages[0].ID); !errors.Is(err, server.ErrNoMessage) {
				t.Errorf("delete it again: %v, want ErrNoMessage", err)
			}
			r, err := c.Replay(ctx, "tasks-dead", server.ReplayOptions{Delay: time.Hour})
			if err != nil || r.Messages != 2 || r.To != "tasks" {
				t.Errorf("replay: %+v, %v", r, err)
			}
			wantOp(server.OpReplay, "tasks-dead", 2)
			if page, _ := c.Peek(ctx, "tasks", server.PeekOptions{State: "delayed"}); len(page.Messages) != 2 || page.Messages[0].Attempts != 0 {
				t.Errorf("replayed, an hour later: %+v", page.Messages)
			}
			if err := c.Resume(ctx, "tasks"); err != nil {
				t.Error(err)
			}
			wantOp(server.OpResume, "tasks", 0)
			if err := c.Pause(ctx, "tasks"); err != nil {
				t.Error(err)
			}
			wantOp(server.OpPause, "tasks", 0)
			if n, err := c.Purge(ctx, "tasks"); n != 2 || err != nil {
				t.Errorf("purge: %d, %v", n, err)
			}
			wantOp(server.OpPurge, "tasks", 2)
			if err := c.CreateQueue(ctx, "extra"); err != nil {
				t.Error(err)
			}
			wantOp(server.OpCreateQueue, "extra", 0)
			if err := c.DeleteQueue(ctx, "extra"); err != nil {
				t.Error(err)
			}
			wantOp(server.OpDeleteQueue, "extra", 0)
			if err := c.DeleteQueue(ctx, "tasks"); !errors.Is(err, server.ErrConfigured) {
				t.Errorf("delete a configured queue: %v, want ErrConfigured", err)
			}
			for _, err := range []error{
				func() error { _, err := c.Replay(ctx, "tasks", server.ReplayOptions{}); return err }(), // no consumer names it
				func() error { _, err := c.Peek(ctx, "Tasks", server.PeekOptions{}); return err }(),
				func() error {
					_, err := c.Replay(ctx, "tasks-dead", server.ReplayOptions{Delay: 13 * time.Hour})
					return err
				}(),
			} {
				if !errors.Is(err, server.ErrInvalid) {
					t.Errorf("%v: want ErrInvalid", err)
				}
			}
		})
	}
}

// A client whose platform cannot be opened (another process holds the data directory and does
// not serve) says so from every operation, Send included, and closes cleanly.
func TestClientOpenFails(t *testing.T) {
	t.Parallel()
	cfg := server.Config{Bindings: map[string]string{"TASKS": "tasks"}, Platform: &jetstream.Config{DataDir: t.TempDir()},
		Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	holder, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(ctx, "TASKS", `1`, 0)
	var ex *duilie.Exception
	if err == nil || errors.As(err, &ex) || !errors.Is(err, c.OpenErr()) {
		t.Errorf("send: %v, want the platform's failure to open, not an exception", err)
	}
	if _, err := c.Queues(ctx); err == nil {
		t.Error("queues: no error")
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}
