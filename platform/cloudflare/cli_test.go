package cloudflare_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/queues"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/cli"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
	"github.com/duilie/duilie/server"
)

// duilie queues on this platform shows what Cloudflare reports, the backlog; pause, resume
// and purge are Cloudflare's own, and the operator commands Cloudflare has no API for are
// refused as unsupported.
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
		{[]string{"pause", "jobs"}, 0, "", ""},
		{[]string{"queues"}, 0, "queue  backlog  paused  dead_letter_queue\njobs         2  yes     -\n", ""},
		{[]string{"resume", "jobs"}, 0, "", ""},
		{[]string{"purge", "--yes", "jobs"}, 0, "", ""},
		{[]string{"queues"}, 0, "queue  backlog  paused  dead_letter_queue\njobs         0  no      -\n", ""}, // a resume shows within a moment
		{[]string{"peek", "jobs"}, 69, "", "duilie: unsupported operation on Cloudflare: it has no API to list a queue's messages\n"},
		{[]string{"delete", "jobs", "0123456789abcdef0123456789abcdef"}, 69, "", "duilie: unsupported operation on Cloudflare: it has no API to delete one message\n"},
		{[]string{"replay", "jobs", "--to", "other"}, 69, "", "duilie: unsupported operation on Cloudflare: it has no API to move messages between queues\n"},
	} {
		code, out, errOut := run(tc.args...)
		for deadline := time.Now().Add(5 * time.Second); tc.args[0] == "queues" && out != tc.out && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			code, out, errOut = run(tc.args...)
		}
		if code != tc.code || out != tc.out || errOut != tc.err {
			t.Errorf("duilie %v: exit %d\n%s%s\nwant exit %d\n%s%s", tc.args, code, out, errOut, tc.code, tc.out, tc.err)
		}
	}
}

// serve on this platform needs each configured queue on the account, and an HTTP pull consumer
// on each consumed one: a missing queue stops it from starting, naming the queue, and a queue
// without one stops its consumer with one line naming the queue.
func TestServeOnCloudflare(t *testing.T) {
	url := serveAPI(t, "pulled")
	api := queues.NewQueueService(option.WithBaseURL(url), option.WithAPIToken(token), option.WithMaxRetries(0))
	var create queues.QueueNewParams
	create.AccountID.Value, create.AccountID.Present = account, true
	create.QueueName.Value, create.QueueName.Present = "pushed", true // a queue with no consumer
	if _, err := api.New(context.Background(), create); err != nil {
		t.Fatal(err)
	}
	newServer := func(consumed string, log *bytes.Buffer, mu *sync.Mutex) (*server.Server, error) {
		cc := server.DefaultConsumerConfig(consumed)
		cc.RetryDelay = 5 * time.Second // Cloudflare's consumer decides: serve says so
		return server.New(server.Config{
			Permissions: server.Permissions{Queue: []string{"JOBS"}},
			Bindings:    map[string]string{"JOBS": "pulled"},
			Consumers:   []server.ConsumerConfig{cc},
			Program:     &duilie.Program{Queue: func(ev *duilie.Event) error { return nil }},
			Platform:    &cloudflare.Config{AccountID: account, Token: token, BaseURL: url},
			Logger:      slog.New(slog.NewTextHandler(&lockedBuffer{b: log, mu: mu}, nil)),
		})
	}
	ctx := context.Background()

	var log bytes.Buffer
	var mu sync.Mutex
	srv, err := newServer("missing", &log, &mu)
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), `create queue missing: account `+account+` has no queue named "missing"`) {
		t.Errorf("Start with a missing queue: %v", err)
	}

	mu.Lock()
	log.Reset()
	mu.Unlock()
	srv, err = newServer("pushed", &log, &mu)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	select {
	case err := <-srv.Failed():
		want := "queue pushed has no consumer on Cloudflare, not http_pull"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve stopped with %v, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer of a queue without an http_pull consumer did not stop")
	}
	mu.Lock()
	defer mu.Unlock()
	var stopped, warned []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "consumer stopped") {
			stopped = append(stopped, l)
		}
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "do not apply") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "queue=pushed") || !strings.Contains(warned[0], "kind=cloudflare") {
		t.Errorf("warnings of settings that do not apply: %q", warned)
	}
	if len(stopped) != 1 || !strings.Contains(stopped[0], "queue=pushed") || !strings.Contains(stopped[0], "wrangler queues consumer http add pushed") {
		t.Errorf("log lines of the stopped consumer: %q", stopped)
	}
}

type lockedBuffer struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
