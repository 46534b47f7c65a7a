package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
)

// DefaultConfigFile is the configuration read when --config is not given, in the current
// directory.
const DefaultConfigFile = "duilie.toml"

// Config is a checked duilie.toml (SPEC §13): every setting in range, every default filled in,
// every path absolute.
type Config struct {
	// File is the configuration's path as the user named it; messages start with it.
	File string
	// Dir is the absolute directory of the file: relative paths in it, and app.command, start
	// there.
	Dir string

	Permissions host.Permissions
	// Bindings maps each queues.producers binding to its queue.
	Bindings map[string]string
	// Consumers are the queues.consumers in file order.
	Consumers []host.ConsumerConfig
	App       AppConfig
	Platform  PlatformConfig
}

// AppConfig is the app table.
type AppConfig struct {
	Command       []string      // the program run per event; empty for none
	Listen        string        // host:port for fetch events; "" for none
	TimeLimit     time.Duration // each event's wall-clock limit, 1 ms – 900 s
	ShutdownGrace time.Duration // how long running events may finish after SIGINT/SIGTERM
}

// PlatformConfig is the platform table: the embedded engine in DataDir, or the cluster at NATSURL.
type PlatformConfig struct {
	DataDir                            string // absolute
	NATSURL                            string
	NATSCreds                          string // absolute, or ""
	NATSTLSCA, NATSTLSCert, NATSTLSKey string
	Replicas                           int // 1, 3 or 5
	Sync                               string
	Retention                          time.Duration
}

// Defaults and ranges of the app table (SPEC §8.1, §13).
const (
	defaultTimeLimitMS     = 30000
	maxTimeLimitMS         = 900000
	defaultShutdownGraceMS = 30000
	maxShutdownGraceMS     = 900000
)

// ConfigError lists every mistake found in a configuration file, one per line, each naming
// the file, the key and what is allowed.
type ConfigError struct {
	Mistakes []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Mistakes, "\n") }

// LoadConfig reads and checks the configuration file at path. A file that is missing, unreadable,
// not TOML, or has any mistake is a *ConfigError.
func LoadConfig(path string) (*Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ConfigError{[]string{path + ": no such file (write one, or name it with --config)"}}
		}
		return nil, &ConfigError{[]string{path + ": " + unwrapPathError(err)}}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &ConfigError{[]string{path + ": " + err.Error()}}
	}
	return ParseConfig(path, filepath.Dir(abs), text)
}

func unwrapPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ParseConfig checks the TOML text of a configuration file named file whose relative paths
// start at dir.
func ParseConfig(file, dir string, text []byte) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(text), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ConfigError{[]string{fmt.Sprintf("%s: line %d: %s", file, pe.Position.Line, pe.Message)}}
		}
		return nil, &ConfigError{[]string{file + ": " + err.Error()}}
	}
	c := &checker{file: file, dir: dir}
	cfg := c.config(raw)
	if len(c.mistakes) > 0 {
		return nil, &ConfigError{c.mistakes}
	}
	return cfg, nil
}

// checker walks the decoded TOML in a fixed order (the order of SPEC §13's example) and
// collects every mistake.
type checker struct {
	file     string
	dir      string
	mistakes []string
}

// bad records a mistake about key holding v.
func (c *checker) bad(key string, v any, allowed string) {
	c.mistakes = append(c.mistakes, fmt.Sprintf("%s: %s = %s: %s", c.file, key, tomlValue(v), allowed))
}

// badKey records a mistake about key itself (missing, unknown).
func (c *checker) badKey(key, problem string) {
	c.mistakes = append(c.mistakes, fmt.Sprintf("%s: %s: %s", c.file, key, problem))
}

// table checks that v (at key; "" for the document) is a table whose keys are all in allowed,
// and returns it.
func (c *checker) table(key string, v any, allowed ...string) map[string]any {
	if v == nil {
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		c.bad(key, v, "must be a table (["+key+"])")
		return nil
	}
	var unknown []string
	for k := range t {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		c.badKey(join(key, k), "unknown key; allowed: "+strings.Join(allowed, ", "))
	}
	return t
}

