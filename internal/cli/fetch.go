package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/duilie/duilie/host"
)

// fetchHandler runs an in-process FetchHandler as one fetch event per HTTP request. A failed
// event (an error, a panic, an abort, the time limit) answers 500 unless the handler had begun
// its response; once the event has ended, the handler's late writes are dropped, so a handler
// that overran its time limit cannot touch a response that belongs to the server again.
func fetchHandler(h *host.Host, fetch FetchHandler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		gw := &eventWriter{w: w, header: http.Header{}}
		ids := make(chan string, 1) // the handler may outlive Run at the time limit
		// The event runs to its end even if the client goes away: it may be sending messages.
		failure := h.Run(context.WithoutCancel(r.Context()), host.FetchEvent, nil, func(ev *host.Event) error {
			ids <- ev.ID()
			return fetch(ev, gw, r.WithContext(ev.Context()))
		})
		status := gw.end()
		var id string
		select {
		case id = <-ids:
		default: // the event ended before the handler was called
		}
		if failure != nil && status == 0 {
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			status = http.StatusInternalServerError
		} else if status == 0 {
			w.WriteHeader(http.StatusOK)
			status = http.StatusOK
		}
		attrs := []any{"event", id, "method", r.Method, "path", r.URL.Path, "status", status,
			"outcome", host.Outcome(failure), "duration", time.Since(start).Round(time.Microsecond)}
		if failure != nil {
			log.Info("fetch event", append(attrs, "err", failure.Error())...)
			return
		}
		log.Info("fetch event", attrs...)
	})
}

var errEventEnded = errors.New("the fetch event has ended: its response can no longer be written")

// eventWriter is the ResponseWriter of one fetch event. It keeps its own header map, so a
// handler still running after its event ended touches nothing the server reads.
type eventWriter struct {
	w      http.ResponseWriter
	header http.Header

	mu     sync.Mutex
	status int // 0 until the response began
	ended  bool
}

func (e *eventWriter) Header() http.Header { return e.header }

func (e *eventWriter) WriteHeader(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeHeader(code)
}

func (e *eventWriter) writeHeader(code int) {
	if e.ended || e.status != 0 {
		return
	}
	dst := e.w.Header()
	for k, v := range e.header {
		dst[k] = append([]string(nil), v...)
	}
	e.status = code
	e.w.WriteHeader(code)
}

func (e *eventWriter) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return 0, errEventEnded
	}
	if e.status == 0 {
		if e.header.Get("Content-Type") == "" {
			e.header.Set("Content-Type", http.DetectContentType(b))
		}
		e.writeHeader(http.StatusOK)
	}
	return e.w.Write(b)
}

// Flush sends what was written so far, when the server supports it.
func (e *eventWriter) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return
	}
	if e.status == 0 {
		e.writeHeader(http.StatusOK)
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// end stops all writes and returns the status written, or 0 if the response never began.
func (e *eventWriter) end() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
	return e.status
}
