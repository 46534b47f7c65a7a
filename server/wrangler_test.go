package server

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWranglerGolden: the example Worker project's wrangler.toml and wrangler.jsonc, and the
// files of testdata/wrangler, each read as duilie reads it: the mapping of a valid file, the
// exact mistakes of another.
func TestWranglerGolden(t *testing.T) {
	examples, _ := filepath.Glob("../examples/wrangler/wrangler.*")
	tests, _ := filepath.Glob("testdata/wrangler/wrangler.*")
	files := append(examples, tests...)
	if len(examples) != 2 || len(tests) == 0 {
		t.Fatalf("files %v", files)
	}
	dumps := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, ".golden") {
			continue
		}
		name := strings.TrimPrefix(filepath.Base(f), "wrangler.")
		if strings.HasPrefix(f, "../") {
			name = "example." + name
		}
		t.Run(name, func(t *testing.T) {
			if !IsWranglerFile(f) {
				t.Fatalf("%s is not taken for a wrangler file", f)
			}
			got := loaded(t, f, func(t *testing.T, cfg *Config) string {
				example, _ := filepath.Abs("../examples/wrangler")
				testdata, _ := filepath.Abs("testdata/wrangler")
				dump := dumpConfig(t, cfg) + "ignored: " + strings.Join(cfg.ignored, ", ") + "\n"
				return strings.NewReplacer(example, "$EXAMPLE", testdata, "$TESTDATA").Replace(dump)
			})
			dumps[name] = got
			golden(t, "wrangler/"+name+".golden", got)
		})
	}
	// The two spellings of the example are one configuration (the JSON one has a $schema key
	// and the TOML one workers_dev, both ignored).
	mapping := func(dump string) string {
		lines := strings.Split(dump, "\n")
		return strings.Join(lines[1:len(lines)-2], "\n")
	}
	if toml, jsonc := mapping(dumps["example.toml"]), mapping(dumps["example.jsonc"]); toml == "" || toml != jsonc {
		t.Errorf("wrangler.toml and wrangler.jsonc differ:\n%s\n%s", dumps["example.toml"], dumps["example.jsonc"])
	}
}

func TestIsWranglerFile(t *testing.T) {
	for f, want := range map[string]bool{
		"wrangler.toml": true, "dir/Wrangler.staging.toml": true, "wrangler.json": true, "x.jsonc": true,
		"duilie.toml": false, "wrangler": false, "config.toml": false,
	} {
		if IsWranglerFile(f) != want {
			t.Errorf("IsWranglerFile(%q) = %v", f, !want)
		}
	}
}
