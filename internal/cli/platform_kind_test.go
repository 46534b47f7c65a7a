package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// refusingKind is a platform kind the command line does not know: registered here as a driver
// registers itself (the Cloudflare platform will be one more), with a key of its own. Its
// queues take sends, but it refuses every consumer with a permanent error carrying Code.
const refusingKind = "refusing"

type refusingConfig struct {
	Code int `toml:"code" rule:"must be 10000–99999 (the error code its consumers fail with)"`
}

func (c *refusingConfig) Kind() string { return refusingKind }

func (c *refusingConfig) Validate() error {
	if c.Code < 10000 || c.Code > 99999 {
		return platform.Invalid(c, "Code")
	}
	return nil
}

func (c *refusingConfig) Open(ctx context.Context, o platform.OpenOptions) (platform.Platform, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return refusingPlatform{memory.New(memory.Options{}), c.Code}, nil
}

type refusingPlatform struct {
	*memory.Platform
	code int
}

func (p refusingPlatform) Consume(context.Context, string, platform.ConsumerOptions) (platform.Consumer, error) {
	return nil, platform.Permanent(fmt.Errorf("credentials refused (%d)", p.code))
}

func init() {
	platform.Register(refusingKind, func() platform.Opener { return &refusingConfig{Code: 10000} })
}

// A platform kind is chosen through the registry alone: the command line maps its key, quotes
// its rule for a mistake (exit 78), and runs it. When every consumer stops on a permanent
// platform error, serve logs one line per queue and exits 69 (SPEC §13).
func TestServeRegisteredKind(t *testing.T) {
	dir := t.TempDir()
	write := func(name, platformTable string) string {
		path := filepath.Join(dir, name)
		text := "[[queues.consumers]]\nqueue = \"qa\"\n[[queues.consumers]]\nqueue = \"qb\"\n[platform]\nkind = \"refusing\"\n" + platformTable
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	opts := Options{Program: &duilie.Program{Queue: func(*duilie.Event) error { return nil }}}

	bad := write("bad.toml", "code = 7\n")
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), opts, []string{"serve", "--config", bad}, nil, &stdout, &stderr)
	if want := bad + ": platform.code = 7: must be 10000–99999 (the error code its consumers fail with)\n"; code != exitConfig || stderr.String() != want {
		t.Errorf("a mistake in the driver's key: exit %d, stderr %q, want 78 and %q", code, stderr.String(), want)
	}

	good := write("good.toml", "code = 10106\n")
	stdout.Reset()
	stderr.Reset()
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), opts, []string{"serve", "--config", good}, nil, &stdout, &stderr)
	}()
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve went on with no consumer left")
	}
	text := stderr.String()
	if code != exitUnavailable || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, want 69 and nothing", code, stdout.String())
	}
	for _, want := range []string{
		`level=ERROR msg="consumer stopped" queue=qa err="credentials refused (10106)"`,
		`level=ERROR msg="consumer stopped" queue=qb err="credentials refused (10106)"`,
		`level=ERROR msg="every consumer has stopped; shutting down"`,
		"duilie: no consumer is left: consume q", // qa and qb, in the order they stopped
		"consume qa: credentials refused (10106)",
		"consume qb: credentials refused (10106)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in stderr:\n%s", want, text)
		}
	}
}

// The command line knows no platform by its package: it chooses one through the registry
// (server.LoadConfig and platform.NewConfig), so a new driver needs no change here. (duilie
// bench's raw nats.go baseline lives in internal/bench, which knows the engine on purpose.)
func TestNoEngineImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/duilie/duilie/internal/cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if !slices.Contains(imports, "github.com/duilie/duilie/server") {
		t.Fatalf("go list listed no imports of the command line: %q", imports)
	}
	for _, p := range imports {
		if strings.HasPrefix(p, "github.com/duilie/duilie/platform/") || strings.HasPrefix(p, "github.com/nats-io/") {
			t.Errorf("internal/cli imports %s: choose platforms through the registry", p)
		}
	}
}
