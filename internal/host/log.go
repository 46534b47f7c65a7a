package host

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform"
)

// LogObserver writes duilie's log lines from the host's reports: one per event, one per batch
// of messages resolved without an event, and a debug line per send. duilie serve and a Worker
// built by duilie worker build log through it, so their lines read alike.
func LogObserver(log *slog.Logger) Observer {
	return func(r Report) {
		switch r := r.(type) {
		case *EventReport:
			logEvent(log, r)
		case *SettleReport:
			logSettle(log, r)
		case *SendReport:
			if log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug("send", "event", r.Event, "binding", r.Binding, "queue", r.Queue, "messages", r.Messages,
					"bytes", r.Bytes, "delayed", r.Delayed, "err", r.Err)
			}
		}
	}
}

// logEvent writes an event's line: INFO when it ended normally, WARN when it failed or was
// aborted, ERROR when its handler panicked (the stack as an attribute of its own), when the
// host could not start its program, or when its messages could not be settled.
func logEvent(log *slog.Logger, r *EventReport) {
	attrs := []any{"event", r.ID}
	msg := "fetch event"
	if r.Kind == QueueEvent {
		msg = "queue event"
		count := countActions(r.Messages)
		attrs = append(attrs, "queue", r.Queue, "batch", r.Batch, "outcome", string(r.Outcome),
			"duration", r.Duration.Round(time.Microsecond), "acked", count[platform.Done],
			"retried", count[platform.Redeliver], "dead", count[platform.DeadLetter], "dropped", count[platform.Drop])
		if n := count[platform.Release]; n > 0 {
			attrs = append(attrs, "released", n)
		}
	} else {
		attrs = append(attrs, "method", r.Method, "path", r.Path, "status", r.Status, "outcome", string(r.Outcome),
			"duration", r.Duration.Round(time.Microsecond))
	}
	level := slog.LevelInfo
	if r.Outcome == Failed || r.Outcome == Aborted {
		level = slog.LevelWarn
	}
	if r.Err != nil {
		attrs = append(attrs, "err", r.Err.Error())
		attrs = append(attrs, explained(r.Err)...)
		var pe *PanicError
		if errors.As(r.Err, &pe) {
			level = slog.LevelError
			attrs = append(attrs, "stack", string(pe.Stack))
		}
	}
	if r.Outcome == NotStarted {
		level = slog.LevelError
	}
	if r.SettleErr != nil {
		level = slog.LevelError
		attrs = append(attrs, "settle_err", r.SettleErr.Error())
	}
	log.Log(context.Background(), level, msg, attrs...)
}

func logSettle(log *slog.Logger, r *SettleReport) {
	count := countActions(r.Messages)
	attrs := []any{"queue", r.Queue, "messages", len(r.Messages)}
	switch r.Reason {
	case Exhausted:
		attrs = append(attrs, "dead", count[platform.DeadLetter], "dropped", count[platform.Drop])
		if r.Err != nil {
			attrs = append(attrs, "settle_err", r.Err.Error())
		}
		log.Warn("retries exhausted before delivery: dead-lettered or dropped undelivered", attrs...)
	case Halting:
		if r.Err != nil {
			attrs = append(attrs, "settle_err", r.Err.Error())
		}
		log.Info("released undelivered messages", attrs...)
	case Pulled:
		attrs = append(attrs, "acked", count[platform.Done], "retried", count[platform.Redeliver],
			"dead", count[platform.DeadLetter], "dropped", count[platform.Drop])
		level := slog.LevelDebug
		if count[platform.DeadLetter]+count[platform.Drop] > 0 {
			level = slog.LevelInfo
		}
		if r.Err != nil {
			level = slog.LevelError
			attrs = append(attrs, "settle_err", r.Err.Error())
		}
		log.Log(context.Background(), level, "pulled messages settled", attrs...)
	}
}

// explained is the English beside an abort's or exception's message, for people reading the
// log: its code, gloss and detail.
func explained(err error) []any {
	code, gloss, detail, ok := duilie.Explain(err)
	if !ok {
		return nil
	}
	out := []any{"code", code, "gloss", gloss}
	if detail != "" {
		out = append(out, "detail", detail)
	}
	return out
}

func countActions(ms []MessageReport) (count [platform.Release + 1]int) {
	for _, m := range ms {
		count[m.Action.Kind]++
	}
	return count
}
