package cloudflare

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/duilie/duilie/platform"
)

// Kind is the name this driver is registered under, for [platform] kind in duilie.toml.
const Kind = "cloudflare"

func init() {
	platform.Register(Kind, func() platform.Opener { return &Config{BaseURL: DefaultBaseURL} })
}

// DefaultBaseURL is Cloudflare's API.
const DefaultBaseURL = "https://api.cloudflare.com/client/v4"

// Pull pacing. Cloudflare has no long polling: an idle consumer asks again after a pause that
// doubles from MinPullInterval to its ceiling, DefaultMaxPullInterval unless
// Config.MaxPullInterval says otherwise, and a pull that brings messages makes the next one
// immediate. At the ceiling an idle queue costs 60 requests per 5 minutes, so 20 idle queues
// stay within Cloudflare's global API limit of 1200 requests per 5 minutes per user, which
// pulls and acks may count against (pull consumers may move 5000 messages per second per queue).
const (
	MinPullInterval        = 100 * time.Millisecond
	DefaultMaxPullInterval = 5 * time.Second
)

// Config configures the platform: the [platform] table of duilie.toml for kind "cloudflare".
// The API token is never written in the file: APITokenEnv names the environment variable that
// holds it.
type Config struct {
	// AccountID is the Cloudflare account that owns the queues. Required.
	AccountID string `toml:"account_id" rule:"must be the Cloudflare account id that owns the queues (32 hex characters on Cloudflare), required"`
	// APITokenEnv names the environment variable that holds the API token (Queues Read and
	// Write). Required unless Token is set.
	APITokenEnv string `toml:"api_token_env" rule:"must name the environment variable that holds the API token (the token itself never goes in the file), required"`
	// BaseURL is the API's base URL; "" means DefaultBaseURL. Point it at a duilie serving
	// Cloudflare's API ("http://127.0.0.1:8790/client/v4") for local runs.
	BaseURL string `toml:"base_url" rule:"must be an http or https URL, like \"https://api.cloudflare.com/client/v4\""`
	// Token is the API token itself, for a Go program; "" means the value of APITokenEnv.
	Token string
	// MaxPullInterval is the longest pause between pulls of an idle queue; 0 means
	// DefaultMaxPullInterval. Tests shorten it.
	MaxPullInterval time.Duration
	// Logger receives the driver's log lines; nil means slog.Default(). Config.Open sets it
	// from OpenOptions.Logger.
	Logger *slog.Logger
}

var _ platform.Opener = (*Config)(nil)

// Kind is "cloudflare".
func (c *Config) Kind() string { return Kind }

// Validate checks every setting. Its error joins a *platform.FieldError per mistake. It does
// not read the environment: Open does.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string) { errs = append(errs, platform.Invalid(c, field)) }
	if !ValidAccountID(c.AccountID) {
		bad("AccountID")
	}
	if c.Token == "" && c.APITokenEnv == "" {
		bad("APITokenEnv")
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("BaseURL")
		}
	}
	if c.MaxPullInterval < 0 {
		errs = append(errs, &platform.FieldError{Field: "MaxPullInterval", Rule: "must not be negative"})
	}
	return errors.Join(errs...)
}

// Open opens the platform the configuration describes, as Open does, with o's Logger.
func (c *Config) Open(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	cfg := *c
	cfg.Logger = o.Logger
	return Open(ctx, cfg)
}

// withDefaults checks every field, reads the token and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, &configError{err}
	}
	if c.Token == "" {
		if c.Token = os.Getenv(c.APITokenEnv); c.Token == "" {
			return c, &configError{&platform.FieldError{Field: "APITokenEnv",
				Rule: "names an environment variable that is unset or empty; set it to a Cloudflare API token with Queues Read and Write"}}
		}
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.MaxPullInterval == 0 {
		c.MaxPullInterval = DefaultMaxPullInterval
	}
	c.MaxPullInterval = max(c.MaxPullInterval, MinPullInterval)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// ValidAccountID reports whether s can be an account id in the API's paths: 1–64 letters,
// digits, '-' or '_' (Cloudflare's own are 32 lowercase hex characters).
func ValidAccountID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// configError is a Config that does not validate, with the driver's name in front.
type configError struct{ err error }

func (e *configError) Error() string { return "cloudflare: " + e.err.Error() }
func (e *configError) Unwrap() error { return e.err }
