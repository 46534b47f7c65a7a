// Package bounded serves HTTP with every resource a client can hold bounded: how long it may
// take to send a request's headers and body, how long a response may stall, how long an idle
// connection stays open, how many connections are open at once, and how many requests run at
// once. It is the one way duilie listens for HTTP: the fetch listener of duilie serve, the
// bridge, the dashboard and Cloudflare's REST API use it.
//
//	srv, err := bounded.Listen(bounded.Config{Addr: "127.0.0.1:8787", Name: "fetch events", Handler: h, Logger: log})
//	…
//	err = srv.Shutdown(ctx)
//
// A listener that is not loopback-only (":8787", "0.0.0.0:8787", a public address) is logged
// at WARN with its address: every host that can reach it can use it.
package bounded

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout    = 30 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultMaxConns       = 256
	DefaultMaxHeaderBytes = 64 << 10
)

// Config configures a Server. The zero value of every field but Addr and Handler is its
// documented default.
type Config struct {
	// Addr is the host:port to listen on; port 0 picks a free one.
	Addr string
	// Handler serves the requests.
	Handler http.Handler
	// Name says what the listener is for, in log lines: "fetch events", "the bridge".
	Name string
	// HeaderTimeout is how long a client may take to send a request's headers, from the
	// moment the connection is accepted or the previous response was sent; 0 means 10 s.
	HeaderTimeout time.Duration
	// BodyTimeout is how long, beyond HeaderTimeout, it may take to send the whole request
	// body; 0 means 30 s. A handler that reads the body later (after waiting for a slot, say)
	// still has to have it within HeaderTimeout + BodyTimeout of the request's start.
	BodyTimeout time.Duration
	// WriteTimeout is how long one write of a response may stall (a client that does not
	// read); 0 means 30 s. It is counted per write, so a handler may take as long as it needs
	// before it answers.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next request; 0 means
	// 60 s.
	IdleTimeout time.Duration
	// MaxConns is how many connections may be open at once; 0 means 256. A connection beyond
	// it first closes the connection that has been idle (kept alive between requests) the
	// longest, if there is one, as nginx does when it runs out of connections; otherwise the
	// one that has been sending its request's headers the longest, if that has taken
	// SlowHeaders or more and the end of its headers is not waiting to be read (a real client
	// sends its headers in one go; a slow-connection flood never finishes them); otherwise it waits in the kernel's queue, holding no file
	// descriptor of this process, until one closes or becomes one of those. So a flood of
	// connections that hold their headers back costs each of them SlowHeaders at the cap, not
	// HeaderTimeout, and requests behind it are served. (A request sent on a kept-alive connection just as
	// it is closed is lost to its client, which retries it if it may, as with any keep-alive
	// timeout.)
	MaxConns int
	// MaxHeaderBytes bounds a request's header block; 0 means 64 KiB. A bigger one is answered
	// 431 without reaching Handler.
	MaxHeaderBytes int
	// Logger receives the server's own errors and the WARN for a listener that is not
	// loopback-only; nil means slog.Default().
	Logger *slog.Logger
}

// SlowHeaders is how long a connection may have been sending its request's headers before,
// at the connection cap, a new connection may close it (see Config.MaxConns).
const SlowHeaders = 250 * time.Millisecond

// Server is an HTTP server listening with the bounds of its Config.
type Server struct {
	srv  *http.Server
	lim  *limited
	addr net.Addr
	done chan struct{}
}

// Listen listens on cfg.Addr and serves cfg.Handler there until Shutdown or Close.
func Listen(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("bounded: Config.Handler is required")
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	if !Loopback(ln.Addr().String()) {
		cfg.Logger.Warn("listening beyond loopback: every host that can reach this address can use it",
			"listener", cfg.Name, "addr", ln.Addr().String())
	}
	lim := limitListener(ln, cfg.MaxConns)
	s := &Server{addr: ln.Addr(), lim: lim, done: make(chan struct{})}
	s.srv = &http.Server{
		ConnState:         lim.track,
		ConnContext:       lim.connContext,
		Handler:           lim.handling(progress(cfg.Handler, cfg.WriteTimeout)),
		ReadHeaderTimeout: cfg.HeaderTimeout,
		ReadTimeout:       cfg.HeaderTimeout + cfg.BodyTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lim); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("listener stopped", "listener", cfg.Name, "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "http"
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops accepting connections, closes idle ones and waits, until ctx ends, for the
// requests that are running; as http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err == nil {
		<-s.done
	}
	return err
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Loopback reports whether an address (a listen address, a listener's, or a Host header; with
// or without a port) is a loopback one, which no other host can reach: localhost, or a
// loopback IP. 0.0.0.0 and :: (every interface) are not. It is duilie's one rule of what stays
// on this machine.
func Loopback(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Limit returns a handler that runs at most n requests of h at once. A request beyond them
// waits up to wait for a slot; if none frees, or its client goes away, it is answered
// 503 Service Unavailable with Retry-After: 1 and never reaches h.
func Limit(h http.Handler, n int, wait time.Duration) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case slots <- struct{}{}:
			case <-t.C:
				busy(w)
				return
			case <-r.Context().Done():
				busy(w)
				return
			}
		}
		defer func() { <-slots }()
		h.ServeHTTP(w, r)
	})
}

func busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "busy: too many requests at once; try again in a second", http.StatusServiceUnavailable)
}

// progress makes every write of a response finish within d: a client that stops reading is
// cut off then, however long the handler took before it wrote.
func progress(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r)
	})
}

type progressWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (p *progressWriter) arm() { _ = p.rc.SetWriteDeadline(time.Now().Add(p.d)) }

func (p *progressWriter) WriteHeader(code int) {
	p.arm()
	p.ResponseWriter.WriteHeader(code)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.arm()
	return p.ResponseWriter.Write(b)
}

// Flush sends what was written so far.
func (p *progressWriter) Flush() {
	p.arm()
	_ = p.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// limitListener keeps at most n connections open at a time. When all n are open, Accept
// closes the connection idle the longest, or the one slowest to send its headers, if any, and
// otherwise waits for one to close or to become either.
func limitListener(ln net.Listener, n int) *limited {
	return &limited{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}),
		idled: make(chan struct{}, 1), idle: map[net.Conn]stamp{}, reading: map[net.Conn]stamp{}}
}

type limited struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	idled     chan struct{} // a connection became idle: one Accept waiting at the cap may close it
	closeOnce sync.Once

	mu      sync.Mutex
	stamps  uint64             // stamps handed out
	idle    map[net.Conn]stamp // kept-alive connections between requests, since when
	reading map[net.Conn]stamp // connections sending a request's headers, since when
}

// stamp is when a connection became idle or began its headers; n orders stamps of one instant.
type stamp struct {
	at time.Time
	n  uint64
}

func (l *limited) now() stamp {
	l.stamps++
	return stamp{time.Now(), l.stamps}
}

// track follows each connection's state (http.Server.ConnState). A new connection, and an
// idle one that has begun its next request, are reading headers until their handler starts.
func (l *limited) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateIdle:
		delete(l.reading, c)
		l.idle[c] = l.now()
		select {
		case l.idled <- struct{}{}:
		default:
		}
	case http.StateNew, http.StateActive:
		if _, was := l.idle[c]; was || state == http.StateNew {
			l.reading[c] = l.now()
		}
		delete(l.idle, c)
	default:
		delete(l.idle, c)
		delete(l.reading, c)
	}
}

type connKey struct{}

// connContext puts the connection in its requests' contexts, for handling.
func (l *limited) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// handling marks a request's connection as done with its headers when its handler starts.
func (l *limited) handling(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			l.mu.Lock()
			delete(l.reading, c)
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// closeOne closes the connection idle the longest, or else the one that has been reading its
// headers the longest if that is SlowHeaders or more, and reports whether it closed one; if
// not, wait is how long until a connection reading headers now would be closed (0: none).
func (l *limited) closeOne() (closed bool, wait time.Duration) {
	l.mu.Lock()
	victim, _ := oldest(l.idle)
	if victim != nil {
		delete(l.idle, victim)
	} else if victim, wait = l.slowestSender(); victim != nil {
		delete(l.reading, victim)
	}
	l.mu.Unlock()
	if victim == nil {
		return false, wait
	}
	_ = victim.Close()
	return true, 0
}

// slowestSender is the connection that has been sending its request's headers the longest, if
// that is SlowHeaders or more and its client is the slow one: the end of its headers is not
// waiting to be read (a server too busy to read a whole request at once does not count against
// its client). Else it returns how long until one could be. l.mu is held.
func (l *limited) slowestSender() (net.Conn, time.Duration) {
	var skip map[net.Conn]bool // looked at, and not to be closed
	for {
		// The oldest not looked at yet: usually it qualifies, so no sort.
		var c net.Conn
		var r stamp
		for k, s := range l.reading {
			if !skip[k] && (c == nil || s.n < r.n) {
				c, r = k, s
			}
		}
		if c == nil {
			return nil, SlowHeaders // none, or all waiting for the server: look again later
		}
		if age := time.Since(r.at); age < SlowHeaders {
			return nil, SlowHeaders - age // and every other one is younger
		}
		if !headersWaiting(c) {
			return c, 0
		}
		if skip == nil {
			skip = map[net.Conn]bool{}
		}
		skip[c] = true
	}
}

func oldest(m map[net.Conn]stamp) (net.Conn, stamp) {
	var c net.Conn
	var since stamp
	for k, t := range m {
		if c == nil || t.n < since.n {
			c, since = k, t
		}
	}
	return c, since
}

// Accept takes the next connection, then a slot for it: at the cap it closes the connection
// idle the longest, or the slowest to send its headers, or waits, holding this one
// connection, for one to close or to become either.
func (l *limited) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		closed, wait := l.closeOne()
		if closed {
			continue
		}
		var slow <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			slow = t.C
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		case <-l.idled:
		case <-slow:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
