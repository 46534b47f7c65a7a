package bridge

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// Programs die with their host, however it dies (kill -9, a panic, the OOM killer): a
// program's process group must not outlive the process that started it. Two things see to it
// on Linux:
//
//   - every program is started with a parent-death signal (SIGKILL), so the program itself
//     dies with the host. The kernel sends it when the thread that forked the program ends,
//     not the process; so programs are forked by one goroutine locked to a thread of its own
//     for the life of the process (startLocked), and that thread never ends before the host;
//   - a guard process (this same executable, started once per host with DUILIE_PROGRAM_GUARD
//     set) is told each program's process group as it starts and ends. It reads from a pipe
//     whose only writer is the host; when the pipe ends, the host is gone, and the guard
//     kills every process group it was told of and not told is over. It runs in a process
//     group of its own, so a signal sent to the host's group does not take it along.
//
// A group is registered right after its program starts: a host that dies in the few
// microseconds between leaves the program to its parent-death signal, and a process it may
// have started by then behind.

// guardEnv, set to guardMagic, makes this executable a program guard instead of itself (see
// init).
const (
	guardEnv   = "DUILIE_PROGRAM_GUARD"
	guardMagic = "1"
)

func init() {
	if os.Getenv(guardEnv) == guardMagic {
		// Signals meant for the host (a terminal's ^C, a service manager's stop) are not for
		// the guard: it ends when its host does, and kills what is left then.
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		os.Exit(runGuard(os.Stdin))
	}
}

// runGuard is the guard's whole life: it keeps the process groups read from r ("+pgid" when a
// program started, "-pgid" when its group is over) until r ends, then kills those left.
func runGuard(r io.Reader) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// guard is this process's link to its program guard.
var guard struct {
	mu     sync.Mutex
	w      *os.File     // the pipe to the guard; nil until a program starts, or after it broke
	proc   *os.Process  // the guard
	groups map[int]bool // process groups of running programs
	failed error        // why no guard could be started: none is tried again
}

// guardGroup tells the guard that pgid is a running program's process group, and returns the
// func that tells it the group is over (called once the group has been killed). err is why no
// guard could be started, the first time only.
func guardGroup(pgid int) (over func(), err error) {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if guard.groups == nil {
		guard.groups = map[int]bool{}
	}
	guard.groups[pgid] = true
	failedBefore := guard.failed != nil
	guardSend('+', pgid)
	if !failedBefore {
		err = guard.failed
	}
	return func() {
		guard.mu.Lock()
		defer guard.mu.Unlock()
		delete(guard.groups, pgid)
		guardSend('-', pgid)
	}, err
}

// guardSend writes one line to the guard, starting one (again) when there is none or the
// last one is gone; a new guard is told every running group. Without a guard (one could not be
// started) programs still have their parent-death signal. guard.mu is held.
func guardSend(op byte, pgid int) {
	line := fmt.Appendf(nil, "%c%d\n", op, pgid)
	if guard.w != nil {
		if _, err := guard.w.Write(line); err == nil {
			return
		}
		_ = guard.w.Close() // the guard died (killed by hand, say): start another
		guard.w = nil
	}
	if guard.failed != nil {
		return
	}
	w, proc, err := startGuard()
	if err != nil {
		guard.failed = err
		return
	}
	guard.w, guard.proc = w, proc
	for g := range guard.groups {
		if _, err := fmt.Fprintf(w, "+%d\n", g); err != nil {
			return
		}
	}
}

// startGuard starts a guard and returns the pipe to it. The guard is not waited for: it lives
// as long as this process, and its exit is reaped by whoever reaps orphans then.
func startGuard() (*os.File, *os.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"duilie-program-guard"}
	cmd.Env = []string{guardEnv + "=" + guardMagic}
	cmd.Dir = "/"
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("bridge: start the program guard: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it, should it end before this process
	return w, cmd.Process, nil
}

// dieWithParent has the kernel kill the program when its parent dies.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// startLocked starts cmd from the one thread that forks programs (see the top of this file).
func startLocked(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.starts = make(chan forkRequest)
		go func() {
			runtime.LockOSThread() // for good: this goroutine never returns, so the thread never ends
			for req := range forker.starts {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.starts <- forkRequest{cmd, done}
	return <-done
}

var forker struct {
	once   sync.Once
	starts chan forkRequest
}

type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}
