package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie"
)

func newCheck() *cobra.Command {
	var batch bool
	var delay int
	c := &cobra.Command{
		Use:                   "check [--batch] [--delay N]",
		DisableFlagsInUseLine: true,
		Short:                 "Check and normalize a message body (or a batch) read on stdin",
		Long: `check applies the interface's checks to stdin, taken byte for byte (a trailing newline
is JSON whitespace and counts toward the size), and prints the normalized body: exactly
JavaScript's JSON.stringify(JSON.parse(text)) in V8. With --batch it reads a sendBatch
array and prints the items the platform would receive. A failed check prints the spec's
message on stderr and exits 1.`,
		Example: `  echo '{"kind":"page", "url":"/release/x", "n":1E2}' | duilie check
  {"kind":"page","url":"/release/x","n":100}

  echo '[{"body":1,"delaySeconds":30},{"body":"两"}]' | duilie check --batch
  [{"body":1,"contentType":"json","delaySeconds":30},{"body":"两","contentType":"json"}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch && cmd.Flags().Changed("delay") {
				return usageErr("--delay cannot be used with --batch: each item has its own delaySeconds")
			}
			limit := duilie.MaxBodyBytes
			if batch {
				limit = duilie.MaxBatchBytes
			}
			in, err := readStdin(cmd, limit)
			if err != nil {
				return err
			}
			var out []byte
			if batch {
				out, err = duilie.CheckBatchText(in)
			} else {
				out, err = duilie.CheckBody(in, delay)
			}
			if err != nil {
				return err
			}
			if _, err := cmd.OutOrStdout().Write(append(out, '\n')); err != nil {
				return &exitError{exitIOErr, fmt.Errorf("writing stdout: %w", err)}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&batch, "batch", false, "read a sendBatch array instead of one body")
	c.Flags().IntVar(&delay, "delay", 0, fmt.Sprintf("delay in seconds to check (0–%d)", duilie.MaxDelaySeconds))
	return c
}
