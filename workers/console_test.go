package workers

import (
	"context"
	"errors"
	"log/slog"
	"testing"
)

type consoleLine struct {
	method, text string
}

func recording(opts *slog.HandlerOptions) (*slog.Logger, *[]consoleLine) {
	var lines []consoleLine
	h := newConsoleHandler(opts, func(level slog.Level, line string) {
		lines = append(lines, consoleLine{consoleMethod(level), line})
	})
	return slog.New(h), &lines
}

// A record is one console line: its message, then its attributes as slog's text handler
// writes them, without time or level, on the console method of its level.
func TestConsoleHandler(t *testing.T) {
	log, lines := recording(&slog.HandlerOptions{Level: slog.LevelDebug - 4})
	log.Debug("task", "outcome", "rendered")
	log.Info("rendered", "url", "/release/x", "attempts", 1)
	log.Warn("render failed: retry", "err", errors.New("render failed"), "delay_s", 30)
	log.Error("消息", "msg", "an attribute named msg", "level", "and one named level")
	log.Log(context.Background(), slog.LevelError+4, "beyond error")
	log.Log(context.Background(), slog.LevelDebug-4, "below debug")
	log.Info("")
	log.Info("", "k", "v")
	log.With("event", "ab12").WithGroup("task").Info("grouped", "url", "/a", slog.Group("g", "x", 1))
	log.Info("two\nlines", "q", "a b")
	want := []consoleLine{
		{"debug", "task outcome=rendered"},
		{"info", "rendered url=/release/x attempts=1"},
		{"warn", `render failed: retry err="render failed" delay_s=30`},
		{"error", `消息 msg="an attribute named msg" level="and one named level"`},
		{"error", "beyond error"},
		{"debug", "below debug"},
		{"info", ""},
		{"info", "k=v"},
		{"info", "grouped event=ab12 task.url=/a task.g.x=1"},
		{"info", "two\nlines q=\"a b\""},
	}
	if len(*lines) != len(want) {
		t.Fatalf("lines = %q", *lines)
	}
	for i, l := range *lines {
		if l != want[i] {
			t.Errorf("line %d = %q, want %q", i, l, want[i])
		}
	}
}

// The level defaults to INFO, as slog's own; ReplaceAttr sees the attributes, not the time,
// level and message the line leaves out.
func TestConsoleHandlerOptions(t *testing.T) {
	log, lines := recording(nil)
	log.Debug("hidden")
	log.Info("shown")
	if len(*lines) != 1 || (*lines)[0].text != "shown" {
		t.Fatalf("lines = %q", *lines)
	}
	var seen []string
	log, lines = recording(&slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		seen = append(seen, a.Key)
		if a.Key == "secret" {
			return slog.String("secret", "***")
		}
		return a
	}})
	log.Info("hidden", "secret", "x")
	log.Warn("login", "user", "u", "secret", "hunter2")
	if len(*lines) != 1 || (*lines)[0] != (consoleLine{"warn", "login user=u secret=***"}) {
		t.Fatalf("lines = %q", *lines)
	}
	if len(seen) != 2 || seen[0] != "user" || seen[1] != "secret" {
		t.Errorf("ReplaceAttr saw %q", seen)
	}
}
