package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/serve"
	"github.com/duilie/duilie/server"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/platform/memory"
)

// scrape reads the dashboard's /metrics with Prometheus's own text parser.
func scrape(t *testing.T, addr, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value is the value of the family's metric with exactly these labels (a counter's or gauge's
// value, a histogram's count), or -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func histogramSum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range fams[name].GetMetric() {
		ok := len(m.GetLabel()) == len(labels)
		for _, l := range m.GetLabel() {
			ok = ok && labels[l.GetName()] == l.GetValue()
		}
		if ok && m.Histogram != nil {
			return m.Histogram.GetSampleSum()
		}
	}
	return -1
}

// /metrics after a known workload on the embedded engine: every count is what the workload did.
func TestMetricsAfterWorkload(t *testing.T) {
	t.Parallel()
	type task struct {
		Fail  int  `json:"fail"`  // retried while attempts < fail
		Crash bool `json:"crash"` // the first delivery's event fails
	}
	handle := func(ev *duilie.Event) error {
		b, err := duilie.ReadBatchOf[task](ev)
		if err != nil {
			return err
		}
		for i, m := range b.Messages {
			switch {
			case m.Body.Crash && m.Attempts == 1:
				return errors.New("crash")
			case m.Attempts < m.Body.Fail:
				_ = duilie.Retry(ev, i, 0)
			default:
				_ = duilie.Ack(ev, i)
			}
		}
		return nil
	}
	cc := server.DefaultConsumerConfig("jobs")
	cc.MaxBatchSize, cc.MaxBatchTimeout, cc.MaxRetries, cc.DeadLetterQueue = 1, server.NoBatchTimeout, 1, "jobs-dead"
	dataDir := t.TempDir()
	srv, err := serve.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"JOBS"}},
		Bindings:    map[string]string{"JOBS": "jobs"},
		Consumers:   []server.ConsumerConfig{cc},
		Program: &duilie.Program{Queue: handle, Fetch: func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			body, _ := io.ReadAll(r.Body)
			var send error
			if body[0] == '[' {
				send = duilie.SendBatch(ev, "JOBS", string(body))
			} else {
				send = duilie.Send(ev, "JOBS", string(body), 0)
			}
			if send != nil {
				return send
			}
			w.WriteHeader(http.StatusAccepted)
			return nil
		}},
		Listen:    "127.0.0.1:0",
		Platform:  &jetstream.Config{DataDir: dataDir},
		Dashboard: server.DashboardConfig{Listen: "127.0.0.1:0"},
		Logger:    quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)

	// 9 messages in 7 fetch events: 5 that succeed, 2 retried once, 1 retried until it is
	// dead-lettered, 1 whose first event fails.
	for _, body := range []string{`[{"body":{}},{"body":{}},{"body":{}}]`, `{}`, `{}`, `{"fail":2}`, `{"fail":2}`, `{"fail":99}`, `{"crash":true}`} {
		resp, err := http.Post("http://"+srv.FetchAddr()+"/", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("POST %s: %s", body, resp.Status)
		}
	}
	addr := srv.DashboardAddr()
	jobs := map[string]string{"queue": "jobs"}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams = scrape(t, addr, ownToken(t, dataDir))
		if value(fams, "duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "acked"}) == 8 &&
			value(fams, "duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "dead_lettered"}) == 1 &&
			value(fams, "duilie_consumer_batches_in_flight", jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload did not settle within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"duilie_messages_sent_total", jobs, 9},
		{"duilie_messages_delivered_total", jobs, 13}, // 5 + 2×2 + 2 + 2
		{"duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "acked"}, 8},
		{"duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "retried"}, 4},
		{"duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "dead_lettered"}, 1},
		{"duilie_messages_settled_total", map[string]string{"queue": "jobs", "result": "dropped"}, -1},
		{"duilie_events_total", map[string]string{"kind": "queue", "queue": "jobs", "outcome": "ok"}, 12},
		{"duilie_events_total", map[string]string{"kind": "queue", "queue": "jobs", "outcome": "failed"}, 1},
		{"duilie_events_total", map[string]string{"kind": "fetch", "queue": "", "outcome": "ok"}, 7},
		{"duilie_event_duration_seconds", map[string]string{"kind": "queue", "queue": "jobs"}, 13},
		{"duilie_delivery_lag_seconds", jobs, 13},
		{"duilie_batch_messages", jobs, 13},
		{"duilie_consumer_batches_in_flight", jobs, 0},
		{"duilie_queue_messages", map[string]string{"queue": "jobs-dead", "state": "ready"}, 1},
		{"duilie_queue_messages", map[string]string{"queue": "jobs", "state": "ready"}, 0},
		{"duilie_queue_messages", map[string]string{"queue": "jobs", "state": "delayed"}, 0},
		{"duilie_queue_messages", map[string]string{"queue": "jobs", "state": "in_flight"}, 0},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if sum := histogramSum(fams, "duilie_batch_messages", jobs); sum != 13 {
		t.Errorf("duilie_batch_messages sum %v, want 13", sum)
	}
	if f := fams["duilie_build_info"]; f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("duilie_build_info: %v", f)
	}
	// No label holds a message id or an error's text.
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if len(l.GetValue()) == 32 || strings.Contains(l.GetValue(), "crash") {
					t.Errorf("%s has a high-cardinality label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A dashboard beyond loopback refuses to start without its token; with one, every request
// needs it, and an action from another origin is refused even with it.
func TestDashboardToken(t *testing.T) { // not parallel: it sets an environment variable
	base := server.Config{Platform: &memory.Config{}, Logger: quietLog()}
	for _, c := range []struct {
		dash server.DashboardConfig
		want string
	}{
		{server.DashboardConfig{Listen: "0.0.0.0:0"}, `Dashboard.Listen = "0.0.0.0:0": is not a loopback address, so the dashboard needs a token: name the environment variable that holds it with dashboard.token_env`},
		{server.DashboardConfig{Listen: "0.0.0.0:0", TokenEnv: "DUILIE_TEST_UNSET_TOKEN"}, `Dashboard.TokenEnv = "DUILIE_TEST_UNSET_TOKEN": names an environment variable that is unset or empty; the dashboard needs its token`},
	} {
		cfg := base
		cfg.Dashboard = c.dash
		_, err := serve.New(cfg)
		var ce *server.ConfigError
		if !errors.As(err, &ce) || ce.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.dash, err, c.want)
		}
	}

	t.Setenv("DUILIE_TEST_TOKEN", "s3cret")
	cfg := base
	cfg.Consumers = []server.ConsumerConfig{server.DefaultConsumerConfig("jobs")}
	cfg.Program = &duilie.Program{Queue: func(ev *duilie.Event) error { return nil }}
	cfg.Dashboard = server.DashboardConfig{Listen: "127.0.0.1:0", TokenEnv: "DUILIE_TEST_TOKEN"}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	url := "http://" + srv.DashboardAddr()
	do := func(method, path, token, origin string) int {
		code, _ := request(t, method, url+path, `{}`, "Content-Type", "application/json", "Authorization", bearer(token), "Origin", origin)
		return code
	}
	for _, c := range []struct {
		method, path, token, origin string
		want                        int
	}{
		{"POST", "/api/queues/jobs/pause", "", "", 403},
		{"POST", "/api/queues/jobs/pause", "wrong", "", 403},
		{"GET", "/", "", "", 403},
		{"GET", "/metrics", "", "", 403},
		{"GET", "/api/queues", "", "", 403},
		{"POST", "/api/queues/jobs/pause", "s3cret", "http://evil.example", 403},
		{"GET", "/metrics", "s3cret", "", 200},
		{"POST", "/api/queues/jobs/pause", "s3cret", "", 200},
		{"POST", "/api/queues/jobs/resume", "s3cret", url, 200},
		{"GET", "/api/queues/jobs/pause", "s3cret", "", 405},
		{"POST", "/api/queues/Not-A-Queue/pause", "s3cret", "", 400},
		{"POST", "/api/queues/nowhere/pause", "s3cret", "", 404},
		{"GET", "/api/queues/jobs/messages?state=gone", "s3cret", "", 400},
	} {
		if got := do(c.method, c.path, c.token, c.origin); got != c.want {
			t.Errorf("%s %s token %q origin %q: %d, want %d", c.method, c.path, c.token, c.origin, got, c.want)
		}
	}
	// The page's link with the token sets a cookie that later requests carry.
	client := &http.Client{Jar: newJar()}
	resp, err := client.Get(url + "/?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "/static/app.js") {
		t.Errorf("GET /?token=: %s %q", resp.Status, page)
	}
	resp, err = client.Get(url + "/api/queues")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(rows) != 1 || rows[0]["queue"] != "jobs" {
		t.Errorf("GET /api/queues with the cookie: %s %v", resp.Status, rows)
	}
}

// Without a token of its own the dashboard needs the one in the token file, on loopback too, on
// every request: any account on the machine can reach a loopback port. Actions must also come
// from its own origin.
func TestDashboardOwnToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A file may configure a binding it does not permit (its programs then abort).
	cfg, err := server.ParseConfig("duilie.toml", dir, []byte(`
[[queues.producers]]
binding = "JOBS"
queue = "jobs"
[platform]
kind = "memory"
[dashboard]
listen = "127.0.0.1:0"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = quietLog()
	srv, err := serve.New(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	addr := srv.DashboardAddr()
	token := ownToken(t, filepath.Join(dir, ".duilie"))
	for _, path := range []string{"/", "/api/queues", "/api/queues/jobs/messages", "/metrics", "/static/app.js"} {
		if code, _ := request(t, "GET", "http://"+addr+path, "", "Host", "localhost:8789"); code != 403 {
			t.Errorf("GET %s without the token, from loopback: %d, want 403", path, code)
		}
		if code, _ := request(t, "GET", "http://"+addr+path, "", "Authorization", "Bearer wrong"+token[5:]); code != 403 {
			t.Errorf("GET %s with a wrong token: %d, want 403", path, code)
		}
	}
	if code, _ := request(t, "POST", "http://"+addr+"/api/queues/jobs/purge", "{}", "Content-Type", "application/json"); code != 403 {
		t.Errorf("a purge without the token: %d", code)
	}
	do := func(method, path, hostHdr, origin, ctype, body string) (int, string) {
		return request(t, method, "http://"+addr+path, body, "Host", hostHdr, "Content-Type", ctype, "Origin", origin, "Authorization", "Bearer "+token)
	}
	for _, c := range []struct {
		method, path, host, origin, ctype, body string
		want                                    int
	}{
		{"GET", "/api/queues", "localhost:8789", "", "", "", 200},
		{"POST", "/api/queues/jobs/pause", "", "http://evil.example", "application/json", "{}", 403},
		{"POST", "/api/queues/jobs/pause", "", "http://" + addr, "text/plain", "{}", 415},
		{"POST", "/api/queues/jobs/pause", "", "http://" + addr, "application/json", "{}", 200},
		{"POST", "/api/queues/jobs/replay", "", "", "application/json", `{"bogus":1}`, 400},
	} {
		if got, body := do(c.method, c.path, c.host, c.origin, c.ctype, c.body); got != c.want {
			t.Errorf("%s %s host %q origin %q: %d %s, want %d", c.method, c.path, c.host, c.origin, got, body, c.want)
		}
	}
	// A test message goes through the interface's checks: the exact exception comes back.
	if code, body := do("POST", "/api/queues/jobs/send", "", "", "application/json", `{"body":"{"}`); code != 200 || body != `{"sent":false,"binding":"JOBS","exception":"消息体不是有效的 JSON 文字","code":"body_not_json","gloss":"the message body is not a JSON text","detail":"at byte 1: unexpected end of JSON input"}`+"\n" {
		t.Errorf("send a bad body: %d %s", code, body)
	}
	// JOBS is configured but not permitted: the abort comes back.
	if code, body := do("POST", "/api/queues/jobs/send", "", "", "application/json", `{"body":"{}"}`); code != 200 || body != `{"sent":false,"binding":"JOBS","exception":"未授权的QUEUE绑定：JOBS","code":"not_permitted","gloss":"the host's permissions (QUEUE) do not list this binding","detail":"no binding is permitted"}`+"\n" {
		t.Errorf("send through a binding not permitted: %d %s", code, body)
	}
}

// ownToken is the token in the token file of dir, which a server made.
func ownToken(t *testing.T, dir string) string {
	t.Helper()
	token, err := server.SurfaceToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}

// request makes one HTTP request with the headers given as name, value pairs ("Host" sets the
// request's host; an empty value sets nothing) and returns its status and body.
func request(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch name, v := header[i], header[i+1]; {
		case v == "":
		case name == "Host":
			req.Host = v
		default:
			req.Header.Set(name, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// Two servers on the default dashboard address: the second finds it taken, takes a free
// loopback port instead and logs both, so two serves on one machine both start.
func TestDashboardDefaultTaken(t *testing.T) { // not parallel: it takes the default address
	dir := t.TempDir()
	start := func(log *logBuffer) *serve.Server {
		t.Helper()
		srv, err := serve.New(server.Config{Platform: &memory.Config{}, Dashboard: server.DefaultDashboard(),
			Logger: slog.New(slog.NewTextHandler(log, nil)), Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			t.Fatalf("start with the default dashboard address: %v", err)
		}
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		return srv
	}
	var log1, log2 logBuffer
	first := start(&log1)
	second := start(&log2)
	a1, a2 := first.DashboardAddr(), second.DashboardAddr()
	host, _, _ := strings.Cut(a2, ":")
	if a1 == "" || a2 == "" || a1 == a2 || host != "127.0.0.1" || a2 == server.DefaultDashboardListen {
		t.Fatalf("dashboards on %q and %q: want two loopback addresses, the second not the default", a1, a2)
	}
	logged := log2.String()
	if !strings.Contains(logged, `msg="the dashboard's address is taken; using a free loopback port" address=127.0.0.1:8789`) ||
		!strings.Contains(logged, `msg=dashboard url="http://`+a2+`/?token=`+ownToken(t, filepath.Join(dir, ".duilie"))+`"`) {
		t.Errorf("the second server logged:\n%s", logged)
	}
	// Both answer.
	for _, a := range []string{a1, a2} {
		if code, _ := request(t, "GET", "http://"+a+"/api/queues", "", "Authorization", "Bearer "+ownToken(t, filepath.Join(dir, ".duilie"))); code != 200 {
			t.Errorf("GET http://%s/api/queues: %d", a, code)
		}
	}
	// An address the configuration names is not replaced: taken, the server does not start.
	srv, err := serve.New(server.Config{Platform: &memory.Config{}, Logger: quietLog(), Dashboard: server.DashboardConfig{Listen: a2}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err == nil {
		srv.Shutdown(context.Background())
		t.Errorf("a server started with its configured dashboard address %s taken", a2)
	}
}

// logBuffer keeps a server's log, written and read from different goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An http_pull consumer's dead-letter queue is shown and replayed on the dashboard as a program
// consumer's is: its queue's row names it with its count, and replay sends it back there.
func TestDashboardPullConsumerDeadLetters(t *testing.T) {
	t.Parallel()
	pc := server.DefaultPullConsumer("audit")
	pc.DeadLetterQueue = "audit-dlq"
	srv, err := serve.New(server.Config{Platform: &memory.Config{}, Logger: quietLog(), Dashboard: server.DashboardConfig{Listen: "127.0.0.1:0", Token: "dt"},
		CloudflareAPI: server.CloudflareAPI{Listen: "127.0.0.1:0", AccountID: "acc", Token: "t", PullConsumers: []server.PullConsumer{pc}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	if err := srv.Client().Push(ctx, "audit-dlq", server.PushMessage{Body: []byte(`{"n":1}`), ContentType: "json"}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + srv.DashboardAddr()
	code, body := request(t, "GET", url+"/api/queues", "", "Authorization", "Bearer dt")
	var rows []struct {
		Queue           string   `json:"queue"`
		Ready           int      `json:"ready"`
		DeadLetterQueue string   `json:"dead_letter_queue"`
		DeadLetters     *int     `json:"dead_letters"`
		Sources         []string `json:"sources"`
	}
	if err := json.Unmarshal([]byte(body), &rows); code != 200 || err != nil || len(rows) != 2 {
		t.Fatalf("GET /api/queues: %d %s", code, body)
	}
	if r := rows[0]; r.Queue != "audit" || r.DeadLetterQueue != "audit-dlq" || r.DeadLetters == nil || *r.DeadLetters != 1 {
		t.Errorf("audit's row %+v, want its dead-letter queue audit-dlq with 1 message", r)
	}
	if r := rows[1]; r.Queue != "audit-dlq" || !slices.Equal(r.Sources, []string{"audit"}) {
		t.Errorf("audit-dlq's row %+v, want audit as its source", r)
	}
	code, body = request(t, "POST", url+"/api/queues/audit-dlq/replay", `{}`, "Content-Type", "application/json", "Authorization", "Bearer dt")
	if code != 200 || body != `{"replayed":1,"to":"audit"}`+"\n" {
		t.Errorf("replay: %d %s", code, body)
	}
}
