package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A program and what it started die with serve, however serve dies: here kill -9, which
// gives serve no chance to kill them itself.
func TestProgramsDieWithServe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's")
	}
	t.Parallel()
	cfg := e2eConfig(t, 60000, 30000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"orphan","sleep_ms":60000}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `pids orphan \d+ \d+`, 1)
	b, _ := os.ReadFile(appLog)
	m := regexp.MustCompile(`pids orphan (\d+) (\d+)`).FindStringSubmatch(string(b))
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	for _, pid := range m[1:] {
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %s of the program outlived serve's kill -9 by 5 s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// countingReader is n bytes of '[' (JSON text that never ends), counting what is read of it.
type countingReader struct {
	left int64
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), c.left)]
	for i := range p {
		p[i] = '['
	}
	c.left -= int64(len(p))
	c.read.Add(int64(len(p)))
	return len(p), nil
}

// send, send-batch and check read stdin up to the input's limit and one byte more, then refuse
// it with the size check's exception: 300 MB on stdin are never read, let alone held.
func TestStdinBounded(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	for _, tc := range []struct {
		args  []string
		limit int64
		want  string
	}{
		{[]string{"send", "--binding", "JOBS", "--config", cfg}, 128000, "消息体超过 128000 字节\n"},
		{[]string{"send-batch", "--binding", "JOBS", "--config", cfg}, 1 << 20, "批量消息文字超过 1 MiB\n"},
		{[]string{"check"}, 128000, "消息体超过 128000 字节\n"},
		{[]string{"check", "--batch"}, 1 << 20, "批量消息文字超过 1 MiB\n"},
	} {
		t.Run(strings.Join(tc.args[:min(2, len(tc.args))], " "), func(t *testing.T) {
			in := &countingReader{left: 300 << 20}
			cmd := exec.Command(duilieBinary(t), tc.args...)
			cmd.Stdin = in
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || stderr.String() != tc.want {
				t.Fatalf("%v: %q, want exit 1 and %q", err, stderr.String(), tc.want)
			}
			// What was written is what the command read, plus what the pipe and the copy held.
			if read := in.read.Load(); read > tc.limit+1+(1<<20) {
				t.Errorf("%d bytes of stdin taken, for a limit of %d", read, tc.limit)
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
			t.Logf("read %d bytes, peak RSS %d KiB", in.read.Load(), rss)
			if rss > 150<<10 {
				t.Errorf("peak RSS %d KiB", rss)
			}
		})
	}
}

// A closed stdin, or one that cannot be read, is exit status 74; an empty one is an empty body.
func TestStdinUnreadable(t *testing.T) {
	t.Parallel()
	bin := duilieBinary(t)
	for _, tc := range []struct {
		shell string
		code  int
		want  string
	}{
		{"exec %s check <&-", 74, "duilie: reading stdin: it is closed (give the input on stdin, or < /dev/null for none)\n"},
		{"exec %s check < /", 74, "duilie: reading stdin: read /dev/stdin: is a directory\n"},
		{"exec %s check < /dev/null", 1, "消息体不是有效的 JSON 文字\n"},
	} {
		cmd := exec.Command("sh", "-c", strings.Replace(tc.shell, "%s", bin, 1))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != tc.code || stderr.String() != tc.want {
			t.Errorf("%s: exit %d, %q; want %d, %q", tc.shell, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// A configuration nested without bound is refused before it is parsed (exit 78), as is a data
// directory reached through another user's symbolic link.
func TestConfigRefusedEarly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deep := filepath.Join(dir, "deep.toml")
	os.WriteFile(deep, []byte("x = "+strings.Repeat("{a=", 100000)+"1"+strings.Repeat("}", 100000)+"\n"), 0o644)
	r := runDuilie(t, "", nil, "queues", "--config", deep)
	if want := deep + ": line 1: arrays and tables nest more than 32 deep\n"; r.code != 78 || r.stderr != want {
		t.Errorf("a 100,000-deep configuration: %+v, want 78 and %q", r, want)
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to make a symbolic link another user owns")
	}
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "theirs")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t, 30000, 1000)
	text, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(text, fmt.Sprintf("\n[platform]\ndata_dir = %q\n", link)...), 0o644)
	for _, args := range [][]string{{"queues"}, {"send", "--binding", "JOBS"}} {
		r = runDuilie(t, `{}`, nil, append(args, "--config", cfg)...)
		if r.code != 78 || !strings.Contains(r.stderr, link+" is a symbolic link that belongs to uid 65534, not to you (uid 0) or root") {
			t.Errorf("%s through another user's link: %+v", args[0], r)
		}
	}
}

// After kill -9 of serve on the embedded engine, the message that was in flight is delivered
// again within 5 s of the next serve's start, with attempts 2, though its ack wait (max_batch_timeout
// + time_limit_ms + 30 s) is 90 s: the serve that holds the data directory knows no other
// consumer exists.
func TestServeKilledInFlightBack(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 60000, 30000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"inflight","sleep_ms":60000}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `pids inflight \d+ \d+`, 1)
	// In flight for over a second: JetStream writes a consumer's state a moment after a delivery,
	// and one made just before a crash comes back as never delivered (attempts 1).
	time.Sleep(1200 * time.Millisecond)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	restarted := time.Now()
	s = startServe(t, cfg, env...)
	waitAppLogFor(t, appLog, `done inflight attempts=2`, 1, 5*time.Second-time.Since(restarted))
	s.waitLog(`msg="jetstream: messages a stopped process left in flight are delivered again" queue=jobs messages=1`, 1)
	s.stop()
}

