package miniflare_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/workerbuild"
	"github.com/duilie/duilie/server"
)

// TestWorkerUnit runs unit.mjs, the Worker's unit tests in node: the conformance program's
// build, the one TestConformance runs, driven through its entry's handlers with mock Queue
// bindings and MessageBatches. It adds unit-entry.mjs to the build: the entry duilie worker
// build writes for the same duilie.toml with [worker] log_events off and a 300 ms time limit.
// Each of node's tests is a subtest here.
func TestWorkerUnit(t *testing.T) {
	needNode(t)
	dir := worker(t, "./testdata/conformance")
	cfg, err := server.LoadConfig("testdata/conformance/duilie.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Worker.LogEvents = false
	cfg.TimeLimit = 300 * time.Millisecond
	entry, err := workerbuild.Entry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unit-entry.mjs"), entry, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test-reporter=tap", "unit.mjs", dir)
	out, err := cmd.CombinedOutput()
	results := tapResults(out)
	for _, r := range results {
		t.Run(r.name, func(t *testing.T) {
			if !r.ok {
				t.Errorf("%s", r.detail)
			}
		})
	}
	if err != nil || len(results) == 0 {
		t.Fatalf("node unit.mjs: %v\n%s", err, out)
	}
}

// tapResult is one top-level test of node's TAP report.
type tapResult struct {
	name   string
	ok     bool
	detail string // the YAML block after a failure
}

var tapLine = regexp.MustCompile(`^(not )?ok \d+ - (.*)$`)

func tapResults(out []byte) []tapResult {
	var results []tapResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var detail *strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if m := tapLine.FindStringSubmatch(line); m != nil {
			results = append(results, tapResult{name: m[2], ok: m[1] == ""})
			detail = &strings.Builder{}
			continue
		}
		if detail != nil && strings.HasPrefix(line, "  ") {
			detail.WriteString(line[2:] + "\n")
			results[len(results)-1].detail = detail.String()
		} else {
			detail = nil
		}
	}
	return results
}
