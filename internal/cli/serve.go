package cli

import (
	"errors"
	"log/slog"

	"github.com/duilie/duilie/internal/serve"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/server"
)

func newServe(opts Options) *cobra.Command {
	var configPath string
	program := "It runs [app] command once per event, in the configuration file's directory."
	if opts.Program != nil {
		program = "It runs this program's handlers in-process, once per event."
	}
	c := &cobra.Command{
		Use:                   "serve [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Run the host: the platform, the consumers, the program per event",
		Long: `serve opens the platform (the embedded engine in [platform] data_dir, the NATS cluster at
nats_url, or another [platform] kind), creates every configured queue and consumes each
[[queues.consumers]] queue in batches; with [app] listen set, every HTTP request there is a
fetch event.
` + program + `

While serve runs it holds the data directory, and send, send-batch, queues and the operator's
commands (peek, replay, delete, purge, pause, resume) on the same configuration reach it there. SIGINT or SIGTERM stops new deliveries and lets running events
finish for up to [app] shutdown_grace_ms; events still running then are aborted and their
messages delivered again on the next start. A second signal kills every running program's
process group and ends serve at once. Logs go to stderr, one line per event.`,
		Example: `  ` + opts.Name + ` serve --config examples/page-python/duilie.toml
  ` + opts.Name + ` serve     # reads ./duilie.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := server.LoadConfig(configPath)
			if err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Program = opts.Program
			srv, err := serve.New(*cfg)
			if err != nil {
				return err
			}
			onSecondSignal(cmd.Context(), srv.Halt) // no program outlives serve
			if err := srv.Run(cmd.Context()); err != nil {
				var ce *server.ConfigError
				if errors.As(err, &ce) {
					return err // the platform cannot use a setting: a data directory not the user's own
				}
				return unavailable(err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}
