package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"time"

	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
	"github.com/duilie/duilie/platform/jetstream"
)

// CloudflareAPI configures Cloudflare's Queues REST API served by duilie ([cloudflare_api]):
// queues, messages, pull consumers with leases, consumers and purge, under
// /client/v4/accounts/{AccountID}/queues, so a Cloudflare client's base URL is
// http://<Listen>/client/v4. The zero value serves nothing.
type CloudflareAPI struct {
	// Listen is the host:port to serve the API on; "" (the default) serves none. Port 0 picks
	// a free port (see Server.CloudflareAPIAddr).
	Listen string `toml:"listen" rule:"must be a host:port to serve Cloudflare's Queues API on, like \"127.0.0.1:8790\""`
	// AccountID is the account id clients put in paths. Required with Listen.
	AccountID string `toml:"account_id" rule:"must be the account id clients put in paths (letters, digits, '-' and '_'), required with listen"`
	// TokenEnv names the environment variable that holds the bearer token every request must
	// carry (Authorization: Bearer <token>). Required with Listen, unless Token is set.
	TokenEnv string `toml:"token_env" rule:"must name the environment variable that holds the API's bearer token, required with listen"`
	// Token is the bearer token itself, for a Go program; "" means the value of TokenEnv.
	Token string
	// PullConsumers are the http_pull consumers: queues whose messages clients pull over the
	// API (wrangler's [[queues.consumers]] with type = "http_pull").
	PullConsumers []PullConsumer
}

// DeadLetterQueues maps each queue whose configured consumer names a dead-letter queue to that
// queue: the program consumers' ([[queues.consumers]]) and the http_pull consumers'
// ([cloudflare_api], or wrangler's type = "http_pull") alike, as duilie queues, replay and the
// dashboard show them. A queue has one consumer at most.
func (c *Config) DeadLetterQueues() map[string]string {
	out := map[string]string{}
	for _, cc := range c.Consumers {
		if cc.DeadLetterQueue != "" {
			out[cc.Queue] = cc.DeadLetterQueue
		}
	}
	for _, pc := range c.CloudflareAPI.PullConsumers {
		if pc.DeadLetterQueue != "" {
			out[pc.Queue] = pc.DeadLetterQueue
		}
	}
	return out
}

