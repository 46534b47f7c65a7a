package docs

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The golden comparison: "…", spaces, the vary classes and keys, and the three modes.
func TestMatchOutput(t *testing.T) {
	for _, tc := range []struct {
		golden, output, mode string
		vary                 []string
		ok                   bool
	}{
		{"all 145 messages settled in 10.3 s", "all 145 messages settled in 2.8 s", "tail", []string{"durations"}, true},
		{"all 145 messages settled in 10.3 s", "all 146 messages settled in 2.8 s", "tail", []string{"durations"}, false},
		{"p50 11ms  14ms", "  p50   1.6ms 228.087ms", "tail", []string{"durations"}, true},
		{"p50 11ms", "p50 11ms", "tail", nil, true},
		{"p50 11ms", "p50 12ms", "tail", nil, false},
		{"event=7f77… batch=1 acked=1", "event=7f778adb batch=2 acked=1", "tail", []string{"batch"}, true},
		{"event=7f77… batch=1 acked=1", "event=7f778adb batch=2 acked=2", "tail", []string{"batch"}, false},
		{`line="a b" x=1`, `line="c d e" x=1`, "tail", []string{"line"}, true},
		{"duilie v0.0.0-… (commit …)", "duilie v0.0.0-20261204042635-ec3d507ead31 (commit ec3d507ead31)", "exact", nil, true},
		{"duilie v0.0.0-… (commit …)", "duilie (devel)", "exact", nil, false},
		{"b\nc", "a\nb\nc\n\n", "tail", nil, true},
		{"b\nc", "a\nb\nc", "exact", nil, false},
		{"c\na", "a\nb\nc", "anyorder", nil, true},
		{"c\nc", "a\nb\nc", "anyorder", nil, false},
		{"id 0123456789ab", "id fedcba987654", "tail", []string{"hex"}, true},
		{"sent 100", "sent 3,000", "tail", []string{"numbers"}, true},
	} {
		err := matchOutput(tc.golden, tc.output, tc.mode, tc.vary)
		if (err == nil) != tc.ok {
			t.Errorf("%q against %q (%s, vary %v): %v, want ok %v", tc.golden, tc.output, tc.mode, tc.vary, err, tc.ok)
		}
	}
}

// Enough of the shell for what pages show.
func TestShellCommands(t *testing.T) {
	script := `export A=1 # a comment
echo '{"kind":"page"}' |
  DUILIE_X=1 go run ./cmd/duilie send --binding PAGE_QUEUE --config "examples/a b.toml" < task.json
curl -H "$AUTH" -d '{"a":1}' \
  $CF/queues 2>&1 >/dev/null && node x.mjs &
while [ -e /proc/$PID ]; do echo "$(date -u +%T)"; sleep 5; done`
	var got []string
	for _, c := range shellCommands(script) {
		got = append(got, strings.Join(c.env, ",")+"|"+strings.Join(c.args, " "))
	}
	want := []string{
		"|export A=1",
		`|echo {"kind":"page"}`,
		"DUILIE_X=1|go run ./cmd/duilie send --binding PAGE_QUEUE --config examples/a b.toml",
		`|curl -H $AUTH -d {"a":1} $CF/queues`,
		"|node x.mjs",
		"|[ -e /proc/$PID ]",
		"|echo $(date -u +%T)",
		"|sleep 5",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// What the parser says of a page's fences, markers and indented blocks.
func TestParsePage(t *testing.T) {
	page := "text\n\n```\nno language\n```\n\n<!-- doctest: bogus -->\n```sh\necho\n```\n\nA paragraph:\n\n    indented command\n\n" +
		"- a list\n\n    its second paragraph\n\n<!-- doctest: parse=\"why\" timeout=3s -->\n```sh\ngo test ./x\n```\n\nsee `go test -run X ./y/`.\n"
	blocks, errs := parsePage("p.md", page)
	wantErrs := []string{
		"p.md:7: doctest marker: unknown word \"bogus\"",
		"p.md:3: a fenced block without a language: sh for commands, text for output",
		"p.md:14: an indented code block: fence it (```sh for commands) so that it is run",
	}
	slicesSort := func(s []string) []string { r := slices.Clone(s); slices.Sort(r); return r }
	if !reflect.DeepEqual(slicesSort(errs), slicesSort(wantErrs)) {
		t.Errorf("mistakes:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(wantErrs, "\n"))
	}
	if len(blocks) != 4 || blocks[2].mark.parse != "why" || blocks[2].mark.timeout.Seconds() != 3 || blocks[3].text != "go test -run X ./y/" || blocks[3].line != 25 {
		for _, b := range blocks {
			t.Logf("%s %s %q %+v", b, b.lang, b.text, b.mark)
		}
		t.Errorf("blocks: %d", len(blocks))
	}
}
