package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/duilie/duilie/platform"
)

// Kind is the name this driver is registered under, for [platform] kind in duilie.toml. It is
// the default kind.
const Kind = platform.DefaultKind

func init() {
	platform.Register(Kind, func() platform.Opener {
		return &Config{DataDir: DefaultDataDir, Replicas: 1, Sync: SyncInterval, Retention: DefaultRetention}
	})
}

// Defaults and ranges of Config.
const (
	DefaultDataDir   = ".duilie"
	DefaultRetention = 96 * time.Hour
	MinRetention     = 60 * time.Second
	MaxRetention     = 336 * time.Hour
)

// Sync policies (SPEC §13 [platform] sync).
const (
	SyncInterval = "interval" // JetStream's default: writes reach the OS at once, the disk on a timer (2 min)
	SyncAlways   = "always"   // fsync every write before it is acknowledged
)

// Config configures the platform: the [platform] table of duilie.toml for kind "jetstream".
// The zero value of every field is its documented default, so the zero Config is the embedded
// engine in ".duilie".
type Config struct {
	// DataDir is where the embedded engine keeps its files, and the directory it locks; ""
	// means ".duilie". Unused when URL is set.
	DataDir string `toml:"data_dir,path" rule:"must be a directory path (a string)"`
	// URL, when set, connects to an existing NATS JetStream server or cluster instead of running
	// the embedded engine. Several URLs may be given, separated by commas.
	URL string `toml:"nats_url" rule:"must be a NATS URL, like \"nats://127.0.0.1:4222\" (several separated by commas)"`
	// Creds is a NATS credentials file for URL.
	Creds string `toml:"nats_creds,path" rule:"must be a file path (a string)"`
	// TLSCA, TLSCert and TLSKey are PEM files for a TLS connection to URL: the CA that signs the
	// servers' certificates, and a client certificate and key.
	TLSCA   string `toml:"nats_tls_ca,path" rule:"must be a file path (a string)"`
	TLSCert string `toml:"nats_tls_cert,path" rule:"must be a file path (a string)"`
	TLSKey  string `toml:"nats_tls_key,path" rule:"must be a file path (a string)"`
	// Replicas is how many copies of each queue's stream a cluster keeps: 1, 3 or 5; 0 means 1.
	// The embedded engine keeps one.
	Replicas int `toml:"replicas" rule:"must be 1, 3 or 5"`
	// Sync is SyncInterval ("" means that) or SyncAlways. It applies to the embedded engine; a
	// cluster's servers carry their own setting.
	Sync string `toml:"sync" rule:"must be \"interval\" (fsync on a timer) or \"always\" (fsync each write)"`
	// Retention is how long an unconsumed message is kept once it is ready (a delayed message
	// from its due time), 60 s – 336 h; 0 means 96 h.
	Retention time.Duration `toml:"retention" rule:"must be a duration 60s–336h, like \"96h\" or \"30m\""`
	// Serve makes the embedded engine accept local commands: it also listens on a random
	// loopback port, guarded by an unguessable token, and records both in the data directory
	// (SPEC §13). Another Open of the same directory while this one runs connects there, and a
	// second Open with Serve fails. A cluster ignores it. Config.OpenOwner sets it, and
	// Config.Open clears it.
	Serve bool
	// Logger receives the driver's and the embedded server's log lines; nil means
	// slog.Default(). The server's routine notices are logged at debug level. Config.Open sets
	// it from OpenOptions.Logger.
	Logger *slog.Logger
}

var _ platform.OwnerOpener = (*Config)(nil)

// Kind is "jetstream".
func (c *Config) Kind() string { return Kind }

// RetentionPeriod is how long an unconsumed message is kept: Retention, or its default.
func (c *Config) RetentionPeriod() time.Duration {
	if c.Retention == 0 {
		return DefaultRetention
	}
	return c.Retention
}

// Open opens the platform the configuration describes, as Open does with o's Logger, as a
// process that does not own the store: it reaches the process that serves the data directory,
// or holds it for as long as the platform is open.
func (c *Config) Open(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	cfg := *c
	cfg.Serve, cfg.Logger = false, o.Logger
	return Open(ctx, cfg)
}

// OpenOwner opens the platform as Open does, as the process that owns the store and serves it
// to the others (Serve).
func (c *Config) OpenOwner(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	cfg := *c
	cfg.Serve, cfg.Logger = true, o.Logger
	return Open(ctx, cfg)
}

// Validate checks every setting; zero values stand for their defaults. Its error joins a
// *platform.FieldError per mistake.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string) { errs = append(errs, platform.Invalid(c, field)) }
	if c.Replicas != 0 && c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5 {
		bad("Replicas")
	}
	if c.Sync != "" && c.Sync != SyncInterval && c.Sync != SyncAlways {
		bad("Sync")
	}
	if c.Retention != 0 && (c.Retention < MinRetention || c.Retention > MaxRetention) {
		bad("Retention")
	}
	// Settings that only make sense together.
	if c.URL == "" {
		if c.Replicas == 3 || c.Replicas == 5 {
			errs = append(errs, &platform.FieldError{Field: "Replicas", Rule: "needs platform.nats_url: the embedded engine keeps one copy"})
		}
		for _, f := range []struct {
			name, value string
		}{{"Creds", c.Creds}, {"TLSCA", c.TLSCA}, {"TLSCert", c.TLSCert}, {"TLSKey", c.TLSKey}} {
			if f.value != "" {
				errs = append(errs, &platform.FieldError{Field: f.name, Rule: "needs platform.nats_url: it applies to a NATS cluster only"})
			}
		}
	} else {
		if c.Sync == SyncAlways {
			errs = append(errs, &platform.FieldError{Field: "Sync", Rule: `applies to the embedded engine only; a cluster's servers set sync_interval: always in their own configuration`})
		}
		if (c.TLSCert == "") != (c.TLSKey == "") {
			missing := "TLSKey"
			if c.TLSCert == "" {
				missing = "TLSCert"
			}
			errs = append(errs, &platform.FieldError{Field: missing, Rule: "a client certificate needs both nats_tls_cert and nats_tls_key"})
		}
	}
	return errors.Join(errs...)
}

// withDefaults checks every field and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, &configError{err}
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Sync == "" {
		c.Sync = SyncInterval
	}
	if c.URL != "" {
		c.Serve = false // a cluster is shared by every process that connects to it
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// configError is a Config that does not validate, with the driver's name in front.
type configError struct{ err error }

func (e *configError) Error() string { return "jetstream: " + e.err.Error() }
func (e *configError) Unwrap() error { return e.err }
