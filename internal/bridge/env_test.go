package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// testdata is the absolute path of the test programs.
var testdata = func() string {
	d, err := filepath.Abs("testdata")
	if err != nil {
		panic(err)
	}
	return d
}()

// Bindings of every test host: Q is permitted and configured (queue "out"), FULL is permitted
// and its queue rejects sends, NOCONF is permitted but not configured, anything else is not
// permitted.
var testPermissions = host.Permissions{Queue: []string{"Q", "FULL", "NOCONF"}}
var testBindings = map[string]string{"Q": "out", "FULL": "full"}

// env is one test's world: an in-memory platform, a host on it, a bridge whose replies are
// recorded, and a log that is kept.
type env struct {
	t      testing.TB
	plat   *memory.Platform
	host   *host.Host
	bridge *Server
	rec    *recorder
	logs   *logBuffer
	log    *slog.Logger
	cc     host.ConsumerConfig
	cons   platform.Consumer
	python string

	mu      sync.Mutex
	reports []*host.EventReport // fetch events, as the host reported them
}

// fetchEvents are the fetch events the host reported, each as the fields of its log line.
func (e *env) fetchEvents() []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, r := range e.reports {
		m := map[string]any{"event": r.ID, "method": r.Method, "path": r.Path, "status": float64(r.Status), "outcome": string(r.Outcome)}
		if r.Err != nil {
			m["err"] = r.Err.Error()
		}
		out = append(out, m)
	}
	return out
}

var pythonPath struct {
	once sync.Once
	path string
}

// python returns the path of the Python 3 interpreter itself: python3 may be a wrapper script
// (pyenv's shims) that takes longer to start than the interpreter.
func python(t testing.TB) string {
	pythonPath.once.Do(func() {
		if out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output(); err == nil {
			pythonPath.path = strings.TrimSpace(string(out))
		}
	})
	if pythonPath.path == "" {
		t.Skip("python3 is needed for the bridge tests' programs")
	}
	return pythonPath.path
}

