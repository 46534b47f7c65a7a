//go:build linux

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// send-batch on a data directory whose disk another program filled: exit 1 with the platform's
// failure (队列批量发送失败：…), never the time-limit abort, and nothing of the batch stored.
func TestSendBatchFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	cfg := e2eConfig(t, 30000, 1000)
	text, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(text, fmt.Sprintf("\n[platform]\ndata_dir = %q\n", filepath.Join(disk, "data"))...), 0o644)
	batch := "[" + strings.Repeat(`{"body":"`+strings.Repeat("x", 1000)+`"},`, 99) + `{"body":1}]`
	if r := runDuilie(t, batch, nil, "send-batch", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("a batch with room: %+v", r)
	}
	// Another program takes all but 4 MiB.
	filler, err := os.Create(filepath.Join(disk, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	syscall.Statfs(disk, &st)
	filler.Write(make([]byte, int64(st.Bavail)*st.Bsize-4<<20))
	filler.Close()

	r := runDuilie(t, batch, nil, "send-batch", "--binding", "JOBS", "--config", cfg)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "队列批量发送失败：jetstream: send batch to queue jobs: the data directory's file system has ") {
		t.Errorf("a batch on a full disk: %+v", r)
	}
	r = runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	if !strings.Contains(r.stdout, `{"queue":"jobs","ready":100,`) {
		t.Errorf("after the refused batch: %+v; want the first batch's 100 messages alone", r)
	}
}
