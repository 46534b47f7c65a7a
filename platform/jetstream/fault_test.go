package jetstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// soak reports whether the long fault runs were asked for (DUILIE_SOAK=1; see docs/jetstream.md).
func soak() bool { return os.Getenv("DUILIE_SOAK") == "1" }

// The child process of the fault tests: the test binary run again with DUILIE_JS_CHILD set.
// It opens the embedded engine on DUILIE_JS_DIR and prints one line per fact, only once the
// fact holds, with its own clock:
//
//	sent <body> <ms>            a send returned success
//	delayed <body> <due ms>     a delayed send returned success
//	got <body> <attempts> <ms>  a delivery
//	settled <body> <ms>         Settle(Done) returned success
//	retried <body> <due ms>     Settle(Redeliver after a delay) returned success
//	kept <body> <ms>            a delivery this child will never settle
//
// In mode "crash" it sends without end while consuming, one message at a time and in batches of
// batchSize (bodies "b<batch>.<index>"): it retries every 7th message once with a delay and keeps
// every 50th in flight without settling; the parent kills it. In mode "recover"
// it only consumes and settles, until its stdin closes.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("DUILIE_JS_CHILD") == "" {
		t.Skip("the child process of the fault tests")
	}
	out := &lineWriter{w: os.Stdout}
	ackWait, _ := time.ParseDuration(os.Getenv("DUILIE_JS_ACKWAIT"))
	delay, _ := strconv.Atoi(os.Getenv("DUILIE_JS_DELAY"))
	p, err := Open(context.Background(), Config{DataDir: os.Getenv("DUILIE_JS_DIR"), Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	q, err := p.Queue(ctx, "q")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	c, err := p.Consume(ctx, "q", platform.ConsumerOptions{MaxBatchSize: 10, MaxConcurrency: 1, AckWait: ackWait})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	now := func() int64 { return time.Now().UnixMilli() }
	crash := os.Getenv("DUILIE_JS_CHILD") == "crash"
	if crash {
		for i := range 20 {
			body := fmt.Sprintf(`"d%d"`, i)
			due := now() + int64(delay)*1000
			if err := q.Send(ctx, []byte(body), platform.SendOptions{ContentType: platform.JSON, DelaySeconds: delay}); err == nil {
				out.printf("delayed %s %d", body, due)
			}
		}
		go func() {
			for k := 0; ; k++ {
				items := make([]platform.BatchItem, batchSize)
				for j := range items {
					items[j] = platform.BatchItem{Body: fmt.Appendf(nil, `"b%d.%d"`, k, j), ContentType: platform.JSON}
				}
				if err := q.SendBatch(ctx, items); err == nil {
					at := now()
					for _, it := range items {
						out.printf("sent %s %d", it.Body, at)
					}
				}
			}
		}()
		go func() {
			for i := 0; ; i++ {
				body := fmt.Sprintf(`"m%d"`, i)
				if err := q.Send(ctx, []byte(body), platform.SendOptions{ContentType: platform.JSON}); err == nil {
					out.printf("sent %s %d", body, now())
				}
			}
		}()
	} else {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			c.Close()
			p.Close()
			os.Exit(0)
		}()
	}
	for n := 0; ; {
		ds, err := c.Receive(ctx, 10)
		if errors.Is(err, platform.ErrClosed) {
			select {} // stdin closed: the process is exiting
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		var done, retry []platform.Delivery
		for _, d := range ds {
			out.printf("got %s %d %d", d.Body, d.Attempts, now())
			n++
			switch {
			case crash && n%50 == 0 && d.Attempts == 1:
				out.printf("kept %s %d", d.Body, now()) // in flight until the kill
			case crash && n%7 == 0 && d.Attempts == 1 && d.Body[1] == 'm':
				retry = append(retry, d)
			default:
				done = append(done, d)
			}
		}
		for _, d := range retry {
			due := now() + int64(delay)*1000
			if settleOne(c, d, platform.Action{Kind: platform.Redeliver, Delay: time.Duration(delay) * time.Second}) == nil {
				out.printf("retried %s %d", d.Body, due)
			}
		}
		if err := settleAll(c, done); err == nil {
			at := now()
			for _, d := range done {
				out.printf("settled %s %d", d.Body, at)
			}
		}
	}
}

func settleOne(c platform.Consumer, d platform.Delivery, a platform.Action) error {
	return c.Settle(context.Background(), platform.Settlement{Queue: "q", Messages: []platform.Resolution{{Delivery: d, Action: a}}})
}

func settleAll(c platform.Consumer, ds []platform.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	s := platform.Settlement{Queue: "q"}
	for _, d := range ds {
		s.Messages = append(s.Messages, platform.Resolution{Delivery: d, Action: platform.Action{Kind: platform.Done}})
	}
	return c.Settle(context.Background(), s)
}

// lineWriter writes whole lines, one write each, so the parent never reads half a fact.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// batchSize is how many messages each batch of the crash child has.
const batchSize = 10

// partialBatches counts the batches of the crash child of which some messages, not all, were
// delivered.
func partialBatches(delivered ...map[string]bool) map[string]int {
	n := map[string]int{}
	seen := map[string]bool{}
	for _, d := range delivered {
		for b := range d {
			if k, _, ok := strings.Cut(strings.TrimPrefix(b, `"b`), "."); ok && strings.HasPrefix(b, `"b`) && !seen[b] {
				seen[b] = true
				n[k]++
			}
		}
	}
	for k, c := range n {
		if c == batchSize {
			delete(n, k)
		}
	}
	return n
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// child is a running child process and what it has printed so far.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines [][]string
	done  chan struct{}
}

func startChild(t *testing.T, mode, dir string, ackWait time.Duration, delay int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DUILIE_JS_CHILD="+mode, "DUILIE_JS_DIR="+dir,
		"DUILIE_JS_ACKWAIT="+ackWait.String(), "DUILIE_JS_DELAY="+strconv.Itoa(delay))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, done: make(chan struct{})}
	if ch.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 3 {
				ch.mu.Lock()
				ch.lines = append(ch.lines, f)
				ch.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return ch
}