func newEnv(t testing.TB, timeLimit time.Duration) *env {
	t.Helper()
	py := python(t)
	e := &env{t: t, python: py, plat: memory.New(memory.Options{Record: true}), rec: &recorder{}, logs: &logBuffer{}}
	e.log = slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.plat.RejectSends("full", "Queue is full")
	h, err := host.New(host.Config{Platform: e.plat, Permissions: testPermissions, Bindings: testBindings,
		TimeLimit: timeLimit, Logger: e.log, Observer: func(r host.Report) {
			if er, ok := r.(*host.EventReport); ok && er.Kind == host.FetchEvent {
				e.mu.Lock()
				e.reports = append(e.reports, er)
				e.mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	e.bridge, err = listen("127.0.0.1:0", e.log, e.rec.wrap)
	if err != nil {
		t.Fatal(err)
	}
	e.cc = host.DefaultConsumerConfig("in")
	e.cc.MaxBatchSize, e.cc.MaxBatchTimeout = 100, host.NoBatchTimeout
	e.cons, err = e.plat.Consume(context.Background(), "in", platform.ConsumerOptions{MaxBatchSize: 100, MaxConcurrency: 1, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.bridge.Close()
		_ = e.plat.Close()
		if t.Failed() {
			t.Logf("log:\n%s", e.logs.short())
		}
	})
	return e
}

// program is a Python program: bridgeprog's functions imported, then code. It runs in
// testdata with $OUT, where it records what it saw; out reads that back.
func (e *env) program(code string) (*Runner, *outFile) {
	e.t.Helper()
	out := &outFile{t: e.t, path: filepath.Join(e.t.TempDir(), "out.jsonl")}
	return &Runner{
		Command: []string{e.python, "-c", "from bridgeprog import *\n" + dedent(code)},
		Dir:     testdata,
		Env:     []string{"PYTHONPATH=" + testdata, "PYTHONDONTWRITEBYTECODE=1", "OUT=" + out.path},
		Bridge:  e.bridge,
		Logger:  e.log,
	}, out
}

// put enqueues messages on queue "in" exactly as given.
func (e *env) put(msgs ...platform.Message) {
	e.plat.Put("in", msgs...)
}

// putBodies enqueues JSON bodies on "in", with ids m0, m1, … and timestamp 1700000000000+i.
func (e *env) putBodies(bodies ...string) {
	for i, b := range bodies {
		e.put(platform.Message{ID: "m" + string(rune('0'+i)), Timestamp: 1700000000000 + int64(i), Attempts: 1,
			Body: []byte(b), ContentType: platform.JSON})
	}
}

// receive takes the n messages ready on "in" as one batch.
func (e *env) receive(n int) []platform.Delivery {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ds []platform.Delivery
	for len(ds) < n {
		more, err := e.cons.Receive(ctx, n-len(ds))
		if err != nil {
			e.t.Fatalf("receive: got %d of %d messages: %v", len(ds), n, err)
		}
		ds = append(ds, more...)
	}
	return ds
}

// runQueue runs handler as the queue event of the n messages ready on "in" and settles it.
// It returns the event's failure.
func (e *env) runQueue(n int, handler duilie.Handler) error {
	s, failure := e.host.RunBatch(context.Background(), e.cc, e.receive(n), handler)
	if err := e.cons.Settle(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
	return failure
}

// settle ends deliveries with an event that succeeds, so the queue is empty again.
func (e *env) settle(ds []platform.Delivery) {
	e.t.Helper()
	s, err := e.host.RunBatch(context.Background(), e.cc, ds, func(*duilie.Event) error { return nil })
	if err == nil {
		err = e.cons.Settle(context.Background(), s)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// lastSettlement is the last settled batch.
func (e *env) lastSettlement() platform.Settlement {
	e.t.Helper()
	s := e.plat.Settlements()
	if len(s) == 0 {
		e.t.Fatal("no batch was settled")
	}
	return s[len(s)-1]
}

// calls renders the platform's recorded calls.
func (e *env) calls() []string {
	var out []string
	for _, c := range e.plat.Calls() {
		out = append(out, c.Queue+": "+c.String())
	}
	return out
}

// exchange is one bridge reply, as the program recorded it or the server wrote it.
type exchange struct {
	Status int     `json:"status"`
	Body   string  `json:"body"`
	Type   string  `json:"type,omitempty"`
	Allow  *string `json:"allow,omitempty"`
	Note   any     `json:"note,omitempty"`
}

// outFile is what a test program recorded.
type outFile struct {
	t    testing.TB
	path string
}

// lines returns every recorded line.
func (o *outFile) lines() []exchange {
	o.t.Helper()
	b, err := os.ReadFile(o.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		o.t.Fatal(err)
	}
	var out []exchange
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r exchange
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			o.t.Fatalf("%s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// replies returns the recorded bridge replies.
func (o *outFile) replies() []exchange {
	return slices.DeleteFunc(o.lines(), func(r exchange) bool { return r.Note != nil })
}

// notes returns the recorded notes.
func (o *outFile) notes() []any {
	var out []any
	for _, r := range o.lines() {
		if r.Note != nil {
			out = append(out, r.Note)
		}
	}
	return out
}

// recorder keeps every reply the bridge wrote, as written: it has the replies of a program
// that was killed right after, too.
type recorder struct {
	mu      sync.Mutex
	replies []exchange
}

func (rec *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&teeWriter{ResponseWriter: w, rec: rec}, r)
	})
}

func (rec *recorder) all() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.replies)
}

// teeWriter records a reply when it is written: the bridge writes each reply whole, with one
// Write, before it calls onAbort.
type teeWriter struct {
	http.ResponseWriter
	rec    *recorder
	status int
}

func (tw *teeWriter) WriteHeader(status int) {
	tw.status = status
	tw.ResponseWriter.WriteHeader(status)
}

func (tw *teeWriter) Write(b []byte) (int, error) {
	tw.rec.mu.Lock()
	tw.rec.replies = append(tw.rec.replies, exchange{Status: tw.status, Body: string(b), Type: tw.Header().Get("Content-Type")})
	tw.rec.mu.Unlock()
	return tw.ResponseWriter.Write(b)
}

func (tw *teeWriter) Flush() {
	if f, ok := tw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logBuffer is a log sink that is safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// short is the log with long lines cut.
func (l *logBuffer) short() string {
	lines := strings.Split(l.String(), "\n")
	for i, line := range lines {
		if len(line) > 400 {
			lines[i] = line[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// records returns the log records whose message is msg.
func (l *logBuffer) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// dedent removes the indentation common to code's non-blank lines.
func dedent(code string) string {
	lines := strings.Split(code, "\n")
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first || !strings.HasPrefix(ind, prefix) {
			if first {
				prefix = ind
			} else {
				for !strings.HasPrefix(ind, prefix) {
					prefix = prefix[:len(prefix)-1]
				}
			}
			first = false
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}
