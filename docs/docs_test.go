// Package docs holds duilie's documentation; its test runs it.
//
// TestDocs reads every fenced block of README.md and docs/*.md and runs the shell ones (sh,
// bash, shell, console) as a reader would, each session of blocks in a fresh temporary
// directory that holds a copy of examples/, against the duilie binary .ci/build makes:
//
//   - a block runs with bash -e -o pipefail and must exit 0 within its timeout (default 15 s);
//   - a block whose lines start with "$ " is a transcript: each command runs on its own, and the
//     lines after it are its output (stdout and stderr as a terminal shows them), exactly, with
//     "# exit status N" at the end of its last line for a status other than 0;
//   - a text block marked output is the output of the shell block before it, compared loosely
//     (see match below);
//   - a block that cannot run as it stands (a benchmark of minutes, a serve that runs until
//     Ctrl-C, a reference of calls) says so with a marker; the test fails on one that would
//     escape it: go test in an unmarked block, a command left running with &, a fence without
//     a language, an indented code block;
//   - go test commands in the text (`go test -run X ./pkg/`) are checked as parse blocks are.
//
// Sessions run six at a time; TestDocs/NAME (README.md#python, docs_cli.md:133) runs some.
//
// A marker is an HTML comment on the line before the fence (several may follow one another):
//
//	<!-- doctest: key=value key="a value" flag -->
//
//	timeout=DUR       the block's time limit (a background block's, to be ready)
//	session=NAME      blocks of one session share one directory, run in document order; each
//	                  block is a session of its own otherwise (output blocks join the block before)
//	background        the block keeps running (a serve, "in another terminal"): started in its
//	                  own process group, the next block runs once ready=REGEX is in its output,
//	                  and at the session's end it gets SIGINT (Ctrl-C) and must exit 0
//	ready=REGEX       what a background block prints once it is ready
//	parse="why"       only checked to parse and start, not run (benchmarks, soaks, a Cloudflare
//	                  account): duilie commands must take their flags (each runs with --help),
//	                  go test's packages, tests, benchmarks, flags and DUILIE_ variables must
//	                  exist, node's and bash's scripts must be there; nothing else runs
//	ci="why"          the block is .ci/run's test command, letter for letter
//	replace="A=>B"    run the block with A replaced by B (a reduced count); repeatable
//	env="K=V"         an environment variable for the block; repeatable
//	setup="SHELL"     commands run first, unshown (a file the block expects in its directory)
//	dir=PATH          the block's directory, within the session's
//	needs=CMD,…       what the block needs (python3, curl, node; git: a git checkout): without
//	                  it the block's session is skipped
//	http=any          curl may get any HTTP status (a reference of calls, some refused)
//	output            this text block is the output of the shell block before it:
//	  of=background   of the session's last background block instead (a serve's log); the
//	                  harness waits until the output shows it before it stops the block
//	  wait=REGEX      or only until this, for output that comes once the block is stopped
//	  stream=S        stdout, stderr or both (the default: as a terminal shows them)
//	  match=M         tail (the default: the output's last lines), exact, or anyorder (each line
//	                  somewhere in the output: log lines)
//	  vary=V,…        what may differ: durations (61ms, 10.3 s), numbers, hex, or a key
//	                  (batch: batch=… may hold any value)
//
// In every golden line "…" stands for any text and a run of spaces for any spaces.
//
// What the harness changes, and nothing else: `go run ./cmd/duilie` and `duilie` are the built
// binary, `go run ./examples/page-go` the built example; curl fails on an HTTP error status
// (--fail-with-body) unless the block says http=any; the examples' fixed ports
// (127.0.0.1:8787–8790) become free ones, in the copied files, the blocks and the goldens, so
// that the test never depends on a port being free.
package docs

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
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

// The pages the test reads, relative to the repository's root.
func pages(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, strings.TrimPrefix(f, repo+string(filepath.Separator)))
	}
	return out
}

// repo is the repository's root: this test runs in docs/.
var repo = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

const defaultTimeout = 15 * time.Second

// fixedPorts are the addresses the examples listen on; each session gets free ones instead.
var fixedPorts = []string{"127.0.0.1:8787", "127.0.0.1:8788", "127.0.0.1:8789", "127.0.0.1:8790"}