// 20 bytes flipped inside one message's record while nothing runs: queues reports the message
// lost with its sequence (exit 74), serve logs an ERROR at its start and delivers the 19 others,
// and the lost message is no longer counted as ready.
func TestQueuesDamagedRecord(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"body":{"name":"r%d","pad":"%s"}}`, i, strings.Repeat("x", 100)))
	}
	if r := runDuilie(t, "["+strings.Join(items, ",")+"]", nil, "send-batch", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send-batch: %+v", r)
	}
	blk := filepath.Join(filepath.Dir(cfg), ".duilie", "jetstream", "$G", "streams", "DUILIE_jobs", "msgs", "1.blk")
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte(`"name":"r10"`))
	for k := range 20 {
		b[at+k] ^= 0xff
	}
	os.WriteFile(blk, b, 0o600)

	r := runDuilie(t, "", nil, "queues", "--config", cfg)
	m := regexp.MustCompile(`^duilie: queue jobs: 1 message lost \(sequence (\d+)\), its stored records do not match their checksums \(1\.blk at byte \d+\)`).FindStringSubmatch(r.stderr)
	if r.code != 74 || m == nil || !regexp.MustCompile(`(?m)^jobs\s+19\s+0\s+0\s+1\s+no\s+-$`).MatchString(r.stdout) {
		t.Fatalf("queues after a damaged record: %+v", r)
	}
	f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "\n[dashboard]\nlisten = \"127.0.0.1:0\"\n")
	f.Close()
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	s.waitLog(`level=ERROR msg="queue damaged: messages lost" queue=jobs lost=1 damage="1 message lost \(sequence `+m[1]+`\)`, 1)
	s.waitAcked(19)
	waitAppLog(t, appLog, `done r\d+ attempts=1`, 19)
	metrics := scrape(t, s)
	for _, want := range []string{`duilie_queue_lost_messages{queue="jobs"} 1`, `duilie_queue_messages{queue="jobs",state="ready"} 0`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("no %s in /metrics:\n%s", want, metrics)
		}
	}
	s.stop()
	if got, _ := os.ReadFile(appLog); strings.Contains(string(got), "r10") {
		t.Errorf("the damaged message was delivered:\n%s", got)
	}
	r = runDuilie(t, "", nil, "queues", "--config", cfg)
	if r.code != 74 || !regexp.MustCompile(`(?m)^jobs\s+0\s+0\s+0\s+1\s+no\s+-$`).MatchString(r.stdout) {
		t.Errorf("queues once the rest was consumed: %+v", r)
	}
}

