package cli

import (
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/duilie/duilie/server"
)

func newDashboard(opts Options) *cobra.Command {
	var configPath string
	var open bool
	c := &cobra.Command{
		Use:                   "dashboard [--open] [--config F]",
		DisableFlagsInUseLine: true,
		Short:                 "Print (or open) the URL of serve's dashboard, with its token",
		Long: `dashboard prints the URL that opens serve's dashboard: the address a running serve
recorded (or, when none runs, the configured dashboard.listen), with the token every request
needs. The token is kept in the data directory's file "token" (mode 0600, the same across
restarts), so only the user who runs serve can read it, and the URL; Prometheus can read the
file (credentials_file). A dashboard with a token of its own (dashboard.token_env) gets no
token in the URL. With --open it also opens the URL in a browser (xdg-open, or open on
macOS), through a file in the data directory so that the token never appears on a command line
other users can see.

Exit status: 0; 78 the configuration (no dashboard, or a data directory another user could
read); 69 no browser could be started.`,
		Example: `  ` + opts.Name + ` dashboard
  http://127.0.0.1:8789/?token=3f6c…

  ` + opts.Name + ` dashboard --open --config examples/page-go/duilie.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := server.LoadConfig(configPath)
			if err != nil {
				return err
			}
			if cfg.Dashboard.Listen == "" {
				return &server.ConfigError{Mistakes: []string{cfg.File + `: dashboard.listen = "": the configuration has no dashboard`}}
			}
			url, _, err := cfg.DashboardURL()
			if err != nil {
				return err
			}
			if url == "" { // a token of its own, which duilie does not keep
				url = "http://" + cfg.Dashboard.Listen + "/"
				fmt.Fprintf(cmd.ErrOrStderr(), "the dashboard's token is the value of $%s (dashboard.token_env): open %s?token=<it>\n", cfg.Dashboard.TokenEnv, url)
			}
			if _, err := fmt.Fprintln(cmd.OutOrStdout(), url); err != nil {
				return &exitError{exitIOErr, fmt.Errorf("writing stdout: %w", err)}
			}
			if !open {
				return nil
			}
			return openBrowser(cfg.TokenDir(), url)
		},
	}
	c.Flags().BoolVar(&open, "open", false, "open the URL in a browser too")
	c.Flags().StringVar(&configPath, "config", server.DefaultConfigFile, "configuration file")
	return c
}

// openBrowser opens url in the user's browser through a page in dir that redirects to it: the
// page's path is on the browser's command line, which every local user can read, the token is
// not.
func openBrowser(dir, url string) error {
	page := filepath.Join(dir, "dashboard.html")
	text := `<!doctype html><meta http-equiv="refresh" content="0; url=` + html.EscapeString(url) + `"><title>duilie dashboard</title>`
	if err := os.WriteFile(page, []byte(text), 0o600); err != nil {
		return &exitError{exitIOErr, fmt.Errorf("writing %s: %w", page, err)}
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	if out, err := exec.Command(opener, page).CombinedOutput(); err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		} else if len(out) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return unavailable(fmt.Errorf("cannot open a browser (%s: %v); open the URL above", opener, err))
	}
	return nil
}
