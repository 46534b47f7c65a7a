// Package server is duilie's running host as a Go package: the platform (chosen by name), a
// consumer per configured queue, the fetch listener, the program run once per event (a command
// through the bridge, or Go handlers in-process), the grace period and the halt. duilie serve
// is this package with flags; a Go service embeds the same thing:
//
//	srv, err := server.New(server.Config{
//		Bindings:  map[string]string{"TASKS": "tasks"},
//		Consumers: []server.ConsumerConfig{{Queue: "tasks"}},
//		Program:   &duilie.Program{Queue: handleTasks},
//	})
//	if err != nil {
//		return err
//	}
//	if err := srv.Start(ctx); err != nil {
//		return err
//	}
//	defer srv.Shutdown(context.Background())
//
// Inside the service, srv.Handler wraps an HTTP handler so that every request is a fetch
// event that may send, and srv.Client() sends from any code and carries the operator's
// operations.
//
// # The client
//
// A Client is the one door to the configured platform for everything that is not a program's
// event: sends outside events, and queues, peek, replay, purge, delete, pause and resume.
// Open makes one that does not serve (duilie's commands use it); Server.Client is the running
// server's. The dashboard and Cloudflare's API are surfaces over a server's client, attached
// with Server.Attach.
//
// # Configuration
//
// Config can be built in Go or read from a duilie.toml with LoadConfig (SPEC §13). Every
// setting's range and default lives with its owner: the consumer settings (ConsumerConfig,
// PullConsumer) and time limit, each platform driver's own keys (its platform.Opener), and
// this package's [app] keys. A mistake is a *ConfigError naming the setting: by its key for a
// file, by its Go field for a configuration made in Go.
//
// # Platforms
//
// Config.Platform names a platform: a *jetstream.Config (the default: the embedded engine in
// .duilie, or a NATS cluster), a *cloudflare.Config (Cloudflare Queues over its REST API), a
// *memory.Config (in the process; for tries and tests), or a driver registered with
// platform.Register. In duilie.toml it is the kind key of the platform table.
//
// # Observing
//
// Every event, send, settlement and operation is reported to each of Config.Observers (see
// Report): the server's own log lines come from the same reports.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/internal/bridge"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/workers"

	// The platforms duilie.toml can name.
	_ "github.com/duilie/duilie/platform/cloudflare"
	_ "github.com/duilie/duilie/platform/jetstream"
	_ "github.com/duilie/duilie/platform/memory"
)

// Defaults and limits of Config.
const (
	MaxFetchConcurrency  = 256
	MaxOutputBytes       = 1 << 30
	DefaultShutdownGrace = 30 * time.Second
	MaxShutdownGrace     = 900 * time.Second
	// NoShutdownGrace, as Config.ShutdownGrace, halts running events as soon as Run stops.
	NoShutdownGrace time.Duration = -1
	// FetchSlotWait is how long a request beyond MaxFetchConcurrency waits for a slot before
	// it is answered 503.
	FetchSlotWait = time.Second
)

// DefaultMaxFetchConcurrency is MaxFetchConcurrency when it is zero: four per CPU.
func DefaultMaxFetchConcurrency() int { return min(4*runtime.NumCPU(), MaxFetchConcurrency) }

