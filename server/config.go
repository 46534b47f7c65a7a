package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// DefaultConfigFile is the configuration duilie serve reads when none is named, in the
// current directory.
const DefaultConfigFile = "duilie.toml"

// FieldError is one setting of a Go-built configuration that is mistaken: Field is the Go
// field's name, Rule what it allows.
type FieldError = platform.FieldError

// FieldErrors returns every *FieldError joined into err, in order.
func FieldErrors(err error) []*FieldError { return platform.FieldErrors(err) }

// IsPermanent reports whether err is a platform's failure that trying again will not mend (bad
// credentials, a queue that no longer exists).
func IsPermanent(err error) bool { return platform.IsPermanent(err) }

// ConfigError lists every mistake found in a configuration, one per line, each naming the
// file (when there is one), the setting by its duilie.toml key, and what is allowed:
//
//	duilie.toml: queues.consumers[0].max_batch_size = 0: must be 1–100
type ConfigError struct {
	Mistakes []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Mistakes, "\n") }

// LoadConfig reads and checks the configuration file at path (SPEC §13): duilie.toml, modelled
// on wrangler's, or a Worker project's wrangler.toml, wrangler.json or wrangler.jsonc read as
// it is (see IsWranglerFile). Relative paths in it are relative to its directory, unknown keys are
// mistakes, and a setting a key leaves out gets its default. A file that is missing,
// unreadable, not TOML, or has any mistake is a *ConfigError listing every mistake.
func LoadConfig(path string) (*Config, error) {
	text, err := readConfigFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ConfigError{[]string{path + ": no such file (write one, or name it with --config)"}}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &ConfigError{[]string{path + ": " + err.Error()}}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &ConfigError{[]string{path + ": " + err.Error()}}
	}
	if IsWranglerFile(path) {
		return parseWrangler(path, filepath.Dir(abs), text)
	}
	return ParseConfig(path, filepath.Dir(abs), text)
}

// readConfigFile reads the file at path, up to MaxConfigBytes and one more byte.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err == nil && len(text) > MaxConfigBytes {
		err = fmt.Errorf("over %d bytes: a configuration file is at most 1 MiB", MaxConfigBytes)
	}
	return text, err
}

// SetPlatform sets one key of the [platform] table as duilie.toml would (value as TOML decodes
// it: a string, an int64, a bool), on a copy of the platform's settings, which are checked
// again; a mistake is a *ConfigError naming the key.
func (cfg *Config) SetPlatform(key string, value any) error {
	pc := reflect.New(reflect.TypeOf(cfg.Platform).Elem())
	pc.Elem().Set(reflect.ValueOf(cfg.Platform).Elem())
	opener := pc.Interface().(platform.Opener)
	c := &checker{file: cfg.File, dir: cfg.Dir}
	t := map[string]any{key: value}
	if !slices.Contains(keys(opener), key) {
		c.badKey("platform."+key, "is not a setting of platform kind "+opener.Kind())
	} else {
		bad := c.decode("platform", t, opener)
		c.invalid("platform", t, opener, opener.Validate(), bad)
	}
	if len(c.mistakes) > 0 {
		return &ConfigError{c.mistakes}
	}
	cfg.Platform = opener
	return nil
}

// PlatformSetting is the value of a key of the [platform] table, as the configuration holds
// it, and whether the platform's kind has that key.
func (cfg *Config) PlatformSetting(key string) (any, bool) {
	rv := reflect.ValueOf(cfg.Platform).Elem()
	for _, f := range fieldsOf(rv.Type()) {
		if f.key == key {
			return rv.FieldByIndex(f.index).Interface(), true
		}
	}
	return nil, false
}

