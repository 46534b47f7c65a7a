package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/server"
)

// programServer starts a server on the embedded engine that runs testdata/app.py per event
// (Python is needed; edit may change the command) and listens for fetch events. It returns the server, the file app.py
// records in, and the events the host reported.
func programServer(t *testing.T, edit func(*server.Config)) (*server.Server, string, *reports, *syncLog) {
	t.Helper()
	// The interpreter itself: python3 may be a wrapper script (pyenv's shims) that takes longer
	// to start.
	exe, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("python3 is needed for the program of these tests")
	}
	py := strings.TrimSpace(string(exe))
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	rep := &reports{}
	log := &syncLog{}
	cc := server.DefaultConsumerConfig("tasks")
	cc.MaxBatchTimeout = host.NoBatchTimeout
	cfg := server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Consumers:   []server.ConsumerConfig{cc},
		Command:     []string{py, "app.py", out},
		Dir:         dir,
		Listen:      "127.0.0.1:0",
		TimeLimit:   10 * time.Second,
		Platform:    &jetstream.Config{DataDir: t.TempDir()},
		Logger:      slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observers:   []server.Observer{rep.add},
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if t.Failed() {
			t.Logf("log:\n%s", log)
		}
	})
	return srv, out, rep, log
}

// reports collects the host's event reports.
type reports struct {
	mu     sync.Mutex
	events []*server.EventReport
}

func (r *reports) add(rep server.Report) {
	if e, ok := rep.(*server.EventReport); ok {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}
}

func (r *reports) all() []*server.EventReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*server.EventReport(nil), r.events...)
}

