package cloudflare_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/duilie/duilie/internal/cli"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
)

// duilie queues on this platform shows what Cloudflare reports, the backlog; the operator
// commands Cloudflare's API cannot carry out as duilie's do are refused as unsupported.
func TestCommandsOnCloudflare(t *testing.T) {
	url := serveAPI(t, "jobs")
	t.Setenv("DUILIE_TEST_CF_TOKEN", token)
	ctx := context.Background()
	p, err := cloudflare.Open(ctx, cloudflare.Config{AccountID: account, Token: token, BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, err := p.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{`1`, `2`} {
		if err := q.Send(ctx, []byte(b), platform.SendOptions{ContentType: platform.JSON}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "duilie.toml")
	conf := "[platform]\nkind = \"cloudflare\"\naccount_id = \"" + account + "\"\napi_token_env = \"DUILIE_TEST_CF_TOKEN\"\nbase_url = \"" + url + "\"\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Run(ctx, cli.Options{}, append(args, "--config", path), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
		err  string
	}{
		{[]string{"queues"}, 0, "queue  backlog  paused  dead_letter_queue\njobs         2  no      -\n", ""},
		{[]string{"queues", "--json"}, 0, `[{"queue":"jobs","backlog":2,"paused":false,"dead_letter_queue":null}]` + "\n", ""},
		{[]string{"pause", "jobs"}, 69, "", "duilie: platform kind cloudflare has no operator operations\n"},
		{[]string{"peek", "jobs"}, 69, "", "duilie: platform kind cloudflare has no operator operations\n"},
	} {
		code, out, errOut := run(tc.args...)
		if code != tc.code || out != tc.out || errOut != tc.err {
			t.Errorf("duilie %v: exit %d\n%s%s\nwant exit %d\n%s%s", tc.args, code, out, errOut, tc.code, tc.out, tc.err)
		}
	}
}
