package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/jetstream"
)

// Several hosts on one cluster (issue 10, item 5): real nats-server processes, built from the
// module this one depends on, form a 3-node JetStream cluster on loopback; two or three
// `duilie serve` processes consume the same queue from it. [app] command is testdata/recorder,
// which appends what each event delivered to a file of its serve's own.

// natsServerBinary builds nats-server, the version go.mod names, next to the duilie binary.
func natsServerBinary(t testing.TB) string {
	return buildTool(t, &natsBuild, "nats-server", "github.com/nats-io/nats-server/v2")
}

// recorderBinary builds testdata/recorder, the cluster tests' program.
func recorderBinary(t testing.TB) string {
	return buildTool(t, &recorderBuild, "recorder", "./testdata/recorder")
}

type toolBuild struct {
	once sync.Once
	err  error
}

var natsBuild, recorderBuild, inprocBuild toolBuild

func buildTool(t testing.TB, b *toolBuild, name, pkg string) string {
	t.Helper()
	duilieBinary(t) // makes binDir
	b.once.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return filepath.Join(binDir, name)
}

// natsCluster is three nats-server processes forming one JetStream cluster.
type natsCluster struct {
	t       testing.TB
	procs   []*exec.Cmd
	exited  []chan struct{}
	clients []int // client ports
	logs    []*syncWriter
	url     string // every server, comma-separated, with the user's credentials
}

