package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/bounded"
	"github.com/duilie/duilie/internal/dashboard"
	"github.com/duilie/duilie/platform"
)

// DashboardConfig is the [dashboard] table of duilie.toml: the web dashboard and the Prometheus
// metrics at /metrics, on one address (docs/operate.md).
type DashboardConfig struct {
	// Listen is the dashboard's host:port; "" for none, the zero value. duilie.toml's default
	// is DefaultDashboardListen; when that address is taken (another serve has it), the
	// dashboard takes a free loopback port instead, and logs it.
	Listen string `toml:"listen" rule:"must be a host:port for the dashboard, like \"127.0.0.1:8789\", or \"\" for none"`
	// TokenEnv names the environment variable holding the dashboard's token. A dashboard on an
	// address other than loopback requires one, and refuses to start without it.
	TokenEnv string `toml:"token_env" rule:"must be the name of an environment variable, like \"DUILIE_DASHBOARD_TOKEN\""`
	// Token is the token itself, for a Go program; TokenEnv, when set, is read instead.
	Token string
}

// DefaultDashboardListen is where duilie serve's dashboard listens unless duilie.toml says
// otherwise.
const DefaultDashboardListen = "127.0.0.1:8789"

// DefaultDashboard is the dashboard of a duilie.toml without a [dashboard] table.
func DefaultDashboard() DashboardConfig { return DashboardConfig{Listen: DefaultDashboardListen} }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the settings' form; a token is checked when the server is made.
func (d DashboardConfig) Validate() error {
	var errs []error
	if d.Listen != "" {
		if _, port, err := net.SplitHostPort(d.Listen); err != nil || !validPort(port) {
			errs = append(errs, platform.Invalid(d, "Listen"))
		}
	}
	if d.TokenEnv != "" && !envName.MatchString(d.TokenEnv) {
		errs = append(errs, platform.Invalid(d, "TokenEnv"))
	}
	return errors.Join(errs...)
}

// token returns the dashboard's token, and a *platform.FieldError when it needs one it does not
// have: a TokenEnv that is unset or empty, or an address beyond loopback without a token.
func (d DashboardConfig) token() (string, error) {
	token := d.Token
	if d.TokenEnv != "" {
		if token = os.Getenv(d.TokenEnv); token == "" {
			return "", &platform.FieldError{Field: "TokenEnv", Rule: "names an environment variable that is unset or empty; the dashboard needs its token"}
		}
	}
	if d.Listen != "" && token == "" && !dashboard.Loopback(d.Listen) {
		return "", &platform.FieldError{Field: "Listen", Rule: "is not a loopback address, so the dashboard needs a token: name the environment variable that holds it with dashboard.token_env"}
	}
	return token, nil
}

func (c *checker) dashboard(cfg *Config, v any) {
	cfg.Dashboard = DefaultDashboard()
	t := c.table(c.ns+"dashboard", v, keys(DashboardConfig{})...)
	bad := c.decode(c.ns+"dashboard", t, &cfg.Dashboard)
	c.invalid(c.ns+"dashboard", t, cfg.Dashboard, cfg.Dashboard.Validate(), bad)
}

// newDashboard makes the dashboard of a server about to start, or nil when it has none.
func (s *Server) newDashboard(token string) *dashboard.Dashboard {
	cfg := &s.cfg
	if cfg.Dashboard.Listen == "" {
		return nil
	}
	return dashboard.New(dashboard.Options{
		Platform:         s.p,
		Consumers:        cfg.Consumers,
		DeadLetterQueues: cfg.DeadLetterQueues(),
		Bindings:         cfg.Bindings,
		Token:            token,
		Logger:           s.log,
		Send: func(ctx context.Context, binding, body string, delay int) error {
			var sendErr error
			failure := s.Do(ctx, func(ev *duilie.Event) error {
				sendErr = duilie.Send(ev, binding, body, delay)
				return nil
			})
			return errors.Join(sendErr, failure)
		},
	})
}

// serveDashboard listens for the dashboard. The default address, when another serve holds it,
// gives way to a free loopback port.
func (s *Server) serveDashboard(d *dashboard.Dashboard) error {
	addr := s.cfg.Dashboard.Listen
	// Bounded like every listener: a slow, idle or flooding client cannot hold connections,
	// and file descriptors the events need, for long.
	bc := s.cfg.listenerBounds
	bc.Addr, bc.Name, bc.Handler, bc.Logger = addr, "the dashboard", d, s.log
	srv, err := bounded.Listen(bc)
	if err != nil && addr == DefaultDashboardListen {
		s.log.Warn("the dashboard's default address is taken; using a free loopback port", "address", addr, "err", err)
		bc.Addr = "127.0.0.1:0"
		srv, err = bounded.Listen(bc)
	}
	if err != nil {
		return fmt.Errorf("listen for the dashboard on %s: %w", addr, err)
	}
	s.dashAddr = srv.Addr().String()
	s.dashSrv = srv
	s.log.Info("dashboard", "url", "http://"+s.dashAddr+"/", "metrics", "http://"+s.dashAddr+"/metrics")
	return nil
}

// DashboardAddr is the address the dashboard listens on, or "" when there is none.
func (s *Server) DashboardAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dashAddr
}