// tables checks that v is an array of tables ([[key]]) and returns it.
func (c *checker) tables(key string, v any) []map[string]any {
	switch v := v.(type) {
	case nil:
		return nil
	case []map[string]any:
		return v
	case []any: // an array of inline tables, or empty
		ts := make([]map[string]any, 0, len(v))
		for _, e := range v {
			t, ok := e.(map[string]any)
			if !ok {
				break
			}
			ts = append(ts, t)
		}
		if len(ts) == len(v) {
			return ts
		}
	}
	c.bad(key, v, "must be an array of tables ([["+key+"]])")
	return nil
}

func join(key, k string) string {
	if key == "" {
		return tomlKey(k)
	}
	return key + "." + tomlKey(k)
}

// tomlKey quotes k as TOML needs it, so an odd unknown key reads back as written.
func tomlKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(k)
		}
	}
	return k
}

// tomlValue prints a decoded value the way TOML writes it.
func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") { // keep 10.0 a float when printed
			s += ".0"
		}
		return s
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []map[string]any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = tomlKey(k) + " = " + tomlValue(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprint(v)
	}
}

// str reads an optional string; ok is false when absent or mistaken.
func (c *checker) str(t map[string]any, table, k, allowed string) (string, bool) {
	v, present := t[k]
	if !present {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		c.bad(join(table, k), v, allowed)
		return "", false
	}
	return s, true
}

// integer reads an optional integer in lo..hi, or def when absent.
func (c *checker) integer(t map[string]any, table, k string, lo, hi, def int64, allowed string) int64 {
	v, present := t[k]
	if !present {
		return def
	}
	n, ok := v.(int64)
	if !ok || n < lo || n > hi {
		c.bad(join(table, k), v, allowed)
		return def
	}
	return n
}

const queueNameRule = "must be a queue name: lowercase letters, digits and '-', 1–63 characters, starting with a letter or digit"