// scrape reads serve's /metrics.
func scrape(t *testing.T, s *serveProc) string {
	t.Helper()
	line := s.waitLog(`msg=dashboard url=`, 1)
	m := regexp.MustCompile(`\?token=([0-9a-f]{64}).* metrics=(http://127\.0\.0\.1:\d+/metrics)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no dashboard token and metrics URL in %q", line)
	}
	req, _ := http.NewRequest("GET", m[2], nil)
	req.Header.Set("Authorization", "Bearer "+m[1]) // as Prometheus sends it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// The dashboard, its API, /metrics and Cloudflare's Queues API refuse every request without the
// token, on loopback too; the token is in the data directory's file "token" (mode 0600, the
// same after a restart), in the URL serve logs and duilie dashboard prints. When run as root, a
// second local user, made for the test, can neither read the token nor use the surfaces.
func TestSurfacesNeedToken(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "\n[dashboard]\nlisten = \"127.0.0.1:0\"\n\n[cloudflare_api]\nlisten = \"127.0.0.1:0\"\naccount_id = \"acc\"\n")
	f.Close()
	tokenFile := filepath.Join(filepath.Dir(cfg), ".duilie", "token")
	s := startServe(t, cfg)
	line := s.waitLog(`msg=dashboard url=`, 1)
	m := regexp.MustCompile(`url="(http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]{64})"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no URL with the token in %q", line)
	}
	base, token := m[1], m[2]
	api := regexp.MustCompile(`url=(http://\S+/client/v4)`).FindStringSubmatch(s.waitLog(`msg="serving Cloudflare's Queues API"`, 1))[1] + "/accounts/acc/queues"
	b, err := os.ReadFile(tokenFile)
	info, _ := os.Stat(tokenFile)
	if err != nil || string(b) != token || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %q %v %v, want the logged token, mode 0600", b, info.Mode(), err)
	}
	if r := runDuilie(t, "", nil, "dashboard", "--config", cfg); r.code != 0 || r.stdout != base+"?token="+token+"\n" {
		t.Errorf("duilie dashboard: %+v", r)
	}
	get := func(method, url, bearer string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct{ method, url string }{
		{"GET", base}, {"GET", base + "api/queues"}, {"GET", base + "api/queues/jobs/messages"}, {"GET", base + "metrics"},
		{"POST", base + "api/queues/jobs/purge"}, {"POST", base + "api/queues/jobs/send"}, {"GET", api},
	} {
		if code := get(c.method, c.url, ""); code != 403 {
			t.Errorf("%s %s without the token: %d, want 403", c.method, c.url, code)
		}
		if code := get(c.method, c.url, strings.Repeat("0", 64)); code != 403 {
			t.Errorf("%s %s with another token: %d, want 403", c.method, c.url, code)
		}
	}
	for _, url := range []string{base + "api/queues", base + "metrics", api} {
		if code := get("GET", url, token); code != 200 {
			t.Errorf("GET %s with the token: %d", url, code)
		}
	}
	// The same token after a restart.
	s.stop()
	s = startServe(t, cfg)
	if line = s.waitLog(`msg=dashboard url=`, 1); !strings.Contains(line, "?token="+token+`"`) {
		t.Errorf("after a restart: %q, want the same token", line)
	}
	base = regexp.MustCompile(`url="(http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(line)[1]
	api = regexp.MustCompile(`url=(http://\S+/client/v4)`).FindStringSubmatch(s.waitLog(`msg="serving Cloudflare's Queues API"`, 1))[1] + "/accounts/acc/queues"

	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to make a second local user")
	}
	other := otherUser(t)
	asOther := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: other, Gid: other}}
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asOther("cat", tokenFile); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("the other user read the token file: %v %q", err, out)
	}
	if curl, err := exec.LookPath("curl"); err == nil {
		for _, url := range []string{base + "api/queues", base + "metrics", api} {
			if out, err := asOther(curl, "-s", "--noproxy", "*", "-o", "/dev/null", "-w", "%{http_code}", url); err != nil || out != "403" {
				t.Errorf("the other user's GET %s: %q %v, want 403", url, out, err)
			}
		}
		if out, _ := asOther(curl, "-s", "--noproxy", "*", "-X", "POST", "-H", "Content-Type: application/json", "-d", "{}", base+"api/queues/jobs/purge"); strings.Contains(out, "purged") {
			t.Errorf("the other user purged: %s", out)
		}
	} else {
		t.Log("no curl: the other user's requests are not tried")
	}
	s.stop()
}

// otherUser makes a local user for the test, removed at its end, and returns its uid.
func otherUser(t *testing.T) uint32 {
	t.Helper()
	name := fmt.Sprintf("duilie-t%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("useradd %s: %v %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v %s", name, err, out)
		}
	})
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	uid, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(uid)
}