// openPlatform opens the configured platform: as the process that owns its store (a server),
// or as one that reaches the owner. A platform that cannot use a setting's value (a data
// directory another user owns or may write) fails with a *ConfigError naming the key, as a
// mistake in the file does.
func (cfg *Config) openPlatform(ctx context.Context, owner bool, log *slog.Logger) (platform.Platform, error) {
	o := platform.OpenOptions{Logger: log}
	open := cfg.Platform.Open
	if oo, ok := cfg.Platform.(platform.OwnerOpener); ok && owner {
		open = oo.OpenOwner
	}
	p, err := open(ctx, o)
	if len(platform.FieldErrors(err)) > 0 {
		c := &checker{file: cfg.File, dir: cfg.Dir}
		c.invalid("platform", nil, cfg.Platform, err, nil)
		return nil, &ConfigError{c.mistakes}
	}
	return p, err
}

// ParseConfig checks the TOML text of a configuration file named file (for messages) whose
// relative paths start at dir, as LoadConfig does.
func ParseConfig(file, dir string, text []byte) (*Config, error) {
	if m := nestingMistake(file, text, true); m != "" {
		return nil, &ConfigError{[]string{m}}
	}
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
	if cfg != nil {
		cfg.parsed = true
	}
	if len(c.mistakes) > 0 {
		return nil, &ConfigError{c.mistakes}
	}
	return cfg, nil
}

// checker walks the decoded TOML in a fixed order (the order of SPEC §13's example) and
// collects every mistake.
type checker struct {
	file string
	dir  string
	ns   string // where duilie's own tables are: "" in duilie.toml, "duilie." in a wrangler file
	// pullTables names the table of each http_pull consumer read from a wrangler file
	// (queues.consumers[i]); nil: [cloudflare_api] pull_consumers[i].
	pullTables []string
	mistakes   []string
	// goNames: the configuration was made in Go, so mistakes name its Go fields.
	goNames *Config
}

// bad records a mistake about key holding v.
func (c *checker) bad(key string, v any, allowed string) {
	if c.goNames != nil {
		c.mistakes = append(c.mistakes, fmt.Sprintf("%s = %s: %s", goName(c.goNames, key), goValue(v), allowed))
		return
	}
	c.mistakes = append(c.mistakes, fmt.Sprintf("%s%s = %s: %s", c.prefix(), key, tomlValue(v), allowed))
}

// badKey records a mistake about key itself (missing, unknown).
func (c *checker) badKey(key, problem string) {
	if c.goNames != nil {
		key = goName(c.goNames, key)
	}
	c.mistakes = append(c.mistakes, fmt.Sprintf("%s%s: %s", c.prefix(), key, problem))
}

func (c *checker) prefix() string {
	if c.file == "" {
		return ""
	}
	return c.file + ": "
}