// Config configures a Server. The zero value of every field is its documented default.
type Config struct {
	// Permissions lists the bindings programs may use ([permissions] QUEUE).
	Permissions Permissions
	// Bindings maps each binding to its queue ([[queues.producers]]).
	Bindings map[string]string
	// Consumers are the queues consumed, each in batches ([[queues.consumers]]).
	Consumers []ConsumerConfig

	// Program is a Go program run in-process, once per event; nil means Command instead.
	Program *duilie.Program
	// Command is the program run once per event through the bridge, in Dir ([app] command):
	// the executable and its arguments. A bare name is looked up in PATH; a name with a path
	// separator is a file, relative to Dir.
	Command []string `toml:"command" rule:"must be a non-empty array of strings, the program and its arguments, like [\"python3\", \"app.py\"]"`
	// Listen is the host:port where every HTTP request is a fetch event ([app] listen); ""
	// for none. Port 0 picks a free port (see Server.FetchAddr). An address that is not
	// loopback-only (":8787", "0.0.0.0:8787") is logged at WARN.
	Listen string `toml:"listen" rule:"must be a host:port to listen on for fetch events, like \"127.0.0.1:8787\""`
	// MaxFetchConcurrency is how many fetch events run at once, 1–256; 0 means four per CPU.
	// A request beyond them waits up to FetchSlotWait for a slot, then is answered 503 with
	// Retry-After: 1, and no program starts for it ([app] max_fetch_concurrency).
	MaxFetchConcurrency int `toml:"max_fetch_concurrency" rule:"must be 1–256 (fetch events at once)"`
	// TimeLimit is every event's wall-clock limit, 1 ms – 900 s; 0 means 30 s.
	TimeLimit time.Duration `toml:"time_limit_ms,ms"`
	// MaxOutputBytes is how much of a program's stdout and of its stderr is logged per event
	// (Command only), 1 B – 1 GiB; 0 means 1 MiB. Beyond it the rest is dropped with one log
	// line saying how much ([app] max_output_bytes).
	MaxOutputBytes int `toml:"max_output_bytes" rule:"must be 1–1073741824 (bytes per stream and event)"`
	// ShutdownGrace is how long running events may finish once Run's context ends, up to
	// 900 s; 0 means 30 s, NoShutdownGrace (or any negative value) none.
	ShutdownGrace time.Duration `toml:"shutdown_grace_ms,ms" rule:"must be 0–900000 (milliseconds)"`

	// Platform is the platform to run on; nil means the embedded engine in .duilie
	// (jetstream.Config{}).
	Platform platform.Opener

	// Dashboard is the web dashboard and /metrics ([dashboard]); the zero value has none.
	Dashboard DashboardConfig
	// DeliveryDelays delays every message sent to a queue without a delay of its own, in
	// seconds (0–86400) by queue name: wrangler's delivery_delay of a producer, Cloudflare's
	// delivery_delay of a queue.
	DeliveryDelays map[string]int
	// CloudflareAPI serves Cloudflare's Queues REST API ([cloudflare_api]); the zero value
	// serves none.
	CloudflareAPI CloudflareAPI
	// Name names the program where Cloudflare's API shows a Worker script (a wrangler file's
	// name); "" means "duilie".
	Name string
	// Worker is the [worker] table: settings of the Worker duilie worker build makes of a Go
	// program (package workers). The server does not use them.
	Worker workers.Settings

	parsed   bool     // read from a file (ParseConfig): mistakes name its keys, not Go fields
	wrangler bool     // read from a wrangler file: duilie's own tables are under duilie
	ignored  []string // the wrangler file's keys that do not concern queues

	// Observers each receive every report (see Observer).
	Observers []Observer
	// Logger receives the server's log lines, one per event; nil means slog.Default().
	Logger *slog.Logger

	// File is the configuration file the settings came from, for messages; "" for none.
	File string
	// Dir is where Command runs and what relative paths are relative to; "" means the
	// current directory.
	Dir string

	// listenerBounds are the timeouts and connection cap of every listener (fetch events, the
	// dashboard, Cloudflare's API); zero values are package bounded's defaults. Only tests
	// shorten them.
	listenerBounds bounded.Config
}

// Server is a running host. Its methods are safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	started   bool
	stopped   bool
	p         platform.Platform
	h         *host.Host
	run       runner
	httpSrv   *bounded.Server
	addr      string     // the fetch listener's address, "" for none
	observers []Observer // the log's, the configuration's and those subscribed
	surfaces  []*Attached

	consumeCtx    context.Context
	stopConsuming context.CancelFunc
	consumers     sync.WaitGroup
	fatal         chan error // every configured consumer stopped on its own

	cmu     sync.Mutex
	running map[string]*running // consumers, of programs and of pulls, by queue
	failed  []error             // configured program consumers that stopped on their own

	client *Client // from New on; its platform from Start

	// live is the host and its program's kill once started: Halt and Handler read it
	// without mu, which Shutdown holds for the whole grace period.
	live atomic.Pointer[live]
}

