package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/server"
)

// The operator's commands: peek, replay, purge, delete, pause, resume. Each opens the platform
// as send does (reaching a running serve, or opening the data directory itself) and calls one
// of the client's operator operations.

const operateExitStatus = `Exit status: 0 success; 64 usage; 78 the configuration; 69 the engine is unavailable, or
the queue or message does not exist.`

// operate loads the configuration and runs fn with a client of it, as send does (reaching a
// running serve, or opening the data directory itself), mapping its errors to exit statuses.
func operate(cmd *cobra.Command, configPath string, fn func(ctx context.Context, c *server.Client) error) error {
	cfg, err := server.LoadConfig(configPath)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := openClient(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := fn(ctx, c); err != nil {
		return clientErr(err)
	}
	// Closing drains the connection: what the operation sent has reached the engine.
	if err := c.Close(); err != nil {
		return unavailable(err)
	}
	return nil
}

func configFlag(c *cobra.Command, path *string) {
	c.Flags().StringVar(path, "config", server.DefaultConfigFile, "configuration file")
}

// msTime prints a Unix-ms time in UTC with milliseconds, or "-" for none.
func msTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func newPeek(opts Options) *cobra.Command {
	var configPath, state string
	var limit int
	var asJSON bool
	c := &cobra.Command{
		Use:                   "peek QUEUE [--state ready|delayed|in_flight] [--limit N] [--json] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Show a queue's messages, with their bodies, without taking them",
		Long: `peek lists up to --limit messages of a queue (default 10, at most 1000), oldest first: every
state, or only --state ready (deliverable now), delayed (waiting for a send or retry delay)
or in_flight (delivered, event not yet settled). Each row has the message's id, state,
attempts so far (0 for a message never delivered, or one moved back from a dead-letter
queue), enqueue time, due time (delayed) or delivery time (in flight), and body. With --json
it prints a JSON array of {"id","state","attempts","timestamp","due"?,"delivered"?,
"content_type","body"}: times in Unix milliseconds, a JSON body as itself, a text body as a
string, any other as base64. Nothing is taken or changed.

` + operateExitStatus,
		Example: `  ` + opts.Name + ` peek page-dlq
  id                                state  attempts  timestamp                 due  delivered  body
  4f0c2a9e1b7d4c3a8e6f5d2c1b0a9e8f  ready         0  2026-12-02T10:15:04.311Z  -    -          {"kind":"page","url":"/x","version":"v8","fail":true}

  ` + opts.Name + ` peek page-render --state delayed --limit 100 --json`,
		Args: exactArgs(1, "peek needs the queue to show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > server.MaxPeekLimit {
				return usageErr("--limit %d: must be 1–%d", limit, server.MaxPeekLimit)
			}
			return operate(cmd, configPath, func(ctx context.Context, c *server.Client) error {
				var ms []server.Message
				cursor := ""
				for len(ms) < limit {
					page, err := c.Peek(ctx, args[0], server.PeekOptions{State: state, Limit: limit - len(ms), Cursor: cursor})
					if err != nil {
						return err
					}
					ms = append(ms, page.Messages...)
					if cursor = page.Next; cursor == "" {
						break
					}
				}
				var out []byte
				if asJSON {
					if ms == nil {
						ms = []server.Message{}
					}
					var err error
					if out, err = json.Marshal(ms); err != nil {
						return &exitError{exitSoftware, err}
					}
					out = append(out, '\n')
				} else {
					out = []byte(peekTable(ms))
				}
				return writeOut(cmd.OutOrStdout(), out)
			})
		},
	}
	c.Flags().StringVar(&state, "state", "", "only messages in this state: ready, delayed or in_flight")
	c.Flags().IntVar(&limit, "limit", 10, "the most messages to show (1–1000)")
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	configFlag(c, &configPath)
	return c
}

func peekTable(ms []server.Message) string {
	rows := [][]string{{"id", "state", "attempts", "timestamp", "due", "delivered", "body"}}
	for _, m := range ms {
		body := string(m.Body)
		if !m.Readable() {
			body = fmt.Sprintf("(%s, %d bytes)", m.ContentType, m.Size)
		}
		rows = append(rows, []string{m.ID, m.State, strconv.Itoa(m.Attempts), msTime(m.Timestamp), msTime(m.Due), msTime(m.Delivered), body})
	}
	return columns(rows, map[int]bool{2: true})
}

func writeOut(w io.Writer, out []byte) error {
	if _, err := w.Write(out); err != nil {
		return &exitError{exitIOErr, fmt.Errorf("writing stdout: %w", err)}
	}
	return nil
}

// exactArgs wants n positional arguments, and says what is missing in a usage error.
func exactArgs(n int, missing string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return usageErr("%s", missing)
		case len(args) > n:
			return usageErr("%s takes %d argument(s), got %d: %s", cmd.Name(), n, len(args), strings.Join(args, " "))
		}
		return nil
	}
}