func (r *reports) acked() int {
	n := 0
	for _, e := range r.all() {
		for _, m := range e.Messages {
			if m.Call.Kind != 0 && m.Action.Kind == 0 {
				n++
			}
		}
	}
	return n
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A flood of idle connections and of requests whose bodies trickle in is cut off at the
// listener's timeouts (shortened here: 300 ms for headers, 500 ms more for a body), holding at
// most its connection cap, while queue events, which reach the bridge on a listener of their
// own, keep running.
func TestFetchFlood(t *testing.T) {
	t.Parallel()
	const headerTimeout, bodyTimeout = 300 * time.Millisecond, 500 * time.Millisecond
	srv, _, rep, _ := programServer(t, func(cfg *server.Config) {
		server.SetListenerBounds(cfg, bounded.Config{HeaderTimeout: headerTimeout, BodyTimeout: bodyTimeout})
	})
	addr := srv.FetchAddr()
	type conn struct {
		c     net.Conn
		start time.Time
		slow  bool
	}
	var conns []conn
	for i := range 200 {
		start := time.Now() // the server's clock for a connection starts when it accepts it
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		slow := i%4 == 0
		if slow {
			fmt.Fprintf(c, "POST /fast HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
			go func() {
				for range 100000 {
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		conns = append(conns, conn{c, start, slow})
	}
	// Queue events run meanwhile.
	for i := range 20 {
		if err := srv.Client().Do(context.Background(), func(ev *duilie.Event) error {
			return duilie.Send(ev, "TASKS", strconv.Itoa(i), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "20 messages acked during the flood", func() bool { return rep.acked() == 20 })

	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c.c) // ends when the server closes it (or resets it: unread bytes)
			took := time.Since(c.start)
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				t.Errorf("connection still open 20 s on")
			case !c.slow && took < headerTimeout:
				t.Errorf("an idle connection closed after %v, before the header timeout", took)
			case c.slow && took < headerTimeout+bodyTimeout:
				t.Errorf("a slow body cut off after %v, before the body timeout", took)
			}
		})
	}
	wg.Wait()
	for _, e := range rep.all() {
		if e.Kind == host.FetchEvent {
			t.Errorf("a fetch event ran for a request that never arrived whole: %+v", e)
		}
	}
	// The listener still serves.
	resp, err := http.Get("http://" + addr + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "/fast\n" {
		t.Errorf("after the flood: %d %q", resp.StatusCode, b)
	}
}

// 300 requests at once against max_fetch_concurrency 4: no more than 4 programs run at once;
// requests that find no slot within FetchSlotWait are answered 503 with Retry-After and start
// no program; a request that waited for its slot has its whole time limit, counted from its
// program's start, so none is aborted for waiting; a program past its limit (2 s) is gone, its
// process group killed, within a second (it would sleep 60 s; the margin is for a loaded machine).
func TestFetchConcurrency(t *testing.T) {
	t.Parallel()
	const limit = 2 * time.Second
	srv, out, rep, log := programServer(t, func(cfg *server.Config) {
		cfg.MaxFetchConcurrency, cfg.TimeLimit = 4, limit
		cfg.Command = []string{"./fetch.sh", cfg.Command[2]} // a shell starts in a moment, even under load
		// Room for every connection: at the cap (256) a connection whose client has not sent
		// its request after 250 ms may be closed for a new one, and 300 clients in this process
		// can be that slow on a loaded machine; the cap is TestFetchSlowConnections's.
		server.SetListenerBounds(cfg, bounded.Config{MaxConns: 1024})
	})
	url := "http://" + srv.FetchAddr()
	type result struct {
		path       string
		status     int
		retryAfter string
	}
	results := make([]result, 300)
	var wg sync.WaitGroup
	// One connection per request: a client retries a GET whose kept-alive connection closed
	// under it, which would run its event twice.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range results {
		path := "/fast"
		if i%30 == 0 {
			path = "/slow"
		}
		wg.Go(func() {
			resp, err := client.Get(url + path)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results[i] = result{path, resp.StatusCode, resp.Header.Get("Retry-After")}
		})
	}
	wg.Wait()
	busy, ran := 0, 0
	for _, r := range results {
		switch {
		case r.status == 503 && r.retryAfter == "1":
			busy++
		case r.path == "/fast" && r.status == 200, r.path == "/slow" && r.status == 500:
			ran++
		default:
			t.Errorf("%s: %d (Retry-After %q)", r.path, r.status, r.retryAfter)
		}
	}
	if busy == 0 || ran < 4 {
		t.Errorf("%d requests ran and %d were turned away; want some of both", ran, busy)
	}
	events := rep.all()
	if len(events) != ran {
		t.Errorf("%d fetch events for %d requests that ran", len(events), ran)
	}
	for _, e := range events {
		switch {
		case e.Path == "/fast" && e.Outcome != server.OK:
			t.Errorf("a fast request's event ended %s (%v) after %v", e.Outcome, e.Err, e.Duration)
		case e.Path == "/slow" && e.Outcome != server.Aborted:
			t.Errorf("a slow request's event ended %s after %v; want aborted at its %v limit", e.Outcome, e.Duration, limit)
		}
	}
	// The bridge logs how long each program ran, from its start until its process group was
	// killed and it was reaped (the event answers at its limit, and the kill follows at once).
	var killed []time.Duration
	waitUntil(t, 10*time.Second, "every slow program's end logged", func() bool {
		killed = nil
		for _, line := range strings.Split(log.String(), "\n") {
			if m := programEnded.FindStringSubmatch(line); m != nil && m[1] == "/slow" {
				d, _ := time.ParseDuration(m[2])
				killed = append(killed, d)
			}
		}
		return len(killed) == countPath(events, "/slow")
	})
	for _, d := range killed {
		if d > limit+time.Second {
			t.Errorf("a program past its %v limit was gone only %v after its start", limit, d)
		}
	}
	if most := overlap(events); most > 4 {
		t.Errorf("%d fetch events ran at once, max_fetch_concurrency 4", most)
	}
	b, _ := os.ReadFile(out)
	for _, pid := range strings.Fields(strings.ReplaceAll(string(b), "slow ", "")) {
		waitUntil(t, 5*time.Second, "the slow program "+pid+" gone", func() bool {
			cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
			return err != nil || !strings.Contains(string(cmdline), "fetch.sh")
		})
	}
}

var programEnded = regexp.MustCompile(`msg="program ended" .*path=(\S+) status="?[^"]*"? duration=(\S+)`)

func countPath(events []*server.EventReport, path string) int {
	n := 0
	for _, e := range events {
		if e.Path == path {
			n++
		}
	}
	return n
}

// overlap is the most events that ran at one time.
func overlap(events []*server.EventReport) int {
	most := 0
	for _, e := range events {
		n := 0
		for _, o := range events {
			if !o.Start.After(e.Start) && o.Start.Add(o.Duration).After(e.Start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