type live struct {
	h    *host.Host
	kill func() // nil for an in-process program
}

// New checks cfg and makes a Server; nothing runs until Start. Mistakes are a *ConfigError.
func New(cfg Config) (*Server, error) {
	if err := cfg.prepare(true); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.observers = append([]Observer{LogObserver(cfg.Logger)}, cfg.Observers...)
	// Every report reaches every observer: the client's operations as well as the host's
	// events. The list is fixed once the server starts.
	s.client = newClient(&s.cfg, s, func(r Report) {
		for _, o := range s.observers {
			o(r)
		}
	})
	return s, nil
}

// Subscribe adds an observer: it will receive every report, as Config.Observers do. It must be
// called before Start.
func (s *Server) Subscribe(o Observer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("server: subscribe before Start")
	}
	s.observers = append(s.observers, o)
	return nil
}

// prepare fills in cfg's defaults and checks it, for a server when serving, else for a client.
func (cfg *Config) prepare(serving bool) error {
	if !cfg.parsed && cfg.Permissions.Queue == nil {
		// A configuration made in Go lists each binding once: every one is permitted.
		cfg.Permissions.Queue = slices.Sorted(maps.Keys(cfg.Bindings))
		if cfg.Permissions.Queue == nil {
			cfg.Permissions.Queue = []string{}
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Platform == nil {
		pc, err := platform.NewConfig(platform.DefaultKind)
		if err != nil {
			return err
		}
		cfg.Platform = pc
	}
	if cfg.TimeLimit == 0 {
		cfg.TimeLimit = host.DefaultTimeLimit
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.MaxFetchConcurrency == 0 {
		cfg.MaxFetchConcurrency = DefaultMaxFetchConcurrency()
	}
	return cfg.check(serving)
}

// check finds every mistake in a configuration made in Go (ParseConfig has checked a file's
// settings already, and they pass again) and, when serving, in what the program can run.
func (cfg *Config) check(serving bool) error {
	c := &checker{file: cfg.File, dir: cfg.Dir}
	if cfg.wrangler {
		c.ns = "duilie."
	}
	if !cfg.parsed {
		c.goNames = cfg
		c.bindings(cfg)
	}
	for b := range cfg.Bindings {
		if b == "" {
			c.badKey("queues.producers", "a binding must have a name")
		}
	}
	for _, q := range cfg.Bindings {
		if err := platform.CheckQueueName(q); err != nil {
			c.badKey("queues.producers", err.Error())
		}
	}
	seen := map[string]bool{}
	for i, cc := range cfg.Consumers {
		table := fmt.Sprintf("queues.consumers[%d]", i)
		c.invalid(table, nil, cc, cc.Validate(), nil)
		if seen[cc.Queue] {
			c.bad(table+".queue", cc.Queue, "has a consumer already; a queue has one consumer")
		}
		seen[cc.Queue] = true
	}
	c.deadLetterCycles(cfg.Consumers, nil)
	c.invalid(c.ns+"app", nil, cfg, cfg.checkApp(nil), nil)
	c.invalid(c.ns+"platform", nil, cfg.Platform, cfg.Platform.Validate(), nil)
	dashErr := cfg.Dashboard.Validate()
	if serving {
		_, tokenErr := cfg.Dashboard.ResolveToken()
		dashErr = errors.Join(dashErr, tokenErr)
	}
	c.invalid(c.ns+"dashboard", nil, cfg.Dashboard, dashErr, nil)
	if serving {
		c.cloudflare(cfg, nil, nil, os.Getenv)
		c.program(cfg)
	} else {
		c.cloudflare(cfg, nil, nil, nil)
	}
	if len(c.mistakes) > 0 {
		return &ConfigError{c.mistakes}
	}
	return nil
}

// program records a configuration that asks for events the program cannot run.
func (c *checker) program(cfg *Config) {
	if cfg.Program == nil {
		switch {
		case len(cfg.Command) > 0 || len(cfg.Consumers) == 0 && cfg.Listen == "":
		case c.goNames != nil:
			c.badKey("Program", "missing; set it to the Go handlers to run for every queue event (Consumers) and fetch event (Listen), or set Command to a program to run per event")
		default:
			c.badKey(c.ns+"app.command", "missing; serve runs it for every queue event (queues.consumers) and fetch event (app.listen)")
		}
		if len(cfg.Command) > 0 && cfg.Command[0] != "" {
			// A command that cannot start would fail every event and spend every message's
			// retries in moments: refuse to serve instead.
			if err := findCommand(cfg.Command[0], cfg.Dir); err != nil {
				c.bad(c.ns+"app.command", cfg.Command[0], err.Error())
			}
		}
		return
	}
	if cfg.Program.Queue == nil && len(cfg.Consumers) > 0 {
		c.badKey("queues.consumers", "this program has no queue handler (Program.Queue) to run their batches")
	}
	if cfg.Program.Fetch == nil && cfg.Listen != "" {
		c.badKey(c.ns+"app.listen", "this program has no fetch handler (Program.Fetch) to run HTTP requests")
	}
}

// bindings checks the bindings of a configuration made in Go: each binding must be permitted
// and each permitted binding configured (a file may differ, and its programs then abort as
// the spec says). Permissions left nil permit every binding.
func (c *checker) bindings(cfg *Config) {
	if cfg.Permissions.Queue == nil {
		return
	}
	for _, b := range slices.Sorted(maps.Keys(cfg.Bindings)) {
		if !slices.Contains(cfg.Permissions.Queue, b) {
			c.badKey(fmt.Sprintf("Bindings[%q]", b), "not permitted: list it in Permissions.Queue, or leave Permissions unset to permit every binding")
		}
	}
	for _, b := range cfg.Permissions.Queue {
		if _, ok := cfg.Bindings[b]; !ok {
			c.badKey("Permissions.Queue", fmt.Sprintf("%q is permitted but not configured: map it to its queue in Bindings", b))
		}
	}
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

// Queues lists every queue the configuration names (bindings, consumers, dead-letter queues),
// sorted.
func (cfg *Config) Queues() []string {
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
	for _, pc := range cfg.CloudflareAPI.PullConsumers {
		names = append(names, pc.Queue)
		if pc.DeadLetterQueue != "" {
			names = append(names, pc.DeadLetterQueue)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ErrNotStarted is returned by a Server's methods that need it running.
var ErrNotStarted = errors.New("server: not started")

// Start opens the platform, creates every configured queue and starts the consumers and the
// fetch listener; it returns once they run. On error nothing is left running. A Server
// starts once.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("server: started already")
	}
	s.started = true
	cfg, log := &s.cfg, s.log
	if len(cfg.ignored) > 0 {
		log.Info("the wrangler file's keys that do not concern queues are ignored", "keys", strings.Join(cfg.ignored, ", "))
	}
	if cfg.Program != nil && len(cfg.Command) > 0 {
		log.Warn("app.command is not used: this program runs its handlers in-process", "command", strings.Join(cfg.Command, " "))
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

	if s.p, err = cfg.openPlatform(ctx, true, log); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.p.Close()
		}
	}()
	attrs := []any{"kind", cfg.Platform.Kind()}
	if d, ok := s.p.(interface{ LogAttrs() []any }); ok {
		attrs = d.LogAttrs()
	}
	log.Info("platform open", attrs...)
	if platform.CapabilitiesOf(s.p).Retries {
		// The platform's own consumer settings decide retries (Cloudflare's); say so where the
		// configuration seems to expect otherwise.
		def := DefaultConsumerConfig("")
		for _, cc := range cfg.Consumers {
			if cc := cc.WithDefaults(); cc.MaxRetries != def.MaxRetries || cc.RetryDelay != def.RetryDelay || cc.DeadLetterQueue != "" {
				log.Warn("max_retries, retry_delay and dead_letter_queue of this consumer do not apply: the platform applies its own consumer's settings",
					"queue", cc.Queue, "kind", cfg.Platform.Kind())
			}
		}
	}
	if st, ok := s.p.(platform.Stater); ok {
		// Damaged storage is never silent: one line per queue that lost messages or cannot be
		// loaded, at every start.
		stats, err := st.Stats(ctx)
		if err != nil {
			return fmt.Errorf("read the queues: %w", err)
		}
		for _, q := range stats {
			if q.Damage != "" {
				log.Error("queue damaged: messages lost", "queue", q.Queue, "lost", q.Lost, "damage", q.Damage)
			}
		}
	}
	for _, name := range cfg.Queues() {
		if _, err := s.p.Queue(ctx, name); err != nil {
			return fmt.Errorf("create queue %s: %w", name, err)
		}
	}

	s.h, err = host.New(host.Config{
		Platform:    delaying{s.p, s.client.delays},
		Permissions: cfg.Permissions,
		Bindings:    cfg.Bindings,
		TimeLimit:   cfg.TimeLimit,
		Logger:      log,
		Observer:    s.client.observe,
	})
	if err != nil {
		return err
	}
	if s.run, err = newRunner(cfg, s.h, log); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.run.close()
		}
	}()

	// Consumers stop on their own context, not ctx, so that the grace period is ours to run.
	s.consumeCtx, s.stopConsuming = context.WithCancel(context.WithoutCancel(ctx))
	s.fatal = make(chan error, 1)
	s.running = map[string]*running{}
	s.client.serve(s.p, s.h)
	defer func() {
		if err != nil {
			s.client.stop()
		}
	}()

	if cfg.Listen != "" {
		bc := cfg.listenerBounds
		bc.Addr, bc.Name, bc.Logger = cfg.Listen, "fetch events", log
		bc.Handler = bounded.Limit(s.run.fetch, cfg.MaxFetchConcurrency, FetchSlotWait)
		s.httpSrv, err = bounded.Listen(bc)
		if err != nil {
			return fmt.Errorf("listen for fetch events on %s: %w", cfg.Listen, err)
		}
		s.addr = s.httpSrv.Addr().String()
		log.Info("listening for fetch events", "url", "http://"+s.addr+"/", "max_fetch_concurrency", cfg.MaxFetchConcurrency)
	}

	if err := s.listenSurfaces(); err != nil {
		if s.httpSrv != nil {
			_ = s.httpSrv.Close()
		}
		return err
	}

	for _, cc := range cfg.Consumers {
		if err := s.consume(cc, true); err != nil {
			return err
		}
	}
	for _, pc := range cfg.CloudflareAPI.PullConsumers {
		if err := s.pull(ctx, pc, true); err != nil {
			return err
		}
	}
	s.live.Store(&live{h: s.h, kill: s.run.kill})
	log.Info("serving", "program", s.run.what, "time_limit", cfg.TimeLimit.String(), "config", cfg.File)
	return nil
}

// Failed is sent an error, once, when every consumer has stopped on its own (its platform
// failed permanently); the server goes on serving fetch events until it is shut down. It is
// nil before Start.
func (s *Server) Failed() <-chan error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// Run starts the server and runs it until ctx ends, then shuts it down with the configured
// grace period: no new deliveries or requests, running events get ShutdownGrace to finish,
// then the rest are halted (their messages are delivered again). It returns nil after a
// shutdown that ctx asked for, and an error if the server could not start or every consumer
// stopped on its own.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	var failure error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: no new deliveries; running events may finish", "grace", max(s.cfg.ShutdownGrace, 0).String())
	case failure = <-s.Failed():
		s.log.Error("every consumer has stopped; shutting down", "err", failure)
	}
	grace, cancel := context.WithTimeout(context.Background(), max(s.cfg.ShutdownGrace, 0))
	defer cancel()
	return errors.Join(failure, s.Shutdown(grace))
}