func newReplay(opts Options) *cobra.Command {
	var configPath, to string
	var limit, delay int
	c := &cobra.Command{
		Use:                   "replay DLQ [--to QUEUE] [--limit N] [--delay N] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Send a dead-letter queue's messages back to the queue they came from",
		Long: `replay moves the messages of a dead-letter queue (every one, or the oldest --limit) back to
the queue whose consumer names it as its dead_letter_queue, or to --to QUEUE. Each keeps its
id, timestamp and body and is delivered again with attempts 1: at once, or --delay seconds
later (0–43200). Messages in flight (a consumer of the dead-letter queue holds them) stay.
A crash in the middle may leave a message in both queues, never in neither.

` + operateExitStatus,
		Example: `  ` + opts.Name + ` replay page-dlq                          # back to page-render, whose consumer names page-dlq
  ` + opts.Name + ` replay page-dlq --limit 10 --delay 60
  ` + opts.Name + ` replay page-dlq --to page-render-v2`,
		Args: exactArgs(1, "replay needs the dead-letter queue to replay"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return operate(cmd, configPath, func(ctx context.Context, c *server.Client) error {
				_, err := c.Replay(ctx, args[0], server.ReplayOptions{To: to, Limit: limit, Delay: time.Duration(delay) * time.Second})
				return err
			})
		},
	}
	c.Flags().StringVar(&to, "to", "", "the queue to send them to (default: the queue whose consumer names DLQ)")
	c.Flags().IntVar(&limit, "limit", 0, "the most messages to replay, oldest first (0: every one)")
	c.Flags().IntVar(&delay, "delay", 0, fmt.Sprintf("deliver them this many seconds later (0–%d)", duilie.MaxDelaySeconds))
	configFlag(c, &configPath)
	return c
}

func newPurge(opts Options) *cobra.Command {
	var configPath string
	var yes bool
	c := &cobra.Command{
		Use:                   "purge QUEUE [--yes] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Delete every message of a queue",
		Long: `purge deletes every message of a queue: ready, delayed and in flight, and those a serve has
received for a batch that has not started yet; once it returns, none of them is delivered
(an event still running with one cannot store it again by retrying it). It asks first on a
terminal; --yes skips the question, and is required when stdin is not a terminal.

` + operateExitStatus,
		Example: `  ` + opts.Name + ` purge page-dlq
  purge every message of page-dlq (3 ready, 0 delayed, 0 in flight)? [y/N] y

  ` + opts.Name + ` purge page-dlq --yes`,
		Args: exactArgs(1, "purge needs the queue to purge"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if !yes && !isTerminal(in) {
				return usageErr("purge deletes every message of %s: confirm with --yes (stdin is not a terminal to ask on)", args[0])
			}
			return operate(cmd, configPath, func(ctx context.Context, c *server.Client) error {
				if !yes {
					ok, err := confirmPurge(ctx, cmd, c, args[0])
					if err != nil || !ok {
						return err
					}
				}
				_, err := c.Purge(ctx, args[0])
				return err
			})
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "purge without asking")
	configFlag(c, &configPath)
	return c
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirmPurge asks on the terminal whether to purge queue, showing its counts.
func confirmPurge(ctx context.Context, cmd *cobra.Command, c *server.Client, queue string) (bool, error) {
	what := ""
	if qs, err := c.Queues(ctx); err == nil {
		for _, q := range qs {
			switch {
			case q.Queue != queue:
			case q.Backlog != nil: // all the platform counts (Cloudflare)
				what = fmt.Sprintf(" (a backlog of %d)", *q.Backlog)
			default:
				what = fmt.Sprintf(" (%d ready, %d delayed, %d in flight)", q.Ready, q.Delayed, q.InFlight)
			}
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "purge every message of %s%s? [y/N] ", queue, what)
	var answer string
	_, _ = fmt.Fscanln(cmd.InOrStdin(), &answer)
	return strings.EqualFold(answer, "y") || strings.EqualFold(answer, "yes"), nil
}

func newDelete(opts Options) *cobra.Command {
	var configPath string
	c := &cobra.Command{
		Use:                   "delete QUEUE ID [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Delete one message of a queue, by its id",
		Long: `delete removes the message with this id (as peek and 读取队列批次 show it) from the queue, in
whatever state it is, for good: once delete returns, it is not delivered, from a batch still
filling or again after an event that had it retries it.

` + operateExitStatus,
		Example: `  ` + opts.Name + ` delete page-dlq 4f0c2a9e1b7d4c3a8e6f5d2c1b0a9e8f`,
		Args:    exactArgs(2, "delete needs the queue and the id of the message to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return operate(cmd, configPath, func(ctx context.Context, c *server.Client) error {
				_, err := c.Delete(ctx, args[0], args[1])
				return err
			})
		},
	}
	configFlag(c, &configPath)
	return c
}

func newPause(opts Options, resume bool) *cobra.Command {
	var configPath string
	name, short, long := "pause", "Stop delivering a queue's messages, until resume", `pause stops delivery of a queue's messages until resume, across restarts of serve: sends are
still accepted, and no batch is delivered (messages in flight stay with their events).
Pausing a paused queue changes nothing.`
	if resume {
		name, short, long = "resume", "Deliver a paused queue's messages again", `resume restarts delivery of a paused queue.`
	}
	c := &cobra.Command{
		Use:                   name + " QUEUE [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 short,
		Long:                  long + "\n\n" + operateExitStatus,
		Example:               `  ` + opts.Name + ` ` + name + ` page-render`,
		Args:                  exactArgs(1, name+" needs the queue to "+name),
		RunE: func(cmd *cobra.Command, args []string) error {
			return operate(cmd, configPath, func(ctx context.Context, c *server.Client) error {
				if resume {
					return c.Resume(ctx, args[0])
				}
				return c.Pause(ctx, args[0])
			})
		},
	}
	configFlag(c, &configPath)
	return c
}
