//go:build linux

package jetstream

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/duilie/duilie/platform"
)

// smallDisk mounts a tmpfs of size MiB for the test (root only) and returns its path.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// free is the space left on the file system of dir.
func free(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes a file into dir until only left bytes are free there, as another program
// filling the disk would.
func fill(t *testing.T, dir string, left int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("filler-%d", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for free(t, dir) > left {
		n := min(int64(len(chunk)), free(t, dir)-left)
		if _, err := f.Write(chunk[:n]); err != nil {
			return // full
		}
	}
}

// A batch sent while the disk fills is stored whole or not at all, and a refusal is the
// platform's failure, reported at once, not a wait until the caller's time limit: nothing of it
// is stored, now or after a restart. Another program fills the disk after the engine started
// (so the engine's own limit, 75% of what was free then, does not stop the sends first), to
// within 1 MiB (the engine would run out of space in the middle of a batch) or to just over
// what duilie keeps free (a few batches fit first).
func TestSendBatchFullDisk(t *testing.T) {
	for _, left := range []int64{1 << 20, DiskReserve + 1<<20} {
		t.Run(fmt.Sprintf("%d KiB left", left>>10), func(t *testing.T) {
			disk := smallDisk(t, 3+DiskReserve>>20)
			dir := filepath.Join(disk, "data")
			p, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			q := queueOf(t, p, "q")
			fill(t, disk, left)
			items := make([]platform.BatchItem, 100)
			for i := range items {
				items[i] = platform.BatchItem{Body: fmt.Appendf(nil, `"%01000d"`, i), ContentType: platform.JSON}
				if i%10 == 0 {
					items[i].DelaySeconds = 60
				}
			}
			stored := 0
			var refusal error
			for range 1000 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				start := time.Now()
				err := q.SendBatch(ctx, items)
				cancel()
				if err != nil {
					if took := time.Since(start); took > 5*time.Second {
						t.Errorf("the refusal took %v", took)
					}
					refusal = err
					break
				}
				stored += len(items)
			}
			t.Logf("%d messages stored, then: %v", stored, refusal)
			if refusal == nil || !strings.Contains(refusal.Error(), "free") {
				t.Fatalf("after %d messages: %v; want a refusal saying how much is free", stored, refusal)
			}
			count := func(p *Platform) int {
				st := stats(t, p)
				return int(st[0].Ready + st[0].Delayed)
			}
			if n := count(p); n != stored {
				t.Errorf("%d messages in the queue after %d were sent whole and one batch refused (%v)", n, stored, refusal)
			}
			p.Close()
			p, err = Open(context.Background(), Config{DataDir: dir, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if n := count(p); n != stored {
				t.Errorf("%d messages after a restart, %d sent whole", n, stored)
			}
		})
	}
}

// A batch whose acknowledgement never comes (an engine that stopped answering) fails after
// publishWait, whatever time the caller would give it: the platform's failure, not the
// caller's time limit.
func TestBatchAckWait(t *testing.T) {
	p := open(t, Config{})
	q := queueOf(t, p, "q")
	// The batch goes where something listens and never answers, as an engine that stopped.
	silent, err := p.nc.SubscribeSync("silent.commit")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	testHookEnvelope = func(m *nats.Msg) { m.Subject = "silent.commit" } // not parallel: a global
	defer func() { testHookEnvelope = nil }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = q.SendBatch(ctx, []platform.BatchItem{{Body: []byte("1"), ContentType: platform.JSON}, {Body: []byte("2"), ContentType: platform.JSON}})
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "none within 5s") || took > publishWait+2*time.Second {
		t.Errorf("after %v: %v", took, err)
	}
}
