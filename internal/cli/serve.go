package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform/jetstream"
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
		Long: `serve opens the platform (the embedded engine in [platform] data_dir, or the NATS cluster
at nats_url), creates every configured queue and consumes each [[queues.consumers]] queue
in batches; with [app] listen set, every HTTP request there is a fetch event.
` + program + `

While serve runs it holds the data directory, and send, send-batch and queues on the same
configuration reach it there. SIGINT or SIGTERM stops new deliveries and lets running events
finish for up to [app] shutdown_grace_ms; events still running then are aborted and their
messages delivered again on the next start. Logs go to stderr, one line per event.`,
		Example: `  ` + opts.Name + ` serve --config examples/page-python/duilie.toml
  ` + opts.Name + ` serve     # reads ./duilie.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := LoadConfig(configPath)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return Serve(cmd.Context(), cfg, opts.Program, log)
		},
	}
	c.Flags().StringVar(&configPath, "config", DefaultConfigFile, "configuration file")
	return c
}

// runner is how the program runs per event: a process per event through the bridge, or a Go
// program in-process.
type runner struct {
	what  string // for the log
	queue host.Handler
	fetch func(h *host.Host) http.Handler
	close func() error
}

func goRunner(p *Program, log *slog.Logger) runner {
	r := runner{what: "in-process Go program", queue: p.Queue, close: func() error { return nil }}
	if p.Fetch != nil {
		r.fetch = func(h *host.Host) http.Handler { return fetchHandler(h, p.Fetch, log) }
	}
	return r
}

// checkProgram reports a configuration that asks for events the program cannot run.
func checkProgram(cfg *Config, prog *Program) error {
	var mistakes []string
	if prog == nil {
		if len(cfg.App.Command) == 0 && (len(cfg.Consumers) > 0 || cfg.App.Listen != "") {
			mistakes = append(mistakes, cfg.File+": app.command: missing; serve runs it for every queue event (queues.consumers) and fetch event (app.listen)")
		}
		if len(cfg.App.Command) > 0 {
			// A command that cannot start would fail every event and spend every message's
			// retries in moments: refuse to serve instead.
			if err := findCommand(cfg.App.Command[0], cfg.Dir); err != nil {
				mistakes = append(mistakes, fmt.Sprintf("%s: app.command = %q: %v", cfg.File, cfg.App.Command[0], err))
			}
		}
	} else {
		if prog.Queue == nil && len(cfg.Consumers) > 0 {
			mistakes = append(mistakes, cfg.File+": queues.consumers: this program has no queue handler (Program.Queue) to run their batches")
		}
		if prog.Fetch == nil && cfg.App.Listen != "" {
			mistakes = append(mistakes, cfg.File+": app.listen: this program has no fetch handler (Program.Fetch) to run HTTP requests")
		}
	}
	if len(mistakes) > 0 {
		return &ConfigError{mistakes}
	}
	return nil
}

// findCommand checks that name runs as it will per event: a name with a path separator is a
// file, relative to the configuration's directory; a bare name is looked up in PATH.
func findCommand(name, dir string) error {
	if !strings.ContainsRune(name, filepath.Separator) {
		if _, err := exec.LookPath(name); err != nil {
			return errors.New("not found in PATH (write ./" + name + " for a file beside the configuration)")
		}
		return nil
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("no such file: %s", path)
	case info.IsDir() || info.Mode()&0o111 == 0:
		return fmt.Errorf("not an executable file: %s", path)
	}
	return nil
}

// queueNames lists every queue the configuration names, sorted.
func queueNames(cfg *Config) []string {
	var names []string
	for _, q := range cfg.Bindings {
		names = append(names, q)
	}
	for _, cc := range cfg.Consumers {
		names = append(names, cc.Queue)
		if cc.DeadLetterQueue != "" {
			names = append(names, cc.DeadLetterQueue)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Serve runs the host on cfg until ctx ends, then shuts down gracefully: no new deliveries or
// requests, running events get app.shutdown_grace_ms to finish, then the host halts the rest
// (their messages are redelivered). prog, when set, runs in-process instead of app.command.
// It returns nil after a shutdown that ctx asked for.
func Serve(ctx context.Context, cfg *Config, prog *Program, log *slog.Logger) error {
	s, err := startServer(ctx, cfg, prog, log)
	if err != nil {
		return err
	}
	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new deliveries; running events may finish", "grace", cfg.App.ShutdownGrace.String())
	case err := <-s.fatal:
		failure = unavailable(err)
		log.Error("consumer failed; shutting down", "err", err)
	}
	s.shutdown()
	return failure
}

// server is a running host: platform, consumers, fetch listener and the program per event.
type server struct {
	cfg     *Config
	log     *slog.Logger
	p       *jetstream.Platform
	h       *host.Host
	run     runner
	httpSrv *http.Server
	addr    string // the fetch listener's address, "" for none

	stopConsuming context.CancelFunc
	consumers     sync.WaitGroup
	fatal         chan error // a consumer that stopped on its own
}

// startServer opens the platform, creates every configured queue and starts the consumers and
// the fetch listener. On error nothing is left running.
func startServer(ctx context.Context, cfg *Config, prog *Program, log *slog.Logger) (_ *server, err error) {
	if err := checkProgram(cfg, prog); err != nil {
		return nil, err
	}
	if prog != nil && len(cfg.App.Command) > 0 {
		log.Warn("app.command is not used: this program runs its handlers in-process", "command", strings.Join(cfg.App.Command, " "))
	}
	for b := range cfg.Bindings {
		if !slices.Contains(cfg.Permissions.Queue, b) {
			log.Warn("binding is configured but not permitted: programs using it abort", "binding", b)
		}
	}
	for _, b := range cfg.Permissions.Queue {
		if _, ok := cfg.Bindings[b]; !ok {
			log.Warn("binding is permitted but not configured: programs using it abort", "binding", b)
		}
	}

	s := &server{cfg: cfg, log: log, fatal: make(chan error, len(cfg.Consumers))}
	if s.p, err = openPlatform(ctx, cfg, true, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.p.Close()
		}
	}()
	if s.p.Attached() {
		return nil, unavailable(fmt.Errorf("data directory %s is in use by another duilie serve; stop it first", cfg.Platform.DataDir))
	}
	log.Info("platform open", describePlatform(cfg, s.p)...)
	for _, name := range queueNames(cfg) {
		if _, err := s.p.Queue(ctx, name); err != nil {
			return nil, unavailable(fmt.Errorf("create queue %s: %w", name, err))
		}
	}

	s.h, err = host.New(host.Config{
		Platform:    s.p,
		Permissions: cfg.Permissions,
		Bindings:    cfg.Bindings,
		TimeLimit:   cfg.App.TimeLimit,
		Logger:      log,
	})
	if err != nil {
		return nil, &exitError{exitSoftware, err}
	}
	if prog != nil {
		s.run = goRunner(prog, log)
	} else if s.run, err = commandRunner(cfg, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.run.close()
		}
	}()

	if cfg.App.Listen != "" {
		ln, err := net.Listen("tcp", cfg.App.Listen)
		if err != nil {
			return nil, unavailable(fmt.Errorf("listen for fetch events on %s: %w", cfg.App.Listen, err))
		}
		s.addr = ln.Addr().String()
		s.httpSrv = &http.Server{
			Handler:           s.run.fetch(s.h),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go func() { _ = s.httpSrv.Serve(ln) }()
		log.Info("listening for fetch events", "url", "http://"+s.addr+"/")
	}

	// Consumers stop on their own context, not ctx, so that the grace period is ours to run.
	var consumeCtx context.Context
	consumeCtx, s.stopConsuming = context.WithCancel(context.WithoutCancel(ctx))
	for _, cc := range cfg.Consumers {
		s.consumers.Go(func() {
			if err := s.h.Consume(consumeCtx, cc, s.run.queue); err != nil {
				s.fatal <- err
			}
		})
		attrs := []any{"queue", cc.Queue, "max_batch_size", cc.MaxBatchSize, "max_batch_timeout", cc.MaxBatchTimeout.String(),
			"max_retries", cc.MaxRetries, "retry_delay", cc.RetryDelay.String(), "max_concurrency", cc.MaxConcurrency}
		if cc.DeadLetterQueue != "" {
			attrs = append(attrs, "dead_letter_queue", cc.DeadLetterQueue)
		}
		log.Info("consuming", attrs...)
	}
	log.Info("serving", "program", s.run.what, "time_limit", cfg.App.TimeLimit.String(), "config", cfg.File)
	return s, nil
}

// shutdown stops new deliveries and requests, lets running events finish for the grace
// period, halts the rest (the host then settles their messages for redelivery) and closes
// everything.
func (s *server) shutdown() {
	s.stopConsuming()
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.App.ShutdownGrace)
	defer cancel()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		var wg sync.WaitGroup
		wg.Go(s.consumers.Wait)
		if s.httpSrv != nil {
			wg.Go(func() { _ = s.httpSrv.Shutdown(grace) })
		}
		wg.Wait()
	}()
	select {
	case <-drained:
	case <-grace.Done():
		s.log.Warn("shutdown grace is over: halting running events; their messages will be delivered again")
		s.h.Halt()
		if s.httpSrv != nil {
			_ = s.httpSrv.Close()
		}
		<-drained
	}
	if err := s.run.close(); err != nil {
		s.log.Warn("closing the bridge", "err", err)
	}
	if err := s.p.Close(); err != nil {
		s.log.Warn("closing the platform", "err", err)
	}
	s.log.Info("stopped")
}
