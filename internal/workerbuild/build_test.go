package workerbuild

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/duilie/duilie/server"
	"github.com/duilie/duilie/workers"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func loadConfig(t *testing.T) *server.Config {
	t.Helper()
	cfg, err := server.LoadConfig("testdata/duilie.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The wrangler.jsonc of a configuration: a producer per binding, sorted, and a consumer per
// [[queues.consumers]] with every setting, defaults included.
func TestWranglerGolden(t *testing.T) {
	got := Wrangler(loadConfig(t), "pages", "./cmd/pages/duilie.toml")
	path := "testdata/wrangler.jsonc.golden"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("wrangler.jsonc differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}
	// Past its comment lines it is JSON, as the Miniflare harness reads it.
	var w wrangler
	body := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAll(got, nil)
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("not JSON after its comments: %v", err)
	}
	if len(w.Queues.Producers) != 2 || w.Queues.Consumers[1].MaxBatchSize != 10 || w.Queues.Consumers[1].MaxBatchTimeout != 5 {
		t.Fatalf("decoded %+v", w)
	}
}

// The entry carries the host's settings, as the program reads them, and stays valid
// JavaScript whatever a binding is called.
func TestEntryConfig(t *testing.T) {
	cfg := loadConfig(t)
	cfg.Permissions.Queue = append(cfg.Permissions.Queue, "ODD\u2028</script>")
	entry, err := Entry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^const config = (.*);$`).FindSubmatch(entry)
	if line == nil {
		t.Fatalf("no config line in:\n%s", entry)
	}
	if strings.ContainsAny(string(line[1]), "\u2028<>") {
		t.Fatalf("config not escaped for JavaScript: %s", line[1])
	}
	var c workers.Config
	if err := json.Unmarshal(line[1], &c); err != nil {
		t.Fatal(err)
	}
	if c.TimeLimitMS != 12000 || !c.LogEvents || c.Bindings["AUDIT"] != "audit" || len(c.Permissions.Queue) != 3 || c.Permissions.Queue[2] != "ODD\u2028</script>" {
		t.Fatalf("config = %+v", c)
	}
	if strings.Count(string(entry), "/*CONFIG*/") != 0 {
		t.Fatal("placeholder left in the entry")
	}
}

func TestWorkerName(t *testing.T) {
	for in, want := range map[string]string{
		"page-go":                      "page-go",
		"Page_Go":                      "page-go",
		"--x--":                        "x",
		"队列":                           "duilie-worker",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "_b": strings.Repeat("a", 62),
	} {
		if got := WorkerName(in); got != want {
			t.Errorf("WorkerName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A package that is not a program, or a program without its configuration, builds nothing.
func TestBuildRefuses(t *testing.T) {
	out := t.TempDir()
	_, err := Build(context.Background(), Options{Program: "github.com/duilie/duilie/internal/host", Out: out})
	var be *Error
	if !errors.As(err, &be) || be.Step != "go" || !strings.Contains(err.Error(), "is package host, not a program") {
		t.Fatalf("Build(host) = %v", err)
	}
	_, err = Build(context.Background(), Options{Program: "github.com/duilie/duilie/examples/page-go", Out: out,
		Config: filepath.Join(t.TempDir(), "duilie.toml")})
	var ce *server.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Build without config = %v", err)
	}
	_, err = Build(context.Background(), Options{Program: "./no/such/program", Out: out})
	if !errors.As(err, &be) || be.Step != "go" {
		t.Fatalf("Build(./no/such/program) = %v", err)
	}
	if files, _ := os.ReadDir(out); len(files) != 0 {
		t.Fatalf("wrote %v", files)
	}
}

// Whatever a directory is called, the Worker's name follows Cloudflare's rule.
func FuzzWorkerName(f *testing.F) {
	for _, s := range []string{"page-go", "Page_Go", "--x--", "队列", strings.Repeat("a-", 40), ""} {
		f.Add(s)
	}
	valid := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	f.Fuzz(func(t *testing.T, s string) {
		if name := WorkerName(s); !valid.MatchString(name) {
			t.Fatalf("WorkerName(%q) = %q", s, name)
		}
	})
}
