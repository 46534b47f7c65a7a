package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/platform/jetstream"
	"github.com/duilie/duilie/server"
)

// operateConfig is e2eConfig with a dead-letter queue: jobs gives up after two deliveries and
// dead-letters to jobs-dead.
func operateConfig(t *testing.T) string {
	t.Helper()
	cfg := e2eConfig(t, 30000, 2000)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "max_retries = 3\n", "max_retries = 1\ndead_letter_queue = \"jobs-dead\"\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

type queueJSON struct {
	Queue           string  `json:"queue"`
	Ready           int     `json:"ready"`
	Delayed         int     `json:"delayed"`
	InFlight        int     `json:"in_flight"`
	Paused          bool    `json:"paused"`
	DeadLetterQueue *string `json:"dead_letter_queue"`
}

// queuesJSON runs duilie queues --json and returns the row of each queue.
func queuesJSON(t *testing.T, cfg string) map[string]queueJSON {
	t.Helper()
	r := runDuilie(t, "", nil, "queues", "--json", "--config", cfg)
	var rows []queueJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
		t.Fatalf("queues --json: %+v", r)
	}
	out := map[string]queueJSON{}
	for _, q := range rows {
		out[q.Queue] = q
	}
	return out
}

func waitQueues(t *testing.T, cfg, what string, cond func(map[string]queueJSON) bool) map[string]queueJSON {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		qs := queuesJSON(t, cfg)
		if cond(qs) {
			return qs
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 20 s: %s; queues %+v", what, qs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type peekJSON struct {
	ID          string          `json:"id"`
	State       string          `json:"state"`
	Attempts    int             `json:"attempts"`
	Timestamp   int64           `json:"timestamp"`
	Due         *int64          `json:"due"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body"`
}

func peek(t *testing.T, cfg string, args ...string) []peekJSON {
	t.Helper()
	r := runDuilie(t, "", nil, append([]string{"peek", "--json", "--config", cfg}, args...)...)
	var ms []peekJSON
	if r.code != 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &ms) != nil {
		t.Fatalf("peek %v: %+v", args, r)
	}
	return ms
}

func mustRun(t *testing.T, cfg, stdin string, args ...string) {
	t.Helper()
	if r := runDuilie(t, stdin, nil, append(args, "--config", cfg)...); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("duilie %v: %+v", args, r)
	}
}

