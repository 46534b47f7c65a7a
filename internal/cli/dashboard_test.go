package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromium finds Debian's headless Chromium (.ci/run installs it). Without it the browser
// tests skip, except in CI, where they fail.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium in PATH: .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("the browser tests need chromium (apt-get install chromium; .ci/run installs it)")
	return ""
}

// browser starts a headless Chromium with an empty profile and nothing reaching the network,
// and collects every console error, uncaught exception and browser-log error of the page.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1100),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first action starts the browser, on a context without a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	return tctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// screenshot saves the page as name.png in the test's artifacts (go test -artifacts keeps them)
// and returns the image.
func screenshot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return png
}

type pageQueue struct {
	Queue       string `json:"queue"`
	Ready       string `json:"ready"`
	Delayed     string `json:"delayed"`
	InFlight    string `json:"in_flight"`
	DeadLetters string `json:"dead_letters"`
	Paused      string `json:"paused"`
}

const readQueuesJS = `[...document.querySelectorAll('#queues tbody tr[data-queue]')].map(r => ({
	queue: r.dataset.queue,
	ready: r.querySelector('[data-col=ready]').textContent,
	delayed: r.querySelector('[data-col=delayed]').textContent,
	in_flight: r.querySelector('[data-col=in_flight]').textContent,
	dead_letters: r.querySelector('[data-col=dead_letters]').textContent,
	paused: r.querySelector('[data-col=paused]').textContent}))`

// waitFor polls the page with a JavaScript expression until it is true.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never showed %s (%s): %v", what, expr, err)
	}
}