// Shutdown stops new deliveries and requests, lets running events finish until ctx ends,
// halts the rest (the host then settles their messages for redelivery) and closes the
// platform. It returns once everything has stopped.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return nil
	}
	s.stopped = true
	s.stopConsuming()
	s.stopSurfaces(ctx)
	s.closePulls()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		var wg sync.WaitGroup
		wg.Go(s.consumers.Wait)
		if s.httpSrv != nil {
			wg.Go(func() { _ = s.httpSrv.Shutdown(ctx) })
		}
		wg.Wait()
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.log.Warn("shutdown grace is over: halting running events; their messages will be delivered again")
		s.Halt()
		if s.httpSrv != nil {
			_ = s.httpSrv.Close()
		}
		<-drained
	}
	var errs []error
	s.closeSurfaces()
	s.client.stop()
	if err := s.run.close(); err != nil {
		s.log.Warn("closing the bridge", "err", err)
	}
	if err := s.p.Close(); err != nil {
		s.log.Warn("closing the platform", "err", err)
		errs = append(errs, err)
	}
	s.log.Info("stopped")
	return errors.Join(errs...)
}

// Halt aborts every running event and every event started later; their messages are
// delivered again. The process groups of programs run per event (Command) are killed at once,
// before Halt returns, so a process that exits right after leaves none behind. Shutdown calls
// it when its context ends first.
func (s *Server) Halt() {
	l := s.live.Load()
	if l == nil {
		return
	}
	l.h.Halt()
	if l.kill != nil {
		l.kill()
	}
}

