package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/workers"
)

// TestConfigGolden loads every testdata/config/*.toml: a valid file's golden is the checked
// configuration, a mistaken one's is the exact message, every mistake on its own line.
func TestConfigGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/config/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no config files: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".toml")
		t.Run(name, func(t *testing.T) {
			golden(t, "config/"+name+".golden", loaded(t, f, dumpConfig))
		})
	}
}

// loaded is what LoadConfig makes of file f: dump of the configuration, or the exact mistakes.
func loaded(t *testing.T, f string, dump func(*testing.T, *Config) string) string {
	t.Helper()
	cfg, err := LoadConfig(f)
	if err == nil {
		return dump(t, cfg)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("error %T, want a *ConfigError", err)
	}
	return "error:\n" + err.Error() + "\n"
}

// dumpConfig prints a checked configuration, the test directory's path replaced by $DIR.
func dumpConfig(t *testing.T, c *Config) string {
	dir, err := filepath.Abs("testdata/config")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "file: %s\ndir: %s\n", c.File, c.Dir)
	fmt.Fprintf(&b, "permissions.QUEUE: %q\n", c.Permissions.Queue)
	fmt.Fprintf(&b, "bindings: %v\n", c.Bindings)
	for _, cc := range c.Consumers {
		fmt.Fprintf(&b, "consumer: %+v\n", cc)
	}
	grace := c.ShutdownGrace.String()
	if c.ShutdownGrace < 0 {
		grace = "none"
	}
	fmt.Fprintf(&b, "app: command=%q listen=%q time_limit=%v shutdown_grace=%s\n", c.Command, c.Listen, c.TimeLimit, grace)
	fmt.Fprintf(&b, "platform: %s %+v\n", c.Platform.Kind(), c.Platform)
	fmt.Fprintf(&b, "dashboard: listen=%q token_env=%q\n", c.Dashboard.Listen, c.Dashboard.TokenEnv)
	if c.Name != "" {
		fmt.Fprintf(&b, "name: %q\n", c.Name)
	}
	if c.Worker != (workers.Settings{}) {
		fmt.Fprintf(&b, "worker: %+v\n", c.Worker)
	}
	if len(c.DeliveryDelays) > 0 {
		fmt.Fprintf(&b, "delivery_delays: %v\n", c.DeliveryDelays)
	}
	if api := c.CloudflareAPI; api.Listen != "" || len(api.PullConsumers) > 0 {
		fmt.Fprintf(&b, "cloudflare_api: listen=%q account_id=%q token_env=%q\n", api.Listen, api.AccountID, api.TokenEnv)
		for _, pc := range api.PullConsumers {
			fmt.Fprintf(&b, "pull consumer: %+v\n", pc)
		}
	}
	return strings.ReplaceAll(b.String(), dir, "$DIR")
}

// Defaults (SPEC §11, §13) and relative paths, spelled out rather than only in a golden file.
func TestConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	text := "[[queues.consumers]]\nqueue = \"q\"\n[platform]\nnats_url = \"nats://x:4222\"\nnats_creds = \"u.creds\"\n"
	cfg, err := ParseConfig("x.toml", dir, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.Consumers[0]
	if cc.MaxBatchSize != 10 || cc.MaxBatchTimeout != 5*time.Second || cc.MaxRetries != 3 || cc.RetryDelay != 0 ||
		cc.DeadLetterQueue != "" || cc.MaxConcurrency != 1 {
		t.Errorf("consumer defaults: %+v", cc)
	}
	if err := cc.Validate(); err != nil {
		t.Errorf("host rejects the defaults: %v", err)
	}
	if cfg.TimeLimit != 30*time.Second || cfg.ShutdownGrace != 30*time.Second {
		t.Errorf("app defaults: %v %v", cfg.TimeLimit, cfg.ShutdownGrace)
	}
	p := cfg.Platform.(*jetstream.Config)
	if p.DataDir != filepath.Join(dir, ".duilie") || p.Creds != filepath.Join(dir, "u.creds") ||
		p.Replicas != 1 || p.Sync != "interval" || p.Retention != 96*time.Hour {
		t.Errorf("platform defaults: %+v", p)
	}
}