// openDashboard adds a dashboard to the configuration, starts serve with it and opens the URL
// serve logs, which carries the token: opening it sets the page's cookie. It returns the page's
// address without the token.
func openDashboard(t *testing.T, ctx context.Context, cfg string, env ...string) string {
	t.Helper()
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[dashboard]\nlisten = \"127.0.0.1:0\"\n")
	f.Close()
	s := startServe(t, cfg, env...)
	line := s.waitLog(`msg=dashboard url=`, 1)
	m := regexp.MustCompile(`url="((http://127\.0\.0\.1:\d+/)\?token=[0-9a-f]{64})"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no dashboard URL with its token in %q", line)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(m[1])); err != nil {
		t.Fatal(err)
	}
	return m[2]
}

// dialogs answers the page's confirmation dialogs: each with the next answer sent on answers,
// or with no when none was sent, and keeps what they asked.
type dialogs struct {
	answers chan bool
	mu      sync.Mutex
	asked   []string
}

func answerDialogs(ctx context.Context) *dialogs {
	d := &dialogs{answers: make(chan bool, 4)}
	go func() {
		for ev, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			d.mu.Lock()
			d.asked = append(d.asked, ev.Message)
			d.mu.Unlock()
			accept := false
			select {
			case accept = <-d.answers:
			default:
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}
	}()
	return d
}

func (d *dialogs) questions() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked)
}

// The dashboard in a real browser, against the real binary: it shows the queues with the counts
// duilie queues --json reports, a dead letter replayed from the page is delivered, pause from
// the page stops delivery while a test message sent from the page is accepted, a bad test
// message shows the interface's exception, and the page logs no console error.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	cfg := operateConfig(t)
	appLog, env := appLogEnv(t)
	url := openDashboard(t, ctx, cfg, env...)
	dialogs := answerDialogs(ctx)

	// A workload: two messages that always fail end in the dead-letter queue; one waits.
	mustRun(t, cfg, `{"name":"a","fail_below":99}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"b","fail_below":99}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"later","note":"delayed ten minutes"}`, "send", "--binding", "JOBS", "--delay", "600")
	waitQueues(t, cfg, "two dead letters", func(qs map[string]queueJSON) bool { return qs["jobs-dead"].Ready == 2 })

	// The queues page shows what duilie queues --json reports.
	want := queuesJSON(t, cfg)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	var shown []pageQueue
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if shown, err = chromedp.Run(ctx, chromedp.Evaluate[[]pageQueue](readQueuesJS)); err != nil {
			t.Fatal(err)
		}
		if matches(shown, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page shows %+v; duilie queues --json says %+v", shown, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, q := range shown {
		if q.Queue == "jobs" && q.DeadLetters != "2" {
			t.Errorf("jobs shows %s dead letters, want 2", q.DeadLetters)
		}
	}
	screenshot(t, ctx, "1-queues")

	// The dead-letter queue: replay one selected message from the page, then the rest.
	dead := peek(t, cfg, "jobs-dead")
	if len(dead) != 2 {
		t.Fatalf("dead letters %+v", dead)
	}
	if err := os.WriteFile(appLog+".fixed", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"#/queue/jobs-dead")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the two dead letters", `document.querySelectorAll('#messages tr[data-id]').length === 2`)
	first := fmt.Sprintf(`#messages tr[data-id="%s"]`, dead[0].ID)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(first+" td:nth-child(3)")), // opens the body viewer
		chromedp.WaitVisible(chromedp.CSS(`#viewer`)),
	); err != nil {
		t.Fatal(err)
	}
	viewer, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#viewer`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(viewer, `"name": "a"`) || !strings.Contains(viewer, `"fail_below": 99`) {
		t.Errorf("the body viewer shows %q", viewer)
	}
	screenshot(t, ctx, "2-dead-letters")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(first+" input.pick")),
		chromedp.Click(chromedp.CSS(`#replay-selected:not([disabled])`)),
	); err != nil {
		t.Fatal(err)
	}
	waitAppLog(t, appLog, `done a attempts=1`, 1)
	waitFor(t, ctx, "the replay's result", `document.querySelector('#action-result').textContent === 'replayed 1 to jobs'`)
	if qs := queuesJSON(t, cfg); qs["jobs-dead"].Ready != 1 {
		t.Errorf("after replaying one: %+v", qs["jobs-dead"])
	}
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "done b") {
		t.Errorf("replaying the selected message replayed another:\n%s", b)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#replay-all`))); err != nil {
		t.Fatal(err)
	}
	waitAppLog(t, appLog, `done b attempts=1`, 1)

	// Pause from the page: a test message sent from the page is accepted and not delivered.
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"#/queue/jobs")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the pause button", `!!document.querySelector('#pause')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#pause`))); err != nil {
		t.Fatal(err)
	}
	waitQueues(t, cfg, "paused from the page", func(qs map[string]queueJSON) bool { return qs["jobs"].Paused })
	waitFor(t, ctx, "the paused badge", `document.querySelector('#queue-state').textContent === 'paused'`)
	send := func(body string) string {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#send-body`), body),
			chromedp.Click(chromedp.CSS(`#send`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the send's result", `!['', '…'].includes(document.querySelector('#send-result').textContent)`)
		result, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#send-result`)))
		if err != nil {
			t.Fatal(err)
		}
		return result
	}
	if got := send(`{"name":"p"}`); got != "sent through JOBS" {
		t.Errorf("sending from the page: %q", got)
	}
	if got, want := send(`{"name":`), "消息体不是有效的 JSON 文字 — body_not_json: the message body is not a JSON text; at byte 8: unexpected end of JSON input"; got != want {
		t.Errorf("a bad test message shows %q, want the interface's exception, its code, gloss and where: %q", got, want)
	}
	waitQueues(t, cfg, "the test message waiting", func(qs map[string]queueJSON) bool { return qs["jobs"].Ready == 1 })
	time.Sleep(time.Second) // a delivery would have happened by now; the check is that none did
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "start p ") {
		t.Fatalf("a queue paused from the page delivered:\n%s", b)
	}
	for _, b := range []string{`{"kind":"page","url":"/release/x","version":"v8"}`, `{"kind":"page","url":"/release/y","version":"v8","refresh":true}`} {
		mustRun(t, cfg, b, "send", "--binding", "JOBS")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#refresh`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the waiting messages", `document.querySelectorAll('#messages tr[data-id]').length === 4`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#messages tr[data-id]:nth-child(2) td:nth-child(3)`))); err != nil {
		t.Fatal(err)
	}
	png := screenshot(t, ctx, "3-paused")
	if *update {
		// The screenshot of docs/operate.md.
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "operate-dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Delete from the page, confirmed: the delayed message, selected, is gone.
	later := peek(t, cfg, "jobs", "--state", "delayed")
	if len(later) != 1 {
		t.Fatalf("delayed messages %+v, want the one sent with --delay 600", later)
	}
	dialogs.answers <- true
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#messages tr[data-id="%s"] input.pick`, later[0].ID))),
		chromedp.Click(chromedp.CSS(`#delete-selected:not([disabled])`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the delete's result", `document.querySelector('#action-result').textContent === 'deleted 1'`)
	if ms := peek(t, cfg, "jobs"); len(ms) != 3 || slices.ContainsFunc(ms, func(m peekJSON) bool { return m.ID == later[0].ID }) {
		t.Errorf("after deleting %s from the page: %+v", later[0].ID, ms)
	}

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#resume`))); err != nil {
		t.Fatal(err)
	}
	waitAppLog(t, appLog, `done p attempts=1`, 1)
	waitFor(t, ctx, "the running badge", `document.querySelector('#queue-state').textContent === 'running'`)

	// Purge from the page asks first: dismissed, nothing is purged; confirmed, every message is.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#pause`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the paused badge", `document.querySelector('#queue-state').textContent === 'paused'`)
	for _, name := range []string{"q1", "q2"} {
		mustRun(t, cfg, `{"name":"`+name+`"}`, "send", "--binding", "JOBS")
	}
	waitQueues(t, cfg, "two to purge", func(qs map[string]queueJSON) bool { return qs["jobs"].Ready == 2 })
	dialogs.answers <- false
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#purge`))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a purge would have been asked for by now
	if qs := queuesJSON(t, cfg); qs["jobs"].Ready != 2 {
		t.Fatalf("a dismissed purge purged: %+v", qs["jobs"])
	}
	dialogs.answers <- true
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#purge`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the purge's result", `document.querySelector('#action-result').textContent === 'purged 2'`)
	waitQueues(t, cfg, "purged from the page", func(qs map[string]queueJSON) bool {
		q := qs["jobs"]
		return q.Ready+q.Delayed+q.InFlight == 0
	})
	if asked := dialogs.questions(); len(asked) != 3 || asked[0] != "Delete 1 selected message of jobs?" || !strings.HasPrefix(asked[1], "Purge every message of jobs: ") {
		t.Errorf("confirmations asked: %q, want one for deleting a message and two for purging jobs", asked)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.u-wrap canvas').length`)); err != nil || n != 2 {
		t.Errorf("%d charts drawn (%v), want 2", n, err)
	}
}

// matches reports whether the page's queues are those of duilie queues --json.
func matches(shown []pageQueue, want map[string]queueJSON) bool {
	if len(shown) != len(want) {
		return false
	}
	for _, s := range shown {
		w, ok := want[s.Queue]
		paused := "running"
		if w.Paused {
			paused = "paused"
		}
		if !ok || s.Ready != fmt.Sprint(w.Ready) || s.Delayed != fmt.Sprint(w.Delayed) || s.InFlight != fmt.Sprint(w.InFlight) || s.Paused != paused {
			return false
		}
	}
	return true
}
