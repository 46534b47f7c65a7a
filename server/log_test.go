package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// Event lines are INFO when the event ended normally, WARN when it failed or was aborted, and
// ERROR when its handler panicked, with the stack as one attribute of its own (the message and
// err stay one short line's worth), or when its program could not be started.
func TestEventLogLevels(t *testing.T) {
	log := &syncLog{}
	srv, err := server.New(server.Config{
		Permissions: server.Permissions{Queue: []string{"TASKS"}},
		Bindings:    map[string]string{"TASKS": "tasks"},
		Platform:    &memory.Config{},
		Listen:      "127.0.0.1:0",
		Logger:      slog.New(slog.NewTextHandler(log, nil)),
		Program: &duilie.Program{Fetch: func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error {
			switch r.URL.Path {
			case "/fail":
				return errors.New("it failed")
			case "/abort":
				return duilie.Send(ev, "NOPE", "1", 0)
			case "/panic":
				panic("boom")
			case "/nostart":
				return &server.StartError{Err: errors.New("fork/exec ./app: too many open files")}
			}
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for _, path := range []string{"/ok", "/fail", "/abort", "/panic", "/nostart"} {
		resp, err := http.Get("http://" + srv.FetchAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	text := log.String()
	for _, want := range []string{
		`level=INFO msg="fetch event" event=\w+ method=GET path=/ok status=200 outcome=ok duration=\S+\n`,
		`level=WARN msg="fetch event" event=\w+ method=GET path=/fail status=500 outcome=failed duration=\S+ err="it failed"\n`,
		`level=WARN msg="fetch event" event=\w+ method=GET path=/abort status=500 outcome=aborted duration=\S+ err=未授权的QUEUE绑定：NOPE code=not_permitted gloss="the host's permissions \(QUEUE\) do not list this binding" detail="permitted: TASKS"\n`,
		`level=ERROR msg="fetch event" event=\w+ method=GET path=/panic status=500 outcome=failed duration=\S+ err="panic: boom" stack="goroutine \d+ \[running\]:\\n[^"]*runtime/debug.Stack[^"]*"\n`,
		`level=ERROR msg="fetch event" event=\w+ method=GET path=/nostart status=503 outcome=not_started duration=\S+ err="the program did not start: fork/exec ./app: too many open files"\n`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("no line matching\n%s\nin:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "\n"); n != strings.Count(text, "time=") {
		t.Errorf("%d lines for %d records: a record spans lines", n, strings.Count(text, "time="))
	}
}

// A fetch listener that is not loopback-only is logged at WARN with its address.
func TestListenBeyondLoopbackWarns(t *testing.T) {
	log := &syncLog{}
	srv, err := server.New(server.Config{
		Platform: &memory.Config{},
		Listen:   ":0",
		Logger:   slog.New(slog.NewTextHandler(log, nil)),
		Program:  &duilie.Program{Fetch: func(ev *duilie.Event, w http.ResponseWriter, r *http.Request) error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	want := `level=WARN msg="listening beyond loopback: every host that can reach this address can use it" listener="fetch events" addr=` + srv.FetchAddr()
	if !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant %s", log, want)
	}
}
