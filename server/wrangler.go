package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A Worker project's wrangler.toml, wrangler.json or wrangler.jsonc is read as it is: its
// queues.producers and queues.consumers are duilie's, a producer's delivery_delay is its
// queue's delivery delay, a consumer with type = "http_pull" is pulled over Cloudflare's API,
// and the producers' bindings are the permissions. duilie's own settings (permissions, app,
// platform, dashboard, cloudflare_api, worker) go in a table named duilie. Keys of the Worker that do
// not concern queues (name, main, compatibility_date, …) are ignored, and serve names them in
// one log line.

// IsWranglerFile reports whether path names a wrangler configuration rather than a duilie.toml:
// a .json or .jsonc file, or a .toml file whose name starts with "wrangler".
func IsWranglerFile(path string) bool {
	base := strings.ToLower(filepath.Base(path))
	switch filepath.Ext(base) {
	case ".json", ".jsonc":
		return true
	case ".toml":
		return strings.HasPrefix(base, "wrangler")
	}
	return false
}

// Keys of wrangler's queue tables, and which of them duilie honours.
var (
	wranglerProducerKeys = []string{"binding", "queue", "delivery_delay"}
	wranglerPullKeys     = []string{"queue", "type", "max_batch_size", "max_retries", "retry_delay", "dead_letter_queue", "visibility_timeout_ms"}
)

// parseWrangler checks a wrangler configuration's text, TOML or (for .json and .jsonc) JSON
// with comments and trailing commas.
func parseWrangler(file, dir string, text []byte) (*Config, error) {
	var raw map[string]any
	if ext := strings.ToLower(filepath.Ext(file)); ext == ".json" || ext == ".jsonc" {
		v, err := decodeJSONC(text)
		if err != nil {
			return nil, &ConfigError{[]string{file + ": " + err.Error()}}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &ConfigError{[]string{file + ": must be a JSON object, as wrangler's configuration is"}}
		}
		raw = m
	} else if m := nestingMistake(file, text, true); m != "" {
		return nil, &ConfigError{[]string{m}}
	} else if _, err := toml.Decode(string(text), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ConfigError{[]string{fmt.Sprintf("%s: line %d: %s", file, pe.Position.Line, pe.Message)}}
		}
		return nil, &ConfigError{[]string{file + ": " + err.Error()}}
	}
	c := &checker{file: file, dir: dir, ns: "duilie."}
	cfg := c.wrangler(raw)
	if len(c.mistakes) > 0 {
		return nil, &ConfigError{c.mistakes}
	}
	return cfg, nil
}

