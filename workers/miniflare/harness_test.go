// Package miniflare_test runs Go programs built by duilie worker build in workerd, through
// Miniflare, on real local Queue bindings. It needs node and the npm packages that install.sh
// puts in a cache directory; without them the tests are skipped with the reason, unless
// DUILIE_WORKERS_TESTS=required (as .ci/run sets), when they fail.
package miniflare_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// packagesDir is where install.sh puts Miniflare.
func packagesDir() string {
	if d := os.Getenv("DUILIE_MINIFLARE_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "duilie", "miniflare")
}

// needMiniflare skips the test, or fails it when the tests are required, unless node and this
// lock's packages are installed.
func needMiniflare(t *testing.T) {
	t.Helper()
	needNode(t)
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	stamp, err := os.ReadFile(filepath.Join(packagesDir(), "lock.sha256"))
	if err != nil || strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]) {
		missing(t, "Miniflare is not installed for this package-lock.json in "+packagesDir()+": run workers/miniflare/install.sh")
	}
}

// needNode skips the test, or fails it when the tests are required, unless node is in PATH.
func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not in PATH: the Workers tests run Workers in node and in workerd through Miniflare")
	}
}

func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("DUILIE_WORKERS_TESTS") == "required" {
		t.Fatal(why)
	}
	t.Skip(why)
}

var (
	duilieOnce sync.Once
	duilieDir  string // the duilie binary and the Workers built with it
	duilieBin  string
	duilieErr  error
	built      = map[string]string{} // program → its Worker's directory
)

// worker builds program as a Worker with the duilie binary, a real process, as a user would,
// once per test run: the tests that run the same program share its build, and may add files
// to it but not change those it has.
func worker(t *testing.T, program string) string {
	t.Helper()
	duilieOnce.Do(func() {
		duilieDir, duilieErr = os.MkdirTemp("", "duilie-workers-")
		if duilieErr != nil {
			return
		}
		duilieBin = filepath.Join(duilieDir, "duilie")
		if out, err := exec.Command("go", "build", "-o", duilieBin, "github.com/duilie/duilie/cmd/duilie").CombinedOutput(); err != nil {
			duilieErr = fmt.Errorf("go build cmd/duilie: %v\n%s", err, out)
		}
	})
	if duilieErr != nil {
		t.Fatal(duilieErr)
	}
	if out, ok := built[program]; ok {
		return out
	}
	out := filepath.Join(duilieDir, fmt.Sprintf("worker%d", len(built)))
	cmd := exec.Command(duilieBin, "worker", "build", "--out", out, program)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("duilie worker build %s: %v\n%s", program, err, b)
	} else if len(b) != 0 {
		t.Fatalf("duilie worker build printed on success:\n%s", b)
	}
	built[program] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if duilieDir != "" {
		os.RemoveAll(duilieDir)
	}
	os.Exit(code)
}

// spec is the harness's spec (harness.mjs).
type spec struct {
	Workers []workerSpec `json:"workers"`
}

type workerSpec struct {
	Name    string            `json:"name"`
	Dir     string            `json:"dir"`
	Consume bool              `json:"consume"`
	Record  string            `json:"record,omitempty"`
	Drop    []string          `json:"drop,omitempty"`
	Vars    map[string]string `json:"vars,omitempty"`
}

// harness is a running harness.mjs.
type harness struct {
	t   *testing.T
	url string
}

// startHarness runs harness.mjs on s until the test ends.
func startHarness(t *testing.T, s spec) *harness {
	t.Helper()
	specFile := filepath.Join(t.TempDir(), "spec.json")
	b, _ := json.Marshal(s)
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "harness.mjs", "--spec", specFile)
	cmd.Env = append(os.Environ(), "DUILIE_MINIFLARE_DIR="+packagesDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close() // the harness disposes of Miniflare and exits
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		var r struct{ URL string }
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.URL == "" {
			t.Fatalf("harness did not start: %q\n%s", line, stderr.String())
		}
		return &harness{t: t, url: r.URL}
	case <-time.After(90 * time.Second):
		t.Fatalf("harness not ready after 90 s\n%s", stderr.String())
	}
	return nil
}

