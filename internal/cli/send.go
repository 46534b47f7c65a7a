package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

func newSend(opts Options) *cobra.Command {
	var binding, configPath string
	var delay int
	c := &cobra.Command{
		Use:                   "send --binding B [--delay N] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Send one message, the JSON body read on stdin, to a binding's queue",
		Long: `send runs 发送队列消息 in a host event, with the configuration's permissions and bindings:
stdin, taken byte for byte (a trailing newline is JSON whitespace and counts toward the
size), is the body. It reaches a running serve on the same configuration, or opens the data
directory itself when none runs; the message is delivered once a serve consumes the queue.

Exit status: 0 when the platform accepted the message, printing nothing; 1 with the
exception's message on stderr (a bad body or delay, or the platform refused); 2 with the
abort's message (the binding is not permitted, or not configured); 64 usage; 78 the
configuration; 69 the engine or cluster is unavailable.`,
		Example: `  echo '{"kind":"page","url":"/release/x","version":"v8"}' | ` + opts.Name + ` send --binding PAGE_QUEUE
  ` + opts.Name + ` send --binding PAGE_QUEUE --delay 30 --config examples/page-go/duilie.toml < examples/task.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("binding") {
				return usageErr("send needs --binding, the binding that names the queue")
			}
			return sendEvent(cmd, configPath, func(ev *duilie.Event, in []byte) error {
				return duilie.Send(ev, binding, string(in), delay)
			})
		},
	}
	c.Flags().StringVar(&binding, "binding", "", "the binding to send to, as the program would (required)")
	c.Flags().IntVar(&delay, "delay", 0, "deliver after this many seconds (0–43200)")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

func newSendBatch(opts Options) *cobra.Command {
	var binding, configPath string
	c := &cobra.Command{
		Use:                   "send-batch --binding B [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Send a batch of messages, a JSON array read on stdin, to a binding's queue",
		Long: `send-batch runs 批量发送队列消息 in a host event: stdin, taken byte for byte, is a JSON array
of 1–100 items {"body": any JSON value, "delaySeconds": optional 0–43200}. Nothing is sent
unless every item passes its checks. Like send, it reaches a running serve or opens the
data directory itself; exit statuses are those of send.`,
		Example: `  echo '[{"body":{"kind":"page","url":"/a","version":"v8"}},{"body":{"kind":"release","url":"/b","version":"v8"},"delaySeconds":60}]' |
    ` + opts.Name + ` send-batch --binding PAGE_QUEUE`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("binding") {
				return usageErr("send-batch needs --binding, the binding that names the queue")
			}
			return sendEvent(cmd, configPath, func(ev *duilie.Event, in []byte) error {
				return duilie.SendBatch(ev, binding, string(in))
			})
		},
	}
	c.Flags().StringVar(&binding, "binding", "", "the binding to send to, as the program would (required)")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

// sendEvent runs send in one fetch-kind host event on the configured platform, with stdin as
// its input. The platform opens only when the event first resolves a binding, so a body that
// fails its checks, or a binding that aborts, never touches the engine.
func sendEvent(cmd *cobra.Command, configPath string, send func(ev *duilie.Event, in []byte) error) error {
	cfg, err := server.LoadConfig(configPath)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return &exitError{exitIOErr, fmt.Errorf("reading stdin: %w", err)}
	}
	quiet := slog.New(slog.DiscardHandler)
	lp := &lazyPlatform{open: func(ctx context.Context) (platform.Platform, error) {
		return openPlatform(ctx, cfg)
	}}
	defer lp.Close()
	h, err := host.New(host.Config{
		Platform:    cfg.WithDeliveryDelays(lp),
		Permissions: cfg.Permissions,
		Bindings:    cfg.Bindings,
		TimeLimit:   cfg.TimeLimit,
		Logger:      quiet,
	})
	if err != nil {
		return &exitError{exitSoftware, err}
	}
	failure := h.Run(cmd.Context(), func(ev *duilie.Event) error { return send(ev, in) })
	if err := lp.openErr(); err != nil {
		return err // the platform could not be opened: 69 (or 78), whatever the event saw
	}
	if failure != nil {
		return failure
	}
	// Closing drains the connection, so the message has reached the engine when we exit 0.
	if err := lp.Close(); err != nil {
		return unavailable(fmt.Errorf("closing the platform: %w", err))
	}
	return nil
}

// openPlatform opens the configured platform as a local command does: it reaches the running
// serve that holds the store, or opens the store itself for a moment. A setting the platform
// cannot use (a data directory another user could capture) is exit status 78; other failures
// are 69.
func openPlatform(ctx context.Context, cfg *server.Config) (platform.Platform, error) {
	p, err := cfg.OpenPlatform(ctx, platform.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	var ce *server.ConfigError
	switch {
	case errors.As(err, &ce):
		return nil, err
	case err != nil:
		return nil, unavailable(err)
	}
	return p, nil
}

// lazyPlatform opens the real platform on first use.
type lazyPlatform struct {
	open func(ctx context.Context) (platform.Platform, error)

	mu  sync.Mutex
	p   platform.Platform
	err error
}

var _ platform.Platform = (*lazyPlatform)(nil)

func (l *lazyPlatform) get(ctx context.Context) (platform.Platform, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.p == nil && l.err == nil {
		l.p, l.err = l.open(ctx)
	}
	return l.p, l.err
}

func (l *lazyPlatform) openErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *lazyPlatform) Queue(ctx context.Context, name string) (platform.Queue, error) {
	p, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return p.Queue(ctx, name)
}

func (l *lazyPlatform) Consume(ctx context.Context, name string, opts platform.ConsumerOptions) (platform.Consumer, error) {
	p, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return p.Consume(ctx, name, opts)
}

func (l *lazyPlatform) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.p == nil {
		return nil
	}
	return l.p.Close()
}