// block is one fenced block of a page.
type block struct {
	file string // relative to the repository
	line int    // of the opening fence, 1-based
	lang string
	text string
	mark marker
}

func (b *block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

func (b *block) shell() bool {
	switch b.lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

func (b *block) transcript() bool {
	for _, l := range strings.Split(b.text, "\n") {
		if strings.TrimSpace(l) != "" {
			return strings.HasPrefix(l, "$ ")
		}
	}
	return false
}

// marker is what a block's doctest comments say.
type marker struct {
	set        bool
	timeout    time.Duration
	session    string
	background bool
	ready      string
	parse      string
	ci         string
	replace    [][2]string
	env        []string
	setup      string
	dir        string
	needs      []string
	httpAny    bool
	output     bool
	of         string
	wait       string
	stream     string
	match      string
	vary       []string
}

var (
	markerRe = regexp.MustCompile(`^\s*<!--\s*doctest:(.*?)-->\s*$`)
	fenceRe  = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^\\s`]*)")
	listRe   = regexp.MustCompile(`^\s*([-*+]|\d+[.)])\s`)
)

// parsePage returns a page's fenced blocks, and its mistakes: fences without a language,
// indented code blocks, markers that say nothing known, or that stand before no fence.
func parsePage(file, text string) ([]*block, []string) {
	var blocks []*block
	var errs []string
	lines := strings.Split(text, "\n")
	var pending marker
	pendingLine := 0
	fenced := make([]bool, len(lines))
	prevBlank, listy := true, false // the line before was blank; the paragraph before is a list's
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := markerRe.FindStringSubmatch(l); m != nil {
			if err := pending.add(m[1]); err != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: %v", file, i+1, err))
			}
			pendingLine = i + 1
			continue
		}
		if strings.Contains(l, "doctest:") && strings.Contains(l, "<!--") {
			errs = append(errs, fmt.Sprintf("%s:%d: a doctest marker must be a comment on a line of its own", file, i+1))
		}
		if m := fenceRe.FindStringSubmatch(l); m != nil {
			indent, fence := len(m[1]), m[2]
			b := &block{file: file, line: i + 1, lang: m[3], mark: pending}
			if pending.set && pendingLine != i {
				errs = append(errs, fmt.Sprintf("%s:%d: the doctest marker of line %d must be right before the fence", file, i+1, pendingLine))
			}
			pending, pendingLine = marker{}, 0
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				c := lines[i]
				if t := strings.TrimLeft(c, " "); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" ") == "" {
					closed = true
					break
				}
				for k := 0; k < indent && strings.HasPrefix(c, " "); k++ {
					c = c[1:]
				}
				body = append(body, c)
			}
			if !closed {
				errs = append(errs, fmt.Sprintf("%s: a fence is not closed", b))
			}
			b.text = strings.Join(body, "\n")
			for k := b.line - 1; k <= i && k < len(lines); k++ {
				fenced[k] = true
			}
			if b.lang == "" {
				errs = append(errs, fmt.Sprintf("%s: a fenced block without a language: sh for commands, text for output", b))
			}
			blocks = append(blocks, b)
			prevBlank, listy = false, false
			continue
		}
		if pending.set {
			errs = append(errs, fmt.Sprintf("%s:%d: a doctest marker must be right before a fence", file, pendingLine))
			pending, pendingLine = marker{}, 0
		}
		blank := strings.TrimSpace(l) == ""
		indented := strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")
		if !blank && indented && prevBlank && !listy {
			errs = append(errs, fmt.Sprintf("%s:%d: an indented code block: fence it (```sh for commands) so that it is run", file, i+1))
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || strings.HasPrefix(lines[i+1], "    ")) {
				i++
			}
			continue
		}
		if !blank {
			if listRe.MatchString(l) || strings.HasPrefix(l, "|") {
				listy = true
			} else if !indented && !strings.HasPrefix(l, " ") {
				listy = false
			}
		}
		prevBlank = blank
	}
	// go test commands in the text: checked as blocks marked parse are.
	var prose strings.Builder
	for k, l := range lines {
		if !fenced[k] {
			prose.WriteString(l)
		}
		prose.WriteString("\n")
	}
	text = prose.String()
	for _, m := range inlineRe.FindAllStringSubmatchIndex(text, -1) {
		cmd := strings.Join(strings.Fields(text[m[2]:m[3]]), " ")
		if goTestRe.MatchString(cmd) {
			blocks = append(blocks, &block{file: file, line: strings.Count(text[:m[0]], "\n") + 1, lang: "sh", text: cmd,
				mark: marker{set: true, parse: "a command in the text"}})
		}
	}
	return blocks, errs
}

