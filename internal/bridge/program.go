package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/internal/host"
)

// Runner runs an external command once per event (SPEC §13 "Program per event"): a fresh
// process, in its own process group, that reaches the interface through its event's bridge URL.
type Runner struct {
	Command []string     // [app] command: the executable and its arguments
	Dir     string       // working directory: the config file's directory; "" is the current one
	Env     []string     // extra environment ("KEY=value"), added to os.Environ()
	Bridge  *Server      // serves the program's calls
	Logger  *slog.Logger // the program's stdout/stderr lines, with the event's id; nil means slog.Default()
	// MaxOutput is how much of each output stream of one event is logged, in bytes; 0 means
	// DefaultMaxOutput. Beyond it the stream is read and dropped, and one line says how much.
	MaxOutput int

	running sync.WaitGroup // program runs not yet over

	mu     sync.Mutex
	groups map[*os.Process]struct{} // running programs, whose process groups Kill kills
	killed bool                     // Kill was called: a program that starts later is killed at once
}

// DefaultMaxOutput is Runner.MaxOutput when it is zero: 1 MiB per stream and event.
const DefaultMaxOutput = 1 << 20

// Kill kills the process group of every running program at once, and of every program
// started later; their events fail. It is the host's last resort (a second signal): a host
// that exits right after leaves no program behind. Kill does not wait for the runs to end;
// Wait does.
func (p *Runner) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	for proc := range p.groups {
		killGroup(proc)
	}
}

// track records a started program until the returned func is called; a program started after
// Kill is killed at once.
func (p *Runner) track(proc *os.Process) (untrack func()) {
	guarded, err := guardGroup(proc.Pid) // killed even if this process dies (guard_linux.go)
	if err != nil {
		p.logger().Warn("a program's own processes may outlive this one if it is killed", "err", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		killGroup(proc)
	}
	if p.groups == nil {
		p.groups = map[*os.Process]struct{}{}
	}
	p.groups[proc] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.groups, proc)
		p.mu.Unlock()
		guarded()
	}
}

// Wait waits until every run of the program has ended: its process reaped, its group killed.
// host.Run returns at an event's time limit, or when the host halts, without waiting for the
// handler; the handler then kills the program at once but may still be at it. A host that is
// shutting down calls Wait after Halt, so that no program outlives it.
func (p *Runner) Wait() {
	p.running.Wait()
}

// Environment variables every program gets.
const (
	EnvEvent  = "DUILIE_EVENT"  // the event kind: queue or fetch
	EnvBridge = "DUILIE_BRIDGE" // the event's bridge URL
)

// loopbackHosts are added to every program's NO_PROXY and no_proxy, so that a proxy set in the
// host's environment (http_proxy) never catches the bridge URL, which only this machine can
// reach anyway.
const loopbackHosts = "127.0.0.1,localhost,::1"

// OutputWait is how long an event waits, once its program has exited and its process group
// has been killed, for the program's output pipes to close. Only a process that left the group
// (setsid) while holding them open can make the wait run out; the pipes are then abandoned.
const OutputWait = time.Second

// maxLine is the longest output line logged as one record; a longer line is logged in pieces.
const maxLine = 64 << 10

// Why an event's program was killed, besides its event ending.
var (
	errBridgeAbort  = errors.New("aborted through the bridge")
	errResponseSize = fmt.Errorf("CGI response over %d bytes", MaxResponseBytes)
)

