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
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
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
