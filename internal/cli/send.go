package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie"
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
			return sendEvent(cmd, configPath, duilie.MaxBodyBytes, func(c *server.Client, in []byte) error {
				return c.Send(cmd.Context(), binding, string(in), delay)
			})
		},
	}
	c.Flags().StringVar(&binding, "binding", "", "the binding to send to, as the program would (required)")
	c.Flags().IntVar(&delay, "delay", 0, fmt.Sprintf("deliver after this many seconds (0–%d)", duilie.MaxDelaySeconds))
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
			return sendEvent(cmd, configPath, duilie.MaxBatchBytes, func(c *server.Client, in []byte) error {
				return c.SendBatch(cmd.Context(), binding, string(in))
			})
		},
	}
	c.Flags().StringVar(&binding, "binding", "", "the binding to send to, as the program would (required)")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

// sendEvent runs send in one fetch-kind event of a client of the configuration, with stdin
// (read up to limit, see readStdin) as its input. The platform opens only when the event first
// resolves a binding, so a body that fails its checks, or a binding that aborts, never touches
// the engine.
func sendEvent(cmd *cobra.Command, configPath string, limit int, send func(c *server.Client, in []byte) error) error {
	cfg, err := server.LoadConfig(configPath)
	if err != nil {
		return err
	}
	in, err := readStdin(cmd, limit)
	if err != nil {
		return err
	}
	c, err := openClient(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := send(c, in); err != nil {
		return clientErr(err)
	}
	// Closing drains the connection, so the message has reached the engine when we exit 0.
	if err := c.Close(); err != nil {
		return unavailable(err)
	}
	return nil
}

// openClient makes a client of the configuration, as every command but serve does: it reaches
// the running serve that holds the store, or opens the store itself for a moment.
func openClient(ctx context.Context, cfg *server.Config) (*server.Client, error) {
	c, err := server.Open(ctx, *cfg)
	if err != nil {
		return nil, err // a *server.ConfigError: 78
	}
	return c, nil
}

// clientErr gives a client's error its exit status: the interface's exceptions (1) and aborts
// (2), a setting the platform cannot use (78), an argument out of range (64), and otherwise the
// engine, the queue or the message is unavailable (69).
func clientErr(err error) error {
	var ex *duilie.Exception
	var ab *duilie.Abort
	var ce *server.ConfigError
	var xe *exitError
	switch {
	case errors.As(err, &ex), errors.As(err, &ab), errors.As(err, &ce), errors.As(err, &xe):
		return err
	case errors.Is(err, server.ErrInvalid):
		return &exitError{exitUsage, err}
	}
	return unavailable(err)
}