// invalid records the mistakes of a settings struct's check, err (joined *platform.FieldError,
// or nil), skipping fields in skip. raw is the TOML table the settings came from; nil for
// settings made in Go, whose values are then printed as the file would write them.
func (c *checker) invalid(table string, raw map[string]any, settings any, err error, skip map[string]bool) {
	for _, fe := range platform.FieldErrors(err) {
		if skip[fe.Field] {
			continue
		}
		key := keyOf(settings, fe.Field)
		if key == "" {
			c.badKey(join(table, fe.Field), fe.Rule)
			continue
		}
		v, present := raw[key]
		if raw == nil && c.goNames != nil {
			v, present = reflect.Indirect(reflect.ValueOf(settings)).FieldByName(fe.Field).Interface(), true
		} else if raw == nil {
			v, present = fieldValue(settings, fe.Field), true
		}
		if present {
			c.bad(join(table, key), v, fe.Rule)
		} else {
			c.badKey(join(table, key), "missing; "+fe.Rule)
		}
	}
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

func (c *checker) config(raw map[string]any) *Config {
	cfg := &Config{File: c.file, Dir: c.dir, Bindings: map[string]string{}}
	doc := c.table("", raw, "permissions", "queues", "app", "platform", "dashboard", "cloudflare_api", "worker")
	c.permissions(cfg, doc["permissions"])
	queues := c.table("queues", doc["queues"], "producers", "consumers")
	c.producers(cfg, queues["producers"])
	c.consumers(cfg, queues["consumers"])
	c.app(cfg, doc["app"])
	c.platform(cfg, doc["platform"])
	c.dashboard(cfg, doc["dashboard"])
	c.cloudflareTable(cfg, doc["cloudflare_api"])
	c.worker(cfg, doc["worker"])
	return cfg
}

func (c *checker) permissions(cfg *Config, v any) {
	t := c.table(c.ns+"permissions", v, "QUEUE")
	q, present := t["QUEUE"]
	if !present {
		return
	}
	const allowed = "must be an array of binding names, like [\"PAGE_QUEUE\"]"
	list, ok := q.([]any)
	if !ok {
		c.bad(c.ns+"permissions.QUEUE", q, allowed)
		return
	}
	seen := map[string]int{}
	for i, e := range list {
		key := c.ns + fmt.Sprintf("permissions.QUEUE[%d]", i)
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

// queueNameRule is what a queue name may be; the host's consumer settings say the same.
var queueNameRule = platform.Invalid(ConsumerConfig{}, "Queue").Rule

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
		var queue string
		switch q, present := t["queue"]; {
		case !present:
			c.badKey(table+".queue", "missing; "+queueNameRule)
		default:
			s, ok := q.(string)
			if !ok || platform.CheckQueueName(s) != nil {
				c.bad(table+".queue", q, queueNameRule)
			} else {
				queue = s
			}
		}
		if binding != "" && queue != "" {
			cfg.Bindings[binding] = queue
		}
	}
}

func (c *checker) consumers(cfg *Config, v any) {
	first := map[string]int{}
	var tables []int // the table of each consumer in cfg.Consumers
	defer func() { c.deadLetterCycles(cfg.Consumers, tables) }()
	for i, t := range c.tables("queues.consumers", v) {
		if c.consumer(cfg, i, t, first) {
			tables = append(tables, i)
		}
	}
}

// deadLetterCycles records a mistake for every cycle of dead-letter queues among consumers
// (direct, a ↔ b, or longer): a message that fails in each queue would go round for ever, its
// attempts starting again at 1 at every hop. tables[i] is the index of consumers[i]'s table in
// the file (nil: the same as i). Each cycle is named once, at its first consumer.
func (c *checker) deadLetterCycles(consumers []ConsumerConfig, tables []int) {
	links := make([]deadLetterLink, len(consumers))
	for i, cc := range consumers {
		table := i
		if tables != nil {
			table = tables[i]
		}
		links[i] = deadLetterLink{cc.Queue, cc.DeadLetterQueue, fmt.Sprintf("queues.consumers[%d]", table)}
	}
	c.cycles(links, len(links))
}

// deadLetterLink is one consumer's queue, its dead-letter queue and the table that sets it.
type deadLetterLink struct{ queue, deadLetterQueue, table string }

// cycles records a mistake for every dead-letter cycle through one of links[:first], named
// once, at the first of its links.
func (c *checker) cycles(links []deadLetterLink, first int) {
	index := map[string]int{}
	for i, l := range links {
		if _, dup := index[l.queue]; !dup {
			index[l.queue] = i
		}
	}
	reported := map[int]bool{}
	for start := range first {
		if links[start].deadLetterQueue == links[start].queue {
			continue // a mistake of its own (ConsumerConfig.Validate)
		}
		// Follow the dead-letter queues from start until they end, or come back to a consumer
		// seen on this walk.
		var path []int
		on := map[int]int{} // consumer → its position in path
		for i, ok := start, true; ok; i, ok = index[links[i].deadLetterQueue] {
			if at, seen := on[i]; seen {
				cycle := path[at:]
				if i != start || reported[slices.Min(cycle)] {
					break // the cycle does not start here, or was named already
				}
				reported[slices.Min(cycle)] = true
				names := make([]string, 0, len(cycle)+1)
				for _, j := range cycle {
					names = append(names, links[j].queue)
				}
				c.bad(links[start].table+".dead_letter_queue", links[start].deadLetterQueue,
					"makes a dead-letter cycle "+strings.Join(append(names, names[0]), " → ")+"; a message failing in each would go round for ever")
				break
			}
			on[i] = len(path)
			path = append(path, i)
		}
	}
}

// consumer reads queues.consumers[i]; first records the table of each queue's consumer.
func (c *checker) consumer(cfg *Config, i int, t map[string]any, first map[string]int) bool {
	table := fmt.Sprintf("queues.consumers[%d]", i)
	t = c.table(table, t, keys(ConsumerConfig{})...)
	cc := DefaultConsumerConfig("")
	bad := c.decode(table, t, &cc)
	c.invalid(table, t, cc, cc.Validate(), bad)
	if !c.firstConsumer(table, cc.Queue, i, first) {
		return false
	}
	if cc.Validate() != nil {
		return false
	}
	cfg.Consumers = append(cfg.Consumers, cc)
	return true
}

// firstConsumer records queues.consumers[i] as queue's consumer, or a mistake if the queue
// has one already. It reports whether the name is a queue's that had none.
func (c *checker) firstConsumer(table, queue string, i int, first map[string]int) bool {
	if queue == "" || platform.CheckQueueName(queue) != nil {
		return false
	}
	if j, dup := first[queue]; dup {
		c.bad(table+".queue", queue, fmt.Sprintf("has a consumer already (queues.consumers[%d]); a queue has one consumer", j))
		return false
	}
	first[queue] = i
	return true
}

func (c *checker) app(cfg *Config, v any) {
	t := c.table(c.ns+"app", v, keys(Config{})...)
	cfg.TimeLimit, cfg.ShutdownGrace = host.DefaultTimeLimit, DefaultShutdownGrace
	bad := c.decode(c.ns+"app", t, cfg)
	c.invalid(c.ns+"app", t, cfg, cfg.checkApp(t), bad)
	if g, ok := t["shutdown_grace_ms"].(int64); ok && g == 0 {
		cfg.ShutdownGrace = NoShutdownGrace // the file's "none"; 0 in Go is the default
	}
}

func (c *checker) platform(cfg *Config, v any) {
	t, _ := v.(map[string]any)
	kind := platform.DefaultKind
	if k, present := t["kind"]; present {
		s, ok := k.(string)
		if ok {
			kind = s
		}
		if _, err := platform.NewConfig(kind); !ok || err != nil {
			c.bad(c.ns+"platform.kind", k, "must be one of "+quoteAll(platform.Kinds()))
			kind = platform.DefaultKind
		}
	}
	pc, err := platform.NewConfig(kind)
	if err != nil {
		c.badKey(c.ns+"platform", err.Error()) // the default driver is always linked in
		return
	}
	t = c.table(c.ns+"platform", v, append([]string{"kind"}, keys(pc)...)...)
	bad := c.decode(c.ns+"platform", t, pc)
	c.invalid(c.ns+"platform", t, pc, pc.Validate(), bad)
	cfg.Platform = pc
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// checkApp checks the settings of the [app] table. Its error joins one *platform.FieldError
// per mistake. file is the table the settings were read from, or nil for settings made in Go:
// in the file, 0 is no default but a time limit out of range, and a negative grace is no
// "none" but a mistake.
func (cfg *Config) checkApp(file map[string]any) error {
	var errs []error
	switch {
	case cfg.Command != nil && len(cfg.Command) == 0:
		errs = append(errs, platform.Invalid(cfg, "Command"))
	case len(cfg.Command) > 0 && cfg.Command[0] == "":
		errs = append(errs, &platform.FieldError{Field: "Command", Rule: `must start with the program to run, not ""`})
	}
	if cfg.Listen != "" {
		if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || !validPort(port) {
			errs = append(errs, platform.Invalid(cfg, "Listen"))
		}
	}
	if _, inFile := file["max_fetch_concurrency"]; (cfg.MaxFetchConcurrency != 0 || inFile) &&
		(cfg.MaxFetchConcurrency < 1 || cfg.MaxFetchConcurrency > MaxFetchConcurrency) {
		errs = append(errs, platform.Invalid(cfg, "MaxFetchConcurrency"))
	}
	if _, inFile := file["max_output_bytes"]; (cfg.MaxOutputBytes != 0 || inFile) &&
		(cfg.MaxOutputBytes < 1 || cfg.MaxOutputBytes > MaxOutputBytes) {
		errs = append(errs, platform.Invalid(cfg, "MaxOutputBytes"))
	}
	if _, inFile := file["time_limit_ms"]; cfg.TimeLimit != 0 || inFile {
		if err := host.CheckTimeLimit(cfg.TimeLimit); err != nil {
			errs = append(errs, err)
		}
	}
	if _, inFile := file["shutdown_grace_ms"]; cfg.ShutdownGrace > MaxShutdownGrace || inFile && cfg.ShutdownGrace < 0 {
		errs = append(errs, platform.Invalid(cfg, "ShutdownGrace"))
	}
	return errors.Join(errs...)
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

func (c *checker) cloudflareTable(cfg *Config, v any) {
	t := c.table(c.ns+"cloudflare_api", v, keys(CloudflareAPI{})...)
	bad := c.decode(c.ns+"cloudflare_api", t, &cfg.CloudflareAPI)
	c.cloudflare(cfg, t, bad, nil)
}

// cloudflare checks the settings of Cloudflare's API ([cloudflare_api]), the http_pull
// consumers and the delivery delays. t is the table read from a file, or nil for settings made
// in Go; bad lists the fields whose values had the wrong type already.
func (c *checker) cloudflare(cfg *Config, t map[string]any, bad map[string]bool, getenv func(string) string) {
	api := &cfg.CloudflareAPI
	c.invalid(c.ns+"cloudflare_api", t, api, api.check(getenv), bad)
	if len(api.PullConsumers) > 0 && api.Listen == "" && len(bad) == 0 {
		c.badKey(c.ns+"cloudflare_api.listen", "missing; the http_pull consumers ("+api.PullConsumers[0].Queue+", …) are pulled over Cloudflare's API, which it serves")
	}
	programs := map[string]bool{}
	for _, cc := range cfg.Consumers {
		programs[cc.Queue] = true
	}
	for i, pc := range api.PullConsumers {
		table := c.ns + fmt.Sprintf("cloudflare_api.pull_consumers[%d]", i)
		c.invalid(table, nil, pc, pc.Validate(), nil)
		if programs[pc.Queue] {
			c.bad(table+".queue", pc.Queue, "has a consumer already; a queue has one consumer")
		}
		programs[pc.Queue] = true
	}
	// Dead-letter cycles through an http_pull consumer (those among program consumers alone
	// are named with them): a message pulled and retried in each queue goes round as well.
	var links []deadLetterLink
	for i, pc := range api.PullConsumers {
		table := c.ns + fmt.Sprintf("cloudflare_api.pull_consumers[%d]", i)
		if i < len(c.pullTables) {
			table = c.pullTables[i]
		}
		links = append(links, deadLetterLink{pc.Queue, pc.DeadLetterQueue, table})
	}
	for _, cc := range cfg.Consumers {
		links = append(links, deadLetterLink{cc.Queue, cc.DeadLetterQueue, ""})
	}
	c.cycles(links, len(api.PullConsumers))
	for _, q := range slices.Sorted(maps.Keys(cfg.DeliveryDelays)) {
		if d := cfg.DeliveryDelays[q]; d < 0 || d > MaxDeliveryDelay {
			c.bad("queues.producers.delivery_delay", int64(d), fmt.Sprintf("must be 0–%d (seconds), for queue %s", MaxDeliveryDelay, q))
		}
	}
}
