package jetstream

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// testCluster is a 3-node JetStream cluster running in this process on loopback ports. Each
// account is a separate JetStream namespace, so tests running in parallel on one cluster never
// see each other's queues.
type testCluster struct {
	servers  []*server.Server
	accounts int

	mu   sync.Mutex
	next int
}

const clusterPassword = "pw"

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startCluster(t testing.TB, accounts int) *testCluster {
	t.Helper()
	dir := t.TempDir()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var accs strings.Builder
	for i := range accounts {
		fmt.Fprintf(&accs, "  A%d: { jetstream: enabled, users: [{user: a%d, password: %s}] }\n", i, i, clusterPassword)
	}
	tc := &testCluster{accounts: accounts}
	for i, p := range ports {
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:-1
jetstream { store_dir: %q }
cluster { name: duilie-test, listen: 127.0.0.1:%d, routes: [%s] }
accounts {
%s  SYS: { users: [{user: sys, password: %s}] }
}
system_account: SYS
`, i, filepath.Join(dir, fmt.Sprint(i)), p, strings.Join(routes, ", "), accs.String(), clusterPassword)
		file := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatal(err)
		}
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		tc.servers = append(tc.servers, s)
	}
	t.Cleanup(tc.shutdown)
	for _, s := range tc.servers {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("cluster server not ready")
		}
	}
	// JetStream is usable once the meta group has a leader.
	nc, err := nats.Connect(tc.url(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster has no JetStream leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A meta leader places a replicated stream only on peers it has heard from: until each
	// server's first statistics reach it, an R3 stream is refused ("no suitable peers for
	// placement, peer offline"), which a loaded machine makes likely right after the start.
	for {
		online := 0
		for _, s := range tc.servers {
			online = max(online, len(s.JetStreamClusterPeers())) // non-empty on the leader only
		}
		if online == len(tc.servers) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's meta leader sees %d of %d servers online", online, len(tc.servers))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return tc
}

// url connects as the user of account a to every running server.
func (tc *testCluster) url(a int) string {
	var urls []string
	for _, s := range tc.servers {
		if s.Running() {
			addr := s.Addr().(*net.TCPAddr)
			urls = append(urls, fmt.Sprintf("nats://a%d:%s@127.0.0.1:%d", a, clusterPassword, addr.Port))
		}
	}
	return strings.Join(urls, ",")
}

// account hands out a fresh account.
func (tc *testCluster) account(t testing.TB) int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.next == tc.accounts {
		t.Fatalf("the test cluster has only %d accounts", tc.accounts)
	}
	tc.next++
	return tc.next - 1
}

// streamLeader returns the server that leads the stream of queue in account a.
func (tc *testCluster) streamLeader(t testing.TB, a int, queue string) *server.Server {
	t.Helper()
	nc, err := nats.Connect(tc.url(a))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), streamName(queue))
	if err != nil {
		t.Fatal(err)
	}
	leader := st.CachedInfo().Cluster.Leader
	for _, s := range tc.servers {
		if s.Name() == leader {
			return s
		}
	}
	t.Fatalf("no server named %q leads %s", leader, queue)
	return nil
}

func (tc *testCluster) shutdown() {
	for _, s := range tc.servers {
		s.Shutdown()
	}
	for _, s := range tc.servers {
		s.WaitForShutdown()
	}
}

// TestClusterLeaderKill shuts down the server leading a queue's R3 stream while messages are
// being sent and consumed: every send that returned success is delivered.
func TestClusterLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	tc := startCluster(t, 1)
	p := open(t, Config{URL: tc.url(0), Replicas: 3})
	q := queueOf(t, p, "q")
	c := consume(t, p, "q", 2*time.Second)

	var mu sync.Mutex
	sent, got := map[string]bool{}, map[string]bool{}
	failed := 0
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			body := fmt.Sprintf(`"m%d"`, i)
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := q.Send(sctx, []byte(body), platform.SendOptions{ContentType: platform.JSON})
			cancel()
			mu.Lock()
			if err == nil {
				sent[body] = true
			} else {
				failed++
			}
			mu.Unlock()
		}
	}()
	cctx, stopConsumer := context.WithCancel(context.Background())
	defer stopConsumer()
	wg.Add(1)
	go func() { // the consumer
		defer wg.Done()
		for cctx.Err() == nil {
			ds, err := c.Receive(cctx, 50)
			if err != nil {
				continue
			}
			mu.Lock()
			for _, d := range ds {
				got[string(d.Body)] = true
			}
			mu.Unlock()
			s := platform.Settlement{Queue: "q"}
			for _, d := range ds {
				s.Messages = append(s.Messages, platform.Resolution{Delivery: d, Action: platform.Action{Kind: platform.Done}})
			}
			sctx, cancel := context.WithTimeout(cctx, 2*time.Second)
			_ = c.Settle(sctx, s) // unconfirmed acks mean redelivery, which is allowed
			cancel()
		}
	}()
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(sent), len(got)
	}
	eventually(t, 10*time.Second, func() error {
		if s, _ := count(); s < 300 {
			return fmt.Errorf("only %d sent", s)
		}
		return nil
	})
	leader := tc.streamLeader(t, 0, "q")
	leader.Shutdown()
	killedAt, _ := count()
	killed := time.Now()
	// Keep going until sends succeed again on the new leader, and a while longer.
	eventually(t, 20*time.Second, func() error {
		if s, _ := count(); s < killedAt+300 {
			return fmt.Errorf("only %d sends succeeded since the leader went down", s-killedAt)
		}
		return nil
	})
	resumed := time.Since(killed)
	if soak() {
		time.Sleep(20 * time.Second)
	}
	stop()
	eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		var missing []string
		for b := range sent {
			if !got[b] {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d successful sends not delivered, e.g. %v", len(missing), len(sent), missing[:min(5, len(missing))])
		}
		return nil
	})
	stopConsumer()
	wg.Wait()
	s, g := count()
	t.Logf("stream leader %s shut down after %d sends; sends resumed within %v; %d sent in all (%d sends failed), %d distinct delivered",
		leader.Name(), killedAt, resumed.Round(time.Millisecond), s, failed, g)
}
