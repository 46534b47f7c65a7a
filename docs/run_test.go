package docs

// Running a session: its directory, processes, transcripts and goldens, and the fakes on its
// PATH.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// harness runs sessions against the binaries it built.
type harness struct {
	tmp    string
	bin    string // first on the blocks' PATH: duilie, and go (this test binary, fakeGo)
	duilie string
	pageGo string
	realGo string
	curl   string
	path   string // PATH after bin: python's own interpreter first (a pyenv shim is slow)
	have   map[string]bool
}

// newHarness builds duilie as the project does (.ci/build) and examples/page-go, once.
func newHarness(t *testing.T) *harness {
	h := &harness{tmp: t.TempDir(), have: map[string]bool{}}
	h.bin = filepath.Join(h.tmp, "bin")
	if err := os.Mkdir(h.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	h.duilie, h.pageGo = filepath.Join(h.bin, "duilie"), filepath.Join(h.tmp, "page-go")
	var err error
	if h.realGo, err = exec.LookPath("go"); err != nil {
		t.Fatal(err)
	}
	builds := []*exec.Cmd{
		exec.Command(filepath.Join(repo, ".ci", "build"), h.duilie),
		exec.Command(h.realGo, "build", "-o", h.pageGo, "./examples/page-go"),
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, c := range builds {
		c.Dir = repo
		wg.Go(func() {
			if out, err := c.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %v\n%s", c.Args, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, fake := range []string{"go", "curl"} {
		if err := os.Symlink(self, filepath.Join(h.bin, fake)); err != nil {
			t.Fatal(err)
		}
	}
	h.path = os.Getenv("PATH")
	if python, err := exec.LookPath("python3"); err == nil {
		if out, err := exec.Command(python, "-c", "import sys; print(sys.executable)").Output(); err == nil {
			h.path = filepath.Dir(strings.TrimSpace(string(out))) + string(os.PathListSeparator) + h.path
		}
	}
	for _, c := range []string{"python3", "curl", "node"} {
		_, err := exec.LookPath(c)
		h.have[c] = err == nil
	}
	h.curl, _ = exec.LookPath("curl")
	// .ci/build stamps the version only in a git checkout.
	h.have["git"] = exec.Command("git", "-C", repo, "rev-parse", "HEAD").Run() == nil
	return h
}

// env is the environment of a block's commands.
func (h *harness) env(tree string, extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "DOCTEST_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+h.bin+string(os.PathListSeparator)+h.path, "DOCTEST_GO="+h.realGo,
		"DOCTEST_CURL="+h.curl, "DOCTEST_DUILIE="+h.duilie, "DOCTEST_PAGE_GO="+h.pageGo, "DOCTEST_TREE="+tree)
	return append(env, extra...)
}

// run runs a session and returns its failures ("skip: …" for a session that cannot run here).
func (h *harness) run(s *session, ciLine string) []string {
	for _, b := range s.blocks {
		for _, n := range b.mark.needs {
			if !h.have[n] {
				return []string{fmt.Sprintf("skip: %s needs %s, which is not installed", b, n)}
			}
		}
	}
	r := &sessionRun{h: h, errs: nil}
	tree, err := os.MkdirTemp(h.tmp, "session-")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.RemoveAll(tree)
	r.tree = tree
	var pairs []string
	for _, p := range fixedPorts {
		pairs = append(pairs, p, "127.0.0.1:"+strconv.Itoa(freePort()))
	}
	r.ports = strings.NewReplacer(pairs...)
	runs := slices.ContainsFunc(s.blocks, func(b *block) bool { return b.mark.parse == "" && b.mark.ci == "" })
	if runs {
		if err := copyTree(filepath.Join(repo, "examples"), filepath.Join(tree, "examples"), r.ports); err != nil {
			return []string{err.Error()}
		}
	}
	defer r.stopAll()
	var last, lastBg *process
	type golden struct {
		b   *block
		out *process
	}
	var goldens []golden
	for _, b := range s.blocks {
		switch m := b.mark; {
		case m.ci != "":
			if got := strings.TrimSpace(b.text); got != ciLine {
				r.failf(b, "the CI's command is\n\t%s\nnot\n\t%s", ciLine, got)
			}
		case m.output && m.of == "background":
			goldens = append(goldens, golden{b, lastBg})
		case m.output:
			goldens = append(goldens, golden{b, last})
		case m.parse != "":
			r.parse(b)
		case b.transcript():
			r.transcript(b)
		default:
			last = r.start(b)
			if last != nil && m.background {
				lastBg = last
			} else if last != nil {
				r.wait(last)
			}
		}
	}
	// What a page shows a background block print may come a moment after the block that
	// caused it (a batch is delivered up to max_batch_timeout later): wait for it.
	for _, g := range goldens {
		if g.out == nil || !g.out.b.mark.background {
			continue
		}
		m := g.b.mark
		shown := func() bool {
			if m.wait != "" {
				return regexp.MustCompile(m.wait).MatchString(g.out.pick(m.stream))
			}
			return matchOutput(r.ports.Replace(g.b.text), g.out.pick(m.stream), m.match, m.vary) == nil
		}
		deadline := time.Now().Add(orDefault(m.timeout, defaultTimeout))
		for !shown() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	r.stopAll()
	for _, p := range r.all {
		r.logs = append(r.logs, fmt.Sprintf("log: %s printed:\n%s", p.b, p.both))
	}
	for _, g := range goldens {
		if g.out == nil {
			continue // its block failed to start: said so
		}
		m := g.b.mark
		if err := matchOutput(r.ports.Replace(g.b.text), g.out.pick(m.stream), m.match, m.vary); err != nil {
			r.failf(g.b, "the output of %s: %v", g.out.b, err)
		}
	}
	return append(r.errs, r.logs...)
}

// sessionRun is one session's directory, ports, processes and failures.
type sessionRun struct {
	h     *harness
	tree  string
	ports *strings.Replacer
	mu    sync.Mutex
	errs  []string
	logs  []string   // "log: …", shown with -v or a failure
	bgs   []*process // running in the background
	all   []*process // every block's script that ran
}

func (r *sessionRun) failf(b *block, format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, b.String()+": "+fmt.Sprintf(format, a...))
}

// process is a block's script running.
type process struct {
	b                    *block
	cmd                  *exec.Cmd
	stdout, stderr, both *lockedBuffer
	done                 chan struct{}
	err                  error
}

// pick is what the process printed on stream: stdout, stderr, or both ("").
func (p *process) pick(stream string) string {
	switch stream {
	case "stdout":
		return p.stdout.String()
	case "stderr":
		return p.stderr.String()
	}
	return p.both.String()
}

// script is what bash runs for b: the marker's replacements, free ports, its directory and
// setup first.
func (r *sessionRun) script(b *block, text string) (string, bool) {
	for _, rp := range b.mark.replace {
		if !strings.Contains(text, rp[0]) {
			r.failf(b, "replace=%q: the block has no %q", rp[0]+"=>"+rp[1], rp[0])
			return "", false
		}
		text = strings.ReplaceAll(text, rp[0], rp[1])
	}
	var s strings.Builder
	s.WriteString("set -eo pipefail\n")
	// One terminal: what a block exported, and where it went, hold in the session's next
	// blocks (a background block runs in a terminal of its own).
	state := r.tree + ".state" // a temporary directory's name: nothing to quote
	fmt.Fprintf(&s, "if [ -f %s ]; then . %s; fi\n", state, state)
	if !b.mark.background {
		fmt.Fprintf(&s, "trap '{ export -p; printf \"cd %%q\\n\" \"$PWD\"; } > %s' EXIT\n", state)
	}
	if b.mark.dir != "" {
		fmt.Fprintf(&s, "cd %s\n", shellQuote(filepath.Join(r.tree, b.mark.dir)))
	}
	if b.mark.setup != "" {
		s.WriteString(r.ports.Replace(b.mark.setup) + "\n")
	}
	s.WriteString(r.ports.Replace(text) + "\n")
	return s.String(), true
}

// start starts b's script; nil if it could not. A background block is ready when start
// returns.
func (r *sessionRun) start(b *block) *process {
	script, ok := r.script(b, b.text)
	if !ok {
		return nil
	}
	p := r.spawn(b, script)
	if p == nil || !b.mark.background {
		return p
	}
	r.bgs = append(r.bgs, p)
	ready := regexp.MustCompile(b.mark.ready)
	if b.mark.ready == "" {
		r.failf(b, "a background block needs ready=REGEX: what it prints once it is ready")
		return p
	}
	deadline := time.Now().Add(orDefault(b.mark.timeout, defaultTimeout))
	for !ready.MatchString(p.both.String()) {
		select {
		case <-p.done:
			r.failf(b, "ended (%v) before it was ready (%s):\n%s", p.err, b.mark.ready, p.both)
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.failf(b, "not ready (%s) within %v:\n%s", b.mark.ready, orDefault(b.mark.timeout, defaultTimeout), p.both)
			return nil
		}
	}
	return p
}

func (r *sessionRun) spawn(b *block, script string) *process {
	p := &process{b: b, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.both = p.stdout.alsoTo(p.stderr)
	p.cmd = exec.Command("/bin/bash", "--noprofile", "--norc", "-c", script)
	p.cmd.Dir = r.tree
	p.cmd.Env = r.h.env(r.tree, r.envOf(b))
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		r.failf(b, "%v", err)
		return nil
	}
	r.all = append(r.all, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

func (r *sessionRun) envOf(b *block) []string {
	var env []string
	if b.mark.httpAny {
		env = append(env, "DOCTEST_CURL_ANY=1")
	}
	for _, kv := range b.mark.env {
		env = append(env, r.ports.Replace(kv))
	}
	return env
}

// wait waits for a foreground block within its timeout; it must exit 0.
func (r *sessionRun) wait(p *process) {
	limit := orDefault(p.b.mark.timeout, defaultTimeout)
	select {
	case <-p.done:
	case <-time.After(limit):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		r.failf(p.b, "not done within %v (timeout=…):\n%s", limit, p.both)
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // whatever it left behind
	if p.err != nil {
		r.failf(p.b, "%v:\n%s", p.err, p.both)
	}
}

// stopAll stops the background blocks, the last started first, as Ctrl-C would: each must
// exit 0.
func (r *sessionRun) stopAll() {
	for i := len(r.bgs) - 1; i >= 0; i-- {
		p := r.bgs[i]
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-p.done:
			if p.err != nil {
				r.failf(p.b, "after Ctrl-C: %v:\n%s", p.err, p.both)
			}
		case <-time.After(defaultTimeout):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			r.failf(p.b, "still running %v after Ctrl-C:\n%s", defaultTimeout, p.both)
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	r.bgs = nil
}

// transcript runs each "$ command" of b on its own and compares what it prints and its exit
// status with the lines after it.
func (r *sessionRun) transcript(b *block) {
	type step struct {
		cmd    string
		out    []string
		status int
	}
	var steps []*step
	lines := strings.Split(b.text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			for strings.HasSuffix(c, "\\") && i+1 < len(lines) {
				i++
				c = c[:len(c)-1] + "\n" + lines[i]
			}
			steps = append(steps, &step{cmd: c})
			continue
		}
		if len(steps) == 0 {
			continue // nothing before the first command but blank lines (transcript says so)
		}
		st := steps[len(steps)-1]
		if m := exitRe.FindStringSubmatch(l); m != nil {
			l = m[1]
			st.status, _ = strconv.Atoi(m[2])
		}
		st.out = append(st.out, l)
	}
	for _, st := range steps {
		script, ok := r.script(b, st.cmd)
		if !ok {
			return
		}
		p := r.spawn(b, script)
		if p == nil {
			return
		}
		limit := orDefault(b.mark.timeout, defaultTimeout)
		select {
		case <-p.done:
		case <-time.After(limit):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			r.failf(b, "$ %s: not done within %v:\n%s", st.cmd, limit, p.both)
			return
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		status := 0
		if p.err != nil {
			var ee *exec.ExitError
			if !errors.As(p.err, &ee) {
				r.failf(b, "$ %s: %v", st.cmd, p.err)
				return
			}
			status = ee.ExitCode()
		}
		if status != st.status {
			r.failf(b, "$ %s: exit status %d, the page says %d:\n%s", st.cmd, status, st.status, p.both)
		}
		if err := matchOutput(r.ports.Replace(strings.Join(st.out, "\n")), p.both.String(), "exact", b.mark.vary); err != nil {
			r.failf(b, "$ %s: %v", st.cmd, err)
		}
	}
}

// exitRe is a transcript's "# exit status N" at the end of a command's last line of output.
var exitRe = regexp.MustCompile(`^(.*?)\s*# exit status (\d+)$`)

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// lockedBuffer is written by a process's stdout or stderr goroutine, and read meanwhile; a
// pair of them also writes to one more, in order, as a terminal shows both.
type lockedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	also *lockedBuffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf.Write(p)
	b.mu.Unlock()
	if b.also != nil {
		b.also.Write(p)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// alsoTo makes b and o write to a third buffer too, and returns it.
func (b *lockedBuffer) alsoTo(o *lockedBuffer) *lockedBuffer {
	both := &lockedBuffer{}
	b.also, o.also = both, both
	return both
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// copyTree copies the examples, without what running them leaves (.duilie, worker/), with the
// fixed ports replaced.
func copyTree(from, to string, ports *strings.Replacer) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			if d.Name() == ".duilie" || (d.Name() == "worker" && strings.Count(rel, string(filepath.Separator)) == 1) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), []byte(ports.Replace(string(b))), info.Mode().Perm())
	})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// matchOutput compares output with a golden text (see the package comment): mode tail, exact
// or anyorder ("" is tail).
func matchOutput(golden, output, mode string, vary []string) error {
	want := trimLines(golden)
	got := trimLines(output)
	res := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		re, err := lineRegexp(w, vary)
		if err != nil {
			return err
		}
		res[i] = re
	}
	show := func(why string) error {
		return fmt.Errorf("%s\n--- the page:\n%s\n--- the output:\n%s", why, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	switch mode {
	case "anyorder":
		used := make([]bool, len(got))
	next:
		for i, re := range res {
			if want[i] == "" {
				continue
			}
			for j, g := range got {
				if !used[j] && re.MatchString(strings.TrimSpace(g)) {
					used[j] = true
					continue next
				}
			}
			return show(fmt.Sprintf("no line of the output is %q", want[i]))
		}
		return nil
	case "exact":
		if len(got) != len(want) {
			return show(fmt.Sprintf("%d lines, the page shows %d", len(got), len(want)))
		}
	default:
		if len(got) < len(want) {
			return show(fmt.Sprintf("%d lines, the page shows %d", len(got), len(want)))
		}
		got = got[len(got)-len(want):]
	}
	for i, re := range res {
		if !re.MatchString(strings.TrimSpace(got[i])) {
			return show(fmt.Sprintf("line %d is %q, the page says %q", i+1, got[i], want[i]))
		}
	}
	return nil
}

// trimLines splits text into lines without the blank ones at either end.
func trimLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// The vary classes: a golden line's text that matches one matches any text that matches it.
const durationRe = `(?:\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h))+(?:\b|$)|\d+(?:\.\d+)? s\b`

var varyClasses = map[string]string{
	"durations": durationRe,
	"numbers":   `\d+(?:[.,]\d+)*`,
	"hex":       `\b[0-9a-f]{7,}\b`,
}

var keyRe = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// lineRegexp compiles one golden line: "…" is any text, a run of spaces any spaces, and what a
// vary class matches any text of that class.
func lineRegexp(line string, vary []string) (*regexp.Regexp, error) {
	line = strings.TrimSpace(line)
	type span struct {
		from, to int
		re       string
	}
	var spans []span
	for _, v := range vary {
		pat, ok := varyClasses[v]
		out := pat
		if !ok {
			if !keyRe.MatchString(v) {
				return nil, fmt.Errorf("vary=%s: durations, numbers, hex or a key", v)
			}
			pat = `\b` + regexp.QuoteMeta(v) + `=(?:"(?:[^"\\]|\\.)*"|\S*)`
			out = regexp.QuoteMeta(v) + `=(?:"(?:[^"\\]|\\.)*"|\S*)`
		}
		for _, m := range regexp.MustCompile(pat).FindAllStringIndex(line, -1) {
			spans = append(spans, span{m[0], m[1], out})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var re strings.Builder
	re.WriteString("^")
	literal := func(s string) {
		space := false
		for _, c := range s {
			switch {
			case c == ' ' || c == '\t':
				if !space {
					re.WriteString(`\s+`)
				}
				space = true
				continue
			case c == '…':
				re.WriteString(".*")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
			space = false
		}
	}
	at := 0
	for _, sp := range spans {
		if sp.from < at {
			continue // inside another class's text
		}
		literal(line[at:sp.from])
		re.WriteString("(?:" + sp.re + ")")
		at = sp.to
	}
	literal(line[at:])
	re.WriteString("$")
	return regexp.Compile(re.String())
}

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "go":
		os.Exit(fakeGo(os.Args[1:]))
	case "curl":
		os.Exit(fakeCurl(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeGo is go on the blocks' PATH: go run ./cmd/duilie (or github.com/duilie/duilie/cmd/duilie)
// is the built duilie, go run ./examples/page-go the built example, go test and go vet are not
// for blocks that run, and everything else is the real go.
func fakeGo(args []string) int {
	tree := os.Getenv("DOCTEST_TREE")
	if len(args) > 1 && args[0] == "run" {
		wd, _ := os.Getwd()
		pkg := args[1]
		var bin string
		switch {
		case pkg == "github.com/duilie/duilie/cmd/duilie" || strings.HasPrefix(pkg, ".") && filepath.Clean(inDir(wd, pkg)) == filepath.Join(tree, "cmd", "duilie"):
			bin = os.Getenv("DOCTEST_DUILIE")
		case strings.HasPrefix(pkg, ".") && filepath.Clean(inDir(wd, pkg)) == filepath.Join(tree, "examples", "page-go"):
			bin = os.Getenv("DOCTEST_PAGE_GO")
		default:
			fmt.Fprintf(os.Stderr, "doctest: go run %s (in %s): the test runs only ./cmd/duilie and ./examples/page-go from the repository's root\n", pkg, wd)
			return 2
		}
		err := syscall.Exec(bin, append([]string{filepath.Base(bin)}, args[2:]...), os.Environ())
		fmt.Fprintln(os.Stderr, "doctest:", err)
		return 2
	}
	if len(args) > 0 && (args[0] == "test" || args[0] == "vet") {
		fmt.Fprintf(os.Stderr, "doctest: go %s runs only in a block marked parse\n", args[0])
		return 2
	}
	real := os.Getenv("DOCTEST_GO")
	err := syscall.Exec(real, append([]string{"go"}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "doctest:", err)
	return 2
}

// fakeCurl is curl on the blocks' PATH: the real one, failing on an HTTP error status as with
// --fail-with-body, unless the block said http=any.
func fakeCurl(args []string) int {
	if os.Getenv("DOCTEST_CURL_ANY") == "" {
		args = append([]string{"--fail-with-body"}, args...)
	}
	err := syscall.Exec(os.Getenv("DOCTEST_CURL"), append([]string{"curl"}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "doctest:", err)
	return 2
}