func (c *checker) wrangler(raw map[string]any) *Config {
	cfg := &Config{File: c.file, Dir: c.dir, Bindings: map[string]string{}, wrangler: true}
	for k := range raw {
		if k != "queues" && k != "duilie" {
			cfg.ignored = append(cfg.ignored, k)
		}
	}
	slices.Sort(cfg.ignored)
	if name, ok := raw["name"].(string); ok {
		cfg.Name = name
	}
	duilie := c.table("duilie", raw["duilie"], "permissions", "app", "platform", "dashboard", "cloudflare_api", "worker")
	queues := c.table("queues", raw["queues"], "producers", "consumers")

	// Producers: a binding and its queue, with the queue's delivery delay taken out.
	var bindings []string
	var producers []any
	for i, t := range c.tables("queues.producers", queues["producers"]) {
		table := fmt.Sprintf("queues.producers[%d]", i)
		t = c.table(table, t, wranglerProducerKeys...)
		if d, present := t["delivery_delay"]; present {
			n, ok := d.(int64)
			q, _ := t["queue"].(string)
			switch {
			case !ok || n < 0 || n > int64(MaxDeliveryDelay):
				c.bad(table+".delivery_delay", d, fmt.Sprintf("must be 0–%d (seconds)", MaxDeliveryDelay))
			case q == "":
			case cfg.DeliveryDelays[q] != 0 && cfg.DeliveryDelays[q] != int(n):
				c.bad(table+".delivery_delay", d, "differs from another producer's of queue "+strconv.Quote(q)+"; duilie delays per queue")
			default:
				if cfg.DeliveryDelays == nil {
					cfg.DeliveryDelays = map[string]int{}
				}
				if n > 0 {
					cfg.DeliveryDelays[q] = int(n)
				}
			}
		}
		if b, ok := t["binding"].(string); ok && b != "" {
			bindings = append(bindings, b)
		}
		p := map[string]any{}
		for _, k := range []string{"binding", "queue"} { // the rest is checked above
			if v, ok := t[k]; ok {
				p[k] = v
			}
		}
		producers = append(producers, p)
	}
	if len(cfg.DeliveryDelays) == 0 {
		cfg.DeliveryDelays = nil
	}
	c.producers(cfg, producers)

	// Consumers: a program's (type "worker", or none) or pulled over the API (type "http_pull").
	first := map[string]int{}
	var workers []int // the table of each consumer in cfg.Consumers
	for i, t := range c.tables("queues.consumers", queues["consumers"]) {
		table := fmt.Sprintf("queues.consumers[%d]", i)
		switch kind, present := t["type"]; {
		case kind == "http_pull":
			t = c.table(table, t, wranglerPullKeys...)
			pc := DefaultPullConsumer("")
			pt := clone(t)
			delete(pt, "type")
			bad := c.decode(table, pt, &pc)
			c.invalid(table, pt, pc, pc.Validate(), bad)
			if c.firstConsumer(table, pc.Queue, i, first) && pc.Validate() == nil {
				cfg.CloudflareAPI.PullConsumers = append(cfg.CloudflareAPI.PullConsumers, pc)
				c.pullTables = append(c.pullTables, table)
			}
		case !present || kind == "worker":
			if _, ok := t["visibility_timeout_ms"]; ok {
				c.badKey(table+".visibility_timeout_ms", `only an http_pull consumer has one (type = "http_pull")`)
			}
			wt := clone(t)
			delete(wt, "type")
			delete(wt, "visibility_timeout_ms")
			if c.consumer(cfg, i, wt, first) {
				workers = append(workers, i)
			}
		default:
			c.bad(table+".type", kind, `must be "worker" (the default: duilie's program consumes the queue) or "http_pull"`)
		}
	}

	c.deadLetterCycles(cfg.Consumers, workers)

	// duilie's own tables; the permissions default to every producer's binding.
	if _, present := duilie["permissions"]; present {
		c.permissions(cfg, duilie["permissions"])
	} else {
		cfg.Permissions.Queue = slices.Compact(slices.Sorted(slices.Values(bindings)))
	}
	c.app(cfg, duilie["app"])
	c.platform(cfg, duilie["platform"])
	c.dashboard(cfg, duilie["dashboard"])
	c.cloudflareTable(cfg, duilie["cloudflare_api"])
	c.worker(cfg, duilie["worker"])
	return cfg
}

func clone(t map[string]any) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = v
	}
	return out
}

// decodeJSONC decodes wrangler's JSON with comments: integers become int64 and other numbers
// float64, as TOML decodes them, and null members are left out (a setting's default).
func decodeJSONC(text []byte) (any, error) {
	stripped, err := StripJSONC(text)
	if err != nil {
		return nil, err
	}
	if line := tooDeep(stripped, MaxConfigDepth, false); line > 0 {
		return nil, fmt.Errorf("line %d: arrays and objects nest more than %d deep", line, MaxConfigDepth)
	}
	d := json.NewDecoder(bytes.NewReader(stripped))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("line %d: %v", bytes.Count(stripped[:min(int(se.Offset), len(stripped))], []byte("\n"))+1, err)
		}
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return jsoncValue(v), nil
}

func jsoncValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = jsoncValue(v[i])
		}
		return v
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = jsoncValue(e)
		}
		return v
	}
	return v
}

// StripJSONC turns JSON with comments (// to the end of the line, /* … */) and trailing commas
// (before ] or }), as wrangler.jsonc allows, into JSON. Comments and the commas become spaces,
// so lines and columns stay where they were; strings are left untouched. An unterminated
// comment is an error; anything else that is not JSON is left for the JSON decoder to report.
func StripJSONC(text []byte) ([]byte, error) {
	out := bytes.Clone(text)
	inString := false
	lastComma := -1 // a comma that a ] or } may make trailing
	for i := 0; i < len(out); i++ {
		ch := out[i]
		if inString {
			switch ch {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case ch == '"':
			inString, lastComma = true, -1
		case ch == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case ch == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			if end < 0 {
				return nil, fmt.Errorf("line %d: a /* comment is never closed", bytes.Count(out[:i], []byte("\n"))+1)
			}
			for j := i; j < i+2+end+2; j++ {
				if out[j] != '\n' {
					out[j] = ' '
				}
			}
			i += 2 + end + 1
		case ch == ',':
			lastComma = i
		case ch == ']' || ch == '}':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
		default:
			lastComma = -1
		}
	}
	return out, nil
}
