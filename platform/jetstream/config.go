package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

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

// Config configures the platform. It mirrors SPEC §13 [platform]; the zero value of every field
// is its documented default, so the zero Config is the embedded engine in ".duilie".
type Config struct {
	// DataDir is where the embedded engine keeps its files, and the directory it locks; ""
	// means ".duilie". Unused when URL is set.
	DataDir string
	// URL, when set, connects to an existing NATS JetStream server or cluster instead of running
	// the embedded engine. Several URLs may be given, separated by commas.
	URL string
	// Creds is a NATS credentials file for URL.
	Creds string
	// TLSCA, TLSCert and TLSKey are PEM files for a TLS connection to URL: the CA that signs the
	// servers' certificates, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Replicas is how many copies of each queue's stream a cluster keeps: 1, 3 or 5; 0 means 1.
	// The embedded engine keeps one.
	Replicas int
	// Sync is SyncInterval ("" means that) or SyncAlways. It applies to the embedded engine; a
	// cluster's servers carry their own setting.
	Sync string
	// Retention is how long an unconsumed message is kept once it is ready (a delayed message
	// from its due time), 60 s – 336 h; 0 means 96 h.
	Retention time.Duration
	// Serve makes the embedded engine accept local commands: it also listens on a random
	// loopback port, guarded by an unguessable token, and records both in the data directory
	// (SPEC §13). Another Open of the same directory while this one runs connects there.
	Serve bool
	// Logger receives the driver's and the embedded server's log lines; nil means
	// slog.Default(). The server's routine notices are logged at debug level.
	Logger *slog.Logger
}

// withDefaults fills in defaults and checks every field.
func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Retention < MinRetention || c.Retention > MaxRetention {
		return c, fmt.Errorf("jetstream: retention %v is outside 60s–336h", c.Retention)
	}
	switch c.Replicas {
	case 0:
		c.Replicas = 1
	case 1, 3, 5:
	default:
		return c, fmt.Errorf("jetstream: replicas must be 1, 3 or 5, not %d", c.Replicas)
	}
	switch c.Sync {
	case "":
		c.Sync = SyncInterval
	case SyncInterval, SyncAlways:
	default:
		return c, fmt.Errorf("jetstream: sync must be %q or %q, not %q", SyncInterval, SyncAlways, c.Sync)
	}
	if c.URL == "" {
		switch {
		case c.Replicas != 1:
			return c, errors.New("jetstream: replicas above 1 need a cluster (set the NATS URL)")
		case c.Creds != "" || c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "":
			return c, errors.New("jetstream: credentials and TLS files apply only with a NATS URL")
		}
	} else {
		switch {
		case c.Sync == SyncAlways:
			return c, errors.New(`jetstream: sync = "always" applies to the embedded engine; a cluster's servers set sync_interval: always in their own configuration`)
		case c.Serve:
			return c, errors.New("jetstream: Serve applies to the embedded engine, not to a NATS URL")
		case (c.TLSCert == "") != (c.TLSKey == ""):
			return c, errors.New("jetstream: a TLS client certificate needs both the certificate and the key file")
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
