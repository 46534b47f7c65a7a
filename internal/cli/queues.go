package cli

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/server"
)

func newQueues(opts Options) *cobra.Command {
	var configPath string
	var asJSON bool
	c := &cobra.Command{
		Use:                   "queues [--json] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Show every queue's ready, delayed, in-flight and lost messages",
		Long: `queues prints one row per queue of the configured platform: ready (deliverable now),
delayed (waiting for a send or retry delay), in_flight (delivered, event not yet
settled), lost (messages damaged storage lost), paused (pause stopped its delivery) and the
dead_letter_queue of its consumer in the configuration. With --json it prints a JSON array
of objects with the keys queue, ready, delayed, in_flight, paused (true or false), lost,
damage (only when there is any) and dead_letter_queue (a name, or null). Like send, it
reaches a running serve or opens the data directory itself. On Cloudflare (kind =
"cloudflare") it shows what Cloudflare reports: queue, backlog (messages not yet
acknowledged, in any state), paused and dead_letter_queue.

Exit status: 0; 74 when a queue lost messages or cannot be loaded (the table is printed,
and one line per such queue on stderr says what happened); 69 the engine or cluster is
unavailable; 78 the configuration.`,
		Example: `  ` + opts.Name + ` queues --config examples/page-go/duilie.toml
  queue        ready  delayed  in_flight  lost  paused  dead_letter_queue
  page-dlq         0        0          0     0  no      -
  page-render      2        1          0     0  no      page-dlq

  ` + opts.Name + ` queues --json
  [{"queue":"page-dlq","ready":0,"delayed":0,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":null},{"queue":"page-render","ready":2,"delayed":1,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":"page-dlq"}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := server.LoadConfig(configPath)
			if err != nil {
				return err
			}
			c, err := openClient(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			qs, err := c.Queues(cmd.Context())
			if err != nil {
				return clientErr(err)
			}
			rows := make([]queueRow, len(qs))
			for i, q := range qs {
				rows[i] = rowOf(q)
			}
			var out []byte
			if asJSON {
				if out, err = json.Marshal(rows); err != nil {
					return &exitError{exitSoftware, err}
				}
				out = append(out, '\n')
			} else {
				out = []byte(queueTable(rows))
			}
			if err := writeOut(cmd.OutOrStdout(), out); err != nil {
				return err
			}
			var damaged []string
			for _, q := range qs {
				if q.Damage != "" {
					damaged = append(damaged, "queue "+q.Queue+": "+q.Damage)
				}
			}
			if len(damaged) > 0 {
				return &exitError{exitIOErr, errors.New(strings.Join(damaged, "\n"+opts.Name+": "))}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

// queueRow is one queue of duilie queues --json: the platform's counts, whether it is paused,
// and the dead-letter queue of its consumer (null when it has none).
type queueRow struct {
	server.QueueInfo
	DeadLetterQueue *string `json:"dead_letter_queue"`
}

func rowOf(q server.QueueInfo) queueRow {
	r := queueRow{QueueInfo: q}
	if q.DeadLetterQueue != "" {
		r.DeadLetterQueue = &q.DeadLetterQueue
	}
	return r
}

// MarshalJSON writes a row of a platform that counts only unacknowledged messages
// (Cloudflare) with what it reports, {queue, backlog, paused, dead_letter_queue}: no ready,
// delayed, in-flight or lost counts it does not have.
func (r queueRow) MarshalJSON() ([]byte, error) {
	if r.Backlog == nil {
		type plain queueRow
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		Queue           string  `json:"queue"`
		Backlog         int64   `json:"backlog"`
		Paused          bool    `json:"paused"`
		DeadLetterQueue *string `json:"dead_letter_queue"`
	}{r.Queue, *r.Backlog, r.Paused, r.DeadLetterQueue})
}

// queueTable lays the rows out in columns: names left-aligned, counts right-aligned. A
// platform that counts only unacknowledged messages (Cloudflare) gets a backlog column instead
// of the counts it does not have.
func queueTable(qs []queueRow) string {
	if len(qs) > 0 && qs[0].Backlog != nil {
		rows := [][]string{{"queue", "backlog", "paused", "dead_letter_queue"}}
		for _, q := range qs {
			paused, dlq := pausedAndDLQ(q)
			var n int64
			if q.Backlog != nil {
				n = *q.Backlog
			}
			rows = append(rows, []string{q.Queue, strconv.FormatInt(n, 10), paused, dlq})
		}
		return columns(rows, map[int]bool{1: true})
	}
	rows := [][]string{{"queue", "ready", "delayed", "in_flight", "lost", "paused", "dead_letter_queue"}}
	for _, q := range qs {
		paused, dlq := pausedAndDLQ(q)
		rows = append(rows, []string{q.Queue, strconv.FormatInt(q.Ready, 10),
			strconv.FormatInt(q.Delayed, 10), strconv.FormatInt(q.InFlight, 10), strconv.FormatInt(q.Lost, 10), paused, dlq})
	}
	return columns(rows, map[int]bool{1: true, 2: true, 3: true, 4: true})
}

func pausedAndDLQ(q queueRow) (paused, dlq string) {
	paused, dlq = "no", "-"
	if q.Paused {
		paused = "yes"
	}
	if q.DeadLetterQueue != nil {
		dlq = *q.DeadLetterQueue
	}
	return paused, dlq
}

// table formats rows in columns two spaces apart; columns from numericFrom on are right-aligned.
func table(rows [][]string, numericFrom int) string {
	numeric := map[int]bool{}
	for i := numericFrom; i < len(rows[0]); i++ {
		numeric[i] = true
	}
	return columns(rows, numeric)
}

// columns formats rows in columns two spaces apart; the numeric columns are right-aligned.
func columns(rows [][]string, numeric map[int]bool) string {
	var width []int
	for _, r := range rows {
		for i, cell := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], displayWidth(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-displayWidth(cell))
			if i > 0 {
				b.WriteString("  ")
			}
			if numeric[i] {
				b.WriteString(pad + cell)
			} else if i < len(r)-1 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(cell)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// displayWidth counts runes: the tables hold ASCII, digits and a few symbols.
func displayWidth(s string) int { return len([]rune(s)) }
