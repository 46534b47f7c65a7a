// Package pagetask is the page-task consumer of the reference host, as a Go program for
// duilie: tasks {"kind":"page"|"release","url":…,"version":…,"fail"?:true} arrive in batches on
// a queue; a task of another version than the current one is stale and acked unread; a task
// that fails to render (the "fail" flag stands in for a failed render) is retried after
// min(300, 15·2^min(attempts,4)) seconds; every other task is rendered and acked.
//
// Consumer.Queue is the queue handler and Fetch the fetch handler of examples/page-go.
package pagetask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/duilie/duilie"
)

// Task is one page task.
type Task struct {
	Kind    string `json:"kind"` // "page" or "release"
	URL     string `json:"url"`
	Version string `json:"version"`
	Fail    bool   `json:"fail,omitempty"` // stands in for a render that fails
}

// DefaultVersion is the current version when PAGE_VERSION is not set.
const DefaultVersion = "v8"

// Binding is the binding the fetch handler sends tasks to.
const Binding = "PAGE_QUEUE"

// CurrentVersion is $PAGE_VERSION, or DefaultVersion.
func CurrentVersion() string {
	if v := os.Getenv("PAGE_VERSION"); v != "" {
		return v
	}
	return DefaultVersion
}

// Backoff is the retry delay, in seconds, of a task whose render failed on its attempts-th
// delivery: min(300, 15·2^min(attempts,4)).
func Backoff(attempts int) int {
	return min(300, 15<<min(max(attempts, 0), 4))
}

// ErrRenderFailed is the failure of a task with "fail": true.
var ErrRenderFailed = errors.New("render failed")

// Outcome is what became of one task.
type Outcome string

// Outcomes.
const (
	Rendered  Outcome = "rendered"  // rendered and acked
	Stale     Outcome = "stale"     // another version: acked unread
	Retried   Outcome = "retried"   // the render failed: retried after the backoff
	Malformed Outcome = "malformed" // not a task: acked, since no retry can fix it
)

// Consumer consumes page tasks. The zero value is the reference behaviour.
type Consumer struct {
	// Version is the current version; "" means CurrentVersion().
	Version string
	// Render renders one task on its attempts-th delivery; nil means: fail when the task has
	// "fail", else log the render.
	Render func(ctx context.Context, t Task, attempts int) error
	// Backoff is the retry delay in seconds after a failed render; nil means Backoff.
	Backoff func(attempts int) int
	// Logger gets one line per task, as the reference consumer logs it: INFO for a task
	// rendered or stale, ERROR for a render that failed, WARN for a message that is no task
	// (and DEBUG for each outcome); nil means slog.Default().
	Logger *slog.Logger
}

