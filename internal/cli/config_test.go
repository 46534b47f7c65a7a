package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			cfg, err := LoadConfig(f)
			var got string
			if err != nil {
				if status(err) != exitConfig {
					t.Errorf("exit status %d, want %d", status(err), exitConfig)
				}
				got = "error:\n" + err.Error() + "\n"
			} else {
				got = dumpConfig(t, cfg)
			}
			golden(t, "config/"+name+".golden", got)
		})
	}
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
	fmt.Fprintf(&b, "app: %+v\n", c.App)
	fmt.Fprintf(&b, "platform: %+v\n", c.Platform)
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
	if cfg.App.TimeLimit != 30*time.Second || cfg.App.ShutdownGrace != 30*time.Second {
		t.Errorf("app defaults: %+v", cfg.App)
	}
	p := cfg.Platform
	if p.DataDir != filepath.Join(dir, ".duilie") || p.NATSCreds != filepath.Join(dir, "u.creds") ||
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

// A configuration mistake is exit status 78 with every mistake on stderr, for every command
// that reads the file.
func TestConfigErrorExit(t *testing.T) {
	want, err := os.ReadFile("testdata/config/platform.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--config", "testdata/config/platform.toml"},
		{"send", "--binding", "B", "--config", "testdata/config/platform.toml"},
		{"send-batch", "--binding", "B", "--config", "testdata/config/platform.toml"},
		{"queues", "--config", "testdata/config/platform.toml"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), Options{}, args, strings.NewReader("{}"), &stdout, &stderr)
		if code != exitConfig || stdout.Len() != 0 || "error:\n"+stderr.String() != string(want) {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", args, code, stdout.String(), stderr.String())
		}
	}
	var stderr bytes.Buffer
	code := Run(context.Background(), Options{}, []string{"queues", "--config", filepath.Join(t.TempDir(), "none.toml")}, nil, &bytes.Buffer{}, &stderr)
	if code != exitConfig || !strings.HasSuffix(stderr.String(), "none.toml: no such file (write one, or name it with --config)\n") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr.String())
	}
}