// Every consumer setting at both ends of its range is accepted, and one past either end is a
// mistake naming the key and the range.
func TestConsumerRanges(t *testing.T) {
	for _, c := range []struct {
		key     string
		lo, hi  int
		allowed string
	}{
		{"max_batch_size", 1, 100, "must be 1–100"},
		{"max_batch_timeout", 0, 60, "must be 0–60 (seconds)"},
		{"max_retries", 0, 100, "must be 0–100"},
		{"retry_delay", 0, 43200, "must be 0–43200 (seconds)"},
		{"max_concurrency", 1, 250, "must be 1–250 (batches at once)"},
	} {
		for _, n := range []int{c.lo, c.hi} {
			text := fmt.Sprintf("[[queues.consumers]]\nqueue = \"q\"\n%s = %d\n", c.key, n)
			cfg, err := ParseConfig("duilie.toml", "/", []byte(text))
			if err != nil {
				t.Errorf("%s = %d: %v", c.key, n, err)
				continue
			}
			if err := cfg.Consumers[0].Validate(); err != nil {
				t.Errorf("%s = %d: the host rejects it: %v", c.key, n, err)
			}
		}
		for _, n := range []int{c.lo - 1, c.hi + 1} {
			text := fmt.Sprintf("[[queues.consumers]]\nqueue = \"q\"\n%s = %d\n", c.key, n)
			_, err := ParseConfig("duilie.toml", "/", []byte(text))
			want := fmt.Sprintf("duilie.toml: queues.consumers[0].%s = %d: %s", c.key, n, c.allowed)
			if err == nil || err.Error() != want {
				t.Errorf("%s = %d: got %v, want %s", c.key, n, err, want)
			}
		}
	}
}

// [app] max_fetch_concurrency and max_output_bytes: each end of the range is accepted in the
// file, one past it is a mistake; left out, or 0 in Go, they are their defaults.
func TestAppRanges(t *testing.T) {
	for _, c := range []struct {
		key     string
		lo, hi  int
		allowed string
		get     func(*Config) int
	}{
		{"max_fetch_concurrency", 1, 256, "must be 1–256 (fetch events at once)", func(c *Config) int { return c.MaxFetchConcurrency }},
		{"max_output_bytes", 1, 1 << 30, "must be 1–1073741824 (bytes per stream and event)", func(c *Config) int { return c.MaxOutputBytes }},
	} {
		for _, n := range []int{c.lo, c.hi} {
			cfg, err := ParseConfig("duilie.toml", "/", fmt.Appendf(nil, "[app]\n%s = %d\n", c.key, n))
			if err != nil || c.get(cfg) != n {
				t.Errorf("%s = %d: %v", c.key, n, err)
			}
		}
		for _, n := range []int{c.lo - 1, c.hi + 1} {
			_, err := ParseConfig("duilie.toml", "/", fmt.Appendf(nil, "[app]\n%s = %d\n", c.key, n))
			want := fmt.Sprintf("duilie.toml: app.%s = %d: %s", c.key, n, c.allowed)
			if err == nil || err.Error() != want {
				t.Errorf("%s = %d: got %v, want %s", c.key, n, err, want)
			}
		}
	}
	if _, err := New(Config{MaxFetchConcurrency: 300, MaxOutputBytes: -1, Platform: &memory.Config{}}); err == nil ||
		!strings.Contains(err.Error(), "MaxFetchConcurrency = 300: must be 1–256") ||
		!strings.Contains(err.Error(), "MaxOutputBytes = -1: must be 1–1073741824") {
		t.Errorf("New with bad values: %v", err)
	}
	if want := min(4*runtime.NumCPU(), 256); DefaultMaxFetchConcurrency() != want {
		t.Errorf("default %d, want %d", DefaultMaxFetchConcurrency(), want)
	}
}

