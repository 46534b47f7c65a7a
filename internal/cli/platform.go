package cli

import (
	"context"
	"log/slog"

	"github.com/duilie/duilie/platform/jetstream"
)

// openPlatform opens the configured platform: the embedded engine in the data directory (or the
// running serve that holds it), or the NATS cluster. serve makes the engine accept local
// commands while it runs. Failures are exit status 69; settings were checked with the config.
func openPlatform(ctx context.Context, cfg *Config, serve bool, log *slog.Logger) (*jetstream.Platform, error) {
	pc := cfg.Platform
	jc := jetstream.Config{
		DataDir:   pc.DataDir,
		URL:       pc.NATSURL,
		Creds:     pc.NATSCreds,
		TLSCA:     pc.NATSTLSCA,
		TLSCert:   pc.NATSTLSCert,
		TLSKey:    pc.NATSTLSKey,
		Replicas:  pc.Replicas,
		Sync:      pc.Sync,
		Retention: pc.Retention,
		Serve:     serve && pc.NATSURL == "",
		Logger:    log,
	}
	p, err := jetstream.Open(ctx, jc)
	if err != nil {
		return nil, unavailable(err)
	}
	return p, nil
}

// describePlatform says in a few words which platform p is, for log lines.
func describePlatform(cfg *Config, p *jetstream.Platform) []any {
	switch {
	case cfg.Platform.NATSURL != "":
		return []any{"platform", "nats", "url", cfg.Platform.NATSURL, "replicas", cfg.Platform.Replicas}
	case p.Attached():
		return []any{"platform", "embedded (attached to the running serve)", "data_dir", cfg.Platform.DataDir}
	default:
		return []any{"platform", "embedded", "data_dir", cfg.Platform.DataDir, "sync", cfg.Platform.Sync,
			"retention", cfg.Platform.Retention.String()}
	}
}