// Queue is a duilie.Handler that runs the command for a queue event, with DUILIE_EVENT=queue and
// DUILIE_BRIDGE set. Exit status 0 ends the event normally. Any other exit status, or a signal,
// fails it with an error such as "program exited with status 3", which unwraps to the
// *exec.ExitError. A program that cannot be started (too many open files, an argument list
// too long, an executable that cannot be run) is a *host.StartError: the host's failure, which
// costs its messages no attempt. At the event's time limit, or after a bridge call aborted the
// event, the whole process group is killed and the event fails with its abort. When the event
// ends, whatever is left of the process group is killed. stdin is empty; every line of stdout
// and stderr is logged with the event id, the queue and the stream, up to MaxOutput each.
func (p *Runner) Queue(ev *duilie.Event) error {
	attrs := []any{"event", ev.ID(), "kind", string(ev.Kind())}
	if b := event.BatchOf(ev); b != nil {
		attrs = append(attrs, "queue", b.Queue())
	}
	return p.run(ev, os.Environ(), nil, nil, nil, attrs)
}

func (p *Runner) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// run runs the command once for ev. The environment is base, then p.Env, then meta, then
// DUILIE_EVENT and DUILIE_BRIDGE (a later value of a name wins). stdin, when not empty, is
// written to the program's stdin. stdout, when not nil, receives the program's stdout (at most
// MaxResponseBytes of it, past which the program is killed and the event fails); otherwise
// stdout is logged line by line as stderr always is.
func (p *Runner) run(ev *duilie.Event, base, meta []string, stdin []byte, stdout *bytes.Buffer, attrs []any) error {
	if len(p.Command) == 0 {
		return &host.StartError{Err: errors.New("bridge: Runner.Command is empty")}
	}
	if p.Bridge == nil {
		return &host.StartError{Err: errors.New("bridge: Runner.Bridge is nil")}
	}
	p.running.Add(1)
	defer p.running.Done()
	log := p.logger()
	ctx, kill := context.WithCancelCause(ev.Context())
	defer kill(nil)
	url, closeURL := p.Bridge.Open(ev, func() { kill(errBridgeAbort) })
	defer closeURL()

	env := make([]string, 0, len(base)+len(p.Env)+len(meta)+4)
	env = append(env, base...)
	env = append(env, p.Env...)
	env = append(env, meta...)
	env = append(env, noProxy(env, "NO_PROXY"), noProxy(env, "no_proxy"))
	env = append(env, EnvEvent+"="+string(ev.Kind()), EnvBridge+"="+url)
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = env
	setGroup(cmd)

	// The pipes are ours rather than exec's, so Wait returns as soon as the program exits, and
	// the group is killed at once even if a straggler still holds them.
	var pipes pipeSet
	defer pipes.close()
	outR, outW, err := pipes.fromChild()
	if err != nil {
		return &host.StartError{Err: err}
	}
	errR, errW, err := pipes.fromChild()
	if err != nil {
		return &host.StartError{Err: err}
	}
	var inW *os.File
	if len(stdin) > 0 {
		var inR *os.File
		if inW, inR, err = pipes.toChild(); err != nil {
			return &host.StartError{Err: err}
		}
		cmd.Stdin = inR
	}
	cmd.Stdout, cmd.Stderr = outW, errW

	start := time.Now()
	err = startLocked(cmd)
	pipes.closeChildEnds()
	if err != nil {
		// The host's failure, not the program's: the event's report says so, and its messages
		// keep their attempts.
		return &host.StartError{Err: fmt.Errorf("bridge: start %s: %w", p.Command[0], err)}
	}
	defer p.track(cmd.Process)()

	var copying sync.WaitGroup
	if inW != nil {
		copying.Go(func() {
			_, _ = inW.Write(stdin) // a program need not read its stdin
			_ = inW.Close()
		})
	}
	if stdout != nil {
		copying.Go(func() {
			_, _ = stdout.ReadFrom(io.LimitReader(outR, MaxResponseBytes+1))
			if stdout.Len() > MaxResponseBytes {
				kill(errResponseSize)
			}
		})
	} else {
		copying.Go(func() { logLines(outR, log, p.maxOutput(), with(attrs, "stream", "stdout")) })
	}
	copying.Go(func() { logLines(errR, log, p.maxOutput(), with(attrs, "stream", "stderr")) })

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		killGroup(cmd.Process)
		werr = <-waited
	}
	killGroup(cmd.Process)   // what is left of the group: the event is over
	ran := time.Since(start) // from its start until its process group was killed and it was reaped
	pipes.drain(&copying, OutputWait)
	log.Debug("program ended", with(attrs, "status", cmd.ProcessState.String(), "duration", ran.Round(time.Microsecond))...)

	switch {
	case ev.Err() != nil:
		return ev.Err() // a bridge call aborted the event, or its time limit passed (or the host halted)
	case context.Cause(ctx) == errResponseSize:
		return errResponseSize
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		return &exitError{ee}
	}
	if werr != nil {
		return fmt.Errorf("bridge: wait for program: %w", werr)
	}
	return nil
}

