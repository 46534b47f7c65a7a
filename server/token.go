package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	privatefs "github.com/duilie/duilie/internal/private"
	"github.com/duilie/duilie/platform"
)

// The HTTP surfaces of a server (the dashboard, its /metrics and Cloudflare's Queues API) refuse
// every request without a credential that only the user running duilie can read, on loopback
// too: any account on the machine can reach a loopback port. Unless the configuration names a
// token of its own (token_env), it is the token kept in TokenFileName, in the data directory:
// 256 random bits, made by the first serve, mode 0600, the same across restarts.

// TokenFileName is the token file's name in the data directory.
const TokenFileName = "token"

// tokenBytes is how much randomness a token has.
const tokenBytes = 32

// TokenDir is the directory of the token file: the platform's data directory (platform.data_dir),
// or, for a platform that keeps none, .duilie beside the configuration file.
func (cfg *Config) TokenDir() string {
	if v, ok := cfg.PlatformSetting("data_dir"); ok {
		if dir, _ := v.(string); dir != "" {
			return dir
		}
	}
	return filepath.Join(cfg.Dir, ".duilie")
}

// SurfaceToken returns the token of cfg's surfaces kept in TokenDir (see the package function
// SurfaceToken). A token file or directory another user could read or replace is a
// *ConfigError naming platform.data_dir, as a data directory that is not the user's own is.
func (cfg *Config) SurfaceToken() (string, error) {
	token, err := SurfaceToken(cfg.TokenDir())
	if len(platform.FieldErrors(err)) > 0 {
		c := &checker{file: cfg.File, dir: cfg.Dir}
		if _, ok := cfg.PlatformSetting("data_dir"); ok {
			c.invalid("platform", nil, cfg.Platform, err, nil)
		} else {
			for _, fe := range platform.FieldErrors(err) {
				c.mistakes = append(c.mistakes, c.prefix()+fe.Rule)
			}
		}
		return "", &ConfigError{c.mistakes}
	}
	if err != nil {
		return "", fmt.Errorf("the surfaces' token in %s: %w", cfg.TokenDir(), err)
	}
	return token, nil
}

// SurfaceToken returns the token in dir's token file, making the directory (mode 0700) and the
// file (mode 0600) when there is none. Like the data directory itself, the directory, the file
// and every symbolic link on the way must belong to the user running duilie and be writable by no
// one else, and the file readable by no one else; otherwise it fails with a *platform.FieldError
// of DataDir naming the path and the fix.
func SurfaceToken(dir string) (string, error) {
	if err := privatefs.Links(dir); err != nil {
		return "", tokenUnsafe(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if err := privatefs.Owned(dir, info); err != nil {
		return "", tokenUnsafe(err)
	}
	path := filepath.Join(dir, TokenFileName)
	for range 2 { // a second try if another serve made the file meanwhile
		token, err := readToken(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return token, err
		}
		b := make([]byte, tokenBytes)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|privatefs.NoFollow, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(token) // no newline: Prometheus's credentials_file takes it whole
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return "", err
		}
		return token, nil
	}
	return readToken(path)
}

// readToken reads a token file, which must be private to this user.
func readToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|privatefs.NoFollow, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := privatefs.Owned(path, info); err != nil {
		return "", tokenUnsafe(err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", tokenUnsafe(fmt.Errorf("%s is readable by its group or others (mode %04o): anyone who reads it controls the dashboard; chmod 600 %s", path, perm, path))
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 2*tokenBytes {
		return "", tokenUnsafe(fmt.Errorf("%s holds no token of 64 hex characters; delete it, and the next serve makes a new one", path))
	}
	return token, nil
}

// tokenUnsafe is the mistake of a token file another user could read or replace: a mistake of
// the data directory setting, as the platform's own checks of it are.
func tokenUnsafe(err error) error {
	return &platform.FieldError{Field: "DataDir", Rule: err.Error()}
}

// DashboardURLFileName is the file, beside the token file, in which a serving dashboard records
// the URL that opens it (token included), for duilie dashboard.
const DashboardURLFileName = "dashboard.url"

// RecordDashboardURL records url in dir's DashboardURLFileName, mode 0600.
func RecordDashboardURL(dir, url string) error {
	tmp, err := os.CreateTemp(dir, DashboardURLFileName+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.WriteString(url + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, DashboardURLFileName))
}

// ForgetDashboardURL removes dir's DashboardURLFileName if it still records url (another serve
// may have recorded its own since).
func ForgetDashboardURL(dir, url string) {
	path := filepath.Join(dir, DashboardURLFileName)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == url {
		_ = os.Remove(path)
	}
}

// DashboardURL is the URL that opens cfg's dashboard, with its token: the one a serving
// dashboard recorded, or else the one its configured address will have. serving says which.
// It is "" for a configuration without a dashboard, or whose dashboard has a token of its own
// (token_env), which duilie does not keep.
func (cfg *Config) DashboardURL() (url string, serving bool, err error) {
	if cfg.Dashboard.Listen == "" || cfg.Dashboard.TokenEnv != "" || cfg.Dashboard.Token != "" {
		return "", false, nil
	}
	token, err := cfg.SurfaceToken()
	if err != nil {
		return "", false, err
	}
	if b, err := readPrivate(filepath.Join(cfg.TokenDir(), DashboardURLFileName)); err == nil {
		if u := strings.TrimSpace(string(b)); strings.HasSuffix(u, "/?token="+token) {
			return u, true, nil
		}
	}
	return "http://" + cfg.Dashboard.Listen + "/?token=" + token, false, nil
}

// readPrivate reads a small file of this user's, not following a final symbolic link.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|privatefs.NoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, err
	} else if err := privatefs.Owned(path, info); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, 4<<10))
}
