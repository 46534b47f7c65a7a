package cli

import (
	"bytes"
	"strings"
	"testing"
)

// duilie check: stdin byte for byte in; the normalized text and one newline out, exit 0; the
// exact message and one newline on stderr, exit 1; usage errors exit 64 (SPEC §13).
func TestCheck(t *testing.T) {
	big := `"` + strings.Repeat("a", 127998) + `"`
	for _, tc := range []struct {
		name, stdin     string
		args            []string
		code            int
		stdout, stderr  string
		stderrHasPrefix bool
	}{
		{"normalizes", "{\"b\":1E2, \"a\":-0, \"1\":\"\\u2028\\ud800\"}\n", nil, 0, "{\"1\":\"\u2028\\ud800\",\"b\":100,\"a\":0}\n", "", false},
		{"exactly 128000 bytes", big, nil, 0, big + "\n", "", false},
		{"a trailing newline counts toward the size", big + "\n", nil, 1, "", "消息体超过 128000 字节\n", false},
		{"not JSON", "{", nil, 1, "", "消息体不是有效的 JSON 文字\n", false},
		{"empty stdin", "", nil, 1, "", "消息体不是有效的 JSON 文字\n", false},
		{"marker", `{"\u0024句柄":1}`, nil, 1, "", "消息体含有不属于 JSON 的值或宿主专用记号\n", false},
		{"delay in range", "1", []string{"--delay", "43200"}, 0, "1\n", "", false},
		{"delay out of range before the body", "{", []string{"--delay", "43201"}, 1, "", "延迟秒数须在 0 至 43200 之间\n", false},
		{"batch", `[{"delaySeconds":1e1,"body":{"x":[1]}},{"body":"],["}]`, []string{"--batch"}, 0,
			`[{"body":{"x":[1]},"contentType":"json","delaySeconds":10},{"body":"],[","contentType":"json"}]` + "\n", "", false},
		{"batch error", `[{"body":1,"contentType":"json"}]`, []string{"--batch"}, 1, "", "批量消息项只允许 body 与 delaySeconds 两个字段\n", false},
		{"batch with delay is a usage error", `[{"body":1}]`, []string{"--batch", "--delay", "3"}, 64, "", "duilie: --delay cannot be used with --batch", true},
		{"bad delay flag", "1", []string{"--delay", "x"}, 64, "", "duilie: invalid argument", true},
		{"stray argument", "1", []string{"body.json"}, 64, "", "duilie: unknown command", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"check"}, tc.args...), strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code || stdout.String() != tc.stdout {
				t.Fatalf("exit %d, stdout %.200q; want %d, %.200q (stderr %q)", code, stdout.String(), tc.code, tc.stdout, stderr.String())
			}
			if tc.stderrHasPrefix && !strings.HasPrefix(stderr.String(), tc.stderr) || !tc.stderrHasPrefix && stderr.String() != tc.stderr {
				t.Fatalf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}
