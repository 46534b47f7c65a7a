package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/duilie/duilie/internal/bounded"
)

// Surface is an HTTP surface served beside the server's events on a listener of its own, from
// Start until Shutdown, bounded as every listener of the server is (a slow, idle or flooding
// client cannot hold connections, and the file descriptors events need, for long): the
// dashboard and /metrics, Cloudflare's Queues API. A surface reaches the platform through the
// server's Client, like every other.
type Surface struct {
	// Name names it in log lines and errors, such as "the dashboard".
	Name string
	// Addr is the host:port to listen on; port 0 picks a free port.
	Addr string
	// Handler answers its requests.
	Handler http.Handler
	// Fallback, when Addr cannot be had (another serve holds a default address), listens on a
	// free loopback port instead, with a warning.
	Fallback bool
	// Started, when set, is called with the address it listens on, once it does.
	Started func(addr string)
	// Stop, when set, is called at Shutdown, once the listener takes no new requests and
	// before the platform closes.
	Stop func(ctx context.Context)
}

// Attached is a surface attached to a server.
type Attached struct {
	sf   Surface
	mu   sync.Mutex
	srv  *bounded.Server
	addr string
}

// Addr is the address the surface listens on, or "" before Start.
func (a *Attached) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Attach adds a surface, served from Start until Shutdown. It must be called before Start.
func (s *Server) Attach(sf Surface) (*Attached, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil, errors.New("server: attach " + sf.Name + " before Start")
	}
	if sf.Handler == nil || sf.Addr == "" {
		return nil, errors.New("server: a surface needs an address and a handler")
	}
	a := &Attached{sf: sf}
	s.surfaces = append(s.surfaces, a)
	return a, nil
}

// listenSurfaces starts listening for every attached surface; on error none listens.
func (s *Server) listenSurfaces() error {
	for i, a := range s.surfaces {
		if err := s.listen(a); err != nil {
			for _, b := range s.surfaces[:i] {
				_ = b.srv.Close()
			}
			return err
		}
	}
	return nil
}

func (s *Server) listen(a *Attached) error {
	bc := s.cfg.listenerBounds
	bc.Addr, bc.Name, bc.Handler, bc.Logger = a.sf.Addr, a.sf.Name, a.sf.Handler, s.log
	srv, err := bounded.Listen(bc)
	if err != nil && a.sf.Fallback {
		s.log.Warn(a.sf.Name+"'s address is taken; using a free loopback port", "address", a.sf.Addr, "err", err)
		bc.Addr = "127.0.0.1:0"
		srv, err = bounded.Listen(bc)
	}
	if err != nil {
		return fmt.Errorf("listen for %s on %s: %w", a.sf.Name, a.sf.Addr, err)
	}
	a.mu.Lock()
	a.srv, a.addr = srv, srv.Addr().String()
	a.mu.Unlock()
	if a.sf.Started != nil {
		a.sf.Started(a.addr)
	}
	return nil
}

// stopSurfaces stops every surface's listener taking requests, waits until ctx ends for those
// running, and calls each surface's Stop.
func (s *Server) stopSurfaces(ctx context.Context) {
	for _, a := range s.surfaces {
		if a.srv != nil {
			if err := a.srv.Shutdown(ctx); err != nil {
				_ = a.srv.Close()
			}
		}
		if a.sf.Stop != nil {
			a.sf.Stop(ctx)
		}
	}
}

// closeSurfaces closes every surface's listener and connections.
func (s *Server) closeSurfaces() {
	for _, a := range s.surfaces {
		if a.srv != nil {
			_ = a.srv.Close()
		}
	}
}

// Loopback reports whether an address (a listen address or a Host header, with or without a
// port) is a loopback one: localhost, or a loopback IP. It is duilie's one rule of what stays
// on this machine.
func Loopback(hostport string) bool { return bounded.Loopback(hostport) }
