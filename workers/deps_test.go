package workers_test

import (
	"os/exec"
	"strings"
	"testing"
)

// What a Go program compiles against for a Worker.
var workerPackages = []string{
	"github.com/duilie/duilie",
	"github.com/duilie/duilie/internal/host",
	"github.com/duilie/duilie/internal/event",
	"github.com/duilie/duilie/workers",
	"github.com/duilie/duilie/app",
	"github.com/duilie/duilie/examples/page-go",
}

// Packages that must never reach a Worker: the engine, the running host with its bridge and
// command line, and processes.
var forbidden = []string{
	"github.com/duilie/duilie/platform/jetstream",
	"github.com/duilie/duilie/server",
	"github.com/duilie/duilie/internal/bridge",
	"github.com/duilie/duilie/internal/cli",
	"github.com/nats-io/",
	"os/exec",
}

func goTool(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not in PATH")
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(cmd.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GOOS=js GOARCH=wasm go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestWorkerImportsNoEngine fails if anything a Worker compiles against starts to import the
// NATS engine, the server or os/exec.
func TestWorkerImportsNoEngine(t *testing.T) {
	deps := goTool(t, append([]string{"list", "-deps"}, workerPackages...)...)
	seen := map[string]bool{}
	for _, p := range strings.Fields(deps) {
		seen[p] = true
		for _, f := range forbidden {
			if p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f) {
				t.Errorf("a Worker imports %s", p)
			}
		}
	}
	if !seen["syscall/js"] || !seen["github.com/duilie/duilie/workers"] {
		t.Fatalf("go list -deps did not list the js/wasm build (no syscall/js or workers):\n%s", deps)
	}
}

// TestWorkerPackagesVet compiles and vets the js/wasm files, which a native go vet never sees.
func TestWorkerPackagesVet(t *testing.T) {
	goTool(t, "vet", "github.com/duilie/duilie/workers", "github.com/duilie/duilie/app")
}
