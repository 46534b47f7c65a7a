package server

import (
	"errors"
	"net"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
)

// CloudflareAPI configures Cloudflare's Queues REST API served by duilie ([cloudflare_api]):
// queues, messages, pull consumers with leases, consumers and purge, under
// /client/v4/accounts/{AccountID}/queues, so a Cloudflare client's base URL is
// http://<Listen>/client/v4. The zero value serves nothing.
type CloudflareAPI struct {
	// Listen is the host:port to serve the API on; "" (the default) serves none. Port 0 picks
	// a free port.
	Listen string `toml:"listen" rule:"must be a host:port to serve Cloudflare's Queues API on, like \"127.0.0.1:8790\""`
	// AccountID is the account id clients put in paths. Required with Listen.
	AccountID string `toml:"account_id" rule:"must be the account id clients put in paths (letters, digits, '-' and '_'), required with listen"`
	// TokenEnv names the environment variable that holds the bearer token every request must
	// carry (Authorization: Bearer <token>). Without it (and without Token) the token is the
	// one in the data directory's token file, as the dashboard's is (SurfaceToken).
	TokenEnv string `toml:"token_env" rule:"must name the environment variable that holds the API's bearer token"`
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
type PullConsumer = host.PullConsumer

// DefaultPullConsumer is Cloudflare's http_pull consumer for queue: batches of 5, 3 retries
// without delay, no dead-letter queue, leases of 30 s.
func DefaultPullConsumer(queue string) PullConsumer { return host.DefaultPullConsumer(queue) }

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
	case c.Token != "", c.TokenEnv == "": // the token file's, when neither
	case !envName.MatchString(c.TokenEnv):
		errs = append(errs, platform.Invalid(c, "TokenEnv"))
	case getenv != nil && getenv(c.TokenEnv) == "":
		errs = append(errs, &platform.FieldError{Field: "TokenEnv", Rule: "names an environment variable that is unset or empty; set it to the API's bearer token"})
	}
	return errors.Join(errs...)
}
