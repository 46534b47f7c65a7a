// Package workerbuild makes a Cloudflare Worker of a Go program written against duilie: the
// program compiled for js/wasm, the entry that hands it the Worker's events, the Go
// distribution's wasm_exec.js, and a wrangler.jsonc declaring the queue producers and consumers
// of the program's duilie.toml. duilie worker build is this package with flags.
package workerbuild

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/duilie/duilie/server"
	"github.com/duilie/duilie/workers"
)

// CompatibilityDate is the Workers runtime's compatibility date the Worker is built for: the
// behaviour it was tested with in workerd.
const CompatibilityDate = "2026-04-01"

// Cloudflare's limits on a Worker's size after compression (gzip), by plan.
const (
	FreeLimit = 3 << 20  // 3 MB
	PaidLimit = 10 << 20 // 10 MB
)

// The files of a built Worker.
const (
	WasmFile     = "app.wasm"
	WasmExecFile = "wasm_exec.js"
	EntryFile    = "worker.mjs"
	WranglerFile = "wrangler.jsonc"
)

//go:embed entry.mjs
var entryTemplate string

// Options says what to build.
type Options struct {
	// Program is the program's main package, as go build names it: "./examples/page-go".
	Program string
	// Config is the program's duilie.toml; "" means duilie.toml in the program's directory.
	Config string
	// Out is the directory to write the Worker to; "" means "worker" in the program's
	// directory.
	Out string
	// Name is the Worker's name in wrangler.jsonc; "" means the program directory's name.
	Name string
	// Go is the go command; "" means "go" from PATH.
	Go string
	// Stderr receives go build's own output; nil means os.Stderr.
	Stderr io.Writer
}

// Result is a built Worker.
type Result struct {
	Dir      string   // the output directory
	Files    []string // the files written, in Dir
	WasmSize int64    // app.wasm's bytes
	GzipSize int64    // app.wasm's bytes after gzip -9, what Cloudflare's size limit counts
}

// Error is a failed build step; Step says which ("go", "config", "write"), for exit statuses.
type Error struct {
	Step string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Build builds the Worker. A configuration mistake is a *server.ConfigError; other failures
// are an *Error.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	dir, err := programDir(ctx, opts)
	if err != nil {
		return nil, err
	}
	from := opts.Config // for wrangler.jsonc's heading: as given, never a machine's own path
	if opts.Config == "" {
		opts.Config = filepath.Join(dir, server.DefaultConfigFile)
		from = strings.TrimSuffix(opts.Program, "/") + "/" + server.DefaultConfigFile
	}
	cfg, err := server.LoadConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	if opts.Out == "" {
		opts.Out = filepath.Join(dir, "worker")
	}
	if opts.Name == "" {
		opts.Name = WorkerName(filepath.Base(dir))
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, &Error{"write", err}
	}
	res := &Result{Dir: opts.Out}

	wasm := filepath.Join(opts.Out, WasmFile)
	build := goCommand(ctx, opts, "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, opts.Program)
	build.Stdout, build.Stderr = opts.Stderr, opts.Stderr
	if err := build.Run(); err != nil {
		return nil, &Error{"go", fmt.Errorf("go build %s for js/wasm: %w", opts.Program, err)}
	}
	res.Files = append(res.Files, WasmFile)
	if res.WasmSize, res.GzipSize, err = sizes(wasm); err != nil {
		return nil, &Error{"write", err}
	}

	wasmExec, err := wasmExecJS(ctx, opts)
	if err != nil {
		return nil, err
	}
	entry, err := Entry(cfg)
	if err != nil {
		return nil, &Error{"write", err}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{WasmExecFile, wasmExec},
		{EntryFile, entry},
		{WranglerFile, Wrangler(cfg, opts.Name, filepath.ToSlash(from))},
	} {
		if err := os.WriteFile(filepath.Join(opts.Out, f.name), f.data, 0o644); err != nil {
			return nil, &Error{"write", err}
		}
		res.Files = append(res.Files, f.name)
	}
	return res, nil
}

func goCommand(ctx context.Context, opts Options, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, opts.Go, args...)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	return cmd
}

// programDir finds the program's directory and checks that it is a main package that builds
// for js/wasm.
func programDir(ctx context.Context, opts Options) (string, error) {
	cmd := goCommand(ctx, opts, "list", "-f", "{{.Name}} {{.Dir}}", opts.Program)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return "", &Error{"go", fmt.Errorf("the go command is needed to build a Worker: %w", err)}
		}
		return "", &Error{"go", fmt.Errorf("go list %s: %s", opts.Program, strings.TrimSpace(stderr.String()))}
	}
	name, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || strings.Contains(dir, "\n") {
		return "", &Error{"go", fmt.Errorf("%s names more than one package: a Worker is one program", opts.Program)}
	}
	if name != "main" {
		return "", &Error{"go", fmt.Errorf("%s is package %s, not a program (package main calling app.Main)", opts.Program, name)}
	}
	return dir, nil
}