// A dead-letter queue that leads back to the queue it serves, directly or through others, is
// a mistake naming the queues: a message that fails in each would go round for ever, its
// attempts starting again at 1 at every hop.
func TestDeadLetterCycles(t *testing.T) {
	for _, tc := range []struct{ name, toml, want string }{
		{"direct", `
[[queues.consumers]]
queue = "a"
dead_letter_queue = "b"
[[queues.consumers]]
queue = "b"
dead_letter_queue = "a"
`, `duilie.toml: queues.consumers[0].dead_letter_queue = "b": makes a dead-letter cycle a → b → a; a message failing in each would go round for ever`},
		{"longer", `
[[queues.consumers]]
queue = "x"
dead_letter_queue = "a"
[[queues.consumers]]
queue = "b"
dead_letter_queue = "c"
[[queues.consumers]]
queue = "a"
dead_letter_queue = "b"
[[queues.consumers]]
queue = "c"
dead_letter_queue = "a"
`, `duilie.toml: queues.consumers[1].dead_letter_queue = "c": makes a dead-letter cycle b → c → a → b; a message failing in each would go round for ever`},
	} {
		_, err := ParseConfig("duilie.toml", "/", []byte(tc.toml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	// In a wrangler file, through an http_pull consumer too, each table named as it is there.
	for _, tc := range []struct{ name, toml, want string }{
		{"workers", `
[[queues.consumers]]
queue = "p"
type = "http_pull"
[[queues.consumers]]
queue = "a"
dead_letter_queue = "b"
[[queues.consumers]]
queue = "b"
dead_letter_queue = "a"
`, `wrangler.toml: queues.consumers[1].dead_letter_queue = "b": makes a dead-letter cycle a → b → a; a message failing in each would go round for ever`},
		{"pull and worker", `
[[queues.consumers]]
queue = "b"
dead_letter_queue = "a"
[[queues.consumers]]
queue = "a"
type = "http_pull"
dead_letter_queue = "b"
`, `wrangler.toml: queues.consumers[1].dead_letter_queue = "b": makes a dead-letter cycle a → b → a; a message failing in each would go round for ever`},
		{"pulls", `
[[queues.consumers]]
queue = "x"
type = "http_pull"
dead_letter_queue = "y"
[[queues.consumers]]
queue = "y"
type = "http_pull"
dead_letter_queue = "x"
`, `wrangler.toml: queues.consumers[0].dead_letter_queue = "y": makes a dead-letter cycle x → y → x; a message failing in each would go round for ever`},
	} {
		text := tc.toml + "[duilie.app]\ncommand = [\"true\"]\n[duilie.cloudflare_api]\nlisten = \"127.0.0.1:0\"\naccount_id = \"a\"\ntoken_env = \"T\"\n"
		_, err := parseWrangler("wrangler.toml", "/", []byte(text))
		if err == nil || err.Error() != tc.want {
			t.Errorf("wrangler, %s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	// A chain that ends is fine, and so is a dead-letter queue nobody consumes.
	ok := "[[queues.consumers]]\nqueue = \"a\"\ndead_letter_queue = \"b\"\n[[queues.consumers]]\nqueue = \"b\"\ndead_letter_queue = \"c\"\n"
	if _, err := ParseConfig("duilie.toml", "/", []byte(ok)); err != nil {
		t.Errorf("a chain: %v", err)
	}
	// The same check for a configuration made in Go.
	a, b := DefaultConsumerConfig("a"), DefaultConsumerConfig("b")
	a.DeadLetterQueue, b.DeadLetterQueue = "b", "a"
	_, err := New(Config{Consumers: []ConsumerConfig{a, b}, Program: &duilie.Program{Queue: func(*duilie.Event) error { return nil }}, Platform: &memory.Config{}})
	if want := `Consumers[0].DeadLetterQueue = "b": makes a dead-letter cycle a → b → a; a message failing in each would go round for ever`; err == nil || err.Error() != want {
		t.Errorf("New: %v\nwant %s", err, want)
	}
	pull := DefaultPullConsumer("b")
	pull.DeadLetterQueue = "a"
	a.DeadLetterQueue = "b"
	_, err = New(Config{Consumers: []ConsumerConfig{a}, Program: &duilie.Program{Queue: func(*duilie.Event) error { return nil }}, Platform: &memory.Config{},
		CloudflareAPI: CloudflareAPI{Listen: "127.0.0.1:0", AccountID: "a", Token: "t", PullConsumers: []PullConsumer{pull}}})
	if want := `CloudflareAPI.PullConsumers[0].DeadLetterQueue = "a": makes a dead-letter cycle b → a → b; a message failing in each would go round for ever`; err == nil || err.Error() != want {
		t.Errorf("New, through a pull consumer: %v\nwant %s", err, want)
	}
}
