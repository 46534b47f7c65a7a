package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostileName is a message body's text that would run or show as markup if the page read it
// as HTML.
const hostileName = `<img src=x onerror=alert(1)></td><script>document.title='pwned'</script>`

// A queue's messages on the dashboard, in a real browser against the real binary: the table
// refreshes with the counts above it as messages are sent, without a reload; a filter selects by
// id and by body text (a hostile body shown as text); delete and replay of what the filter
// selects affect exactly those messages; every time is in one format and the charts' labels do
// not overlap.
func TestDashboardMessagesInBrowser(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	cfg := operateConfig(t)
	appLog, env := appLogEnv(t)
	url := openDashboard(t, ctx, cfg, env...)
	dialogs := answerDialogs(ctx)
	mustRun(t, cfg, "", "pause", "jobs")
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"#/queue/jobs")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the paused badge", `document.querySelector('#queue-state')?.textContent === 'paused'`)

	// Messages sent while the page is open are listed without a reload (a reload would drop
	// window.notReloaded), with the count above the table saying as many.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('#messages tr[data-id]').length === %d && document.querySelector('#queue-info').textContent.startsWith('%d ready · 0 delayed') && window.notReloaded`, n, n)
	}
	waitFor(t, ctx, "an empty table", rows(0))
	mustRun(t, cfg, `{"name":"alpha-1","team":"red"}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"alpha-2","team":"blue"}`, "send", "--binding", "JOBS")
	waitFor(t, ctx, "two messages sent while the page was open", rows(2))
	mustRun(t, cfg, `{"name":"beta","team":"Red"}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"`+hostileName+`","team":"evil"}`, "send", "--binding", "JOBS")
	waitFor(t, ctx, "four messages", rows(4))
	sent := map[string]peekJSON{}
	for _, m := range peek(t, cfg, "jobs") {
		var b struct{ Name string }
		if err := json.Unmarshal(m.Body, &b); err != nil {
			t.Fatal(err)
		}
		sent[b.Name] = m
	}
	if len(sent) != 4 {
		t.Fatalf("peek: %+v", sent)
	}
	checkTimes(t, ctx, sent)
	checkChartLabels(t, ctx)

	// The filter by a piece of an id lists that message alone.
	beta := sent["beta"].ID
	filter := func(text string) {
		t.Helper()
		// Emptied as a user empties it, then typed.
		clear := chromedp.Evaluate[bool](`(f => { f.value = ''; return f.dispatchEvent(new Event('input')); })(document.querySelector('#filter'))`)
		if _, err := chromedp.Run(ctx, clear); err != nil {
			t.Fatal(err)
		}
		if text != "" {
			if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#filter`), text)); err != nil {
				t.Fatal(err)
			}
		}
	}
	listed := func(what string, ids ...string) {
		t.Helper()
		ids = append([]string{}, ids...)
		slices.Sort(ids)
		waitFor(t, ctx, what, fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#messages tr[data-id]')].map(r => r.dataset.id).sort()) === %q`, jsonOf(ids)))
	}
	filter(beta[5:15])
	listed("beta alone, filtered by a piece of its id", beta)
	// By body text, ignoring case: "red" is alpha-1's team and beta's.
	filter("RED")
	listed("alpha-1 and beta, filtered by their body text", sent["alpha-1"].ID, beta)
	if marks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#messages mark')].map(m => m.textContent)`)); err != nil || !slices.Equal(marks, []string{"red", "Red"}) {
		t.Errorf("the matches marked: %q (%v), want red and Red", marks, err)
	}
	// A hostile body is shown as its text, in the table and the viewer.
	filter("onerror")
	hostile := sent[hostileName].ID
	listed("the hostile body", hostile)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#messages tr[data-id] td:nth-child(3)`)), chromedp.WaitVisible(chromedp.CSS(`#viewer`))); err != nil {
		t.Fatal(err)
	}
	type hostileShown struct {
		Preview, Viewer, Title string
		Elements               int
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[hostileShown](`({preview: document.querySelector('#messages .body-preview').textContent,
		viewer: document.querySelector('#viewer').textContent, title: document.title,
		elements: document.querySelectorAll('main img, main script').length})`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown.Preview, `"name":"`+hostileName[:10]) || !strings.Contains(shown.Viewer, hostileName) || shown.Title != "duilie" || shown.Elements != 0 {
		t.Errorf("the hostile body was not shown as text: %+v", shown)
	}

	// Delete what the filter selects: exactly alpha-1 and beta go, the others stay.
	filter("red")
	listed("alpha-1 and beta again", sent["alpha-1"].ID, beta)
	waitFor(t, ctx, "the delete button for none", `document.querySelector('#delete-selected').disabled`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#pick-all`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the delete button for both", `document.querySelector('#delete-selected:not([disabled])')?.textContent === 'delete 2 selected…'`)
	dialogs.answers <- true
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#delete-selected`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the delete's result", `document.querySelector('#action-result').textContent === 'deleted 2'`)
	listed("no match left")
	left := peek(t, cfg, "jobs")
	if ids := []string{left[0].ID, left[1].ID}; len(left) != 2 || !slices.Contains(ids, sent["alpha-2"].ID) || !slices.Contains(ids, hostile) {
		t.Errorf("after deleting alpha-1 and beta: %+v", left)
	}
	if asked := dialogs.questions(); !slices.Equal(asked, []string{"Delete 2 selected messages of jobs?"}) {
		t.Errorf("asked %q", asked)
	}
	filter("")
	listed("the two left", sent["alpha-2"].ID, hostile)

	// Replay what the filter selects in the dead-letter queue: dead-y goes back and is
	// delivered; dead-x stays.
	mustRun(t, cfg, "", "resume", "jobs")
	waitAppLog(t, appLog, `done alpha-2 attempts=1`, 1)
	mustRun(t, cfg, `{"name":"dead-x","fail_below":99}`, "send", "--binding", "JOBS")
	mustRun(t, cfg, `{"name":"dead-y","fail_below":99}`, "send", "--binding", "JOBS")
	waitQueues(t, cfg, "two dead letters", func(qs map[string]queueJSON) bool { return qs["jobs-dead"].Ready == 2 })
	dead := map[string]string{}
	for _, m := range peek(t, cfg, "jobs-dead") {
		var b struct{ Name string }
		_ = json.Unmarshal(m.Body, &b)
		dead[b.Name] = m.ID
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"#/queue/jobs-dead")); err != nil {
		t.Fatal(err)
	}
	listed("both dead letters", dead["dead-x"], dead["dead-y"])
	filter(`"dead-y"`)
	listed("dead-y", dead["dead-y"])
	if err := os.WriteFile(appLog+".fixed", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#pick-all`)), chromedp.Click(chromedp.CSS(`#replay-selected:not([disabled])`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the replay's result", `document.querySelector('#action-result').textContent === 'replayed 1 to jobs'`)
	waitAppLog(t, appLog, `done dead-y attempts=1`, 1)
	if ms := peek(t, cfg, "jobs-dead"); len(ms) != 1 || ms[0].ID != dead["dead-x"] {
		t.Errorf("after replaying dead-y, the dead-letter queue holds %+v, want dead-x alone", ms)
	}
	filter("")
	listed("dead-x alone", dead["dead-x"])
	time.Sleep(300 * time.Millisecond) // a delivery of dead-x would have happened by now
	if b, _ := os.ReadFile(appLog); strings.Contains(string(b), "done dead-x") {
		t.Errorf("replaying dead-y delivered dead-x:\n%s", b)
	}

	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}

// checkTimes checks every time the page shows: each in the one format, UTC, 24-hour, to the
// second, with the date when it is not today's; the messages' as peek reports them; and the
// function that makes them puts the date before a time of another day.
func checkTimes(t *testing.T, ctx context.Context, sent map[string]peekJSON) {
	t.Helper()
	waitFor(t, ctx, "the status line", `/^updated \d\d:\d\d:\d\d UTC$/.test(document.querySelector('#status').textContent)`)
	type timeShown struct{ ID, At, Text string }
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]timeShown](`[...document.querySelectorAll('time')].map(e => ({id: e.closest('tr[data-id]')?.dataset.id || '', at: e.dateTime, text: e.textContent}))`))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]int64{}
	for _, m := range sent {
		byID[m.ID] = m.Timestamp
	}
	format := regexp.MustCompile(`^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d$`)
	rowTimes := 0
	for _, s := range shown {
		at, err := time.Parse(time.RFC3339Nano, s.At)
		want := at.UTC().Format("15:04:05")
		if at.UTC().Format(time.DateOnly) != time.Now().UTC().Format(time.DateOnly) {
			want = at.UTC().Format(time.DateTime)
		}
		if err != nil || !format.MatchString(s.Text) || s.Text != want {
			t.Errorf("a time shown as %q for %s (%v), want %q", s.Text, s.At, err, want)
		}
		if s.ID != "" {
			rowTimes++
			if at.UnixMilli() != byID[s.ID] {
				t.Errorf("message %s shown enqueued at %s, peek says %d", s.ID, s.At, byID[s.ID])
			}
		}
	}
	if rowTimes != len(sent) {
		t.Errorf("%d message times shown, want %d", rowTimes, len(sent))
	}
	if other, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fmtTime(Date.UTC(2020, 0, 2, 15, 4, 5, 678))`)); err != nil || other != "2020-01-02 15:04:05" {
		t.Errorf("a time of another day is shown as %q (%v)", other, err)
	}
	if text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); err != nil || regexp.MustCompile(`(?i)\d ?[ap]\.?m\b`).MatchString(text) {
		t.Errorf("the page shows a 12-hour time (%v):\n%s", err, text)
	}
}

// checkChartLabels checks both charts' time axes: their labels in the page's time format, at
// least two, none overlapping the next; the values axis as wide as its widest label; and the
// legend's time, under the cursor, in the same format.
func checkChartLabels(t *testing.T, ctx context.Context) {
	t.Helper()
	type axis struct {
		Values       []string
		Boxes        [][2]float64
		Size, Widest float64
		Legend       string
	}
	axes, err := chromedp.Run(ctx, chromedp.Evaluate[[]axis](`Object.values(view.charts).map(u => {
		const x = u.axes[0], y = u.axes[1];
		u.setCursor({left: u.bbox.width / devicePixelRatio / 2, top: 10});
		return {values: x._values, boxes: x._splits.map((v, i) => {
			const at = u.valToPos(v, 'x'), w = textWidth(u, x, x._values[i]);
			return [at - w / 2, at + w / 2];
		}), size: y._size, widest: Math.max(0, ...(y._values || []).map(v => textWidth(u, y, v))),
		legend: u.root.querySelector('.u-legend .u-series:first-child .u-value').textContent};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	format := regexp.MustCompile(`^\d\d:\d\d:\d\d$`)
	if len(axes) != 2 {
		t.Fatalf("%d charts", len(axes))
	}
	for i, a := range axes {
		if len(a.Values) < 2 {
			t.Errorf("chart %d: time labels %q", i, a.Values)
		}
		for j, v := range a.Values {
			if !format.MatchString(v) {
				t.Errorf("chart %d: time label %q", i, v)
			}
			if j > 0 && a.Boxes[j-1][1] >= a.Boxes[j][0] {
				t.Errorf("chart %d: labels %q at %v and %q at %v overlap", i, a.Values[j-1], a.Boxes[j-1], v, a.Boxes[j])
			}
		}
		if a.Widest > a.Size {
			t.Errorf("chart %d: values axis %.0f px wide, its widest label %.0f px", i, a.Size, a.Widest)
		}
		if !format.MatchString(a.Legend) {
			t.Errorf("chart %d: the legend's time %q", i, a.Legend)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
