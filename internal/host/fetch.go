package host

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/duilie/duilie/internal/event"
)

// Fetch returns an http.Handler that runs handler as one fetch event per request, and reports
// each to the Observer. A failed event (an error, a panic, an abort, the time limit) answers
// 500 unless the handler had begun its response; one whose program could not be started (a
// *StartError) answers 503 with Retry-After: 1. Once the event has ended, the handler's late
// writes are dropped, so a handler that overran its time limit cannot touch a response that
// belongs to the server again. The event runs to its end even if the client goes away: it may
// be sending messages.
func (h *Host) Fetch(handler FetchHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ew := &eventWriter{w: w, header: http.Header{}}
		ev, failure := h.runEvent(context.WithoutCancel(r.Context()), FetchEvent, nil, func(ev *Event) error {
			return handler(ev, ew, r.WithContext(ev.Context()))
		}, false)
		status := ew.end()
		var se *StartError
		switch {
		case errors.As(failure, &se) && status == 0:
			// The host's failure, not the program's: the client may try again shortly.
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
			status = http.StatusServiceUnavailable
		case failure != nil && status == 0:
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			status = http.StatusInternalServerError
		case status == 0:
			w.WriteHeader(http.StatusOK)
			status = http.StatusOK
		}
		h.observe(&EventReport{ID: ev.ID(), Kind: FetchEvent, Outcome: OutcomeOf(failure), Err: failure,
			Start: start, Duration: time.Since(start), Method: r.Method, Path: r.URL.Path, Status: status,
			BridgeCalls: event.BridgeCalls(ev)})
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
