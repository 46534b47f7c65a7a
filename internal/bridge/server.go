package bridge

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/internal/event"
)

// Server is the bridge: one loopback HTTP listener, on which each open event has its own URL
// with an unguessable token. It is safe for concurrent use.
type Server struct {
	base string // http://127.0.0.1:port/e/
	srv  *bounded.Server
	log  *slog.Logger

	mu     sync.Mutex
	events map[string]*entry // by token
}

// entry is one open event.
type entry struct {
	ev      *duilie.Event
	onAbort func()
	once    sync.Once
}

// pathPrefix starts the path of every event's URL; the token follows it.
const pathPrefix = "/e/"

// Listen starts a bridge on addr, which must be a loopback address such as "127.0.0.1:0" (port
// 0 picks a free port) or "[::1]:8788". log receives the server's own errors; nil means
// slog.Default().
func Listen(addr string, log *slog.Logger) (*Server, error) {
	return listen(addr, log, nil)
}

// listen is Listen; wrap, when not nil, wraps the server's handler (tests record replies).
func listen(addr string, log *slog.Logger, wrap func(http.Handler) http.Handler) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("bridge: listen address %q: %w", addr, err)
	}
	if !bounded.Loopback(addr) {
		return nil, fmt.Errorf("bridge: listen address %q is not a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	s := &Server{log: log, events: map[string]*entry{}}
	var handler http.Handler = http.HandlerFunc(s.serveHTTP)
	if wrap != nil {
		handler = wrap(handler)
	}
	srv, err := bounded.Listen(bounded.Config{Addr: addr, Name: "the bridge", Handler: handler, Logger: log,
		MaxConns: MaxConns})
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if !bounded.Loopback(srv.Addr().String()) {
		srv.Close()
		return nil, fmt.Errorf("bridge: listen address %q resolved to %v, which is not a loopback address", addr, srv.Addr())
	}
	s.srv, s.base = srv, "http://"+srv.Addr().String()+pathPrefix
	return s, nil
}

// MaxConns is how many connections the bridge keeps open at once, for all running programs
// together; more wait until one closes. Its other bounds are package bounded's defaults: a
// call's headers within 10 s, its body within 30 s more, each write of a reply within 30 s,
// and a kept-alive connection closed after 60 s without a call.
const MaxConns = 1024

// Open registers an event and returns its private URL, and a func that closes it: from then on
// the URL answers 404. Close it when the event ends. onAbort (which may be nil) is called once,
// after the first reply with status 500 has been written; the event has been aborted by then,
// and the caller kills the program.
func (s *Server) Open(ev *duilie.Event, onAbort func()) (url string, close func()) {
	if onAbort == nil {
		onAbort = func() {}
	}
	e := &entry{ev: ev, onAbort: onAbort}
	var token string
	s.mu.Lock()
	for {
		token = rand.Text() // 26 base32 characters, 130 random bits
		if s.events[token] == nil {
			break
		}
	}
	s.events[token] = e
	s.mu.Unlock()
	return s.base + token, func() {
		s.mu.Lock()
		delete(s.events, token)
		s.mu.Unlock()
	}
}

// Close stops the listener and closes every connection. URLs still open answer nothing.
func (s *Server) Close() error {
	return s.srv.Close()
}

// Messages of the replies that are not the interface's.
const (
	replyNotFound = "桥接地址不存在或其事件已结束"
	replyMethod   = "桥接调用须用 POST"
	contentType   = "text/plain; charset=utf-8"
)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, pathPrefix)
	var e *entry
	if ok && token != "" {
		s.mu.Lock()
		e = s.events[token]
		s.mu.Unlock()
	}
	if e == nil {
		reply(w, http.StatusNotFound, replyNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, replyMethod)
		return
	}

	var status int
	var text string
	body, err := readCall(w, r)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		// Abort keeps an earlier abort, whose message is then the reply.
		status, text = http.StatusInternalServerError, event.AbortWith(e.ev, event.BadCall.With(badTooBig, "")).Error()
		event.NoteBridgeCall(e.ev, "", status)
	case errors.Is(err, errTooDeep):
		status, text = http.StatusInternalServerError, event.AbortWith(e.ev, event.BadCall.With(badDeep, "")).Error()
		event.NoteBridgeCall(e.ev, "", status)
	case err != nil:
		// The program went away while sending: nobody is left to answer.
		s.log.Debug("bridge call not read", "event", e.ev.ID(), "err", err)
		return
	default:
		status, text = handle(e.ev, body)
	}
	if len(body) > largeCall {
		body = nil
		defer releaseHeap()
	}
	reply(w, status, text)
	if status == http.StatusInternalServerError {
		_ = http.NewResponseController(w).Flush() // the reply is out before the program is killed
		e.once.Do(e.onAbort)
	}
}

var errTooDeep = errors.New("the call nests too deep")

// readCall reads a call's body, at most MaxCallBytes of it, and stops as soon as it nests
// deeper than MaxCallDepth: such a call is never held whole. Room for the whole body (its
// Content-Length) is taken only once its first bytes have passed that check.
func readCall(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := &guardedReader{r: http.MaxBytesReader(w, r.Body, MaxCallBytes)}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(body, firstRead)); err != nil || buf.Len() < firstRead {
		return buf.Bytes(), err
	}
	if n := r.ContentLength; n > firstRead && n <= MaxCallBytes {
		buf.Grow(int(n) - firstRead + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
}

// firstRead is how much of a call is read before room is made for the rest.
const firstRead = 64 << 10

// guardedReader passes a call's bytes through a depthGuard.
type guardedReader struct {
	r     io.Reader
	guard depthGuard
}

func (g *guardedReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if !g.guard.feed(p[:n]) {
		return 0, errTooDeep
	}
	return n, err
}

// largeCall is the size past which a call's memory is handed back to the system once it is
// answered. A call and what is decoded from it take about three times its size; Go's collector
// would keep that much for a while, and the next large call would grow the heap again.
const largeCall = 1 << 20

// heapRelease asks the releaser to return the heap's free memory to the system; its buffer
// of one makes a request made while a release runs start another one after it.
var heapRelease = sync.OnceValue(func() chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		for range ch {
			debug.FreeOSMemory()
		}
	}()
	return ch
})

// releaseHeap has the heap's free memory returned to the system soon, once; it never waits.
func releaseHeap() {
	select {
	case heapRelease() <- struct{}{}:
	default: // a release is pending already, and will see this call's memory free
	}
}

// reply writes a whole reply: text/plain, no trailing newline.
func reply(w http.ResponseWriter, status int, text string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(text)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}
