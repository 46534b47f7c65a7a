package server

import (
	"errors"
	"net"
	"os"
	"regexp"

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

// ResolveToken returns the dashboard's token, and a *platform.FieldError when it needs one it does not
// have: a TokenEnv that is unset or empty, or an address beyond loopback without a token.
func (d DashboardConfig) ResolveToken() (string, error) {
	token := d.Token
	if d.TokenEnv != "" {
		if token = os.Getenv(d.TokenEnv); token == "" {
			return "", &platform.FieldError{Field: "TokenEnv", Rule: "names an environment variable that is unset or empty; the dashboard needs its token"}
		}
	}
	if d.Listen != "" && token == "" && !Loopback(d.Listen) {
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