// The operator's commands with the real binary, with and without a serve on the same
// configuration: a workload dead-letters two messages; peek shows them with their bodies;
// replay sends them back and the program receives them with attempts 1; pause stops delivery
// while sends succeed, across a serve restart, and resume restarts it; purge and delete remove
// messages.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	cfg := operateConfig(t)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)

	mustRun(t, cfg, `{"name":"a","fail_below":99}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"b","fail_below":99}`, "send", "--binding", "JOBS")
	// Both end in the dead-letter queue. The app's log cannot say when: it exits at a batch's
	// first failing message, so when a and b share a batch the other is never started.
	qs := waitQueues(t, cfg, "two dead letters", func(qs map[string]queueJSON) bool { return qs["jobs-dead"].Ready == 2 })
	if d := qs["jobs"].DeadLetterQueue; d == nil || *d != "jobs-dead" || qs["jobs-dead"].DeadLetterQueue != nil {
		t.Errorf("dead_letter_queue columns: %+v", qs)
	}

	dead := peek(t, cfg, "jobs-dead")
	if len(dead) != 2 {
		t.Fatalf("peek jobs-dead: %+v", dead)
	}
	for i, name := range []string{"a", "b"} {
		m := dead[i]
		if want := fmt.Sprintf(`{"name":%q,"fail_below":99}`, name); string(m.Body) != want || m.State != "ready" || m.Attempts != 0 || m.ContentType != "json" || len(m.ID) != 32 {
			t.Errorf("dead letter %d: %+v, want body %s, ready, attempts 0", i, m, want)
		}
	}
	r := runDuilie(t, "", nil, "peek", "jobs-dead", "--config", cfg)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "id  ") || !strings.Contains(r.stdout, dead[0].ID+"  ready         0  ") ||
		!strings.Contains(r.stdout, `{"name":"b","fail_below":99}`) {
		t.Errorf("peek table: %+v", r)
	}

	// The bug is fixed: replay, back to jobs (its consumer names jobs-dead).
	if err := os.WriteFile(appLog+".fixed", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, cfg, "", "replay", "jobs-dead")
	waitAppLog(t, appLog, `done (a|b) attempts=1`, 2)
	waitQueues(t, cfg, "dead-letter queue empty", func(qs map[string]queueJSON) bool { return qs["jobs-dead"].Ready == 0 })

	// Paused: sends succeed, nothing is delivered, across a restart of serve.
	mustRun(t, cfg, "", "pause", "jobs")
	mustRun(t, cfg, `{"name":"p"}`, "send", "--binding", "JOBS")
	waitQueues(t, cfg, "paused with one ready", func(qs map[string]queueJSON) bool { return qs["jobs"].Paused && qs["jobs"].Ready == 1 })
	time.Sleep(time.Second) // a delivery would have happened by now; the check below is that none did
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "start p ") {
		t.Fatalf("a paused queue delivered:\n%s", b)
	}
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if ms := peek(t, cfg, "jobs", "--state", "ready"); len(ms) != 1 || string(ms[0].Body) != `{"name":"p"}` {
		t.Errorf("peek without a serve: %+v", ms)
	}
	r = runDuilie(t, "", nil, "queues", "--config", cfg)
	if !regexp.MustCompile(`\njobs +1 +0 +0 +0  yes     jobs-dead\n`).MatchString(r.stdout) {
		t.Errorf("queues while no serve runs:\n%s", r.stdout)
	}
	s = startServe(t, cfg, env...)
	time.Sleep(time.Second)
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "start p ") {
		t.Fatalf("a paused queue delivered after a restart:\n%s", b)
	}
	mustRun(t, cfg, "", "resume", "jobs")
	waitAppLog(t, appLog, `done p attempts=1`, 1)

	// Purge empties a queue; delete removes one message.
	mustRun(t, cfg, "", "pause", "jobs")
	mustRun(t, cfg, `[{"body":{"name":"x1"}},{"body":{"name":"x2"},"delaySeconds":600}]`, "send-batch", "--binding", "JOBS")
	waitQueues(t, cfg, "two to purge", func(qs map[string]queueJSON) bool { return qs["jobs"].Ready == 1 && qs["jobs"].Delayed == 1 })
	r = runDuilie(t, "", nil, "purge", "jobs", "--config", cfg)
	if r.code != 64 || !strings.Contains(r.stderr, "confirm with --yes") {
		t.Errorf("purge without --yes, stdin not a terminal: %+v", r)
	}
	mustRun(t, cfg, "", "purge", "jobs", "--yes")
	waitQueues(t, cfg, "purged", func(qs map[string]queueJSON) bool {
		q := qs["jobs"]
		return q.Ready+q.Delayed+q.InFlight == 0 && q.Paused
	})
	mustRun(t, cfg, `{"name":"later"}`, "send", "--binding", "JOBS", "--delay", "600")
	delayed := peek(t, cfg, "jobs", "--state", "delayed")
	if len(delayed) != 1 || delayed[0].Due == nil || *delayed[0].Due < time.Now().Add(590*time.Second).UnixMilli() {
		t.Fatalf("peek delayed: %+v", delayed)
	}
	mustRun(t, cfg, "", "delete", "jobs", delayed[0].ID)
	if ms := peek(t, cfg, "jobs"); len(ms) != 0 {
		t.Errorf("after delete: %+v", ms)
	}
	r = runDuilie(t, "", nil, "delete", "jobs", delayed[0].ID, "--config", cfg)
	if r.code != 69 || !strings.Contains(r.stderr, "no such message") {
		t.Errorf("delete twice: %+v", r)
	}
	mustRun(t, cfg, "", "resume", "jobs")
	if code, _ := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "x1") || strings.Contains(string(b), "later") {
		t.Errorf("purged or deleted messages were delivered:\n%s", b)
	}
}