// with is h for test t: its failures fail t.
func (h *harness) with(t *testing.T) *harness { return &harness{t: t, url: h.url} }

// reply is a response: a Worker's, through the harness, or the harness's own.
type reply struct {
	status int
	body   string
	header http.Header
}

func (h *harness) do(method, path, body string, header ...string) reply {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return reply{resp.StatusCode, string(b), resp.Header}
}

// fetch sends a request to a Worker's fetch handler, with header's name and value pairs.
func (h *harness) fetch(worker, method, path, body string, header ...string) reply {
	h.t.Helper()
	return h.do(method, "/fetch/"+worker+path, body, header...)
}

// message is a message of a dispatched batch: a JSON body, or a foreign one (harness.mjs).
type message struct {
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Attempts  int    `json:"attempts"`
	Body      any    `json:"body,omitempty"`
	Foreign   string `json:"foreign,omitempty"`
}

// queueResult is workerd's account of a dispatched batch.
type queueResult struct {
	Outcome       string   `json:"outcome"`
	AckAll        bool     `json:"ackAll"`
	ExplicitAcks  []string `json:"explicitAcks"`
	RetryMessages []struct {
		MsgID        string `json:"msgId"`
		DelaySeconds *int   `json:"delaySeconds"`
	} `json:"retryMessages"`
	RetryBatch struct {
		Retry bool `json:"retry"`
	} `json:"retryBatch"`
}

// queue hands a Worker's queue handler a MessageBatch of msgs from queue.
func (h *harness) queue(worker, queue string, msgs ...message) queueResult {
	h.t.Helper()
	b, _ := json.Marshal(msgs)
	res := h.do("POST", "/queue/"+worker+"/"+queue, string(b))
	var r queueResult
	if res.status != 200 || json.Unmarshal([]byte(res.body), &r) != nil {
		h.t.Fatalf("dispatch to %s: %d %s", queue, res.status, res.body)
	}
	return r
}

// call is a recorded call of the recording Queue binding.
type call struct {
	Op      string `json:"op"`
	Args    int    `json:"args"`
	Body    string `json:"body"`
	Options string `json:"options"`
	Items   string `json:"items"`
}

func (h *harness) calls() []call {
	h.t.Helper()
	res := h.do("GET", "/calls", "")
	var cs []call
	if err := json.Unmarshal([]byte(res.body), &cs); err != nil {
		h.t.Fatalf("calls: %v: %s", err, res.body)
	}
	return cs
}

func (h *harness) reset() { h.t.Helper(); h.do("POST", "/reset", "") }

// failWith makes the recording binding reject every call with msg ("" stops it).
func (h *harness) failWith(msg string) { h.t.Helper(); h.do("POST", "/fail", msg) }

func (h *harness) logs() []string {
	h.t.Helper()
	var ls []string
	if err := json.Unmarshal([]byte(h.do("GET", "/logs", "").body), &ls); err != nil {
		h.t.Fatalf("logs: %v", err)
	}
	return ls
}

// waitLog waits until a line the Workers wrote contains every one of parts, and returns it.
func (h *harness) waitLog(parts ...string) string {
	h.t.Helper()
	return h.waitLogs(1, parts...)[0]
}

// waitLogs waits until n lines the Workers wrote contain every one of parts, and returns them.
func (h *harness) waitLogs(n int, parts ...string) []string {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ls := h.logs()
		var found []string
		for _, l := range ls {
			if containsAll(l, parts) {
				found = append(found, l)
			}
		}
		if len(found) >= n {
			return found
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d lines of %d with %q in 60 s; the Workers wrote:\n%s", len(found), n, parts, strings.Join(ls, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