var (
	inlineRe = regexp.MustCompile("`([^`]+)`")
	goTestRe = regexp.MustCompile(`^(?:[A-Z_][A-Z0-9_]*=\S+ )*go test `)
)

// add reads one marker comment's words.
func (m *marker) add(s string) error {
	m.set = true
	words, err := splitWords(s)
	if err != nil {
		return err
	}
	for _, w := range words {
		k, v, hasValue := strings.Cut(w, "=")
		need := func() error {
			if !hasValue || v == "" {
				return fmt.Errorf("doctest marker: %s needs a value", k)
			}
			return nil
		}
		switch k {
		case "background":
			m.background = true
		case "output":
			m.output = true
		case "timeout", "session", "ready", "parse", "ci", "replace", "env", "setup", "dir", "needs", "http", "of", "wait", "stream", "match", "vary":
			if err := need(); err != nil {
				return err
			}
			switch k {
			case "timeout":
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("doctest marker: timeout=%s: %v", v, err)
				}
				m.timeout = d
			case "session":
				m.session = v
			case "ready":
				if _, err := regexp.Compile(v); err != nil {
					return fmt.Errorf("doctest marker: ready=%q: %v", v, err)
				}
				m.ready = v
			case "parse":
				m.parse = v
			case "ci":
				m.ci = v
			case "replace":
				a, b, ok := strings.Cut(v, "=>")
				if !ok || a == "" {
					return fmt.Errorf("doctest marker: replace=%q: want OLD=>NEW", v)
				}
				m.replace = append(m.replace, [2]string{a, b})
			case "env":
				if !strings.Contains(v, "=") {
					return fmt.Errorf("doctest marker: env=%q: want NAME=VALUE", v)
				}
				m.env = append(m.env, v)
			case "setup":
				m.setup = v
			case "dir":
				m.dir = v
			case "needs":
				m.needs = append(m.needs, strings.Split(v, ",")...)
			case "http":
				if v != "any" {
					return fmt.Errorf("doctest marker: http=%s: any (curl may get any status)", v)
				}
				m.httpAny = true
			case "of":
				if v != "background" {
					return fmt.Errorf("doctest marker: of=%s: background (the session's last background block)", v)
				}
				m.of = v
			case "wait":
				if _, err := regexp.Compile(v); err != nil {
					return fmt.Errorf("doctest marker: wait=%q: %v", v, err)
				}
				m.wait = v
			case "stream":
				if v != "stdout" && v != "stderr" && v != "both" {
					return fmt.Errorf("doctest marker: stream=%s: stdout, stderr or both", v)
				}
				m.stream = v
			case "match":
				if v != "tail" && v != "exact" && v != "anyorder" {
					return fmt.Errorf("doctest marker: match=%s: tail, exact or anyorder", v)
				}
				m.match = v
			case "vary":
				m.vary = append(m.vary, strings.Split(v, ",")...)
			}
		default:
			return fmt.Errorf("doctest marker: unknown word %q", w)
		}
	}
	return nil
}

// splitWords splits a marker at spaces outside double quotes; a quoted value may hold \" and \\.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, esc, any := false, false, false
	for _, r := range s {
		switch {
		case esc:
			w.WriteRune(r)
			esc = false
		case in && r == '\\':
			esc = true
		case r == '"':
			in, any = !in, true
		case !in && (r == ' ' || r == '\t'):
			if any || w.Len() > 0 {
				words = append(words, w.String())
			}
			w.Reset()
			any = false
		default:
			w.WriteRune(r)
		}
	}
	if in {
		return nil, errors.New("doctest marker: a quote is not closed")
	}
	if any || w.Len() > 0 {
		words = append(words, w.String())
	}
	return words, nil
}

// session is blocks that share a directory, in document order.
type session struct {
	name   string
	blocks []*block
}

