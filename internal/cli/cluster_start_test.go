package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Three serves started at the same moment on a fresh 3-node cluster, each creating the same
// four queues (R3 streams) and their consumers: all of them come up and serve.
func TestClusterServesStartTogether(t *testing.T) {
	t.Parallel()
	cl := startNATSCluster(t)
	var text strings.Builder
	fmt.Fprintf(&text, "[permissions]\nQUEUE = [\"JOBS\"]\n\n[[queues.producers]]\nbinding = \"JOBS\"\nqueue = \"q0\"\n")
	for i := range 4 {
		fmt.Fprintf(&text, "\n[[queues.consumers]]\nqueue = \"q%d\"\nmax_batch_timeout = 0\ndead_letter_queue = \"q%d-dead\"\n", i, i)
	}
	fmt.Fprintf(&text, "\n[app]\ncommand = [%q]\ntime_limit_ms = 10000\nshutdown_grace_ms = 1000\n\n[platform]\nnats_url = %q\nreplicas = 3\n\n[dashboard]\nlisten = \"\"\n",
		recorderBinary(t), cl.url)
	cfg := filepath.Join(t.TempDir(), "duilie.toml")
	if err := os.WriteFile(cfg, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var hosts []*hostProc
	for id := range 3 {
		hosts = append(hosts, startHost(t, cfg, dir, id, 0))
	}
	for _, h := range hosts {
		h.waitServing(t)
	}
	if err := sendBatch(t, cfg, 0, 10); err != nil {
		t.Fatalf("send-batch: %v", err)
	}
	want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	checkDelivered(t, waitDelivered(t, hosts, want, 30*time.Second), want, hosts)
}