// with returns attrs followed by more, in a new slice: attrs is shared.
func with(attrs []any, more ...any) []any {
	return slices.Concat(attrs, more)
}

// exitError is a failed event's error when its program exited with a status other than 0, or
// was killed by a signal. It unwraps to the *exec.ExitError.
type exitError struct {
	err *exec.ExitError
}

func (e *exitError) Error() string {
	if code := e.err.ExitCode(); code >= 0 {
		return fmt.Sprintf("program exited with status %d", code)
	}
	return "program ended by " + e.err.ProcessState.String() // "signal: killed"
}

func (e *exitError) Unwrap() error { return e.err }

func (p *Runner) maxOutput() int {
	if p.MaxOutput > 0 {
		return p.MaxOutput
	}
	return DefaultMaxOutput
}

// noProxy is the name=value that adds loopbackHosts to the last value of name in env.
func noProxy(env []string, name string) string {
	old := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			old = v
		}
	}
	if old == "" {
		return name + "=" + loopbackHosts
	}
	return name + "=" + old + "," + loopbackHosts
}

// logLines logs every line read from r, without its line ending, until r ends or limit bytes
// have been logged; it reads the rest and drops it, then logs once how much that was.
func logLines(r io.Reader, log *slog.Logger, limit int, attrs []any) {
	br := bufio.NewReaderSize(r, maxLine)
	logged, dropped := 0, int64(0)
	for logged < limit {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			keep := min(len(line), limit-logged)
			dropped += int64(len(line) - keep)
			line = line[:keep]
			logged += keep
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			log.Info("program output", with(attrs, "line", string(line))...)
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
	rest, _ := io.Copy(io.Discard, br)
	if dropped += rest; dropped > 0 {
		log.Warn("program output over its limit: the rest is dropped", with(attrs, "limit", limit, "dropped_bytes", dropped)...)
	}
}

// pipeSet holds the pipes of one program run: our ends and the program's.
type pipeSet struct {
	ours, theirs []*os.File
}

// fromChild makes a pipe the program writes to (stdout, stderr).
func (ps *pipeSet) fromChild() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: %w", err)
	}
	ps.ours, ps.theirs = append(ps.ours, r), append(ps.theirs, w)
	return r, w, nil
}

// toChild makes a pipe the program reads from (stdin).
func (ps *pipeSet) toChild() (w, r *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: %w", err)
	}
	ps.ours, ps.theirs = append(ps.ours, w), append(ps.theirs, r)
	return w, r, nil
}

// closeChildEnds closes, in this process, the program's ends: once it started it has its own
// copies, and ours would keep its pipes from ever ending.
func (ps *pipeSet) closeChildEnds() {
	for _, f := range ps.theirs {
		_ = f.Close()
	}
}

// drain waits for the copying goroutines, for at most d; then it makes our ends fail, so the
// goroutines end, and waits for them again.
func (ps *pipeSet) drain(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	past := time.Now()
	for _, f := range ps.ours {
		_ = f.SetDeadline(past)
	}
	<-done
}

func (ps *pipeSet) close() {
	for _, f := range ps.ours {
		_ = f.Close()
	}
	ps.closeChildEnds()
}
