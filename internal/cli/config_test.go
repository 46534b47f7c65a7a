package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const configTestdata = "../../server/testdata/config/"

// A configuration mistake is exit status 78 with every mistake on stderr, for every command
// that reads the file.
func TestConfigErrorExit(t *testing.T) {
	want, err := os.ReadFile(configTestdata + "platform.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--config", configTestdata + "platform.toml"},
		{"send", "--binding", "B", "--config", configTestdata + "platform.toml"},
		{"send-batch", "--binding", "B", "--config", configTestdata + "platform.toml"},
		{"queues", "--config", configTestdata + "platform.toml"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), Options{}, args, strings.NewReader("{}"), &stdout, &stderr)
		// The golden names the file as the server package's tests do.
		got := strings.ReplaceAll(stderr.String(), configTestdata, "testdata/config/")
		if code != exitConfig || stdout.Len() != 0 || "error:\n"+got != string(want) {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", args, code, stdout.String(), stderr.String())
		}
	}
	var stderr bytes.Buffer
	code := Run(context.Background(), Options{}, []string{"queues", "--config", filepath.Join(t.TempDir(), "none.toml")}, nil, &bytes.Buffer{}, &stderr)
	if code != exitConfig || !strings.HasSuffix(stderr.String(), "none.toml: no such file (write one, or name it with --config)\n") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr.String())
	}
}