// The case: three messages received by serve for a batch that fills for 3 s are purged
// by another process (duilie purge, attached to serve): purge counts them, duilie queues shows
// none, and the program never gets them; a message sent after the purge is delivered alone.
func TestPurgeFillingBatch(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	text, _ := os.ReadFile(cfg)
	text = []byte(strings.Replace(string(text), "max_batch_timeout = 0\n", "max_batch_timeout = 3\nmax_batch_size = 10\n", 1))
	os.WriteFile(cfg, text, 0o644)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	for _, name := range []string{"p1", "p2", "p3"} {
		if r := runDuilie(t, `{"name":"`+name+`"}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
			t.Fatalf("send: %+v", r)
		}
	}
	waitQueues(t, cfg, "three received for the filling batch", func(qs map[string]queueJSON) bool { return qs["jobs"].InFlight == 3 })
	if r := runDuilie(t, "", nil, "purge", "jobs", "--yes", "--config", cfg); r.code != 0 {
		t.Fatalf("purge: %+v", r)
	}
	if qs := queuesJSON(t, cfg); qs["jobs"].Ready+qs["jobs"].InFlight+qs["jobs"].Delayed != 0 {
		t.Errorf("after the purge: %+v", qs["jobs"])
	}
	if r := runDuilie(t, `{"name":"after"}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `done after attempts=1`, 1)
	s.stop()
	if b, _ := os.ReadFile(appLog); regexp.MustCompile(`start p\d`).Match(b) {
		t.Errorf("the program got purged messages:\n%s", b)
	}
}

// Messages leased over the served Cloudflare API and purged by another process do not come
// back when their leases end.
func TestPurgeLeased(t *testing.T) {
	t.Parallel()
	cfg := e2eConfig(t, 30000, 1000)
	f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "\n[dashboard]\nlisten = \"\"\n\n[cloudflare_api]\nlisten = \"127.0.0.1:0\"\naccount_id = \"acc\"\n")
	f.Close()
	s := startServe(t, cfg)
	base := regexp.MustCompile(`url=(http://\S+/client/v4)`).FindStringSubmatch(s.waitLog(`msg="serving Cloudflare's Queues API"`, 1))[1]
	token, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), ".duilie", "token"))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+"/accounts/acc/queues"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+string(token))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out["success"] != true {
			t.Fatalf("%s %s: %d %v %v", method, path, resp.StatusCode, out, err)
		}
		return out
	}
	call("POST", "", `{"queue_name":"leased"}`)
	var id string
	for _, q := range call("GET", "", "")["result"].([]any) {
		if q := q.(map[string]any); q["queue_name"] == "leased" {
			id = q["queue_id"].(string)
		}
	}
	call("POST", "/"+id+"/consumers", `{"type":"http_pull","settings":{"batch_size":10,"visibility_timeout_ms":1000}}`)
	for i := range 3 {
		call("POST", "/"+id+"/messages", fmt.Sprintf(`{"body":{"n":%d},"content_type":"json"}`, i))
	}
	pulled := call("POST", "/"+id+"/messages/pull", `{"batch_size":10,"visibility_timeout_ms":1000}`)["result"].(map[string]any)["messages"].([]any)
	leasedAt := time.Now()
	if len(pulled) != 3 {
		t.Fatalf("pulled %v, want 3 messages", pulled)
	}
	if r := runDuilie(t, "", nil, "purge", "leased", "--yes", "--config", cfg); r.code != 0 {
		t.Fatalf("purge: %+v", r)
	}
	// The leases end after their 1 s visibility timeout; a message they gave back would be
	// ready at once.
	for time.Since(leasedAt) < 2*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	call("POST", "/"+id+"/messages", `{"body":"after","content_type":"json"}`)
	again := call("POST", "/"+id+"/messages/pull", `{"batch_size":10,"visibility_timeout_ms":1000}`)["result"].(map[string]any)["messages"].([]any)
	if len(again) != 1 || again[0].(map[string]any)["body"] != base64.StdEncoding.EncodeToString([]byte(`"after"`)) {
		t.Errorf("pulled after the purge: %v, want only the message pushed after it", again)
	}
	s.stop()
}