// PullConsumer is an http_pull consumer's settings, named as wrangler names them. Start from
// DefaultPullConsumer: several zero values are meaningful.
type PullConsumer struct {
	Queue             string        `toml:"queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	MaxBatchSize      int           `toml:"max_batch_size" rule:"must be 1–100 (a pull's default batch_size)"`
	MaxRetries        int           `toml:"max_retries" rule:"must be 0–100"`
	RetryDelay        time.Duration `toml:"retry_delay,seconds" rule:"must be 0–86400 (seconds)"`
	DeadLetterQueue   string        `toml:"dead_letter_queue" rule:"must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"`
	VisibilityTimeout time.Duration `toml:"visibility_timeout_ms,ms" rule:"must be 1–43200000 (milliseconds)"`
}

// DefaultPullConsumer is Cloudflare's http_pull consumer for queue: batches of 5, 3 retries
// without delay, no dead-letter queue, leases of 30 s.
func DefaultPullConsumer(queue string) PullConsumer {
	d := cfapi.DefaultPull(queue)
	return PullConsumer{Queue: queue, MaxBatchSize: d.BatchSize, MaxRetries: d.MaxRetries, VisibilityTimeout: d.VisibilityTimeout}
}

// Validate checks every setting; its error joins one *platform.FieldError per mistake.
func (c PullConsumer) Validate() error {
	var errs []error
	bad := func(field string) { errs = append(errs, platform.Invalid(c, field)) }
	if platform.CheckQueueName(c.Queue) != nil {
		bad("Queue")
	}
	if c.MaxBatchSize < 1 || c.MaxBatchSize > cfapi.MaxPullBatch {
		bad("MaxBatchSize")
	}
	if c.MaxRetries < 0 || c.MaxRetries > 100 {
		bad("MaxRetries")
	}
	if c.RetryDelay < 0 || c.RetryDelay > cfapi.MaxDelaySeconds*time.Second {
		bad("RetryDelay")
	}
	switch {
	case c.DeadLetterQueue == "":
	case platform.CheckQueueName(c.DeadLetterQueue) != nil:
		bad("DeadLetterQueue")
	case c.DeadLetterQueue == c.Queue:
		errs = append(errs, &platform.FieldError{Field: "DeadLetterQueue", Rule: "must be another queue than the one consumed"})
	}
	if c.VisibilityTimeout < time.Millisecond || c.VisibilityTimeout > cfapi.MaxVisibilityTimeout {
		bad("VisibilityTimeout")
	}
	return errors.Join(errs...)
}

// check checks the [cloudflare_api] settings. getenv reads the token's variable; nil skips
// that check (a configuration file is read by commands that do not serve the API).
func (c *CloudflareAPI) check(getenv func(string) string) error {
	var errs []error
	if c.Listen == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || !validPort(port) {
		errs = append(errs, platform.Invalid(c, "Listen"))
	}
	if !cloudflare.ValidAccountID(c.AccountID) {
		errs = append(errs, platform.Invalid(c, "AccountID"))
	}
	switch {
	case c.Token != "":
	case c.TokenEnv == "":
		errs = append(errs, platform.Invalid(c, "TokenEnv"))
	case getenv != nil && getenv(c.TokenEnv) == "":
		errs = append(errs, &platform.FieldError{Field: "TokenEnv", Rule: "names an environment variable that is unset or empty; set it to the API's bearer token"})
	}
	return errors.Join(errs...)
}

// programs lets the API start and stop the host's program consumers (worker consumers).
type programs struct{ s *Server }

func (p programs) StartConsumer(cc ConsumerConfig) error {
	if err := cc.Validate(); err != nil {
		return err
	}
	if p.s.run.queue == nil {
		return errors.New("this serve runs no program (app.command)")
	}
	return p.s.startConsumer(cc)
}

func (p programs) StopConsumer(ctx context.Context, queue string) error {
	return p.s.stopConsumer(ctx, queue)
}

// startCloudflareAPI serves the API when the configuration asks for it.
func (s *Server) startCloudflareAPI(ctx context.Context) error {
	cfg := &s.cfg
	c := cfg.CloudflareAPI
	if c.Listen == "" {
		return nil
	}
	token := c.Token
	if token == "" {
		token = os.Getenv(c.TokenEnv)
	}
	producers := map[string][]string{}
	for b, q := range cfg.Bindings {
		producers[q] = append(producers[q], b)
	}
	pulls := make([]cfapi.Pull, len(c.PullConsumers))
	for i, pc := range c.PullConsumers {
		pulls[i] = cfapi.Pull{Queue: pc.Queue, BatchSize: pc.MaxBatchSize, MaxRetries: pc.MaxRetries, RetryDelay: pc.RetryDelay,
			DeadLetterQueue: pc.DeadLetterQueue, VisibilityTimeout: pc.VisibilityTimeout}
	}
	var retention time.Duration
	if jc, ok := cfg.Platform.(*jetstream.Config); ok {
		retention = jc.Retention
	}
	api, err := cfapi.New(ctx, cfapi.Config{
		AccountID: c.AccountID, Token: token, Platform: s.p, Programs: programs{s},
		Script: cfg.Name, Configured: cfg.Queues(), Producers: producers,
		Workers: slices.Clone(cfg.Consumers), Pulls: pulls,
		DeliveryDelays: maps.Clone(cfg.DeliveryDelays), Retention: retention, Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("cloudflare api: %w", err)
	}
	// Bounded like every listener: a slow, idle or flooding client cannot hold connections,
	// and file descriptors the events need, for long.
	bc := s.cfg.listenerBounds
	bc.Addr, bc.Name, bc.Handler, bc.Logger = c.Listen, "Cloudflare's Queues API", api, s.log
	srv, err := bounded.Listen(bc)
	if err != nil {
		api.Close()
		return fmt.Errorf("listen for Cloudflare's Queues API on %s: %w", c.Listen, err)
	}
	s.api, s.apiAddr, s.apiSrv = api, srv.Addr().String(), srv
	attrs := []any{"url", "http://" + s.apiAddr + "/client/v4", "account_id", c.AccountID}
	if host, _, _ := net.SplitHostPort(s.apiAddr); !isLoopback(host) {
		s.log.Warn("Cloudflare's Queues API listens beyond this machine; every request needs the bearer token", attrs...)
	}
	s.log.Info("serving Cloudflare's Queues API", attrs...)
	return nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// CloudflareAPIAddr is the address Cloudflare's Queues API listens on, or "" when it is not
// served.
func (s *Server) CloudflareAPIAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiAddr
}
