package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

// The operator's commands: peek, replay, purge, delete, pause, resume. Each opens the platform
// as send does (reaching a running serve, or opening the data directory itself) and calls one
// of its operator operations (platform.Operator).

const operateExitStatus = `Exit status: 0 success; 64 usage; 78 the configuration; 69 the engine is unavailable, or
the queue or message does not exist.`

// loadOperate checks the queue names of an operator's command and loads the configuration.
func loadOperate(configPath string, queues []string) (*server.Config, error) {
	for _, q := range queues {
		if err := platform.CheckQueueName(q); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	return server.LoadConfig(configPath)
}

// operate opens the configuration's platform as a local command and runs fn with the
// platform's operator operations. Queues the configuration names are created first, as serve
// creates them, so they can be paused or peeked before any serve has run.
func operate(cmd *cobra.Command, cfg *server.Config, queues []string, fn func(ctx context.Context, op platform.Operator) error) error {
	ctx := cmd.Context()
	p, err := openPlatform(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	op, ok := p.(platform.Operator)
	if !ok {
		return unavailable(errors.New("platform kind " + cfg.Platform.Kind() + " has no operator operations"))
	}
	for _, q := range queues {
		if slices.Contains(cfg.Queues(), q) {
			if _, err := p.Queue(ctx, q); err != nil {
				return unavailable(err)
			}
		}
	}
	if err := fn(ctx, op); err != nil {
		var xe *exitError
		if errors.As(err, &xe) {
			return err
		}
		return unavailable(err)
	}
	// Closing drains the connection: what the operation sent has reached the engine.
	if err := p.Close(); err != nil {
		return unavailable(fmt.Errorf("closing the platform: %w", err))
	}
	return nil
}

func configFlag(c *cobra.Command, path *string) {
	c.Flags().StringVar(path, "config", server.DefaultConfigFile, "configuration file")
}

// peekedMessage is one message of peek --json.
type peekedMessage struct {
	ID          string          `json:"id"`
	State       platform.State  `json:"state"`
	Attempts    int             `json:"attempts"`
	Timestamp   int64           `json:"timestamp"`
	Due         *int64          `json:"due,omitempty"`
	Delivered   *int64          `json:"delivered,omitempty"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body"`
}

// bodyJSON is a body as a JSON value: itself for JSON, a string for text, base64 for the rest.
func bodyJSON(m platform.StoredMessage) json.RawMessage {
	switch m.ContentType {
	case platform.JSON:
		if json.Valid(m.Body) {
			return m.Body
		}
	case platform.Text:
		b, _ := json.Marshal(string(m.Body))
		return b
	}
	b, _ := json.Marshal(base64.StdEncoding.EncodeToString(m.Body))
	return b
}

func peeked(m platform.StoredMessage) peekedMessage {
	out := peekedMessage{ID: m.ID, State: m.State, Attempts: m.Attempts, Timestamp: m.Timestamp,
		ContentType: string(m.ContentType), Body: bodyJSON(m)}
	if m.State == platform.Delayed && m.Due > 0 {
		out.Due = &m.Due
	}
	if m.State == platform.InFlight && m.Delivered > 0 {
		out.Delivered = &m.Delivered
	}
	return out
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
			var st platform.State
			if state != "" {
				var err error
				if st, err = platform.ParseState(state); err != nil {
					return usageErr("--state %q: %v", state, err)
				}
			}
			if limit < 1 || limit > platform.MaxBrowseLimit {
				return usageErr("--limit %d: must be 1–%d", limit, platform.MaxBrowseLimit)
			}
			cfg, err := loadOperate(configPath, args)
			if err != nil {
				return err
			}
			return operate(cmd, cfg, args, func(ctx context.Context, op platform.Operator) error {
				var ms []platform.StoredMessage
				cursor := ""
				for len(ms) < limit {
					page, err := op.Browse(ctx, args[0], platform.BrowseOptions{State: st, Limit: limit - len(ms), Cursor: cursor})
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
					rows := make([]peekedMessage, len(ms))
					for i, m := range ms {
						rows[i] = peeked(m)
					}
					var err error
					if out, err = json.Marshal(rows); err != nil {
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

func peekTable(ms []platform.StoredMessage) string {
	rows := [][]string{{"id", "state", "attempts", "timestamp", "due", "delivered", "body"}}
	for _, m := range ms {
		due, delivered := "-", "-"
		if m.State == platform.Delayed {
			due = msTime(m.Due)
		}
		if m.State == platform.InFlight {
			delivered = msTime(m.Delivered)
		}
		body := string(bodyJSON(m))
		if m.ContentType != platform.JSON && m.ContentType != platform.Text {
			body = fmt.Sprintf("(%s, %d bytes)", m.ContentType, len(m.Body))
		}
		rows = append(rows, []string{m.ID, string(m.State), strconv.Itoa(m.Attempts), msTime(m.Timestamp), due, delivered, body})
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
			if limit < 0 {
				return usageErr("--limit %d: must be 0 (every message) or more", limit)
			}
			if delay < 0 || delay > 43200 {
				return usageErr("--delay %d: must be 0–43200 (seconds)", delay)
			}
			queues := args
			if to != "" {
				queues = append(queues, to)
			}
			cfg, err := loadOperate(configPath, queues)
			if err != nil {
				return err
			}
			target := to
			if target == "" {
				if target, err = replayTarget(cfg, args[0]); err != nil {
					return err
				}
			}
			return operate(cmd, cfg, queues, func(ctx context.Context, op platform.Operator) error {
				_, err := op.Move(ctx, args[0], target, platform.MoveOptions{Limit: limit, Delay: time.Duration(delay) * time.Second})
				return err
			})
		},
	}
	c.Flags().StringVar(&to, "to", "", "the queue to send them to (default: the queue whose consumer names DLQ)")
	c.Flags().IntVar(&limit, "limit", 0, "the most messages to replay, oldest first (0: every one)")
	c.Flags().IntVar(&delay, "delay", 0, "deliver them this many seconds later (0–43200)")
	configFlag(c, &configPath)
	return c
}

// replayTarget is the queue whose consumer names dlq as its dead-letter queue.
func replayTarget(cfg *server.Config, dlq string) (string, error) {
	var sources []string
	for q, d := range cfg.DeadLetterQueues() {
		if d == dlq {
			sources = append(sources, q)
		}
	}
	slices.Sort(sources)
	switch len(sources) {
	case 1:
		return sources[0], nil
	case 0:
		return "", usageErr("no consumer in %s names %s as its dead_letter_queue; say where to send its messages with --to QUEUE", cfg.File, dlq)
	}
	return "", usageErr("the consumers of %s all name %s as their dead_letter_queue; choose one with --to QUEUE", strings.Join(sources, ", "), dlq)
}

func newPurge(opts Options) *cobra.Command {
	var configPath string
	var yes bool
	c := &cobra.Command{
		Use:                   "purge QUEUE [--yes] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Delete every message of a queue",
		Long: `purge deletes every message of a queue: ready, delayed and in flight (an event still running
on a purged message may store it again by retrying it). It asks first on a terminal; --yes
skips the question, and is required when stdin is not a terminal.

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
			cfg, err := loadOperate(configPath, args)
			if err != nil {
				return err
			}
			return operate(cmd, cfg, args, func(ctx context.Context, op platform.Operator) error {
				if !yes {
					ok, err := confirmPurge(ctx, cmd, op, args[0])
					if err != nil || !ok {
						return err
					}
				}
				_, err := op.Purge(ctx, args[0])
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
func confirmPurge(ctx context.Context, cmd *cobra.Command, op platform.Operator, queue string) (bool, error) {
	what := ""
	if st, ok := op.(platform.Stater); ok {
		if stats, err := st.Stats(ctx); err == nil {
			for _, s := range stats {
				switch {
				case s.Queue != queue:
				case s.Backlog != nil: // all the platform counts (Cloudflare)
					what = fmt.Sprintf(" (a backlog of %d)", *s.Backlog)
				default:
					what = fmt.Sprintf(" (%d ready, %d delayed, %d in flight)", s.Ready, s.Delayed, s.InFlight)
				}
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
whatever state it is. A message in flight is gone once its event acks it; an event that
retries it stores it again.

` + operateExitStatus,
		Example: `  ` + opts.Name + ` delete page-dlq 4f0c2a9e1b7d4c3a8e6f5d2c1b0a9e8f`,
		Args:    exactArgs(2, "delete needs the queue and the id of the message to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadOperate(configPath, args[:1])
			if err != nil {
				return err
			}
			return operate(cmd, cfg, args[:1], func(ctx context.Context, op platform.Operator) error {
				return op.Delete(ctx, args[0], args[1])
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
			cfg, err := loadOperate(configPath, args)
			if err != nil {
				return err
			}
			return operate(cmd, cfg, args, func(ctx context.Context, op platform.Operator) error {
				if resume {
					return op.Resume(ctx, args[0])
				}
				return op.Pause(ctx, args[0])
			})
		},
	}
	configFlag(c, &configPath)
	return c
}
