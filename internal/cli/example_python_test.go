package cli

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// pythonPath is a PATH with python3's interpreter first, or skips the test without python3.
// python3 may be a slow launcher (pyenv's shim takes a second): with the interpreter itself
// first on PATH, the examples' command ["python3", …] starts fast.
func pythonPath(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	out, err := exec.Command(python, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	return "PATH=" + filepath.Dir(strings.TrimSpace(string(out))) + string(os.PathListSeparator) + os.Getenv("PATH")
}

// The Python example end to end: duilie serve runs examples/page-python/app.py per event, with
// the example's own duilie.toml (listening on a free port instead of 8787).
func TestPythonExample(t *testing.T) {
	t.Parallel()
	pathEnv := pythonPath(t)

	dir := t.TempDir()
	app, err := os.ReadFile("../../examples/page-python/app.py")
	if err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile("../../examples/page-python/duilie.toml")
	if err != nil {
		t.Fatal(err)
	}
	const listen = `listen = "127.0.0.1:8787"`
	if !strings.Contains(string(toml), listen) {
		t.Fatalf("the example's duilie.toml no longer has %s", listen)
	}
	toml = []byte(strings.Replace(string(toml), listen, `listen = "127.0.0.1:0"`, 1))
	os.WriteFile(filepath.Join(dir, "app.py"), app, 0o644)
	cfg := filepath.Join(dir, "duilie.toml")
	os.WriteFile(cfg, toml, 0o644)

	// A proxy in serve's environment must not see any bridge call.
	proxy := recordingProxy(t)
	s := startServe(t, cfg, pathEnv, "http_proxy="+proxy.url, "HTTP_PROXY="+proxy.url)
	base := regexp.MustCompile(`url=(http://\S+)/`).FindStringSubmatch(s.waitLog(`listening for fetch events`, 1))[1]

	// duilie send → a queue event renders it.
	if r := runDuilie(t, `{"kind":"page","url":"/e2e/sent","version":"v8"}`, nil, "send", "--binding", "PAGE_QUEUE", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	s.waitLog(`msg="program output" event=\w+ kind=queue queue=page-render stream=stderr line="rendered page url=/e2e/sent version=v8 attempts=1"`, 1)

	// A fetch event (the CGI script) sends; the failing task is retried after its backoff.
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+"/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"kind":"release","url":"/e2e/fail","version":"v8","fail":true}`); code != 202 || body != "queued\n" {
		t.Fatalf("POST /tasks: %d %q", code, body)
	}
	s.waitLog(`line="render failed: retry url=/e2e/fail attempts=1 delay_s=30"`, 1)
	s.waitLog(`msg="queue event" event=[0-9a-f]+ queue=page-render batch=1 outcome=ok .*acked=0 retried=1 dead=0`, 1)
	r := runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	var stats []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil || r.code != 0 {
		t.Fatalf("queues --json: %+v", r)
	}
	if len(stats) != 2 || stats[1]["queue"] != "page-render" || stats[1]["delayed"] != 1.0 || stats[1]["dead_letter_queue"] != "page-dlq" || stats[1]["lost"] != 0.0 || len(stats[1]) != 7 {
		t.Errorf("queues --json: %s; want page-render with the retried task delayed", r.stdout)
	}

	if code, body := post(`{"kind":"page","url":"/e2e/old","version":"v7"}`); code != 202 {
		t.Fatalf("POST /tasks: %d %q", code, body)
	}
	s.waitLog(`line="stale task: acked url=/e2e/old version=v7 current=v8"`, 1)

	// The interface's exception reaches the client as the script chose: 400 with its message.
	if code, body := post(`{"kind":`); code != 400 || body != "消息体不是有效的 JSON 文字\n" {
		t.Errorf("POST bad JSON: %d %q", code, body)
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(string(page), `<form method="post" action="/tasks">`) {
		t.Errorf("GET /: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}
	s.waitLog(`msg="fetch event" event=\w+ method=GET path=/ status=200 outcome=ok`, 1)
	if code, _ := s.stop(); code != 0 {
		t.Errorf("serve exit %d", code)
	}
	if n := proxy.count.Load(); n != 0 {
		t.Errorf("%d requests went through the proxy", n)
	}
}

// proxy is a listener that counts the connections a client made to it as its HTTP proxy.
type proxy struct {
	url   string
	count atomic.Int32
}

func recordingProxy(t *testing.T) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{url: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.count.Add(1)
			c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	return p
}

// The example's call() reaches the bridge directly even with a proxy in its environment and
// no NO_PROXY (the host adds loopback to NO_PROXY, but a script run otherwise has none).
func TestPythonExampleIgnoresProxy(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "queue")
	}))
	defer bridge.Close()
	proxy := recordingProxy(t)
	dir, _ := filepath.Abs("../../examples/page-python")
	cmd := exec.Command("python3", "-c", "import app; print(app.call('读取入站事件种类'))")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "DUILIE_BRIDGE="+bridge.URL+"/e/x",
		"http_proxy="+proxy.url, "HTTP_PROXY="+proxy.url, "no_proxy=", "NO_PROXY=")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "queue\n" || proxy.count.Load() != 0 {
		t.Errorf("call: %v %q; %d requests through the proxy", err, out, proxy.count.Load())
	}
}