func (s *Server) host() *host.Host {
	if l := s.live.Load(); l != nil {
		return l.h
	}
	return nil
}

// Handler returns an http.Handler that runs fn as one fetch event per request, as the fetch
// listener runs Program.Fetch: mount it in a service's own mux. Until the server has started
// it answers 503.
func (s *Server) Handler(fn duilie.FetchHandler) http.Handler {
	var once sync.Once
	var events http.Handler
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.host()
		if h == nil {
			http.Error(w, "duilie is not started", http.StatusServiceUnavailable)
			return
		}
		once.Do(func() { events = h.Fetch(fn) })
		events.ServeHTTP(w, r)
	})
}

// Client is the running server's client: the operator's operations and sends on the server's
// own platform and host, reported to its observers. It is nil before Start.
func (s *Server) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// FetchAddr is the address the fetch listener listens on, or "" when there is none.
func (s *Server) FetchAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// runner is how the program runs per event: a process per event through the bridge, or a Go
// program in-process.
type runner struct {
	what  string // for the log
	queue duilie.Handler
	fetch http.Handler
	kill  func() // kills every running program at once; nil for an in-process program
	close func() error
}

func newRunner(cfg *Config, h *host.Host, log *slog.Logger) (runner, error) {
	if cfg.Program != nil {
		r := runner{what: "in-process Go program", queue: cfg.Program.Queue, close: func() error { return nil }}
		if cfg.Program.Fetch != nil {
			r.fetch = h.Fetch(cfg.Program.Fetch)
		}
		return r, nil
	}
	if len(cfg.Command) == 0 {
		// Nothing to run: serve only holds the platform for local commands.
		return runner{what: "none (no app.command)", close: func() error { return nil }}, nil
	}
	srv, err := bridge.Listen("127.0.0.1:0", log)
	if err != nil {
		return runner{}, fmt.Errorf("start the bridge: %w", err)
	}
	prog := &bridge.Runner{Command: cfg.Command, Dir: cfg.Dir, Bridge: srv, Logger: log, MaxOutput: cfg.MaxOutputBytes}
	return runner{
		what:  "command " + strings.Join(cfg.Command, " "),
		queue: prog.Queue,
		fetch: prog.Fetch(h),
		kill:  prog.Kill,
		// Halted events return before their programs are reaped: wait for every process
		// group to be gone, so no program outlives the server.
		close: sync.OnceValue(func() error { prog.Wait(); return srv.Close() }),
	}, nil
}
