package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/internal/workerbuild"
)

func newWorker() *cobra.Command {
	c := &cobra.Command{
		Use:   "worker",
		Short: "Make a Cloudflare Worker of a Go program",
		Long: `worker build compiles a Go program written against duilie (its main calls app.Main) into a
Cloudflare Worker whose queue and fetch handlers run the program's handlers, with the same
interface, checks, messages and aborts as under serve. docs/workers.md tells how to run the
Worker in Miniflare and deploy it with wrangler.`,
		Example: `  duilie worker build ./examples/page-go
  cd examples/page-go/worker && npx wrangler deploy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErr("worker needs a subcommand: build")
		},
	}
	c.AddCommand(newWorkerBuild())
	return c
}

func newWorkerBuild() *cobra.Command {
	var opts workerbuild.Options
	var verbose bool
	c := &cobra.Command{
		Use:                   "build [--out DIR] [--config F] [--name N] [-v] PROGRAM",
		DisableFlagsInUseLine: true,
		Short:                 "Build a Go program as a Cloudflare Worker",
		Long: `build compiles PROGRAM, a main package as go build names it, with GOOS=js GOARCH=wasm, and
writes the Worker to --out (default: PROGRAM's directory/worker):

  app.wasm        the program
  wasm_exec.js    the Go distribution's support file for it
  worker.mjs      the entry: the queue and fetch handlers, with [permissions], the
                  bindings and [app] time_limit_ms of the configuration
  wrangler.jsonc  the Worker's name, a queue producer per [[queues.producers]] and a
                  consumer per [[queues.consumers]], with every setting of the configuration

--config defaults to duilie.toml in PROGRAM's directory; [app] command and listen and
[platform] do not apply to a Worker. GOFLAGS reaches go build. -v prints the files and the
Wasm module's size, raw and gzipped, against Cloudflare's Worker size limits.`,
		Example: `  duilie worker build ./examples/page-go
  duilie worker build --out dist --name pages -v ./cmd/pages`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("worker build needs one PROGRAM, such as ./examples/page-go")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Program = args[0]
			opts.Stderr = cmd.ErrOrStderr()
			res, err := workerbuild.Build(cmd.Context(), opts)
			var be *workerbuild.Error
			switch {
			case errors.As(err, &be) && be.Step == "write":
				return &exitError{exitIOErr, err}
			case errors.As(err, &be):
				return &exitError{exitSoftware, err}
			case err != nil:
				return err // a *server.ConfigError: 78
			}
			if !verbose {
				return nil
			}
			out := cmd.OutOrStdout()
			for _, f := range res.Files {
				fmt.Fprintf(out, "%s/%s\n", res.Dir, f)
			}
			_, err = fmt.Fprintf(out, "%s: %s raw, %s gzipped (Cloudflare's limit after compression: %s Free, %s Paid)\n",
				workerbuild.WasmFile, mib(res.WasmSize), mib(res.GzipSize), mib(workerbuild.FreeLimit), mib(workerbuild.PaidLimit))
			if err != nil {
				return &exitError{exitIOErr, fmt.Errorf("writing stdout: %w", err)}
			}
			return nil
		},
	}
	c.Flags().StringVar(&opts.Out, "out", "", "directory to write the Worker to (default: PROGRAM's directory/worker)")
	c.Flags().StringVar(&opts.Config, "config", "", "configuration file (default: duilie.toml in PROGRAM's directory)")
	c.Flags().StringVar(&opts.Name, "name", "", "the Worker's name (default: PROGRAM's directory name)")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the files written and the Wasm module's size")
	return c
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
