package docs

// Checking a block marked parse without running it.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
