package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/server"
)

func newQueues(opts Options) *cobra.Command {
	var configPath string
	var asJSON bool
	c := &cobra.Command{
		Use:                   "queues [--json] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Show every queue's ready, delayed and in-flight messages",
		Long: `queues prints one row per queue of the configured platform: ready (deliverable now),
delayed (waiting for a send or retry delay) and in_flight (delivered, event not yet
settled). With --json it prints a JSON array of objects with exactly the keys queue,
ready, delayed and in_flight. Like send, it reaches a running serve or opens the data
directory itself.`,
		Example: `  ` + opts.Name + ` queues --config examples/page-go/duilie.toml
  queue        ready  delayed  in_flight
  page-dlq         0        0          0
  page-render      2        1          0

  ` + opts.Name + ` queues --json
  [{"queue":"page-dlq","ready":0,"delayed":0,"in_flight":0},{"queue":"page-render","ready":2,"delayed":1,"in_flight":0}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := server.LoadConfig(configPath)
			if err != nil {
				return err
			}
			p, err := openPlatform(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			st, ok := p.(platform.Stater)
			if !ok {
				return unavailable(errors.New("platform kind " + cfg.Platform.Kind() + " cannot count its messages"))
			}
			stats, err := st.Stats(cmd.Context())
			if err != nil {
				return unavailable(err)
			}
			var out []byte
			if asJSON {
				if stats == nil {
					stats = []platform.QueueStats{}
				}
				if out, err = json.Marshal(stats); err != nil {
					return &exitError{exitSoftware, err}
				}
				out = append(out, '\n')
			} else {
				out = []byte(queueTable(stats))
			}
			if _, err := cmd.OutOrStdout().Write(out); err != nil {
				return &exitError{exitIOErr, fmt.Errorf("writing stdout: %w", err)}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

// queueTable lays the stats out in columns: names left-aligned, counts right-aligned.
func queueTable(stats []platform.QueueStats) string {
	rows := [][]string{{"queue", "ready", "delayed", "in_flight"}}
	for _, s := range stats {
		rows = append(rows, []string{s.Queue, strconv.FormatInt(s.Ready, 10),
			strconv.FormatInt(s.Delayed, 10), strconv.FormatInt(s.InFlight, 10)})
	}
	return table(rows, 1)
}

// table formats rows in columns two spaces apart; columns from numericFrom on are right-aligned.
func table(rows [][]string, numericFrom int) string {
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
			if i >= numericFrom {
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
