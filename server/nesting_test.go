package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTooDeep(t *testing.T) {
	deep := strings.Repeat("[", 33)
	for _, tc := range []struct {
		name string
		text string
		toml bool
		want int
	}{
		{"32 levels", "a = " + strings.Repeat("[", 32) + strings.Repeat("]", 32), true, 0},
		{"33 levels", "\n\na = " + deep, true, 3},
		{"inline tables count", "[t]\na = " + strings.Repeat("{b=", 33) + "1" + strings.Repeat("}", 33), true, 2},
		{"closed levels do not add up", strings.Repeat("a = [[[[[[[[[[]]]]]]]]]]\n", 100), true, 0},
		{"in a basic string", `a = "` + deep + `\"` + deep + `"`, true, 0},
		{"in a literal string", `a = '` + deep + `\'`, true, 0},
		{"in a multi-line string", "a = \"\"\"\n" + deep + "\"\"\"\"\nb = 1", true, 0},
		{"in a multi-line literal string", "a = '''" + deep + "\n'''''\nb = " + deep, true, 3},
		{"in a comment", "# " + deep + "\na = 1", true, 0},
		{"after a comment", "# x\n" + deep, true, 2},
		{"a string that does not end", `a = "` + deep, true, 0},
		{"JSON", `{"a":` + strings.Repeat("[", 32), false, 1},
		{"JSON string", `{"a":"` + deep + `\"'", "b": 1}`, false, 0},
		{"JSON quote", `{"a":'` + deep, false, 1},
	} {
		if got := tooDeep([]byte(tc.text), MaxConfigDepth, tc.toml); got != tc.want {
			t.Errorf("%s: line %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A configuration nested without bound is a mistake found before it is parsed: 100,000 nested
// inline tables overflowed the TOML parser's stack, and as many arrays took seconds.
func TestConfigNestingBounded(t *testing.T) {
	n := 100000
	dir := t.TempDir()
	for _, tc := range []struct{ file, text, want string }{
		{"duilie.toml", "[app]\ncommand = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n", "line 2: arrays and tables nest more than 32 deep"},
		{"duilie.toml", "x = " + strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n) + "\n", "line 1: arrays and tables nest more than 32 deep"},
		{"wrangler.toml", "x = " + strings.Repeat("[", n) + "\n", "line 1: arrays and tables nest more than 32 deep"},
		{"wrangler.jsonc", "// [[[[\n{\"x\": " + strings.Repeat("[", n) + "}", "line 2: arrays and objects nest more than 32 deep"},
	} {
		path := filepath.Join(dir, tc.file)
		os.WriteFile(path, []byte(tc.text), 0o600)
		_, err := LoadConfig(path)
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Mistakes) != 1 || ce.Mistakes[0] != path+": "+tc.want {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
}

// A configuration file is read up to 1 MiB and one byte more.
func TestConfigFileBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "duilie.toml")
	os.WriteFile(path, []byte("# "+strings.Repeat("x", MaxConfigBytes)), 0o600)
	_, err := LoadConfig(path)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Mistakes[0] != path+": over 1048576 bytes: a configuration file is at most 1 MiB" {
		t.Errorf("%v", err)
	}
	if _, err := LoadConfig("/dev/zero"); !errors.As(err, &ce) || !strings.Contains(ce.Mistakes[0], "at most 1 MiB") {
		t.Errorf("/dev/zero: %v", err)
	}
}
