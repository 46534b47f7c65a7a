// Package serve is what duilie serve runs: package server's Server with the surfaces its
// configuration asks for attached, the dashboard and /metrics ([dashboard]) and Cloudflare's
// Queues API ([cloudflare_api]). Each surface reaches the platform through the server's Client.
package serve

import (
	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/internal/dashboard"
	"github.com/duilie/duilie/server"
)

// Server is a server with its surfaces.
type Server struct {
	*server.Server
	dashboard, api *server.Attached // nil when the configuration has none
}

// New makes the server of cfg, with its surfaces; nothing runs until Start. Mistakes in cfg
// are a *server.ConfigError.
func New(cfg server.Config) (*Server, error) {
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: srv}
	if s.dashboard, err = dashboard.Attach(srv); err != nil {
		return nil, err
	}
	if s.api, err = cfapi.Attach(srv); err != nil {
		return nil, err
	}
	return s, nil
}

// DashboardAddr is the address the dashboard listens on, or "" when there is none or the
// server has not started.
func (s *Server) DashboardAddr() string { return addr(s.dashboard) }

// CloudflareAPIAddr is the address Cloudflare's Queues API listens on, or "" when it is not
// served or the server has not started.
func (s *Server) CloudflareAPIAddr() string { return addr(s.api) }

func addr(a *server.Attached) string {
	if a == nil {
		return ""
	}
	return a.Addr()
}