func (ch *child) snapshot() [][]string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return slicesClone(ch.lines)
}

func slicesClone(l [][]string) [][]string { return append([][]string(nil), l...) }

func (ch *child) count(kind string) int {
	n := 0
	for _, l := range ch.snapshot() {
		if l[0] == kind {
			n++
		}
	}
	return n
}

func keys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func ms(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// TestCrashRecovery kills a child process running the embedded engine with SIGKILL while it
// sends and consumes, then starts another on the same data directory.
func TestCrashRecovery(t *testing.T) {
	rounds := 1
	if soak() {
		rounds = 10
	}
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) { crashRound(t) })
	}
}

// crashRound runs one kill and restart. The ack wait is a minute, as with serve's defaults:
// what was in flight at the kill must come back within 5 s of the restart all the same
// (reclaim.go), not when the ack wait ends.
func crashRound(t *testing.T) {
	const ackWait, delay = time.Minute, 4
	dir := t.TempDir()
	run := time.Second
	if soak() {
		run = 5 * time.Second
	}

	first := startChild(t, "crash", dir, ackWait, delay)
	deadline := time.Now().Add(run + 10*time.Second)
	for first.count("settled") < 200 || time.Now().Before(deadline.Add(-10*time.Second)) {
		if time.Now().After(deadline) {
			t.Fatalf("the first child settled only %d messages", first.count("settled"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = first.cmd.Wait()
	<-first.done

	// What the first child established before it died.
	sent := map[string]bool{}
	due := map[string]time.Time{}       // delayed or retried: when it must come back
	settledAt := map[string]time.Time{} // settled (Done) in the first child
	gotAt := map[string]time.Time{}     // last delivery in the first child
	inFlight := map[string]time.Time{}  // kept unsettled by the first child
	for _, l := range first.snapshot() {
		switch l[0] {
		case "sent":
			sent[l[1]] = true
		case "delayed":
			sent[l[1]] = true
			due[l[1]] = ms(l[2])
		case "got":
			gotAt[l[1]] = ms(l[3])
			delete(settledAt, l[1])
		case "kept":
			inFlight[l[1]] = ms(l[2])
		case "settled":
			settledAt[l[1]] = ms(l[2])
			delete(due, l[1])
			delete(inFlight, l[1])
		case "retried":
			due[l[1]] = ms(l[2])
		}
	}
	t.Logf("first child: %d sent, %d settled, %d in flight, %d delayed or retried, killed after %v",
		len(sent), len(settledAt), len(inFlight), len(due), run)

	restarted := time.Now()
	second := startChild(t, "recover", dir, ackWait, delay)
	// The second child has seen everything once every sent message was settled by the first
	// or delivered to it, and the last due time has passed.
	lastDue := restarted.Add(5 * time.Second)
	for _, d := range due {
		if d.After(lastDue) {
			lastDue = d
		}
	}
	// It may stop waiting once it has seen everything, or once the last due time is 5 s past
	// and the second child has delivered nothing new for 5 s: on a loaded machine the second
	// child may still be working through the first's backlog when the last due time passes, and
	// what it has not reached yet is late, not lost. (A lost message stays missing however long
	// the child goes quiet; 2 minutes bounds the wait.)
	var missing []string
	wait := time.Until(lastDue) + 5*time.Second
	if soak() {
		wait += 20 * time.Second
	}
	end := time.Now().Add(wait)
	giveUp := time.Now().Add(wait + 2*time.Minute)
	var gotLater map[string][]string
	seen, quietFrom := 0, time.Now()
	for {
		gotLater = map[string][]string{}
		got := 0
		for _, l := range second.snapshot() {
			if l[0] == "got" {
				gotLater[l[1]] = l
				got++
			}
		}
		if got > seen {
			seen, quietFrom = got, time.Now()
		}
		// Delivered at least once, by either child. (A message the first child was settling
		// when it died may have been acked without a "settled" line, so it need not come back.)
		missing = missing[:0]
		for b := range sent {
			_, early := gotAt[b]
			if _, ok := gotLater[b]; !ok && !early {
				missing = append(missing, b)
			}
		}
		waiting := 0
		for b := range inFlight {
			if _, ok := gotLater[b]; !ok {
				waiting++
			}
		}
		waiting += len(partialBatches(keys(gotAt), keys(gotLater)))
		if len(missing) == 0 && waiting == 0 && time.Now().After(lastDue.Add(time.Second)) ||
			time.Now().After(end) && time.Since(quietFrom) > 5*time.Second || time.Now().After(giveUp) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	second.stdin.Close()
	<-second.done
	_ = second.cmd.Wait()

	if len(missing) > 0 {
		t.Errorf("%d successful sends never delivered after the crash, e.g. %v", len(missing), missing[:min(5, len(missing))])
		describeMissing(t, dir, missing)
	}
	// A batch is all or nothing across the crash: one the kill cut off after its envelope was
	// stored is completed when the second child opens the engine.
	for k, n := range partialBatches(keys(gotAt), keys(gotLater)) {
		t.Errorf("batch %s: %d of its %d messages delivered", k, n, batchSize)
	}
	back := 0
	for b, at := range settledAt {
		if _, ok := gotLater[b]; ok && at.Before(killed.Add(-time.Second)) {
			back++
			if back <= 5 {
				t.Errorf("%s settled %v before the kill came back", b, killed.Sub(at))
			}
		}
	}
	// In-flight messages come back within 5 s of the restart, with attempts + 1, though the ack
	// wait is a minute. JetStream writes the consumer's state a moment after the fact, so a
	// message delivered in the last second before the crash may come back as never delivered
	// (same attempts).
	var slowest time.Duration
	for b, at := range inFlight {
		l, ok := gotLater[b]
		if !ok {
			t.Errorf("%s, in flight at the kill, never came back", b)
			continue
		}
		again := ms(l[3])
		slowest = max(slowest, again.Sub(restarted))
		if again.After(restarted.Add(5*time.Second)) || l[2] != "2" && at.Before(killed.Add(-time.Second)) {
			t.Errorf("%s, in flight at the kill (delivered %v before it), came back %v after the restart, attempts %s",
				b, killed.Sub(at), again.Sub(restarted), l[2])
		}
	}
	t.Logf("%d in flight at the kill, all back within %v of the restart", len(inFlight), slowest.Round(time.Millisecond))
	// A delayed or retried message is never early, and at most a second late, counted from when
	// it was due or, if the second child was still working through the backlog the first left
	// (the messages sent without delay and not settled), from when it got the last of them: a
	// message that comes due joins the end of the queue.
	caughtUp := restarted
	for b, l := range gotLater {
		if _, delayed := due[b]; !delayed {
			caughtUp = laterOf(caughtUp, ms(l[3]))
		}
	}
	for b, d := range due {
		l, ok := gotLater[b]
		if !ok {
			if at, ok := gotAt[b]; ok && !at.Before(d) {
				continue // came back before the kill
			}
			t.Errorf("%s, due at %v, never came back", b, d.Sub(killed))
			continue
		}
		if at := ms(l[3]); at.Before(d) || at.After(laterOf(d, caughtUp).Add(time.Second)) {
			t.Errorf("%s due %v after the kill arrived %v after it (the backlog was delivered %v after it)", b, d.Sub(killed), at.Sub(killed), caughtUp.Sub(killed))
		}
	}
	t.Logf("second child: %d delivered, the backlog within %v of the restart", len(gotLater), caughtUp.Sub(restarted).Round(time.Millisecond))
}

// describeMissing logs where the messages missing after a crash are: still stored (in which
// state), or gone; and the queue's consumer state.
func describeMissing(t *testing.T, dir string, missing []string) {
	p, err := Open(context.Background(), Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Logf("reopen: %v", err)
		return
	}
	defer p.Close()
	if ci, err := p.js.Consumer(context.Background(), streamName("q"), consumerName); err == nil {
		i := ci.CachedInfo()
		t.Logf("consumer: delivered %+v, ack floor %+v, %d pending, %d ack pending", i.Delivered, i.AckFloor, i.NumPending, i.NumAckPending)
	}
	want := map[string]bool{}
	for _, b := range missing {
		want[b] = true
	}
	cursor := ""
	for {
		page, err := p.Browse(context.Background(), "q", platform.BrowseOptions{Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Logf("browse: %v", err)
			return
		}
		for _, m := range page.Messages {
			if want[string(m.Body)] {
				t.Logf("missing %s is stored: %s, attempts %d", m.Body, m.State, m.Attempts)
				delete(want, string(m.Body))
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	t.Logf("%d of the missing are not stored", len(want))
}
