package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// End-to-end tests: the duilie binary, built once, runs as real processes; [app] command is
// this test binary in its app mode (testApp), which calls the interface over the real bridge.

func TestMain(m *testing.M) {
	if os.Getenv("DUILIE_TEST_APP") != "" {
		os.Exit(testApp())
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	binErr    error
)

// headCommit is the commit the tests' binary is stamped with, as a release build is; "" when
// git cannot tell.
var headCommit = func() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}()

// duilieBinary builds cmd/duilie once per test run.
func duilieBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "duilie-e2e-")
		if binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "duilie"),
			"-ldflags=-X github.com/duilie/duilie/internal/buildinfo.commit="+headCommit, "github.com/duilie/duilie/cmd/duilie").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "duilie")
}

// testApp is [app] command in the tests: a queue event reads its batch over the bridge and,
// per message {"name":…, "fail_below":k, "sleep_ms":n}, logs "start", exits 3 while attempts
// < k (unless the file $TEST_APP_LOG.fixed exists), sleeps n ms on the first attempt (after
// starting a child process that sleeps too, in its process group, and logging
// "pids <name> <its pid> <the child's>"), acks and logs "done". Lines go to $TEST_APP_LOG.
func testApp() int {
	logf, err := os.OpenFile(os.Getenv("TEST_APP_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 10
	}
	defer logf.Close()
	logLine := func(format string, a ...any) { fmt.Fprintf(logf, format+"\n", a...) }
	call := func(args ...any) (int, string) {
		body, _ := json.Marshal(args)
		resp, err := http.Post(os.Getenv("DUILIE_BRIDGE"), "application/json", bytes.NewReader(body))
		if err != nil {
			logLine("bridge error %v", err)
			os.Exit(11)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if ev := os.Getenv("DUILIE_EVENT"); ev != "queue" {
		logLine("unexpected event %q", ev)
		return 12
	}
	status, text := call("读取队列批次")
	if status != 200 {
		logLine("read batch: %d %s", status, text)
		return 13
	}
	var batch struct {
		Messages []struct {
			Attempts int `json:"attempts"`
			Body     struct {
				Name      string `json:"name"`
				FailBelow int    `json:"fail_below"`
				SleepMS   int    `json:"sleep_ms"`
				DeepMB    int    `json:"deep_mb"`
			} `json:"body"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(text), &batch); err != nil {
		logLine("decode batch: %v", err)
		return 14
	}
	_, fixedErr := os.Stat(os.Getenv("TEST_APP_LOG") + ".fixed")
	for i, m := range batch.Messages {
		b := m.Body
		if fixedErr == nil { // the test fixed the bug: nothing fails any more
			b.FailBelow = 0
		}
		logLine("start %s attempts=%d", b.Name, m.Attempts)
		if b.DeepMB > 0 {
			// A call of nothing but brackets, streamed: the bridge must refuse it as it comes.
			resp, err := http.Post(os.Getenv("DUILIE_BRIDGE"), "application/json",
				io.LimitReader(bracketReader{}, int64(b.DeepMB)<<20))
			if err != nil {
				logLine("deep %s: %v", b.Name, err)
				return 17
			}
			text, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			logLine("deep %s %d %s", b.Name, resp.StatusCode, text)
			return 18
		}
		if m.Attempts < b.FailBelow {
			logLine("fail %s attempts=%d", b.Name, m.Attempts)
			return 3
		}
		if b.SleepMS > 0 && m.Attempts == 1 {
			child := exec.Command("sleep", strconv.Itoa(b.SleepMS/1000+1))
			if err := child.Start(); err != nil {
				logLine("child: %v", err)
				return 16
			}
			logLine("pids %s %d %d", b.Name, os.Getpid(), child.Process.Pid)
			time.Sleep(time.Duration(b.SleepMS) * time.Millisecond)
		}
		if status, text := call("确认队列消息", i); status != 200 {
			logLine("ack: %d %s", status, text)
			return 15
		}
		logLine("done %s attempts=%d", b.Name, m.Attempts)
	}
	return 0
}

// bracketReader is an endless "[[[[…".
type bracketReader struct{}

func (bracketReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '['
	}
	return len(p), nil
}

// e2eConfig writes a duilie.toml into a new directory and returns its path. The app is this
// test binary; JOBS is permitted and configured, SECRET configured only, UNSET permitted only.
func e2eConfig(t *testing.T, timeLimitMS, graceMS int) string {
	return e2eConfigRetry(t, timeLimitMS, graceMS, 0)
}

func e2eConfigRetry(t *testing.T, timeLimitMS, graceMS, retryDelay int) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := fmt.Sprintf(`[permissions]
QUEUE = ["JOBS", "UNSET"]

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.producers]]
binding = "SECRET"
queue = "secret"

[[queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
max_retries = 3
retry_delay = %d

[app]
command = [%q]
time_limit_ms = %d
shutdown_grace_ms = %d
`, retryDelay, exe, timeLimitMS, graceMS)
	path := filepath.Join(dir, "duilie.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is a finished duilie command.
type result struct {
	code           int
	stdout, stderr string
}

// runDuilie runs the binary to its end with stdin and the extra environment.
func runDuilie(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(duilieBinary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("duilie %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// serveProc is a running duilie serve, its stderr (the log) collected line by line.
type serveProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{}

	mu        sync.Mutex
	lines     []string
	stoppedAt time.Time // when the msg=stopped line came
	exitedAt  time.Time // when the process had exited
}

func startServe(t *testing.T, config string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(duilieBinary(t), "serve", "--config", config)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serveProc{t: t, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			if strings.Contains(sc.Text(), "msg=stopped") {
				s.stoppedAt = time.Now()
			}
			s.mu.Unlock()
		}
		_ = cmd.Wait()
		s.mu.Lock()
		s.exitedAt = time.Now()
		s.mu.Unlock()
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", s.log())
		}
	})
	s.waitLog(`msg=serving`, 1)
	return s
}

func (s *serveProc) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// waitLog waits until n lines of the log match re, and returns the last of them.
func (s *serveProc) waitLog(re string, n int) string {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		var found []string
		for _, l := range s.lines {
			if rx.MatchString(l) {
				found = append(found, l)
			}
		}
		s.mu.Unlock()
		if len(found) >= n {
			return found[n-1]
		}
		select {
		case <-s.done:
			s.t.Fatalf("serve exited (%v) before logging %d× %s", s.cmd.ProcessState, n, re)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %d× %s in the serve log", n, re)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAcked waits until the queue event lines of the log count n acked messages in all.
func (s *serveProc) waitAcked(n int) {
	s.t.Helper()
	rx := regexp.MustCompile(`msg="queue event" .* acked=(\d+) `)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		acked := 0
		for _, l := range s.lines {
			if m := rx.FindStringSubmatch(l); m != nil {
				k, _ := strconv.Atoi(m[1])
				acked += k
			}
		}
		s.mu.Unlock()
		if acked >= n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d messages acked, want %d", acked, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and returns the exit status and how long the exit took.
func (s *serveProc) stop() (int, time.Duration) {
	s.t.Helper()
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("serve did not exit within 30 s of SIGTERM")
	}
	return s.cmd.ProcessState.ExitCode(), time.Since(start)
}

// appLog waits until n lines of the test app's log file match re.
func waitAppLog(t *testing.T, path, re string, n int) {
	t.Helper()
	waitAppLogFor(t, path, re, n, 20*time.Second)
}

func waitAppLogFor(t *testing.T, path, re string, n int, wait time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(wait)
	for {
		b, _ := os.ReadFile(path)
		if len(rx.FindAllString(string(b), -1)) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %s in the app log:\n%s", n, re, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func appLogEnv(t *testing.T) (string, []string) {
	path := filepath.Join(t.TempDir(), "app.log")
	return path, []string{"DUILIE_TEST_APP=1", "TEST_APP_LOG=" + path}
}

// send and send-batch: exit statuses and exact stderr. None of the failures touches the
// engine, so none of them creates the data directory.
func TestSendExitStatuses(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	for _, c := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"ok", `{"name":"a"}`, []string{"send", "--binding", "JOBS"}, 0, ""},
		{"ok batch", `[{"body":1},{"body":2,"delaySeconds":60}]`, []string{"send-batch", "--binding", "JOBS"}, 0, ""},
		{"ok with delay", "{}\n", []string{"send", "--binding", "JOBS", "--delay", "43200"}, 0, ""},
		{"not JSON", `{"name":`, []string{"send", "--binding", "JOBS"}, 1, "消息体不是有效的 JSON 文字\n"},
		{"delay", `{}`, []string{"send", "--binding", "JOBS", "--delay", "43201"}, 1, "延迟秒数须在 0 至 43200 之间\n"},
		{"empty binding", `{}`, []string{"send", "--binding", ""}, 1, "队列绑定名不得为空\n"},
		{"marker", `{"$句柄":1}`, []string{"send", "--binding", "JOBS"}, 1, "消息体含有不属于 JSON 的值或宿主专用记号\n"},
		{"batch empty", `[]`, []string{"send-batch", "--binding", "JOBS"}, 1, "批量消息不得为空\n"},
		{"batch item", `[{"body":1,"contentType":"json"}]`, []string{"send-batch", "--binding", "JOBS"}, 1, "批量消息项只允许 body 与 delaySeconds 两个字段\n"},
		{"not permitted", `{}`, []string{"send", "--binding", "SECRET"}, 2, "未授权的QUEUE绑定：SECRET\n"},
		{"not configured", `{}`, []string{"send", "--binding", "UNSET"}, 2, "绑定不存在：UNSET\n"},
		{"batch not permitted", `[{"body":1}]`, []string{"send-batch", "--binding", "NOPE"}, 2, "未授权的QUEUE绑定：NOPE\n"},
		// The body's checks come before the binding's (SPEC §3): a bad body to a bad binding is 1.
		{"bad body, bad binding", `{`, []string{"send", "--binding", "SECRET"}, 1, "消息体不是有效的 JSON 文字\n"},
		{"no binding", `{}`, []string{"send"}, 64, "duilie: send needs --binding, the binding that names the queue\nRun 'duilie send --help' for usage.\n"},
		{"batch no binding", `[]`, []string{"send-batch"}, 64, "duilie: send-batch needs --binding, the binding that names the queue\nRun 'duilie send-batch --help' for usage.\n"},
		{"bad flag", `{}`, []string{"send", "--binding", "JOBS", "--delay", "soon"}, 64, "duilie: invalid argument \"soon\" for \"--delay\" flag: strconv.ParseInt: parsing \"soon\": invalid syntax\nRun 'duilie send --help' for usage.\n"},
		{"argument", `{}`, []string{"send", "--binding", "JOBS", "extra"}, 64, "duilie: unknown command \"extra\" for \"duilie send\"\nRun 'duilie send --help' for usage.\n"},
		{"unknown command", ``, []string{"sned"}, 64, "duilie: unknown command \"sned\" for \"duilie\"\n\nDid you mean this?\n\tsend\n\nRun 'duilie --help' for usage.\n"},
	} {
		args := append(c.args, "--config", cfg)
		r := runDuilie(t, c.stdin, nil, args...)
		if r.code != c.code || r.stderr != c.stderr || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", c.name, r.code, r.stdout, r.stderr, c.code, c.stderr)
		}
	}
	r := runDuilie(t, `{}`, nil, "send", "--binding", "JOBS", "--config", filepath.Join(t.TempDir(), "duilie.toml"))
	if r.code != 78 || !strings.HasSuffix(r.stderr, "duilie.toml: no such file (write one, or name it with --config)\n") {
		t.Errorf("missing config: exit %d, stderr %q", r.code, r.stderr)
	}
	// Three messages were accepted: 1 + 2 from the batch (one delayed) + 1 delayed. The queue
	// of the binding that is not permitted is listed too: the configuration names it.
	r = runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	want := `[{"queue":"jobs","ready":2,"delayed":2,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":null},` +
		`{"queue":"secret","ready":0,"delayed":0,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":null}]` + "\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("queues --json: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
}

// Messages sent while no serve runs wait in the data directory; a running serve delivers them,
// and takes sends from other processes while it holds the directory; after a restart,
// messages sent in between are delivered.
func TestSendServeRestart(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 5000)
	appLog, env := appLogEnv(t)

	if r := runDuilie(t, `{"name":"before"}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send before serve: %+v", r)
	}
	s := startServe(t, cfg, env...)
	waitAppLog(t, appLog, `done before attempts=1`, 1)
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=ok .* acked=1 retried=0 dead=0`, 1)

	// Attached to the running serve: its engine holds the directory.
	if r := runDuilie(t, `{"name":"while"}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send while serving: %+v", r)
	}
	if r := runDuilie(t, `[{"body":{"name":"batch1"}},{"body":{"name":"batch2"}}]`, nil, "send-batch", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send-batch while serving: %+v", r)
	}
	waitAppLog(t, appLog, `done (while|batch1|batch2) attempts=1`, 3)
	s.waitAcked(4) // the host settles a batch once its program has exited
	r := runDuilie(t, "", nil, "queues", "--config", cfg)
	if r.code != 0 || r.stdout != "queue   ready  delayed  in_flight  lost  paused  dead_letter_queue\njobs        0        0          0     0  no      -\nsecret      0        0          0     0  no      -\n" {
		t.Errorf("queues while serving: %+v", r)
	}
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}

	if r := runDuilie(t, `{"name":"between"}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send between: %+v", r)
	}
	r = runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	if want := `[{"queue":"jobs","ready":1,"delayed":0,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":null},{"queue":"secret","ready":0,"delayed":0,"in_flight":0,"paused":false,"lost":0,"dead_letter_queue":null}]` + "\n"; r.stdout != want {
		t.Errorf("queues between: %+v", r)
	}
	s = startServe(t, cfg, env...)
	waitAppLog(t, appLog, `done between attempts=1`, 1)
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	b, _ := os.ReadFile(appLog)
	if got := strings.Count(string(b), "start "); got != 5 {
		t.Errorf("%d deliveries, want 5 (each message once):\n%s", got, b)
	}
}

// A queue event whose program exits non-zero fails: its message comes again with attempts + 1.
func TestFailedEventRedelivered(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 5000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"flaky","fail_below":3}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `done flaky attempts=3`, 1)
	b, _ := os.ReadFile(appLog)
	want := "start flaky attempts=1\nfail flaky attempts=1\nstart flaky attempts=2\nfail flaky attempts=2\nstart flaky attempts=3\ndone flaky attempts=3\n"
	if string(b) != want {
		t.Errorf("app log:\n%s\nwant:\n%s", b, want)
	}
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=failed .*retried=1 .*err="program exited with status 3`, 2)
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=ok .*acked=1`, 1)
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

// SIGTERM lets a running event finish within the grace period; an event that overruns it is
// halted, and its message delivered again on the next start with attempts + 1.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	// retry_delay = 0: the halted event's message must be ready at once on the next start,
	// not after its 90 s ack wait.
	cfg := e2eConfigRetry(t, 60000, 2000, 0)
	appLog, env := appLogEnv(t)

	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"short","sleep_ms":800}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `start short attempts=1`, 1)
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	waitAppLog(t, appLog, `done short attempts=1`, 1)
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=ok`, 1)
	if strings.Contains(s.log(), "grace is over") {
		t.Errorf("the event within the grace was halted")
	}

	s = startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"long","sleep_ms":60000}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `start long attempts=1`, 1)
	code, took := s.stop()
	if code != 0 || took < 2*time.Second || took > 10*time.Second {
		t.Fatalf("serve exit %d after %v; want 0 after the 2 s grace", code, took)
	}
	s.waitLog(`shutdown grace is over`, 1)
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=jobs batch=1 outcome=aborted .*retried=1 .*err=执行超过时限`, 1)

	s = startServe(t, cfg, env...)
	waitAppLog(t, appLog, `done long attempts=2`, 1)
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "done long attempts=1") {
		t.Errorf("the halted event finished:\n%s", b)
	}
}

// A call of 30 MB of nested brackets to a real serve's bridge is refused as it arrives: the
// serve's peak memory does not grow (it grew by 3 GB before the bridge followed a call's depth).
func TestDeepCallMemory(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	before := peakRSS(t, s.cmd.Process.Pid)
	if r := runDuilie(t, `{"name":"deep","deep_mb":30}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	// The program is killed right after the 500 reply: the event's abort says what it was.
	s.waitLog(`msg="queue event" .* outcome=aborted .*err="桥接调用无效：调用嵌套超过 2 层"`, 1)
	waitAppLog(t, appLog, `start deep attempts=1`, 1)
	grown := peakRSS(t, s.cmd.Process.Pid) - before
	t.Logf("serve's peak memory: %d MiB before the call, %d KiB more after it", before>>20, grown>>10)
	if grown > 20<<20 {
		t.Errorf("serve's peak memory grew by %d MiB", grown>>20)
	}
	s.stop()
}

// peakRSS is a process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		t.Skip("no VmHWM in /proc/<pid>/status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// With nothing running, serve exits within 200 ms of logging stopped.
func TestServeExitsPromptly(t *testing.T) {
	t.Parallel()
	s := startServe(t, e2eConfig(t, 30000, 30000))
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stoppedAt.IsZero() {
		t.Fatal("no stopped line")
	}
	if took := s.exitedAt.Sub(s.stoppedAt); took > 200*time.Millisecond {
		t.Errorf("serve exited %v after logging stopped", took)
	}
}

// A second SIGTERM ends serve at once, and kills every running program's process group first:
// no program outlives the host.
func TestSecondSignal(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 60000, 30000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"stuck","sleep_ms":60000}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `pids stuck \d+ \d+`, 1)
	b, _ := os.ReadFile(appLog)
	m := regexp.MustCompile(`pids stuck (\d+) (\d+)`).FindStringSubmatch(string(b))
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.waitLog(`shutting down`, 1) // the grace of 30 s has begun
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10 s after a second SIGTERM")
	}
	for _, pid := range m[1:] {
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %s of the program outlived serve", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether process pid exists and is not a zombie (a killed orphan waiting for
// init to reap it is gone for every purpose).
func alive(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// duilie --version prints the module's version and the commit it was built from, whether Go
// recorded them (a checkout) or the build stamped the commit (this one, for a worktree or
// -buildvcs=false); internal/buildinfo's tests judge every combination.
func TestVersion(t *testing.T) {
	t.Parallel()
	if headCommit == "" {
		t.Skip("git cannot say which commit this is")
	}
	r := runDuilie(t, "", nil, "--version")
	want := regexp.MustCompile(`^duilie (v\S+|\(devel\)) \(commit ` + headCommit[:12] + `(, modified)?\)\n$`)
	if r.code != 0 || r.stderr != "" || !want.MatchString(r.stdout) {
		t.Errorf("--version: %+v, want %v", r, want)
	}
}

// serve refuses what it cannot run, with the exit statuses of SPEC §13.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noApp := filepath.Join(dir, "noapp.toml")
	os.WriteFile(noApp, []byte("[[queues.consumers]]\nqueue = \"q\"\n"), 0o644)
	r := runDuilie(t, "", nil, "serve", "--config", noApp)
	if want := noApp + ": app.command: missing; serve runs it for every queue event (queues.consumers) and fetch event (app.listen)\n"; r.code != 78 || r.stderr != want {
		t.Errorf("no app.command: %+v", r)
	}

	for _, tc := range []struct{ command, want string }{
		{"pyhton3-typo", `app.command = "pyhton3-typo": not found in PATH (write ./pyhton3-typo for a file beside the configuration)`},
		{"./missing.py", `app.command = "./missing.py": no such file: ` + filepath.Join(dir, "missing.py")},
		{"./noapp.toml", `app.command = "./noapp.toml": not an executable file: ` + noApp},
	} {
		typo := filepath.Join(dir, "typo.toml")
		os.WriteFile(typo, []byte(fmt.Sprintf("[app]\ncommand = [%q, \"app.py\"]\n[[queues.consumers]]\nqueue = \"q\"\n", tc.command)), 0o644)
		r = runDuilie(t, "", nil, "serve", "--config", typo)
		if want := typo + ": " + tc.want + "\n"; r.code != 78 || r.stderr != want {
			t.Errorf("command %s: %+v, want 78 and %q", tc.command, r, want)
		}
	}

	cfg := e2eConfig(t, 30000, 1000)
	s := startServe(t, cfg)
	r = runDuilie(t, "", nil, "serve", "--config", cfg)
	if r.code != 69 || !strings.Contains(r.stderr, "is in use by another duilie serve; stop it first\n") {
		t.Errorf("second serve on one data directory: %+v", r)
	}
	s.stop()

	busy := filepath.Join(dir, "busy.toml")
	ln, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.WriteFile(busy, []byte(fmt.Sprintf("[app]\ncommand = [\"true\"]\nlisten = %q\n", ln.Addr().String())), 0o644)
	r = runDuilie(t, "", nil, "serve", "--config", busy)
	if r.code != 69 || !strings.Contains(r.stderr, "duilie: listen for fetch events on "+ln.Addr().String()+": ") {
		t.Errorf("address in use: %+v", r)
	}
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// A data directory another user could capture is refused by every command (exit 78) with a
// message naming it and the fix: here another user (nobody) created it where the
// configuration points, as anyone may in a shared temporary directory; and one that others may
// write.
func TestDataDirNotOwn(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	dataDir := filepath.Join(filepath.Dir(cfg), ".duilie")
	if err := os.Mkdir(dataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dataDir, 0o777)
	want := cfg + `: platform.data_dir = "` + dataDir + `": ` + dataDir + ` is writable by its group or others (mode 0777): another user could replace what duilie keeps there; chmod go-w ` + dataDir + "\n"
	for _, args := range [][]string{{"send", "--binding", "JOBS"}, {"queues"}, {"serve"}} {
		r := runDuilie(t, `{}`, nil, append(args, "--config", cfg)...)
		if r.code != 78 || !strings.HasSuffix(r.stderr, "\n"+want) && r.stderr != want { // serve logs before
			t.Errorf("%s: %+v\nwant 78 and %q", args[0], r, want)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to make a directory another user owns")
	}
	os.Chmod(dataDir, 0o755)
	if err := os.Chown(dataDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := runDuilie(t, `{}`, nil, "send", "--binding", "JOBS", "--config", cfg)
	if r.code != 78 || !strings.Contains(r.stderr, dataDir+" belongs to uid 65534, not to you (uid 0)") {
		t.Errorf("send to a directory nobody owns: %+v", r)
	}
}

// Damaged storage is never silent: a block file cut in half (half the messages gone), then a
// corrupt stream metadata file (the queue not loadable).
func TestQueuesDamage(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	batch := "[" + strings.Repeat(`{"body":{"name":"`+strings.Repeat("x", 100)+`"}},`, 19) + `{"body":{"name":"last"}}]`
	if r := runDuilie(t, batch, nil, "send-batch", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send-batch: %+v", r)
	}
	stream := filepath.Join(filepath.Dir(cfg), ".duilie", "jetstream", "$G", "streams", "DUILIE_jobs")
	blk := filepath.Join(stream, "msgs", "1.blk")
	info, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	os.Truncate(blk, info.Size()/2)

	r := runDuilie(t, "", nil, "queues", "--config", cfg)
	m := regexp.MustCompile(`(?m)^jobs\s+(\d+)\s+0\s+0\s+(\d+)\s+no\s+-$`).FindStringSubmatch(r.stdout)
	if r.code != 74 || m == nil || m[1] == "20" || atoi(m[1])+atoi(m[2]) != 20 ||
		!strings.HasPrefix(r.stderr, "duilie: queue jobs: "+m[2]+" messages lost (sequences ") {
		t.Fatalf("queues after a cut block file: %+v", r)
	}
	r = runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	if r.code != 74 || !strings.Contains(r.stdout, `"lost":`+m[2]+`,"damage":"`+m[2]+` messages lost`) {
		t.Errorf("queues --json: %+v", r)
	}
	// serve says so at its start, and serves the messages that are left.
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	s.waitLog(`level=ERROR msg="queue damaged: messages lost" queue=jobs lost=`+m[2]+` damage="`, 1)
	s.waitAcked(atoi(m[1]))
	s.stop()
	waitAppLog(t, appLog, `done x+ attempts=1`, atoi(m[1]))

	// A damaged stream metadata file: the queue cannot be loaded; send refuses it.
	os.WriteFile(filepath.Join(stream, "meta.inf"), []byte("{garbage"), 0o600)
	r = runDuilie(t, "", nil, "queues", "--config", cfg)
	if r.code != 74 || !strings.Contains(r.stderr, "its stored messages cannot be loaded (Stream metafile") {
		t.Errorf("queues after a corrupt meta.inf: %+v", r)
	}
	r = runDuilie(t, `{}`, nil, "send", "--binding", "JOBS", "--config", cfg)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "队列发送失败：jetstream: queue jobs: its stored messages cannot be loaded (") {
		t.Errorf("send to a queue that cannot be loaded: %+v", r)
	}
	r = runDuilie(t, "", nil, "serve", "--config", cfg)
	if r.code != 69 || !strings.Contains(r.stderr, `level=ERROR msg="queue damaged: messages lost" queue=jobs`) ||
		!strings.Contains(r.stderr, "duilie will not create it anew over them") {
		t.Errorf("serve on a queue that cannot be loaded: %+v", r)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