// wasmExecJS is the go command's own wasm_exec.js: lib/wasm since Go 1.24, misc/wasm before.
func wasmExecJS(ctx context.Context, opts Options) ([]byte, error) {
	out, err := goCommand(ctx, opts, "env", "GOROOT").Output()
	if err != nil {
		return nil, &Error{"go", fmt.Errorf("go env GOROOT: %w", err)}
	}
	root := strings.TrimSpace(string(out))
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
			return b, nil
		}
	}
	return nil, &Error{"go", fmt.Errorf("no wasm_exec.js in %s/lib/wasm or %s/misc/wasm", root, root)}
}

func sizes(path string) (raw, gz int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(b)
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	return int64(len(b)), int64(buf.Len()), nil
}

// WorkerConfig is the configuration the Worker's program gets from cfg.
func WorkerConfig(cfg *server.Config) workers.Config {
	return workers.Config{Permissions: cfg.Permissions, Bindings: cfg.Bindings, TimeLimitMS: cfg.TimeLimit.Milliseconds(),
		Settings: cfg.Worker}
}

// Entry is the Worker's entry module for cfg.
func Entry(cfg *server.Config) ([]byte, error) {
	c, err := json.Marshal(WorkerConfig(cfg)) // HTML-escaped, and U+2028/U+2029 escaped: valid JavaScript
	if err != nil {
		return nil, err
	}
	if !strings.Contains(entryTemplate, "/*CONFIG*/{}") {
		return nil, errors.New("the entry template has lost its configuration placeholder")
	}
	return []byte(strings.Replace(entryTemplate, "/*CONFIG*/{}", string(c), 1)), nil
}

// wrangler.jsonc, in the key order wrangler's documentation uses.
type wrangler struct {
	Name              string `json:"name"`
	Main              string `json:"main"`
	CompatibilityDate string `json:"compatibility_date"`
	Queues            struct {
		Producers []producer `json:"producers"`
		Consumers []consumer `json:"consumers"`
	} `json:"queues"`
}

type producer struct {
	Binding string `json:"binding"`
	Queue   string `json:"queue"`
}

type consumer struct {
	Queue           string `json:"queue"`
	MaxBatchSize    int    `json:"max_batch_size"`
	MaxBatchTimeout int64  `json:"max_batch_timeout"`
	MaxRetries      int    `json:"max_retries"`
	RetryDelay      int64  `json:"retry_delay"`
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
	MaxConcurrency  int    `json:"max_concurrency"`
}

// Wrangler is the Worker's wrangler.jsonc for cfg: the Worker's name, its entry, and a queue
// producer per binding and a consumer per [[queues.consumers]], with every setting as duilie.toml
// has it (defaults included). from names the configuration in the file's heading comment.
func Wrangler(cfg *server.Config, name, from string) []byte {
	var w wrangler
	w.Name, w.Main, w.CompatibilityDate = name, EntryFile, CompatibilityDate
	w.Queues.Producers = []producer{}
	for _, b := range slices.Sorted(maps.Keys(cfg.Bindings)) {
		w.Queues.Producers = append(w.Queues.Producers, producer{Binding: b, Queue: cfg.Bindings[b]})
	}
	w.Queues.Consumers = []consumer{}
	for _, cc := range cfg.Consumers {
		cc = cc.WithDefaults()
		w.Queues.Consumers = append(w.Queues.Consumers, consumer{
			Queue: cc.Queue, MaxBatchSize: cc.MaxBatchSize, MaxBatchTimeout: seconds(cc.MaxBatchTimeout),
			MaxRetries: cc.MaxRetries, RetryDelay: seconds(cc.RetryDelay), DeadLetterQueue: cc.DeadLetterQueue,
			MaxConcurrency: cc.MaxConcurrency,
		})
	}
	body, _ := json.MarshalIndent(w, "", "  ") // plain strings and numbers: cannot fail
	var out bytes.Buffer
	fmt.Fprintf(&out, "// The Worker of %s, made by duilie worker build. Build it again rather than edit it:\n", name)
	fmt.Fprintf(&out, "// the queues and their consumer settings come from %s.\n", from)
	out.Write(body)
	out.WriteByte('\n')
	return out.Bytes()
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// WorkerName makes a Worker name of s: lowercase letters, digits and '-', at most 63
// characters, as Cloudflare requires.
func WorkerName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	if name == "" {
		return "duilie-worker"
	}
	return name
}
