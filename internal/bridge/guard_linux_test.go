package bridge

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupOfSleepers starts a shell, leader of a process group of its own, that starts a sleep
// and waits for it: a program and its child.
func groupOfSleepers(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// waitKilled waits until cmd, the leader of its group, has been killed by SIGKILL, and then
// until its group is empty.
func waitKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the program ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the program was not killed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the program's child outlived it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The guard kills, when its pipe ends, every group it was told of and not told is over.
func TestGuardKillsWhatIsLeft(t *testing.T) {
	left, over := groupOfSleepers(t), groupOfSleepers(t)
	r, w := io.Pipe()
	done := make(chan int)
	go func() { done <- runGuard(r) }()
	for _, line := range []string{"+" + strconv.Itoa(left.Process.Pid), "+" + strconv.Itoa(over.Process.Pid),
		"-" + strconv.Itoa(over.Process.Pid), "+junk", "+1", "x"} {
		io.WriteString(w, line+"\n")
	}
	w.Close()
	<-done
	waitKilled(t, left)
	if err := syscall.Kill(-over.Process.Pid, 0); err != nil {
		t.Errorf("a group the guard was told is over was killed: %v", err)
	}
}

// A guard killed by hand is replaced at the next program, and the new one is told every group
// still running; when this process's end of the pipe closes (as when it dies) they are killed.
func TestGuardReplaced(t *testing.T) {
	a, b := groupOfSleepers(t), groupOfSleepers(t)
	overA, err := guardGroup(a.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer overA()
	guard.mu.Lock()
	first := guard.proc
	guard.mu.Unlock()
	if first == nil {
		t.Fatal("no guard started")
	}
	if args, _ := os.ReadFile("/proc/" + strconv.Itoa(first.Pid) + "/cmdline"); !strings.HasPrefix(string(args), "duilie-program-guard") {
		t.Fatalf("the guard's command line is %q", args)
	}
	first.Kill()
	_, _ = first.Wait()
	overB, err := guardGroup(b.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer overB()
	guard.mu.Lock()
	second := guard.proc
	guard.w.Close() // as if this process died
	guard.w = nil
	guard.mu.Unlock()
	if second == nil || second == first {
		t.Fatal("the killed guard was not replaced")
	}
	waitKilled(t, a)
	waitKilled(t, b)
}
