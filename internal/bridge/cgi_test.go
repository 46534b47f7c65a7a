//go:build unix

package bridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fetchServer serves testdata/cgi.py as fetch events of e's host on a real HTTP server.
func (e *env) fetchServer(t *testing.T) *httptest.Server {
	p := &Runner{
		Command: []string{e.python, filepath.Join(testdata, "cgi.py")},
		Dir:     testdata,
		Env:     []string{"PYTHONDONTWRITEBYTECODE=1", "FROM_CONFIG=yes"},
		Bridge:  e.bridge,
		Logger:  e.log,
	}
	srv := httptest.NewServer(p.Fetch(e.host))
	t.Cleanup(srv.Close)
	return srv
}

// fetch sends a request with header X-Mode: mode and returns the response and its body.
func fetch(t *testing.T, req *http.Request, mode string) (*http.Response, string) {
	t.Helper()
	if mode != "" {
		req.Header.Set("X-Mode", mode)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// report is what cgi.py's echo mode answers.
type report struct {
	Env   map[string]string
	Stdin string
	Kind  []any
	Ack   []any
	Send  []any
}

// TestFetch serves a request as a fetch event: the CGI meta-variables, the body, and
// DUILIE_EVENT/DUILIE_BRIDGE reach the script; its Status, headers and body reach the client;
// through the bridge it reads its kind (fetch), gets 当前事件不是队列事件 for a consumer function
// and sends a message that lands on the platform.
func TestFetch(t *testing.T) {
	t.Setenv("HTTP_X_INHERITED", "1")           // not a header of this request
	t.Setenv("CONTENT_TYPE", "stale/inherited") // not this request's content type
	e := newEnv(t, 0)
	srv := e.fetchServer(t)
	u, _ := url.Parse(srv.URL)

	body := `{"hello":"世界"}`
	req, _ := http.NewRequest("POST", srv.URL+"/p/x%20y?a=1&b=%20", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Custom", "v1")
	req.Header.Add("X-Custom", "v2")
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	req.Header.Set("Proxy", "http://evil.example")
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, text := fetch(t, req, "echo")

	if resp.StatusCode != 201 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Reply") != "yes" {
		t.Fatalf("response %d %v: %s", resp.StatusCode, resp.Header, text)
	}
	if resp.ContentLength != int64(len(text)) {
		t.Errorf("Content-Length %d for a body of %d bytes: the script's own Content-Length must be dropped", resp.ContentLength, len(text))
	}
	var r report
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	want := map[string]string{
		"GATEWAY_INTERFACE":  "CGI/1.1",
		"SERVER_SOFTWARE":    "duilie",
		"SERVER_PROTOCOL":    "HTTP/1.1",
		"SERVER_NAME":        "127.0.0.1",
		"SERVER_PORT":        u.Port(),
		"REQUEST_METHOD":     "POST",
		"REQUEST_URI":        "/p/x%20y?a=1&b=%20",
		"SCRIPT_NAME":        "",
		"PATH_INFO":          "/p/x y",
		"QUERY_STRING":       "a=1&b=%20",
		"REMOTE_ADDR":        "127.0.0.1",
		"CONTENT_LENGTH":     "18",
		"CONTENT_TYPE":       "application/json",
		"HTTP_X_CUSTOM":      "v1, v2",
		"HTTP_COOKIE":        "a=1; b=2",
		"HTTP_AUTHORIZATION": "Bearer t0ken",
		"HTTP_X_MODE":        "echo",
		"DUILIE_EVENT":       "fetch",
		"FROM_CONFIG":        "yes",
	}
	for k, v := range want {
		if got, ok := r.Env[k]; !ok || got != v {
			t.Errorf("%s = %q (set: %v), want %q", k, got, ok, v)
		}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH", "HTTP_X_INHERITED"} {
		if v, ok := r.Env[k]; ok {
			t.Errorf("%s = %q, want it unset", k, v)
		}
	}
	if !strings.HasPrefix(r.Env["DUILIE_BRIDGE"], "http://127.0.0.1:") || r.Env["REMOTE_PORT"] == "" || r.Env["PATH"] == "" {
		t.Errorf("DUILIE_BRIDGE %q, REMOTE_PORT %q, PATH %q", r.Env["DUILIE_BRIDGE"], r.Env["REMOTE_PORT"], r.Env["PATH"])
	}
	if r.Stdin != body {
		t.Errorf("stdin %q, want %q", r.Stdin, body)
	}
	for _, c := range []struct {
		name      string
		got, want []any
	}{
		{"读取入站事件种类", r.Kind, []any{200.0, "fetch"}},
		{"确认队列消息", r.Ack, []any{400.0, "当前事件不是队列事件"}},
		{"发送队列消息", r.Send, []any{200.0, ""}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := e.calls(); !slices.Equal(got, []string{`out: send({"hello":"世界"}, {"contentType":"json"})`}) {
		t.Errorf("platform calls %q", got)
	}

	// One log line for the event, and the script's stderr with the same event id.
	events := e.fetchEvents()
	if len(events) != 1 || events[0]["status"] != 201.0 || events[0]["outcome"] != "ok" || events[0]["path"] != "/p/x y" {
		t.Fatalf("fetch event log %v", events)
	}
	out := e.logs.records("program output")
	if len(out) != 1 || out[0]["line"] != "cgi.py running echo" || out[0]["stream"] != "stderr" || out[0]["event"] != events[0]["event"] || out[0]["kind"] != "fetch" {
		t.Errorf("program output %v, want the stderr line with event %v", out, events[0]["event"])
	}
}

// TestFetchBody: a GET has no CONTENT_LENGTH and an empty stdin; a chunked body is read whole
// and CONTENT_LENGTH is its length; a NUL in the path (which no environment can hold) is 400
// and a body over MaxRequestBytes is 413, and neither runs an event.
func TestFetchBody(t *testing.T) {
	e := newEnv(t, 0)
	srv := e.fetchServer(t)

	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	resp, text := fetch(t, req, "echo")
	var r report
	if err := json.Unmarshal([]byte(text), &r); err != nil || resp.StatusCode != 201 {
		t.Fatalf("%d %v: %s", resp.StatusCode, err, text)
	}
	if _, ok := r.Env["CONTENT_LENGTH"]; ok || r.Stdin != "" || r.Env["PATH_INFO"] != "/" || r.Env["QUERY_STRING"] != "" {
		t.Errorf("GET: CONTENT_LENGTH %q, stdin %q, PATH_INFO %q", r.Env["CONTENT_LENGTH"], r.Stdin, r.Env["PATH_INFO"])
	}

	body := strings.Repeat("[1,", 30000) + "1" + strings.Repeat("]", 30000)
	req, _ = http.NewRequest("PUT", srv.URL+"/chunked", io.MultiReader(strings.NewReader(body))) // unknown length: chunked
	resp, text = fetch(t, req, "echo")
	r = report{}
	if err := json.Unmarshal([]byte(text), &r); err != nil || resp.StatusCode != 201 {
		t.Fatalf("%d %v: %.200s", resp.StatusCode, err, text)
	}
	if r.Env["CONTENT_LENGTH"] != "120001" || r.Stdin != body {
		t.Errorf("chunked: CONTENT_LENGTH %q, stdin of %d bytes", r.Env["CONTENT_LENGTH"], len(r.Stdin))
	}

	req, _ = http.NewRequest("GET", srv.URL+"/a%00b", nil)
	if resp, text := fetch(t, req, "echo"); resp.StatusCode != 400 || !strings.Contains(text, "NUL") {
		t.Errorf("a NUL in the path: %d %q, want 400", resp.StatusCode, text)
	}

	req, _ = http.NewRequest("POST", srv.URL+"/big", strings.NewReader(strings.Repeat("x", MaxRequestBytes+1)))
	if resp, _ := fetch(t, req, "echo"); resp.StatusCode != 413 {
		t.Errorf("a body over MaxRequestBytes: %d, want 413", resp.StatusCode)
	}
	if n := len(e.fetchEvents()); n != 2 {
		t.Errorf("%d fetch events, want 2: the 413 runs none", n)
	}
}

// TestFetchFailures: a fetch event that fails answers 500, whatever the program wrote before:
// a non-zero exit after a whole response, an abort through the bridge, a response that is not
// CGI. A Location alone is a 302.
func TestFetchFailures(t *testing.T) {
	e := newEnv(t, 0)
	srv := e.fetchServer(t)
	for _, tc := range []struct {
		mode, outcome, err string
	}{
		{"fail", "failed", "program exited with status 3"},
		{"send", "aborted", "未授权的QUEUE绑定：X"},
		{"noblank", "failed", "CGI response has no blank line after its headers"},
		{"nostatus", "failed", `CGI response header line "just a body" is not a header`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/"+tc.mode, nil)
			start := time.Now()
			resp, text := fetch(t, req, tc.mode)
			if resp.StatusCode != 500 || text != "Internal Server Error\n" {
				t.Errorf("%d %q, want 500", resp.StatusCode, text)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %v", took)
			}
			ev := e.fetchEvents()
			last := ev[len(ev)-1]
			if last["outcome"] != tc.outcome || !strings.HasPrefix(last["err"].(string), tc.err) || last["status"] != 500.0 {
				t.Errorf("logged %v, want outcome %s, err %s", last, tc.outcome, tc.err)
			}
		})
	}

	req, _ := http.NewRequest("GET", srv.URL+"/redirect", nil)
	if resp, _ := fetch(t, req, "redirect"); resp.StatusCode != 302 || resp.Header.Get("Location") != "/elsewhere" {
		t.Errorf("redirect: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestFetchTimeLimit: a fetch program that overruns the time limit is killed and the client
// gets 500.
func TestFetchTimeLimit(t *testing.T) {
	e := newEnv(t, 500*time.Millisecond)
	srv := e.fetchServer(t)
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	start := time.Now()
	resp, _ := fetch(t, req, "sleep")
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want 500", resp.StatusCode)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	ev := e.fetchEvents()
	if len(ev) != 1 || ev[0]["outcome"] != "aborted" || ev[0]["err"] != "执行超过时限" {
		t.Errorf("logged %v", ev)
	}
}

// TestFetchHeaderCapacity: a request whose headers the CGI environment cannot carry (a
// variable over Linux's 128 KiB per string, or all of them over MaxMetaBytes) is answered 431
// without an event, where exec would fail with "argument list too long".
func TestFetchHeaderCapacity(t *testing.T) {
	e := newEnv(t, 0)
	srv := e.fetchServer(t) // httptest's server takes headers up to 1 MiB
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"one header over 128 KiB", map[string]string{"X-Big": strings.Repeat("a", 130<<10)}},
		{"all headers over MaxMetaBytes", func() map[string]string {
			h := map[string]string{}
			for i := range 10 {
				h[fmt.Sprintf("X-Part-%d", i)] = strings.Repeat("b", 110<<10)
			}
			return h
		}()},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, text := fetch(t, req, "echo")
		if resp.StatusCode != 431 {
			t.Errorf("%s: %d %q, want 431", tc.name, resp.StatusCode, text)
		}
	}
	if events := e.fetchEvents(); len(events) != 0 {
		t.Errorf("events ran: %v", events)
	}
	if errs := e.logs.records("program did not start"); len(errs) != 0 {
		t.Errorf("a program was started: %v", errs)
	}
}

// TestFetchHeaderNames: header names that would map to one CGI variable do not let a client
// override a proxy's header: a name holding anything but letters, digits and '-' (X_Forwarded_For,
// X.Forwarded.For) is dropped, as nginx and Apache drop them, so HTTP_X_FORWARDED_FOR is
// X-Forwarded-For's alone.
func TestFetchHeaderNames(t *testing.T) {
	e := newEnv(t, 0)
	srv := e.fetchServer(t)
	u, _ := url.Parse(srv.URL)
	for _, order := range [][2]string{{"X-Forwarded-For", "X_Forwarded_For"}, {"X_Forwarded_For", "X-Forwarded-For"}} {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		values := map[string]string{"X-Forwarded-For": "203.0.113.7", "X_Forwarded_For": "127.0.0.1"}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Mode: echo\r\n%s: %s\r\n%s: %s\r\nX.Forwarded.For: 10.0.0.1\r\nConnection: close\r\n\r\n",
			order[0], values[order[0]], order[1], values[order[1]])
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		if got := r.Env["HTTP_X_FORWARDED_FOR"]; got != "203.0.113.7" {
			t.Errorf("%s then %s: HTTP_X_FORWARDED_FOR = %q, want the X-Forwarded-For header's", order[0], order[1], got)
		}
		for k := range r.Env {
			if strings.Contains(k, ".") {
				t.Errorf("%s reached the program", k)
			}
		}
	}
}