// plan reads every page and groups its blocks into sessions; it returns the mistakes too.
func plan(t *testing.T) ([]*session, []string) {
	var sessions []*session
	var errs []string
	byName := map[string]*session{}
	for _, file := range pages(t) {
		text, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil {
			t.Fatal(err)
		}
		blocks, perrs := parsePage(file, string(text))
		errs = append(errs, perrs...)
		var last *session // the session of the page's last shell block
		for _, b := range blocks {
			m := &b.mark
			switch {
			case m.output:
				if b.shell() {
					errs = append(errs, fmt.Sprintf("%s: an output block is text, not %s", b, b.lang))
					continue
				}
			case !b.shell():
				if m.set {
					errs = append(errs, fmt.Sprintf("%s: a doctest marker on a %s block: only shell blocks and output run", b, b.lang))
				}
				continue
			}
			if !m.output && m.ci == "" && m.parse == "" && (strings.Contains(b.text, "go test ") || strings.Contains(b.text, "go vet ")) {
				errs = append(errs, fmt.Sprintf("%s: go test in a block: mark it parse=\"why\" (or ci) so the test does not run a test suite", b))
				continue
			}
			var s *session
			switch {
			case m.session != "":
				key := b.file + "#" + m.session
				if s = byName[key]; s == nil {
					s = &session{name: key}
					byName[key] = s
					sessions = append(sessions, s)
				}
			case m.output:
				if last == nil {
					errs = append(errs, fmt.Sprintf("%s: an output block with no shell block before it", b))
					continue
				}
				s = last
			default:
				s = &session{name: b.String()}
				sessions = append(sessions, s)
			}
			s.blocks = append(s.blocks, b)
			if !m.output {
				last = s
			}
		}
	}
	for _, s := range sessions {
		var prev *block
		for _, b := range s.blocks {
			if b.mark.output && (prev == nil || prev.mark.parse != "" || prev.mark.ci != "" || prev.transcript()) {
				errs = append(errs, fmt.Sprintf("%s: an output block must follow a block that runs, not a transcript or a parse-only one", b))
			}
			if !b.mark.output {
				prev = b
			}
			if !b.mark.background && b.mark.parse == "" && b.mark.ci == "" && backgrounded(b.text) {
				errs = append(errs, fmt.Sprintf("%s: a command left running with &: give it a block of its own, marked background", b))
			}
		}
	}
	return sessions, errs
}

// backgrounded tells whether a script leaves a command running with a trailing &.
func backgrounded(script string) bool {
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if strings.HasSuffix(l, "&") && !strings.HasSuffix(l, "&&") {
			return true
		}
	}
	return false
}

func TestDocs(t *testing.T) {
	sessions, errs := plan(t)
	for _, e := range errs {
		t.Error(e)
	}
	ciLine := ciCommand(t)
	sessions = slices.DeleteFunc(sessions, func(s *session) bool { return !selected(s.name) })
	if len(sessions) == 0 {
		return
	}
	h := newHarness(t)
	var wg sync.WaitGroup
	results := make([][]string, len(sessions))
	limit := make(chan struct{}, 6) // sessions mostly wait: on a serve, on the demo's delays
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			results[i] = h.run(s, ciLine)
		}()
	}
	wg.Wait()
	for i, s := range sessions {
		t.Run(subtestName(s.name), func(t *testing.T) {
			for _, e := range results[i] {
				switch {
				case strings.HasPrefix(e, "skip: "):
					t.Skip(strings.TrimPrefix(e, "skip: "))
				case strings.HasPrefix(e, "log: "):
					t.Log(strings.TrimPrefix(e, "log: "))
				default:
					t.Error(e)
				}
			}
		})
	}
}

func subtestName(s string) string { return strings.NewReplacer("/", "_", " ", "_").Replace(s) }

// selected tells whether -run's second level (TestDocs/README) lets the session run: sessions
// run before their subtests report, so -run alone would not spare them.
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil {
		return true
	}
	parts := splitTestPattern(f.Value.String())
	if len(parts) < 2 {
		return true
	}
	re, err := regexp.Compile(parts[1])
	return err != nil || re.MatchString(subtestName(name))
}

