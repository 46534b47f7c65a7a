package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/duilie/duilie/bridge"
)

// commandRunner runs app.command once per event, serving it the interface over the bridge.
func commandRunner(cfg *Config, log *slog.Logger) (runner, error) {
	if len(cfg.App.Command) == 0 {
		// Nothing to run: serve only holds the platform for local commands.
		return runner{what: "none (no app.command)", close: func() error { return nil }}, nil
	}
	srv, err := bridge.Listen("127.0.0.1:0", log)
	if err != nil {
		return runner{}, unavailable(fmt.Errorf("start the bridge: %w", err))
	}
	prog := &bridge.Program{
		Command: cfg.App.Command,
		Dir:     cfg.Dir,
		Bridge:  srv,
		Logger:  log,
	}
	return runner{
		what:  "command " + strings.Join(cfg.App.Command, " "),
		queue: prog.Queue,
		fetch: prog.Fetch,
		// Halted events return before their programs are reaped: wait for every process
		// group to be gone, so no program outlives serve.
		close: sync.OnceValue(func() error { prog.Wait(); return srv.Close() }),
	}, nil
}