// queueName reads a required (or optional) queue name.
func (c *checker) queueName(t map[string]any, table, k string, required bool) string {
	v, present := t[k]
	if !present {
		if required {
			c.badKey(join(table, k), "missing; "+queueNameRule)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok || platform.CheckQueueName(s) != nil {
		c.bad(join(table, k), v, queueNameRule)
		return ""
	}
	return s
}

// path reads an optional file path and makes it absolute, relative to the file's directory.
func (c *checker) path(t map[string]any, table, k, allowed string) string {
	s, ok := c.str(t, table, k, allowed)
	if !ok || s == "" {
		return ""
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(c.dir, s)
	}
	return filepath.Clean(s)
}

func (c *checker) config(raw map[string]any) *Config {
	cfg := &Config{File: c.file, Dir: c.dir, Bindings: map[string]string{}}
	doc := c.table("", raw, "permissions", "queues", "app", "platform")
	c.permissions(cfg, doc["permissions"])
	queues := c.table("queues", doc["queues"], "producers", "consumers")
	c.producers(cfg, queues["producers"])
	c.consumers(cfg, queues["consumers"])
	c.app(cfg, doc["app"])
	c.platform(cfg, doc["platform"])
	return cfg
}

func (c *checker) permissions(cfg *Config, v any) {
	t := c.table("permissions", v, "QUEUE")
	q, present := t["QUEUE"]
	if !present {
		return
	}
	const allowed = "must be an array of binding names, like [\"PAGE_QUEUE\"]"
	list, ok := q.([]any)
	if !ok {
		c.bad("permissions.QUEUE", q, allowed)
		return
	}
	seen := map[string]int{}
	for i, e := range list {
		key := fmt.Sprintf("permissions.QUEUE[%d]", i)
		s, ok := e.(string)
		switch {
		case !ok || s == "":
			c.bad(key, e, "must be a binding name (a non-empty string)")
		case seen[s] > 0:
			c.bad(key, e, fmt.Sprintf("listed twice (also permissions.QUEUE[%d])", seen[s]-1))
		default:
			seen[s] = i + 1
			cfg.Permissions.Queue = append(cfg.Permissions.Queue, s)
		}
	}
}

func (c *checker) producers(cfg *Config, v any) {
	first := map[string]int{}
	for i, t := range c.tables("queues.producers", v) {
		table := fmt.Sprintf("queues.producers[%d]", i)
		t = c.table(table, t, "binding", "queue")
		var binding string
		switch b, present := t["binding"]; {
		case !present:
			c.badKey(table+".binding", "missing; must be a binding name, like \"PAGE_QUEUE\"")
		default:
			s, ok := b.(string)
			if !ok || s == "" {
				c.bad(table+".binding", b, "must be a binding name (a non-empty string)")
			} else if j, dup := first[s]; dup {
				c.bad(table+".binding", b, fmt.Sprintf("listed twice (also queues.producers[%d]); a binding names one queue", j))
			} else {
				first[s] = i
				binding = s
			}
		}
		queue := c.queueName(t, table, "queue", true)
		if binding != "" && queue != "" {
			cfg.Bindings[binding] = queue
		}
	}
}

func (c *checker) consumers(cfg *Config, v any) {
	first := map[string]int{}
	for i, t := range c.tables("queues.consumers", v) {
		table := fmt.Sprintf("queues.consumers[%d]", i)
		t = c.table(table, t, "queue", "max_batch_size", "max_batch_timeout", "max_retries",
			"retry_delay", "dead_letter_queue", "max_concurrency")
		queue := c.queueName(t, table, "queue", true)
		if j, dup := first[queue]; dup && queue != "" {
			c.bad(table+".queue", queue, fmt.Sprintf("has a consumer already (queues.consumers[%d]); a queue has one consumer", j))
		} else if queue != "" {
			first[queue] = i
		}
		cc := host.DefaultConsumerConfig(queue)
		cc.MaxBatchSize = int(c.integer(t, table, "max_batch_size", 1, 100, 10, "must be 1–100"))
		cc.MaxBatchTimeout = time.Duration(c.integer(t, table, "max_batch_timeout", 0, 60, 5, "must be 0–60 (seconds)")) * time.Second
		cc.MaxRetries = int(c.integer(t, table, "max_retries", 0, 100, 3, "must be 0–100"))
		cc.RetryDelay = time.Duration(c.integer(t, table, "retry_delay", 0, 43200, 0, "must be 0–43200 (seconds)")) * time.Second
		cc.MaxConcurrency = int(c.integer(t, table, "max_concurrency", 1, 250, 1, "must be 1–250 (batches at once)"))
		cc.DeadLetterQueue = c.queueName(t, table, "dead_letter_queue", false)
		if cc.DeadLetterQueue != "" && cc.DeadLetterQueue == queue {
			c.bad(table+".dead_letter_queue", queue, "must be another queue than the one consumed")
			cc.DeadLetterQueue = ""
		}
		if queue != "" {
			cfg.Consumers = append(cfg.Consumers, cc)
		}
	}
}

func (c *checker) app(cfg *Config, v any) {
	t := c.table("app", v, "command", "listen", "time_limit_ms", "shutdown_grace_ms")
	if cmd, present := t["command"]; present {
		const allowed = `must be a non-empty array of strings, the program and its arguments, like ["python3", "app.py"]`
		list, ok := cmd.([]any)
		if !ok || len(list) == 0 {
			c.bad("app.command", cmd, allowed)
		} else {
			for _, e := range list {
				s, ok := e.(string)
				if !ok {
					c.bad("app.command", cmd, allowed)
					cfg.App.Command = nil
					break
				}
				cfg.App.Command = append(cfg.App.Command, s)
			}
			if len(cfg.App.Command) > 0 && cfg.App.Command[0] == "" {
				c.bad("app.command", cmd, "must start with the program to run, not \"\"")
				cfg.App.Command = nil
			}
		}
	}
	const listenAllowed = `must be a host:port to listen on for fetch events, like "127.0.0.1:8787"`
	if s, ok := c.str(t, "app", "listen", listenAllowed); ok && s != "" {
		if _, port, err := net.SplitHostPort(s); err != nil || !validPort(port) {
			c.bad("app.listen", s, listenAllowed)
		} else {
			cfg.App.Listen = s
		}
	}
	cfg.App.TimeLimit = time.Duration(c.integer(t, "app", "time_limit_ms", 1, maxTimeLimitMS, defaultTimeLimitMS,
		"must be 1–900000 (milliseconds)")) * time.Millisecond
	cfg.App.ShutdownGrace = time.Duration(c.integer(t, "app", "shutdown_grace_ms", 0, maxShutdownGraceMS, defaultShutdownGraceMS,
		"must be 0–900000 (milliseconds)")) * time.Millisecond
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

func (c *checker) platform(cfg *Config, v any) {
	t := c.table("platform", v, "data_dir", "nats_url", "nats_creds", "nats_tls_ca", "nats_tls_cert",
		"nats_tls_key", "replicas", "sync", "retention")
	p := &cfg.Platform
	p.DataDir = c.path(t, "platform", "data_dir", "must be a directory path (a string)")
	if p.DataDir == "" {
		p.DataDir = filepath.Join(c.dir, ".duilie")
	}
	const urlAllowed = `must be a NATS URL, like "nats://127.0.0.1:4222" (several separated by commas)`
	if s, ok := c.str(t, "platform", "nats_url", urlAllowed); ok {
		if s != "" && !strings.Contains(s, "://") && strings.ContainsAny(s, " \t\n") {
			c.bad("platform.nats_url", s, urlAllowed)
		} else {
			p.NATSURL = s
		}
	}
	const fileAllowed = "must be a file path (a string)"
	p.NATSCreds = c.path(t, "platform", "nats_creds", fileAllowed)
	p.NATSTLSCA = c.path(t, "platform", "nats_tls_ca", fileAllowed)
	p.NATSTLSCert = c.path(t, "platform", "nats_tls_cert", fileAllowed)
	p.NATSTLSKey = c.path(t, "platform", "nats_tls_key", fileAllowed)
	p.Replicas = 1
	if r, present := t["replicas"]; present {
		if n, ok := r.(int64); ok && (n == 1 || n == 3 || n == 5) {
			p.Replicas = int(n)
		} else {
			c.bad("platform.replicas", r, "must be 1, 3 or 5")
		}
	}
	p.Sync = "interval"
	const syncAllowed = `must be "interval" (fsync on a timer) or "always" (fsync each write)`
	if s, ok := c.str(t, "platform", "sync", syncAllowed); ok {
		if s == "interval" || s == "always" {
			p.Sync = s
		} else {
			c.bad("platform.sync", s, syncAllowed)
		}
	}
	p.Retention = 96 * time.Hour
	const retentionAllowed = `must be a duration 60s–336h, like "96h" or "30m"`
	if r, present := t["retention"]; present {
		s, _ := r.(string)
		d, err := time.ParseDuration(s)
		if err != nil || d < 60*time.Second || d > 336*time.Hour {
			c.bad("platform.retention", r, retentionAllowed)
		} else {
			p.Retention = d
		}
	}

	// Settings that only make sense together.
	if p.NATSURL == "" {
		if p.Replicas != 1 {
			c.bad("platform.replicas", int64(p.Replicas), "needs platform.nats_url: the embedded engine keeps one copy")
		}
		for _, k := range []string{"nats_creds", "nats_tls_ca", "nats_tls_cert", "nats_tls_key"} {
			if s, ok := t[k].(string); ok && s != "" {
				c.bad("platform."+k, s, "needs platform.nats_url: it applies to a NATS cluster only")
			}
		}
	} else {
		if p.Sync == "always" {
			c.bad("platform.sync", p.Sync, `applies to the embedded engine only; a cluster's servers set sync_interval: always in their own configuration`)
		}
		if (p.NATSTLSCert == "") != (p.NATSTLSKey == "") {
			if p.NATSTLSCert == "" {
				c.badKey("platform.nats_tls_cert", "missing; a client certificate needs both nats_tls_cert and nats_tls_key")
			} else {
				c.badKey("platform.nats_tls_key", "missing; a client certificate needs both nats_tls_cert and nats_tls_key")
			}
		}
	}
}
