package cloudflare_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/cloudflare"
	"github.com/duilie/duilie/server"
)

// [platform] kind = "cloudflare" reads account_id, api_token_env and base_url.
func TestConfigFile(t *testing.T) {
	cfg, err := server.ParseConfig("duilie.toml", t.TempDir(), []byte(`
[platform]
kind = "cloudflare"
account_id = "`+account+`"
api_token_env = "CF_QUEUES_TOKEN"
base_url = "http://127.0.0.1:8790/client/v4"
`))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.Platform.(*cloudflare.Config)
	if !ok || c.AccountID != account || c.APITokenEnv != "CF_QUEUES_TOKEN" || c.BaseURL != "http://127.0.0.1:8790/client/v4" {
		t.Fatalf("platform %#v", cfg.Platform)
	}
	def, _ := platform.NewConfig("cloudflare")
	if def.(*cloudflare.Config).BaseURL != cloudflare.DefaultBaseURL {
		t.Errorf("default base_url %q", def.(*cloudflare.Config).BaseURL)
	}
}

// Mistakes name the key; a token written in the file is refused without being repeated.
func TestConfigMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        []string
		never       string
	}{
		{"token in the file", `account_id = "` + account + `"
api_token_env = "T"
api_token = "s3cr3t-token"`, []string{"duilie.toml: platform.api_token: unknown key; allowed: kind, account_id, api_token_env, base_url"}, "s3cr3t-token"},
		{"nothing", ``, []string{
			"duilie.toml: platform.account_id: missing; must be the Cloudflare account id",
			"duilie.toml: platform.api_token_env: missing; must name the environment variable that holds the API token (the token itself never goes in the file)",
		}, ""},
		{"bad values", `account_id = "a/b"
api_token_env = 7
base_url = "ftp://example.com"`, []string{
			`duilie.toml: platform.account_id = "a/b": must be the Cloudflare account id`,
			`duilie.toml: platform.api_token_env = 7: must name the environment variable`,
			`duilie.toml: platform.base_url = "ftp://example.com": must be an http or https URL`,
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.ParseConfig("duilie.toml", t.TempDir(), []byte("[platform]\nkind = \"cloudflare\"\n"+tc.table+"\n"))
			var ce *server.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig: %v, want a *ConfigError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\nlacks %q", err, w)
				}
			}
			if tc.never != "" && strings.Contains(err.Error(), tc.never) {
				t.Errorf("error repeats the token: %s", err)
			}
		})
	}
}

// The token's variable is read when the platform opens: unset, it is a mistake naming the key.
func TestConfigTokenUnset(t *testing.T) {
	t.Setenv("DUILIE_TEST_CF_TOKEN", "")
	cfg, err := server.ParseConfig("duilie.toml", t.TempDir(), []byte(`
[platform]
kind = "cloudflare"
account_id = "`+account+`"
api_token_env = "DUILIE_TEST_CF_TOKEN"
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := server.Open(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Connect(context.Background())
	want := `duilie.toml: platform.api_token_env = "DUILIE_TEST_CF_TOKEN": names an environment variable that is unset or empty`
	var ce *server.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Errorf("OpenPlatform: %v, want %q", err, want)
	}
	t.Setenv("DUILIE_TEST_CF_TOKEN", "tok")
	c, _ = server.Open(context.Background(), *cfg)
	if err := c.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := (&cloudflare.Config{AccountID: account, Token: "t", MaxPullInterval: -time.Second}).Validate(); err == nil {
		t.Error("a negative MaxPullInterval validated")
	}
}
