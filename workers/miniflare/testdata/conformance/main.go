// Command conformance is the Worker the Miniflare tests run: its fetch handler makes one
// interface call per request, and its queue handler does what the batch's queue name says, so
// every row of the seed's conformance table can be observed from outside the Worker.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/app"
)

// HANDLERS (a Worker's var) leaves out a handler: "queue" runs only the queue handler,
// "fetch" only the fetch handler.
func main() {
	p := duilie.Program{Queue: queue, Fetch: fetch}
	switch os.Getenv("HANDLERS") {
	case "queue":
		p.Fetch = nil
	case "fetch":
		p.Queue = nil
	}
	app.Main(p)
}

// calls counts the calls of GET /count, which tell a program that kept running from one that
// started again.
var calls atomic.Int64

// fetch answers:
//
//	POST /send?binding=B&delay=N        Send(B, body, N)
//	POST /send-batch?binding=B          SendBatch(B, body)
//	POST /consume                       ReadBatch, Ack(0) and Retry(0, 0) in a fetch event
//	GET  /env?name=X                    os.Getenv(X)
//	PUT  /request?q=…                   201, the request as the handler saw it, and X-Echo: a, b
//	GET  /panic                         panics: the event fails
//	GET  /exit                          ends the program (os.Exit)
//	GET  /sleep                         waits past the time limit
//	GET  /log                           a line on stdout and on stderr, one by log, and one by
//	                                    slog at each level, through the default logger and
//	                                    through a logger of its own at DEBUG; then stdout
//	                                    without a newline
//	GET  /count                         how many times it was called since the program started
//
// with 200 "ok", 400 and an exception's message, or 500 "abort: " and an abort's message (the
// event then fails).
func fetch(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	switch r.URL.Path {
	case "/send":
		delay, _ := strconv.Atoi(q.Get("delay"))
		return answer(w, duilie.Send(ev, q.Get("binding"), string(body), delay))
	case "/send-batch":
		return answer(w, duilie.SendBatch(ev, q.Get("binding"), string(body)))
	case "/consume":
		_, e1 := duilie.ReadBatch(ev)
		e2 := duilie.Ack(ev, 0)
		e3 := duilie.Retry(ev, 0, 0)
		fmt.Fprintf(w, "%s|%s|%s|%s", ev.Kind(), kind(e1), kind(e2), kind(e3))
		return nil
	case "/env":
		fmt.Fprint(w, os.Getenv(q.Get("name")))
		return nil
	case "/request":
		w.Header().Add("X-Echo", "a")
		w.Header().Add("X-Echo", "b")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s %s %d %q", r.Method, r.Host, r.URL.RequestURI(), r.Header.Get("X-Test"), r.ContentLength, body)
		return nil
	case "/panic":
		panic("on purpose")
	case "/exit":
		os.Exit(3)
	case "/sleep":
		<-ev.Context().Done()
		return nil // aborted all the same
	case "/log":
		fmt.Println("OUT line")
		fmt.Fprintln(os.Stderr, "ERR line")
		log.Print("by log")
		slog.Debug("hidden debug", "k", 0)
		slog.Info("an info", "k", 1)
		slog.Warn("a warning", "k", 2)
		slog.Error("an error", "k", 3, "err", errors.New("two words"))
		own := slog.New(app.NewLogHandler(&slog.HandlerOptions{Level: slog.LevelDebug}))
		own.With("event", ev.Kind()).Debug("own debug", "k", 4)
		fmt.Print("OUT without a newline")
		fmt.Fprint(w, "logged")
		return nil
	case "/count":
		fmt.Fprint(w, calls.Add(1))
		return nil
	}
	http.NotFound(w, r)
	return nil
}

func answer(w http.ResponseWriter, err error) error {
	var ex *duilie.Exception
	var ab *duilie.Abort
	switch {
	case err == nil:
		fmt.Fprint(w, "ok")
	case errors.As(err, &ex):
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, ex.Message)
	case errors.As(err, &ab):
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "abort: "+ab.Reason)
		return err
	default:
		return err
	}
	return nil
}

// kind names an error as a test compares it: "exception: <message>", "abort: <message>" or "ok".
func kind(err error) string {
	var ex *duilie.Exception
	var ab *duilie.Abort
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ex):
		return "exception: " + ex.Message
	case errors.As(err, &ab):
		return "abort: " + ab.Reason
	}
	return "error: " + err.Error()
}

// queue handles a batch by its queue's name:
//
//	read       prints READ and the batch's text, or the error; returns it
//	settle     acks 0, retries 1 after 30 s, leaves 2
//	retry0     retries 0 with delay 0
//	bad-index  Ack(count), Ack(-1), Retry(0, -1), Retry(0, 43201); prints what each returned
//	sleep      waits past the time limit, then acks 0 (which the abort refuses)
//	abort      sends to UNPERMITTED, and returns nil: the event is aborted all the same
//	conf-q     prints CONSUMED, the event's kind and the batch's text; acks each message whose body has
//	           "ack": true, and fails at the first whose body has fail_until > its attempts
//
// Every line names the first message's id, so tests tell their batches apart.
func queue(ev *duilie.Event) error {
	text, err := duilie.ReadBatch(ev)
	var b struct {
		Queue    string `json:"queue"`
		Messages []struct {
			ID       string          `json:"id"`
			Attempts int             `json:"attempts"`
			Body     json.RawMessage `json:"body"`
		} `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal([]byte(text), &b)
	}
	name := b.Queue
	if err != nil {
		fmt.Printf("READ %s\n", kind(err))
		return err
	}
	switch name {
	case "read":
		fmt.Printf("READ %s\n", text)
	case "settle":
		return errors.Join(duilie.Ack(ev, 0), duilie.Retry(ev, 1, 30))
	case "retry0":
		return duilie.Retry(ev, 0, 0)
	case "bad-index":
		n := len(b.Messages)
		fmt.Printf("BAD-INDEX %s %s\n", b.Messages[0].ID, strings.Join([]string{
			kind(duilie.Ack(ev, n)), kind(duilie.Ack(ev, -1)), kind(duilie.Retry(ev, 0, -1)), kind(duilie.Retry(ev, 0, 43201)),
		}, "|"))
	case "sleep":
		<-ev.Context().Done()
		return duilie.Ack(ev, 0)
	case "abort":
		_ = duilie.Send(ev, "UNPERMITTED", "1", 0)
	case "conf-q":
		fmt.Printf("CONSUMED %s %s\n", ev.Kind(), text)
		for i, m := range b.Messages {
			var task struct {
				FailUntil int  `json:"fail_until"`
				Ack       bool `json:"ack"`
			}
			if json.Unmarshal(m.Body, &task) != nil {
				continue
			}
			if task.Ack {
				if err := duilie.Ack(ev, i); err != nil {
					return err
				}
			}
			if task.FailUntil > m.Attempts {
				return fmt.Errorf("message %s fails until attempt %d", m.ID, task.FailUntil)
			}
		}
	}
	return nil
}
