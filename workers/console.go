package workers

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"
)

// consoleMethod is the method of a Worker's console that a record of level goes to: debug below
// INFO, info below WARN, warn below ERROR, error from ERROR up. Workers Logs and wrangler tail
// show the method as the line's level.
func consoleMethod(level slog.Level) string {
	switch {
	case level < slog.LevelInfo:
		return "debug"
	case level < slog.LevelWarn:
		return "info"
	case level < slog.LevelError:
		return "warn"
	}
	return "error"
}

// consoleHandler is the slog.Handler of a Worker's console: each record is one line, the
// message followed by its attributes as slog.TextHandler writes them (key=value, quoted when
// needed, groups as prefixes), without a time or a level, since the console records both.
type consoleHandler struct {
	opts slog.HandlerOptions
	text slog.Handler // writes the attributes into out.buf
	out  *consoleOut
}

// consoleOut is what a handler and those derived from it (WithAttrs, WithGroup) share.
type consoleOut struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// builtin is true while the text handler writes a record's level and message, which the
	// line leaves out: they come first, before any attribute, and are passed to ReplaceAttr
	// without groups.
	builtin bool
	write   func(level slog.Level, line string)
}

// newConsoleHandler makes a console handler whose lines go to write. opts may be nil.
func newConsoleHandler(opts *slog.HandlerOptions, write func(level slog.Level, line string)) *consoleHandler {
	h := &consoleHandler{out: &consoleOut{write: write}}
	if opts != nil {
		h.opts = *opts
	}
	replace := h.opts.ReplaceAttr
	out := h.out
	h.text = slog.NewTextHandler(&out.buf, &slog.HandlerOptions{
		AddSource: h.opts.AddSource,
		Level:     slog.LevelDebug - 1000, // Enabled is this handler's
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if out.builtin && len(groups) == 0 {
				switch a.Key {
				case slog.LevelKey:
					return slog.Attr{}
				case slog.MessageKey:
					out.builtin = false // what follows is the record's attributes
					return slog.Attr{}
				}
			}
			if replace != nil {
				return replace(groups, a)
			}
			return a
		},
	})
	return h
}

func (h *consoleHandler) Enabled(_ context.Context, level slog.Level) bool {
	min := slog.LevelInfo
	if h.opts.Level != nil {
		min = h.opts.Level.Level()
	}
	return level >= min
}

func (h *consoleHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{} // the text handler leaves a zero time out
	h.out.mu.Lock()
	h.out.buf.Reset()
	h.out.builtin = true
	err := h.text.Handle(ctx, r)
	h.out.builtin = false
	attrs := bytes.TrimSuffix(h.out.buf.Bytes(), []byte("\n"))
	line := r.Message
	switch {
	case len(attrs) == 0:
	case line == "":
		line = string(attrs)
	default:
		line += " " + string(attrs)
	}
	h.out.mu.Unlock()
	if err != nil {
		return err
	}
	h.out.write(r.Level, line)
	return nil
}

func (h *consoleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.out.mu.Lock() // the text handler formats the attributes now, calling ReplaceAttr
	defer h.out.mu.Unlock()
	return &consoleHandler{opts: h.opts, text: h.text.WithAttrs(attrs), out: h.out}
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	return &consoleHandler{opts: h.opts, text: h.text.WithGroup(name), out: h.out}
}