// ciCommand is .ci/run's test command: its last line.
func ciCommand(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

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
		deadline := time.Now().Add(cmp(m.timeout, defaultTimeout))
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
	deadline := time.Now().Add(cmp(b.mark.timeout, defaultTimeout))
	for !ready.MatchString(p.both.String()) {
		select {
		case <-p.done:
			r.failf(b, "ended (%v) before it was ready (%s):\n%s", p.err, b.mark.ready, p.both)
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.failf(b, "not ready (%s) within %v:\n%s", b.mark.ready, cmp(b.mark.timeout, defaultTimeout), p.both)
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
	limit := cmp(p.b.mark.timeout, defaultTimeout)
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
		limit := cmp(b.mark.timeout, defaultTimeout)
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

func cmp(d, def time.Duration) time.Duration {
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

// simpleCommand is one command of a script: its variable assignments and words, quotes
// removed, variables and command substitutions left as written.
type simpleCommand struct {
	env  []string
	args []string
}

// shellCommands splits a script into its simple commands: enough of the shell for what pages
// show (quotes, \-newlines, comments, | || && ; &, redirections, $(…), while/if/do…).
func shellCommands(script string) []simpleCommand {
	var cmds []simpleCommand
	var cur []string
	var w strings.Builder
	inWord, dropNext := false, false
	endWord := func() {
		if !inWord {
			return
		}
		if dropNext {
			dropNext = false
		} else {
			cur = append(cur, w.String())
		}
		w.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		var c simpleCommand
		for len(cur) > 0 && slices.Contains([]string{"while", "until", "if", "then", "do", "else", "elif", "!", "{", "}", "(", ")"}, cur[0]) {
			cur = cur[1:]
		}
		for len(cur) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(cur[0]) {
			c.env, cur = append(c.env, cur[0]), cur[1:]
		}
		if len(cur) > 0 && cur[0] != "done" && cur[0] != "fi" {
			c.args = cur
			cmds = append(cmds, c)
		}
		cur = nil
	}
	rs := []rune(script)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++
		case c == '\\' && i+1 < len(rs):
			w.WriteRune(rs[i+1])
			inWord = true
			i++
		case c == '#' && !inWord:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			endCmd()
		case c == '\'':
			inWord = true
			for i++; i < len(rs) && rs[i] != '\''; i++ {
				w.WriteRune(rs[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(rs) && rs[i] != '"'; i++ {
				if rs[i] == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[i+1]) {
					i++
				}
				w.WriteRune(rs[i])
			}
		case c == '$' && i+1 < len(rs) && rs[i+1] == '(':
			inWord = true
			depth := 0
			for ; i < len(rs); i++ {
				w.WriteRune(rs[i])
				if rs[i] == '(' {
					depth++
				} else if rs[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
		case c == ' ' || c == '\t':
			endWord()
		case c == '\n' || c == ';' || c == '|' || c == '&':
			if c == '&' && i+1 < len(rs) && rs[i+1] == '>' { // &> file
				endWord()
				i++
				dropNext = true
				continue
			}
			endCmd()
			if (c == '|' || c == '&') && i+1 < len(rs) && rs[i+1] == c {
				i++
			}
		case c == '<' || c == '>':
			if inWord && regexp.MustCompile(`^\d+$`).MatchString(w.String()) {
				w.Reset()
				inWord = false
			} else {
				endWord()
			}
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			if i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9' && rs[i] == '&' { // 2>&1
				i++
				continue
			}
			dropNext = true
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// parse checks a block marked parse: bash reads it, and every duilie, go, node and bash
// command in it must be able to start (see the package comment). Nothing runs but duilie's
// --help.
func (r *sessionRun) parse(b *block) {
	if out, err := exec.Command("/bin/bash", "-n", "-c", b.text).CombinedOutput(); err != nil {
		r.failf(b, "bash cannot read it: %s", out)
		return
	}
	cwd := repo
	if b.mark.dir != "" {
		cwd = filepath.Join(repo, b.mark.dir)
	}
	exported := map[string]bool{}
	for _, kv := range b.mark.env {
		k, _, _ := strings.Cut(kv, "=")
		exported[k] = true
	}
	for _, c := range shellCommands(b.text) {
		name, args := c.args[0], c.args[1:]
		env := slices.Clone(c.env)
		for k := range exported {
			env = append(env, k+"=")
		}
		var err error
		switch {
		case name == "cd" && len(args) == 1:
			if !filepath.IsAbs(args[0]) {
				cwd = filepath.Join(cwd, args[0])
			}
		case name == "export":
			for _, a := range args {
				k, _, _ := strings.Cut(a, "=")
				exported[k] = true
			}
		case name == "duilie":
			err = r.h.helps(r.h.duilie, "duilie", cwd, args)
		case name == "go" && len(args) > 1 && args[0] == "run":
			switch pkg := args[1]; {
			case samePath(cwd, pkg, "cmd/duilie") || pkg == "github.com/duilie/duilie/cmd/duilie":
				err = r.h.helps(r.h.duilie, "duilie", cwd, args[2:])
			case samePath(cwd, pkg, "examples/page-go"):
				err = r.h.helps(r.h.pageGo, "page-go", cwd, args[2:])
			default:
				err = fmt.Errorf("go run %s: the test knows only ./cmd/duilie and ./examples/page-go", pkg)
			}
		case name == "go" && len(args) > 0 && (args[0] == "test" || args[0] == "vet"):
			err = checkGoTest(cwd, args[0], args[1:], env)
		case name == "node" || name == "bash":
			if len(args) == 0 || strings.HasPrefix(args[0], "-") {
				err = fmt.Errorf("%s without a script", name)
			} else if _, e := os.Stat(inDir(cwd, args[0])); e != nil {
				err = fmt.Errorf("%s %s: %v", name, args[0], e)
			}
		case strings.Contains(name, "/"):
			if _, e := os.Stat(inDir(cwd, name)); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
		if err != nil {
			r.failf(b, "%v", err)
		}
	}
}

func inDir(cwd, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(cwd, p)
}

// samePath tells whether pkg, from cwd, is the repository's directory rel.
func samePath(cwd, pkg, rel string) bool {
	return strings.HasPrefix(pkg, ".") && filepath.Clean(inDir(cwd, pkg)) == filepath.Join(repo, rel)
}

// helps runs a command line with --help: its command must exist, take every flag given, and
// any --config file must be there.
func (h *harness) helps(bin, name, cwd string, args []string) error {
	line := name + " " + strings.Join(args, " ")
	var lead []string // the words before the first flag: the command, then its arguments
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		lead = append(lead, a)
	}
	for i, a := range args {
		file, ok := strings.CutPrefix(a, "--config=")
		if a == "--config" && i+1 < len(args) {
			file, ok = args[i+1], true
		}
		if _, err := os.Stat(inDir(cwd, file)); ok && err != nil {
			return fmt.Errorf("%s: --config: %v", line, err)
		}
	}
	cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
	cmd.Dir = h.tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", line, err, out)
	}
	// A group of commands (worker) takes --help after any word: its usage says "[command]".
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "Usage:" {
			continue
		}
		if !sc.Scan() {
			break
		}
		usage := strings.Fields(sc.Text())
		if len(usage) >= 1 && usage[len(usage)-1] == "[command]" {
			path := usage[1 : len(usage)-1]
			if len(lead) > len(path) {
				return fmt.Errorf("%s: %s has no command %q", line, strings.Join(usage[:len(usage)-1], " "), lead[len(path)])
			}
		}
		break
	}
	return nil
}

// go test's own flags: those that take no value, and those that do.
var (
	goTestBools  = []string{"v", "race", "short", "json", "failfast", "cover", "benchmem", "x", "n", "a", "msan", "asan", "trimpath", "artifacts", "fullpath"}
	goTestValues = []string{"run", "bench", "benchtime", "count", "timeout", "cpu", "skip", "outputdir", "cpuprofile", "memprofile", "blockprofile",
		"mutexprofile", "coverprofile", "parallel", "p", "tags", "list", "o", "exec", "shuffle", "covermode", "coverpkg", "trace", "ldflags", "gcflags", "mod", "vet"}
)

// checkGoTest checks a go test (or vet) command line without running it: its packages are the
// repository's, its flags go test's or its packages' own, -run and -bench name tests and
// benchmarks that exist (at their first level), -benchtime, -count and -timeout read, and every
// DUILIE_ variable it sets is one its packages read.
func checkGoTest(cwd, verb string, args, env []string) error {
	line := "go " + verb + " " + strings.Join(args, " ")
	var pkgs []string
	flags := map[string]string{}
	var custom []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.TrimPrefix(name, "test.")
		switch {
		case slices.Contains(goTestBools, name):
		case slices.Contains(goTestValues, name):
			if !hasValue {
				if i+1 == len(args) {
					return fmt.Errorf("%s: -%s needs a value", line, name)
				}
				i++
				value = args[i]
			}
			flags[name] = value
		default:
			custom = append(custom, name)
		}
	}
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	var dirs []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p, ".") {
			return fmt.Errorf("%s: %s: the test knows only the repository's packages, by path", line, p)
		}
		if strings.HasSuffix(p, "/...") {
			dirs = append(dirs, "") // a whole tree: nothing to say about its tests
			continue
		}
		dir := filepath.Clean(inDir(cwd, p))
		if rel, err := filepath.Rel(repo, dir); err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s: %s is outside the repository", line, p)
		}
		if tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go")); len(tests) == 0 {
			return fmt.Errorf("%s: %s has no tests", line, p)
		}
		dirs = append(dirs, dir)
	}
	funcs, sources := map[string]bool{}, ""
	for _, d := range dirs {
		if d == "" {
			funcs = nil // a tree's tests are not listed: -run and -bench are not judged
			break
		}
		fs, src, err := testFuncs(d)
		if err != nil {
			return fmt.Errorf("%s: %v", line, err)
		}
		for f := range fs {
			funcs[f] = true
		}
		sources += src
	}
	for _, name := range custom {
		if sources != "" && !regexp.MustCompile(`flag\.\w+\("`+regexp.QuoteMeta(name)+`"`).MatchString(sources) {
			return fmt.Errorf("%s: -%s is not a flag of go test or of the package's tests", line, name)
		}
	}
	for name, prefixes := range map[string][]string{"run": {"Test", "Fuzz", "Example"}, "bench": {"Benchmark"}} {
		pat, ok := flags[name]
		if !ok || funcs == nil {
			continue
		}
		first := splitTestPattern(pat)[0]
		re, err := regexp.Compile(first)
		if err != nil {
			return fmt.Errorf("%s: -%s %s: %v", line, name, pat, err)
		}
		if re.MatchString("") {
			continue // ^$, .: nothing or everything
		}
		found := false
		for f := range funcs {
			for _, p := range prefixes {
				found = found || (strings.HasPrefix(f, p) && re.MatchString(f))
			}
		}
		if !found {
			return fmt.Errorf("%s: -%s %s: no %s of %s is named so", line, name, pat, strings.Join(prefixes, ", "), strings.Join(pkgs, " "))
		}
	}
	if v, ok := flags["benchtime"]; ok {
		if _, err := time.ParseDuration(v); err != nil && !regexp.MustCompile(`^\d+x$`).MatchString(v) {
			return fmt.Errorf("%s: -benchtime %s: a duration or Nx", line, v)
		}
	}
	if v, ok := flags["timeout"]; ok {
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("%s: -timeout %s: %v", line, v, err)
		}
	}
	if v, ok := flags["count"]; ok {
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s: -count %s: %v", line, v, err)
		}
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "DUILIE_") && sources != "" && !strings.Contains(sources, `"`+k+`"`) {
			return fmt.Errorf("%s: %s: no code of %s reads it", line, k, strings.Join(pkgs, " "))
		}
	}
	return nil
}

// splitTestPattern splits a -run or -bench pattern at its slashes, as package testing does
// (not within brackets or parentheses).
func splitTestPattern(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '\\':
			i++
		case '/':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// testFuncs lists the package in dir's test functions (Test…, Benchmark…, Fuzz…, Example…) and
// returns its Go sources, tests included, as one text.
func testFuncs(dir string) (map[string]bool, string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, "", err
	}
	funcs := map[string]bool{}
	var src strings.Builder
	fset := token.NewFileSet()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		src.Write(b)
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, b, parser.SkipObjectResolution)
		if err != nil {
			return nil, "", err
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = true
			}
		}
	}
	return funcs, src.String(), nil
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