// Queue handles one batch: a queue event. Every task is acked or retried explicitly, so a
// failure of one task never redelivers the others.
func (c *Consumer) Queue(ev *duilie.Event) error {
	text, err := duilie.ReadBatch(ev)
	if err != nil {
		return err
	}
	var batch struct {
		Queue    string `json:"queue"`
		Messages []struct {
			ID        string          `json:"id"`
			Attempts  int             `json:"attempts"`
			Timestamp int64           `json:"timestamp"`
			Body      json.RawMessage `json:"body"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(text), &batch); err != nil {
		return fmt.Errorf("pagetask: decode batch: %w", err)
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	version := c.Version
	if version == "" {
		version = CurrentVersion()
	}
	for i, raw := range batch.Messages {
		m := &duilie.Message[Task]{ID: raw.ID, Attempts: raw.Attempts, Timestamp: time.UnixMilli(raw.Timestamp)}
		attrs := []any{"event", ev.ID(), "queue", batch.Queue, "id", raw.ID, "attempts", raw.Attempts}
		var o Outcome
		var err error // of the ack or retry
		switch derr := decode(raw.Body, &m.Body); {
		case derr != nil:
			o = Malformed
			log.Warn("not a page task: acked and dropped", append(attrs, "err", derr)...)
			err = duilie.Ack(ev, i)
		case m.Body.Version != version:
			o = Stale
			log.Info("stale task: acked", append(attrs, "url", m.Body.URL, "version", m.Body.Version, "current", version)...)
			err = duilie.Ack(ev, i)
		default:
			if rerr := c.render(ev.Context(), m.Body, raw.Attempts); rerr != nil {
				o = Retried
				delay := c.backoff(raw.Attempts)
				log.Error("render failed: retry", append(attrs, "kind", m.Body.Kind, "url", m.Body.URL, "err", rerr, "delay_s", delay)...)
				err = duilie.Retry(ev, i, delay)
			} else {
				o = Rendered
				log.Info("rendered", append(attrs, "kind", m.Body.Kind, "url", m.Body.URL, "version", m.Body.Version)...)
				err = duilie.Ack(ev, i)
			}
		}
		if err != nil {
			return err
		}
		log.Debug("task", append(attrs, "outcome", string(o))...)
	}
	return nil
}

func (c *Consumer) render(ctx context.Context, t Task, attempts int) error {
	if c.Render != nil {
		return c.Render(ctx, t, attempts)
	}
	if t.Fail {
		return ErrRenderFailed
	}
	return nil
}

func (c *Consumer) backoff(attempts int) int {
	if c.Backoff != nil {
		return c.Backoff(attempts)
	}
	return Backoff(attempts)
}

// decode reads a task and checks its shape.
func decode(body []byte, t *Task) error {
	if err := json.Unmarshal(body, t); err != nil {
		return err
	}
	switch {
	case t.Kind != "page" && t.Kind != "release":
		return fmt.Errorf(`kind %q is not "page" or "release"`, t.Kind)
	case t.URL == "":
		return errors.New("url is missing")
	}
	return nil
}

// Fetch handles one fetch event: GET / answers a form, POST /tasks sends a task to
// PAGE_QUEUE (a JSON body, or the form's fields) and answers 202. ?delay=N delays it.
// A catchable exception answers 400 with its message; an abort fails the event (500).
func Fetch(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, err := fmt.Fprint(w, formPage(CurrentVersion()))
		return err
	case r.URL.Path == "/tasks" && r.Method == http.MethodPost:
		return postTask(ev, w, r)
	case r.URL.Path == "/tasks" || r.URL.Path == "/":
		w.Header().Set("Allow", map[string]string{"/": "GET", "/tasks": "POST"}[r.URL.Path])
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	default:
		http.NotFound(w, r)
		return nil
	}
}

func postTask(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
	delay := 0
	if d := r.URL.Query().Get("delay"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil {
			http.Error(w, "delay must be an integer number of seconds", http.StatusBadRequest)
			return nil
		}
		delay = n
	}
	// The interface's body limit is 128000 bytes; reading twice that leaves a body between the
	// two to get the interface's own message.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 2*128000))
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return nil
	}
	body := string(raw)
	// The form posts kind=…&url=…; anything else (curl -d sends JSON with the form's content
	// type) is the task's JSON text.
	if form, err := url.ParseQuery(body); err == nil && form.Has("url") && form.Has("kind") {
		t := Task{Kind: form.Get("kind"), URL: form.Get("url"), Version: form.Get("version"), Fail: form.Get("fail") != ""}
		b, _ := json.Marshal(t)
		body = string(b)
	}
	// The interface checks the body; its exceptions are the client's mistakes.
	err = duilie.Send(ev, Binding, body, delay)
	var ex *duilie.Exception
	if errors.As(err, &ex) {
		http.Error(w, ex.Message, http.StatusBadRequest)
		return nil
	}
	if err != nil {
		return err // an abort: the deployment is wrong, the event fails
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	_, err = fmt.Fprintln(w, "queued")
	return err
}

func formPage(version string) string {
	return `<!doctype html>
<meta charset="utf-8">
<title>page tasks</title>
<h1>Send a page task</h1>
<form method="post" action="/tasks">
<p><label>kind <select name="kind"><option>page</option><option>release</option></select></label>
<p><label>url <input name="url" value="/release/x"></label>
<p><label>version <input name="version" value="` + html.EscapeString(version) + `"></label>
<p><label><input type="checkbox" name="fail" value="1"> fail (retried with backoff)</label>
<p><button>send</button>
</form>
`
}