func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startNATSCluster(t testing.TB) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	c := &natsCluster{t: t}
	var routes, urls []string
	routePorts := make([]int, 3)
	for i := range 3 {
		routePorts[i] = freeLoopbackPort(t)
		c.clients = append(c.clients, freeLoopbackPort(t))
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[i]))
		urls = append(urls, fmt.Sprintf("nats://a:pw@127.0.0.1:%d", c.clients[i]))
	}
	c.url = strings.Join(urls, ",")
	for i := range 3 {
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster { name: duilie-hosts, listen: 127.0.0.1:%d, routes: [%s] }
accounts {
  A: { jetstream: enabled, users: [{user: a, password: pw}] }
  SYS: { users: [{user: sys, password: pw}] }
}
system_account: SYS
`, i, c.clients[i], filepath.Join(dir, fmt.Sprint(i)), routePorts[i], strings.Join(routes, ", "))
		file := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", file)
		log := &syncWriter{}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		c.procs, c.exited, c.logs = append(c.procs, cmd), append(c.exited, exited), append(c.logs, log)
	}
	t.Cleanup(func() {
		for i, p := range c.procs {
			_ = p.Process.Kill()
			<-c.exited[i] // before the store directories are removed
			if t.Failed() {
				t.Logf("nats-server n%d log (last 20 lines):\n%s", i, c.logs[i].tail(20))
			}
		}
	})
	// Ready once JetStream answers: the meta group has a leader.
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(c.url, nats.Timeout(time.Second))
		if err == nil {
			js, _ := natsjs.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
		}
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nats-server cluster did not become ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncWriter collects a process's stdout and stderr.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// tail is the last n lines written.
func (s *syncWriter) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimRight(s.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// streamLeader returns the index of the server leading the queue's stream.
func (c *natsCluster) streamLeader(queue string) int {
	c.t.Helper()
	nc, err := nats.Connect(c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The driver's stream of a queue is DUILIE_<queue> (platform/jetstream's layout).
	s, err := js.Stream(ctx, "DUILIE_"+queue)
	if err != nil {
		c.t.Fatal(err)
	}
	if cl := s.CachedInfo().Cluster; cl != nil {
		if i, err := strconv.Atoi(strings.TrimPrefix(cl.Leader, "n")); err == nil {
			return i
		}
	}
	c.t.Fatalf("stream of queue %s has no leader: %+v", queue, s.CachedInfo().Cluster)
	return -1
}

// readyConsumer creates the queue's stream and durable consumer as serve would (the same ack
// wait: max_batch_timeout 0 + the time limit + 30 s), and waits until the consumer has a
// leader. Serves started at once on a fresh queue otherwise race its creation: a pull request
// sent before the new R3 consumer has a leader fails with "no responders", and the driver
// then waits for that request's expiry (5 s + 1 s) before it asks again.
func readyConsumer(t testing.TB, url, queue string, timeLimit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := jetstream.Open(ctx, jetstream.Config{URL: url, Replicas: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := p.Consume(ctx, queue, platform.ConsumerOptions{MaxBatchSize: 1, MaxConcurrency: 1, AckWait: timeLimit + 30*time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	for {
		// The driver's names: stream DUILIE_<queue>, durable consumer "duilie".
		if cons, err := js.Consumer(ctx, "DUILIE_"+queue, "duilie"); err == nil {
			if cl := cons.CachedInfo().Cluster; cl != nil && cl.Leader != "" {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the consumer of queue %s has no leader after 30 s", queue)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterConfig writes a duilie.toml for the cluster: producer binding JOBS and a consumer of
// queue, [app] command testdata/recorder.
func clusterConfig(t testing.TB, url, queue string, maxBatch, maxConcurrency, timeLimitMS int) string {
	t.Helper()
	return writeClusterConfig(t, url, queue, maxBatch, maxConcurrency, timeLimitMS,
		fmt.Sprintf("command = [%q]\n", recorderBinary(t)))
}

// writeClusterConfig writes the configuration with command, a line of [app] or "".
func writeClusterConfig(t testing.TB, url, queue string, maxBatch, maxConcurrency, timeLimitMS int, command string) string {
	t.Helper()
	text := fmt.Sprintf(`[permissions]
QUEUE = ["JOBS"]

[[queues.producers]]
binding = "JOBS"
queue = %q

[[queues.consumers]]
queue = %q
max_batch_size = %d
max_batch_timeout = 0
max_concurrency = %d
max_retries = 100

[app]
%stime_limit_ms = %d
shutdown_grace_ms = 1000

[platform]
nats_url = %q
replicas = 3

[dashboard]
listen = ""
`, queue, queue, maxBatch, maxConcurrency, command, timeLimitMS, url)
	path := filepath.Join(t.TempDir(), "duilie.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostProc is a running duilie serve on the cluster.
type hostProc struct {
	id   int
	cmd  *exec.Cmd
	log  string // the program's record
	done chan struct{}

	mu    sync.Mutex
	lines []string
}

// startHost starts serve number id; it does not wait for it to serve.
func startHost(t testing.TB, config, dir string, id, sleepMS int, env ...string) *hostProc {
	t.Helper()
	return startHostOf(t, duilieBinary(t), config, dir, id, sleepMS, env...)
}

// startHostOf starts serve of the binary bin: duilie, or a Go program with duilie's command line.
func startHostOf(t testing.TB, bin, config, dir string, id, sleepMS int, env ...string) *hostProc {
	t.Helper()
	h := &hostProc{id: id, log: filepath.Join(dir, fmt.Sprintf("serve%d.log", id)), done: make(chan struct{})}
	h.cmd = exec.Command(bin, "serve", "--config", config)
	h.cmd.Env = append(os.Environ(), "CLUSTER_SERVE="+strconv.Itoa(id),
		"CLUSTER_APP_LOG="+h.log, "CLUSTER_APP_SLEEP_MS="+strconv.Itoa(sleepMS))
	h.cmd.Env = append(h.cmd.Env, env...)
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			h.mu.Lock()
			h.lines = append(h.lines, sc.Text())
			h.mu.Unlock()
		}
		_ = h.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			h.mu.Lock()
			var notes []string // the log without its line per event
			for _, l := range h.lines {
				if !strings.Contains(l, `msg="queue event"`) {
					notes = append(notes, l)
				}
			}
			h.mu.Unlock()
			t.Logf("serve %d log, queue event lines left out (last 30):\n%s", id, strings.Join(notes[max(0, len(notes)-30):], "\n"))
		}
	})
	return h
}

// waitServing waits for serve's msg=serving line.
func (h *hostProc) waitServing(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		ok := false
		for _, l := range h.lines {
			if strings.Contains(l, "msg=serving") {
				ok = true
			}
		}
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.done:
			t.Fatalf("serve %d exited (%v) before serving", h.id, h.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %d is not serving after 30 s", h.id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// record is what the programs of some serves recorded.
type record struct {
	deliveries map[int]int   // message n → deliveries recorded
	byServe    map[int]int   // serve → deliveries recorded
	events     map[int][]ivl // serve → its events' spans
	total      int
	again      int // deliveries with attempts > 1
}

type ivl struct{ start, end int64 }

func readRecords(t testing.TB, hosts []*hostProc) record {
	t.Helper()
	r := record{deliveries: map[int]int{}, byServe: map[int]int{}, events: map[int][]ivl{}}
	for _, h := range hosts {
		b, err := os.ReadFile(h.log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 5 && f[0] == "m":
				n, _ := strconv.Atoi(f[2])
				r.deliveries[n]++
				r.byServe[h.id]++
				r.total++
				if a, _ := strconv.Atoi(f[4]); a > 1 {
					r.again++
				}
			case len(f) == 4 && f[0] == "e":
				s, _ := strconv.ParseInt(f[2], 10, 64)
				e, _ := strconv.ParseInt(f[3], 10, 64)
				r.events[h.id] = append(r.events[h.id], ivl{s, e})
			}
		}
	}
	return r
}

// maxOverlap is the most spans open at one instant.
func maxOverlap(spans []ivl) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	most, open := 0, 0
	for _, e := range edges {
		open += e.delta
		most = max(most, open)
	}
	return most
}

// sendBatch runs one `duilie send-batch` of the messages {"n": first…first+count-1}; nil means
// it exited 0, so the batch was accepted.
func sendBatch(t testing.TB, config string, first, count int) error {
	items := make([]string, count)
	for i := range count {
		items[i] = fmt.Sprintf(`{"body":{"n":%d}}`, first+i)
	}
	cmd := exec.Command(duilieBinary(t), "send-batch", "--binding", "JOBS", "--config", config)
	cmd.Stdin = strings.NewReader("[" + strings.Join(items, ",") + "]")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// waitDelivered waits until every message in want has been recorded, or the deadline.
func waitDelivered(t testing.TB, hosts []*hostProc, want []int, wait time.Duration) record {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		r := readRecords(t, hosts)
		missing := 0
		for _, n := range want {
			if r.deliveries[n] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkDelivered fails the test for every accepted message never delivered, and logs the
// duplicates and the spread.
func checkDelivered(t testing.TB, r record, accepted []int, hosts []*hostProc) {
	t.Helper()
	var missing []int
	for _, n := range accepted {
		if r.deliveries[n] == 0 {
			missing = append(missing, n)
		}
	}
	dups := 0
	for _, k := range r.deliveries {
		dups += k - 1
	}
	var spread []string
	for _, h := range hosts {
		spread = append(spread, fmt.Sprintf("serve %d: %d", h.id, r.byServe[h.id]))
	}
	t.Logf("%d accepted, %d distinct delivered, %d deliveries (%d duplicates, %d with attempts > 1); %s",
		len(accepted), len(r.deliveries), r.total, dups, r.again, strings.Join(spread, ", "))
	if len(missing) > 0 {
		t.Errorf("%d accepted messages never delivered, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
}

// Two serves on a 3-node cluster share a queue: every message sent is delivered, both serves
// get a share, and max_concurrency bounds each serve's own events, not the cluster's.
func TestClusterHostsShare(t *testing.T) {
	t.Parallel()
	cl := startNATSCluster(t)
	dir := t.TempDir()
	const maxConcurrency = 2
	cfg := clusterConfig(t, cl.url, "jobs", 10, maxConcurrency, 10000)
	// The backlog is there before the serves start: a serve that keeps up with a trickle of
	// sends may rightly take it all, so only a backlog shows whether the work is shared.
	var accepted []int
	const total, per = 400, 50
	for first := 0; first < total; first += per {
		if err := sendBatch(t, cfg, first, per); err != nil {
			t.Fatalf("send-batch: %v", err)
		}
		for n := first; n < first+per; n++ {
			accepted = append(accepted, n)
		}
	}
	// Paused until both serve: a serve slow to start on a loaded machine would otherwise find
	// the backlog gone.
	readyConsumer(t, cl.url, "jobs", 10*time.Second)
	if r := runDuilie(t, "", nil, "pause", "jobs", "--config", cfg); r.code != 0 {
		t.Fatalf("pause: exit %d, %s", r.code, r.stderr)
	}
	var hosts []*hostProc
	for id := range 2 {
		hosts = append(hosts, startHost(t, cfg, dir, id, 40))
	}
	for _, h := range hosts {
		h.waitServing(t)
	}
	if r := runDuilie(t, "", nil, "resume", "jobs", "--config", cfg); r.code != 0 {
		t.Fatalf("resume: exit %d, %s", r.code, r.stderr)
	}
	r := waitDelivered(t, hosts, accepted, 30*time.Second)
	checkDelivered(t, r, accepted, hosts)
	var all []ivl
	for _, h := range hosts {
		if r.byServe[h.id] == 0 {
			t.Errorf("serve %d got no message", h.id)
		}
		if k := maxOverlap(r.events[h.id]); k > maxConcurrency {
			t.Errorf("serve %d ran %d events at once, max_concurrency is %d", h.id, k, maxConcurrency)
		}
		all = append(all, r.events[h.id]...)
	}
	// Each event sleeps 40 ms and the backlog is 40 batches: with the limit per process, the
	// two serves together run more than max_concurrency events at some moment.
	t.Logf("events at once: serve 0 %d, serve 1 %d, both %d", maxOverlap(r.events[0]), maxOverlap(r.events[1]), maxOverlap(all))
	if k := maxOverlap(all); k <= maxConcurrency {
		t.Errorf("the serves together ran at most %d events at once: max_concurrency %d looks cluster-wide", k, maxConcurrency)
	}
}

// Three serves consume one queue on a 3-node cluster while send-batch processes keep sending;
// one serve is killed with SIGKILL, then one nats-server (the stream's leader). Every message
// of an accepted batch is delivered at least once. Long (its killed serve's messages come back
// after the ack wait, over 30 s): DUILIE_CLUSTER_E2E=1 runs it.
func TestClusterHostsKill(t *testing.T) {
	if os.Getenv("DUILIE_CLUSTER_E2E") == "" {
		t.Skip("about 60 s with real nats-server and serve processes; DUILIE_CLUSTER_E2E=1 runs it")
	}
	cl := startNATSCluster(t)
	dir := t.TempDir()
	cfg := clusterConfig(t, cl.url, "jobs", 20, 2, 2000)
	readyConsumer(t, cl.url, "jobs", 2*time.Second)
	var hosts []*hostProc
	for id := range 3 {
		// Serve 0's events wait 300 ms before they read their batch, so that it has batches
		// in flight when it is killed, and they record nothing then: those messages count as
		// delivered only once another serve gets them again.
		var env []string
		if id == 0 {
			env = append(env, "CLUSTER_APP_SLEEP_BEFORE_MS=300")
		}
		hosts = append(hosts, startHost(t, cfg, dir, id, 5, env...))
	}
	for _, h := range hosts {
		h.waitServing(t)
	}

	const per = 25
	var (
		mu       sync.Mutex
		accepted []int
		failed   []string
		next     atomic.Int64
		killedAt time.Time // the nats-server's kill
		resumed  []time.Duration
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 { // two producers, each a send-batch process after another
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				first := int(next.Add(per)) - per
				began := time.Now()
				err := sendBatch(t, cfg, first, per)
				mu.Lock()
				since := "before the nats-server's kill"
				if !killedAt.IsZero() && began.After(killedAt) {
					since = fmt.Sprintf("started %.1f s after the nats-server's kill", began.Sub(killedAt).Seconds())
				}
				if err == nil {
					for n := first; n < first+per; n++ {
						accepted = append(accepted, n)
					}
					if !killedAt.IsZero() && began.After(killedAt) {
						resumed = append(resumed, began.Sub(killedAt))
					}
				} else {
					failed = append(failed, fmt.Sprintf("batch %d (%s, took %.1f s): %v", first, since, time.Since(began).Seconds(), err))
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(4 * time.Second)
	before := readRecords(t, hosts)
	if before.byServe[0] == 0 {
		t.Errorf("serve 0 got nothing in 4 s of traffic")
	}
	_ = hosts[0].cmd.Process.Kill()
	t.Logf("killed serve 0 (pid %d) after it recorded %d deliveries", hosts[0].cmd.Process.Pid, before.byServe[0])
	time.Sleep(3 * time.Second)
	leader := cl.streamLeader("jobs")
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	_ = cl.procs[leader].Process.Kill()
	t.Logf("killed nats-server n%d (pid %d), the stream's leader", leader, cl.procs[leader].Process.Pid)
	time.Sleep(15 * time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(accepted) < 200 {
		t.Fatalf("only %d messages accepted; failures: %v", len(accepted), failed)
	}
	t.Logf("%d batches failed to send (not counted as accepted):\n%s", len(failed), strings.Join(failed, "\n"))
	if len(resumed) == 0 {
		t.Errorf("no batch started after the nats-server's kill was accepted in 15 s")
	} else {
		t.Logf("%d batches started after the nats-server's kill were accepted, the first started %.1f s after it", len(resumed), resumed[0].Seconds())
	}
	// The killed serve's unfinished batches come back after the ack wait: 0 + 2 s + 30 s.
	r := waitDelivered(t, hosts, accepted, 60*time.Second)
	checkDelivered(t, r, accepted, hosts)
	if r.again == 0 {
		t.Errorf("no message came back with attempts > 1: the killed serve's batches in flight were not redelivered")
	}
	after := 0
	for _, h := range hosts[1:] {
		if r.byServe[h.id] == 0 {
			t.Errorf("serve %d got no message", h.id)
		}
		after += r.byServe[h.id] - before.byServe[h.id]
	}
	if after == 0 {
		t.Errorf("nothing delivered after the kills")
	}
}

// BenchmarkClusterHosts: the same workload (b.N messages of {"n":…}, about 12 B, already in the
// queue) drained by 1, 2 and 3 serve processes on a 3-node cluster of nats-server processes
// (R3), max_batch_size 100, max_concurrency 4. program=process: `duilie serve` running
// testdata/recorder once per batch; program=inproc: testdata/inproc, a Go program on package
// app whose handler records in-process. Reports msgs/s from the serves' start to the last
// message recorded, and the CPU time the serves (with their programs) and the nats-servers
// took per message.
//
//	go test -run '^$' -bench ClusterHosts -benchtime 20000x ./internal/cli/
func BenchmarkClusterHosts(b *testing.B) {
	cl := startNATSCluster(b)
	for _, program := range []string{"process", "inproc"} {
		for _, serves := range []int{1, 2, 3} {
			benchClusterHosts(b, cl, program, serves)
		}
	}
}

func benchClusterHosts(b *testing.B, cl *natsCluster, program string, serves int) {
	b.Run(fmt.Sprintf("program=%s/serves=%d", program, serves), func(b *testing.B) {
		queue := fmt.Sprintf("bench-%s-%d-%d", program, serves, b.N)
		bin, cfg := duilieBinary(b), clusterConfig(b, cl.url, queue, 100, 4, 30000)
		if program == "inproc" {
			bin = buildTool(b, &inprocBuild, "inproc", "./testdata/inproc")
			cfg = writeClusterConfig(b, cl.url, queue, 100, 4, 30000, "")
		}
		preload(b, cl.url, queue, b.N)
		readyConsumer(b, cl.url, queue, 30*time.Second)
		dir := b.TempDir()
		natsBefore := cl.cpu()
		machineBefore := machineBusy()
		b.ResetTimer()
		start := time.Now()
		var hosts []*hostProc
		for id := range serves {
			hosts = append(hosts, startHostOf(b, bin, cfg, dir, id, 0))
		}
		want := make([]int, b.N)
		for i := range want {
			want[i] = i
		}
		r := waitDelivered(b, hosts, want, 10*time.Minute)
		elapsed := time.Since(start)
		b.StopTimer()
		natsCPU := cl.cpu() - natsBefore
		machine := machineBusy().sub(machineBefore)
		if len(r.deliveries) != b.N {
			b.Fatalf("%d of %d messages delivered", len(r.deliveries), b.N)
		}
		for _, h := range hosts {
			_ = h.cmd.Process.Signal(os.Interrupt)
		}
		// A serve's CPU time counts its programs (their processes are waited for).
		var serveCPU time.Duration
		for _, h := range hosts {
			<-h.done
			serveCPU += h.cmd.ProcessState.UserTime() + h.cmd.ProcessState.SystemTime()
		}
		rate := float64(b.N) / elapsed.Seconds()
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(float64(serveCPU.Microseconds())/float64(b.N), "serve-cpu-µs/msg")
		b.ReportMetric(float64(natsCPU.Microseconds())/float64(b.N), "nats-cpu-µs/msg")
		var spread []string
		for _, h := range hosts {
			spread = append(spread, strconv.Itoa(r.byServe[h.id]))
		}
		b.Logf("%d messages, %d serves: %.2f s, %.0f msgs/s, spread %s, %d duplicates; CPU: serves and their programs %.2f s, nats-servers %.2f s; machine busy %.0f%% of its %d CPUs (everyone's work)",
			b.N, serves, elapsed.Seconds(), rate, strings.Join(spread, "/"), r.total-len(r.deliveries),
			serveCPU.Seconds(), natsCPU.Seconds(), 100*machine, runtime.NumCPU())
	})
}

// cpu is the CPU time the cluster's live servers have used so far (Linux; 0 elsewhere).
func (c *natsCluster) cpu() time.Duration {
	var total time.Duration
	for _, p := range c.procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			total += time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
		}
	}
	return total
}

// busy is the machine's CPU time, all CPUs, from /proc/stat: busy and total jiffies.
type busy struct{ busy, total int64 }

func machineBusy() busy {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return busy{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var v busy
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseInt(f, 10, 64)
		v.total += n
		if i != 3 && i != 4 { // idle, iowait
			v.busy += n
		}
	}
	return v
}

// sub is the busy fraction between an earlier reading and this one.
func (v busy) sub(before busy) float64 {
	if v.total == before.total {
		return 0
	}
	return float64(v.busy-before.busy) / float64(v.total-before.total)
}

// preload sends n messages {"n": 0…n-1} to queue through the platform, in batches of 100 from
// 4 goroutines.
func preload(b testing.TB, url, queue string, n int) {
	b.Helper()
	ctx := context.Background()
	p, err := jetstream.Open(ctx, jetstream.Config{URL: url, Replicas: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	q, err := p.Queue(ctx, queue)
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				first := int(next.Add(100)) - 100
				if first >= n {
					errs <- nil
					return
				}
				var items []platform.BatchItem
				for i := first; i < min(first+100, n); i++ {
					items = append(items, platform.BatchItem{Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), ContentType: platform.JSON})
				}
				if err := q.SendBatch(ctx, items); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
