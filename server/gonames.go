package server

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// A configuration made in Go is checked as a file is, and its mistakes name its Go fields
// (Consumers[0].MaxBatchSize = 0: must be 1–100) where a file's name its keys
// (queues.consumers[0].max_batch_size = 0: …). goName maps a key to its field.

// goTables are the tables of duilie.toml and the Config fields that hold them, longest first.
func goTables(cfg *Config) []struct {
	key, field string
	settings   any
} {
	return []struct {
		key, field string
		settings   any
	}{
		{"cloudflare_api.pull_consumers", "CloudflareAPI.PullConsumers", PullConsumer{}},
		{"queues.consumers", "Consumers", ConsumerConfig{}},
		{"queues.producers", "Bindings", nil},
		{"cloudflare_api", "CloudflareAPI", CloudflareAPI{}},
		{"permissions", "Permissions", Permissions{}},
		{"dashboard", "Dashboard", DashboardConfig{}},
		{"platform", "Platform", cfg.Platform},
		{"app", "", Config{}},
	}
}

// goName is the Go name of a duilie.toml key of cfg: queues.consumers[1].queue is
// Consumers[1].Queue, app.listen is Listen, platform.replicas Platform.Replicas.
func goName(cfg *Config, key string) string {
	key = strings.TrimPrefix(key, "duilie.")
	for _, t := range goTables(cfg) {
		rest, ok := strings.CutPrefix(key, t.key)
		if !ok || rest != "" && rest[0] != '.' && rest[0] != '[' {
			continue
		}
		index := ""
		if strings.HasPrefix(rest, "[") {
			if i := strings.IndexByte(rest, ']'); i > 0 {
				index, rest = rest[:i+1], rest[i+1:]
			}
		}
		name := t.field + index
		if k := strings.TrimPrefix(rest, "."); k != "" {
			field := k
			if k == "QUEUE" {
				field = "Queue"
			} else if t.settings != nil {
				for _, f := range fieldsOf(reflect.TypeOf(t.settings)) {
					if f.key == k {
						field = f.name
					}
				}
			}
			if name == "" {
				return field
			}
			name += "." + field
		}
		return name
	}
	return key
}

// goValue prints a Go setting's value as Go would write it.
func goValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case time.Duration:
		return v.String()
	}
	return fmt.Sprint(v)
}