// The operator's commands refuse bad arguments with the exit statuses of SPEC §13.
func TestOperatorCommandErrors(t *testing.T) {
	t.Parallel()
	cfg := operateConfig(t)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"peek"}, 64, "duilie: peek needs the queue to show\nRun 'duilie peek --help' for usage.\n"},
		{[]string{"peek", "jobs", "extra"}, 64, "duilie: peek takes 1 argument(s), got 2: jobs extra\nRun 'duilie peek --help' for usage.\n"},
		{[]string{"peek", "jobs", "--state", "gone"}, 64, "duilie: \"gone\": state must be \"ready\", \"delayed\" or \"in_flight\"\nRun 'duilie peek --help' for usage.\n"},
		{[]string{"peek", "jobs", "--limit", "0"}, 64, "duilie: --limit 0: must be 1–1000\nRun 'duilie peek --help' for usage.\n"},
		{[]string{"peek", "Jobs"}, 64, "duilie: queue name \"Jobs\" may hold only lowercase letters, digits and '-', and must start with a letter or digit\nRun 'duilie peek --help' for usage.\n"},
		{[]string{"replay", "jobs-dead", "--delay", "43201"}, 64, "duilie: a replay's delay must be 0–43200 seconds, not 43201\nRun 'duilie replay --help' for usage.\n"},
		{[]string{"replay", "jobs"}, 64, "duilie: no consumer in " + cfg + " names jobs as its dead_letter_queue; say where to send its messages (--to QUEUE)\nRun 'duilie replay --help' for usage.\n"},
		{[]string{"delete", "jobs"}, 64, "duilie: delete needs the queue and the id of the message to delete\nRun 'duilie delete --help' for usage.\n"},
		{[]string{"pause"}, 64, "duilie: pause needs the queue to pause\nRun 'duilie pause --help' for usage.\n"},
	} {
		r := runDuilie(t, "", nil, append(c.args, "--config", cfg)...)
		if r.code != c.code || r.stderr != c.stderr || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.args, r.code, r.stderr, c.code, c.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), ".duilie")); err == nil {
		t.Error("a refused command opened the data directory")
	}
	// A queue neither configured nor on the platform.
	r := runDuilie(t, "", nil, "peek", "nowhere", "--config", cfg)
	if r.code != 69 || !strings.Contains(r.stderr, "nowhere") || !strings.Contains(r.stderr, "no such queue") {
		t.Errorf("peek of an unknown queue: %+v", r)
	}
	r = runDuilie(t, "", nil, "pause", "jobs", "--config", filepath.Join(t.TempDir(), "duilie.toml"))
	if r.code != 78 {
		t.Errorf("pause without a configuration: %+v", r)
	}
}

// duilie queues shows each queue's dead-letter queue, a program consumer's and an http_pull
// consumer's alike (the example wrangler.toml has one of each), before anything is sent.
func TestQueuesTable(t *testing.T) {
	t.Parallel()
	cfg, err := server.LoadConfig("../../examples/wrangler/wrangler.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.Platform = &jetstream.Config{DataDir: dir}
	c, err := server.Open(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qs, err := c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rows []queueRow
	for _, q := range qs {
		rows = append(rows, rowOf(q))
	}
	want := "queue        ready  delayed  in_flight  lost  paused  dead_letter_queue\n" +
		"audit            0        0          0     0  no      audit-dlq\n" +
		"audit-dlq        0        0          0     0  no      -\n" +
		"page-dlq         0        0          0     0  no      -\n" +
		"page-render      0        0          0     0  no      page-dlq\n"
	if got := queueTable(rows); got != want {
		t.Errorf("queues:\n%s\nwant\n%s", got, want)
	}
}

// Three replays of one dead-letter queue at once, through a running serve: each exits 0, and
// every message is moved once between them (none twice, none left behind).
func TestConcurrentReplays(t *testing.T) {
	t.Parallel()
	cfg := operateConfig(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), `QUEUE = ["JOBS", "UNSET"]`, `QUEUE = ["JOBS", "UNSET", "DEAD"]`, 1) +
		"\n[[queues.producers]]\nbinding = \"DEAD\"\nqueue = \"jobs-dead\"\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	defer s.stop()
	var items []string
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"body":{"n":%d}}`, i))
	}
	batch := "[" + strings.Join(items, ",") + "]"
	mustRun(t, cfg, "", "pause", "jobs") // nothing consumes what is replayed
	for range 6 {
		if r := runDuilie(t, batch, nil, "send-batch", "--binding", "DEAD", "--config", cfg); r.code != 0 {
			t.Fatalf("send-batch: %+v", r)
		}
	}
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Go(func() { results[i] = runDuilie(t, "", nil, "replay", "jobs-dead", "--config", cfg) })
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("replay %d: exit %d, stderr %q", i, r.code, r.stderr)
		}
	}
	qs := queuesJSON(t, cfg)
	if qs["jobs-dead"].Ready != 0 || qs["jobs"].Ready != 600 {
		t.Errorf("after three replays at once: %+v", qs)
	}
}
