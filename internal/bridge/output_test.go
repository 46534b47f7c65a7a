package bridge

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOutputCap: per event and stream, output beyond Runner.MaxOutput is not logged; one
// line says how much was dropped. 100 MB of stdout (here 5 MB, of NUL bytes, which the log
// escapes fourfold) no longer grows the log without end.
func TestOutputCap(t *testing.T) {
	e := newEnv(t, 0)
	e.putBodies("1")
	p, _ := e.program(`
		sys.stdout.write("a" * 1000 + "\n")
		sys.stdout.write("\0" * (5 << 20))
		sys.stderr.write("short\n")
	`)
	p.MaxOutput = 64 << 10
	if err := e.runQueue(1, p.Queue); err != nil {
		t.Fatal(err)
	}
	logged := map[string]int{}
	for _, r := range e.logs.records("program output") {
		logged[r["stream"].(string)] += len(r["line"].(string))
	}
	if logged["stdout"] > 64<<10 || logged["stdout"] < 60<<10 || logged["stderr"] != 5 {
		t.Errorf("logged %v bytes, want about 64 KiB of stdout and all of stderr", logged)
	}
	over := e.logs.records("program output over its limit: the rest is dropped")
	if len(over) != 1 || over[0]["stream"] != "stdout" || over[0]["limit"] != float64(64<<10) ||
		over[0]["dropped_bytes"] != float64(1001+5<<20-64<<10) || over[0]["level"] != "WARN" {
		t.Errorf("over-limit lines %v", over)
	}
	if n := len(e.logs.String()); n > 1<<20 {
		t.Errorf("the log grew by %d bytes", n)
	}
}

// TestNoProxy: a proxy set in the host's environment does not catch the bridge: every program
// gets loopback added to NO_PROXY and no_proxy, so an HTTP client that honours proxy
// variables (here Python's urllib, as it comes) reaches the bridge directly.
func TestNoProxy(t *testing.T) {
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var proxied atomic.Int32
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			proxied.Add(1)
			line, _ := bufio.NewReader(c).ReadString('\n')
			t.Logf("the proxy got %q", line)
			c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	url := "http://" + proxy.Addr().String()
	t.Setenv("http_proxy", url)
	t.Setenv("HTTP_PROXY", url)
	t.Setenv("no_proxy", "example.com")
	e := newEnv(t, 0)
	e.putBodies("1")
	p, out := e.program(`
		import os, urllib.request
		note({"NO_PROXY": os.environ.get("NO_PROXY"), "no_proxy": os.environ.get("no_proxy")})
		req = urllib.request.Request(BRIDGE, data='["确认队列消息",0]'.encode(), method="POST")
		with urllib.request.urlopen(req) as r:
			note(r.status)
	`)
	if err := e.runQueue(1, p.Queue); err != nil {
		t.Fatalf("event failed: %v", err)
	}
	notes := out.notes()
	if len(notes) != 2 || notes[1] != 200.0 || proxied.Load() != 0 {
		t.Errorf("notes %v, %d requests through the proxy", notes, proxied.Load())
	}
	if len(notes) > 0 {
		env := notes[0].(map[string]any)
		if v, _ := env["no_proxy"].(string); !strings.HasPrefix(v, "example.com,") || !strings.Contains(v, "127.0.0.1") {
			t.Errorf("no_proxy = %q: the host's value, then loopback", v)
		}
		if v, _ := env["NO_PROXY"].(string); !strings.Contains(v, "127.0.0.1") || !strings.Contains(v, "localhost") {
			t.Errorf("NO_PROXY = %q", v)
		}
	}
}
