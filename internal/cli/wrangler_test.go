package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The example Worker project's wrangler.toml and wrangler.jsonc under duilie serve, as they are
// (only their ports changed to free ones): the Python page-task consumer renders a task pushed
// over Cloudflare's REST API, and the http_pull queue is pulled, with its delivery delay.
func TestWranglerExample(t *testing.T) {
	t.Parallel()
	pathEnv := pythonPath(t)
	app, err := os.ReadFile("../../examples/page-python/app.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wrangler.toml", "wrangler.jsonc"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "page-python"), 0o755)
			os.MkdirAll(filepath.Join(dir, "wrangler"), 0o755)
			os.WriteFile(filepath.Join(dir, "page-python", "app.py"), app, 0o644)
			text, err := os.ReadFile("../../examples/wrangler/" + name)
			if err != nil {
				t.Fatal(err)
			}
			for _, port := range []string{"8787", "8790"} {
				if !strings.Contains(string(text), `"127.0.0.1:`+port+`"`) {
					t.Fatalf("the example no longer listens on %s", port)
				}
				text = []byte(strings.ReplaceAll(string(text), `"127.0.0.1:`+port+`"`, `"127.0.0.1:0"`))
			}
			cfg := filepath.Join(dir, "wrangler", name)
			os.WriteFile(cfg, text, 0o644)

			s := startServe(t, cfg, pathEnv, "DUILIE_CF_TOKEN=wrangler-secret")
			s.waitLog(`msg="the wrangler file's keys that do not concern queues are ignored" keys=".*compatibility_date, compatibility_flags, main, name, observability, vars`, 1)
			base := regexp.MustCompile(`url=(http://\S+/client/v4)`).FindStringSubmatch(s.waitLog(`msg="serving Cloudflare's Queues API"`, 1))[1]
			call := func(method, path, body string) (int, map[string]any) {
				t.Helper()
				req, _ := http.NewRequest(method, base+"/accounts/0123456789abcdef0123456789abcdef/queues"+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer wrangler-secret")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var env map[string]any
				if err := json.Unmarshal(b, &env); err != nil {
					t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
				}
				return resp.StatusCode, env
			}
			_, list := call("GET", "", "")
			ids := map[string]string{}
			for _, q := range list["result"].([]any) {
				q := q.(map[string]any)
				ids[q["queue_name"].(string)] = q["queue_id"].(string)
			}
			if len(ids) != 4 || ids["page-render"] == "" || ids["audit-dlq"] == "" {
				t.Fatalf("queues %v, want page-render, page-dlq, audit and audit-dlq", ids)
			}
			// A REST producer, the program consumer.
			if code, env := call("POST", "/"+ids["page-render"]+"/messages", `{"body":{"kind":"page","url":"/wrangler/x","version":"v8"}}`); code != 200 {
				t.Fatalf("push: %d %v", code, env)
			}
			s.waitLog(`kind=queue queue=page-render stream=stderr line="rendered page url=/wrangler/x version=v8 attempts=1"`, 1)
			// The audit queue's delivery delay holds a push without a delay of its own.
			call("POST", "/"+ids["audit"]+"/messages", `{"body":"held"}`)
			call("POST", "/"+ids["audit"]+"/messages", `{"body":"now","delay_seconds":0}`)
			code, env := call("POST", "/"+ids["audit"]+"/messages/pull", `{"batch_size":10}`)
			msgs, _ := env["result"].(map[string]any)["messages"].([]any)
			if code != 200 || len(msgs) != 1 {
				t.Fatalf("pull: %d %v", code, env)
			}
			body, _ := base64.StdEncoding.DecodeString(msgs[0].(map[string]any)["body"].(string))
			if string(body) != `"now"` {
				t.Errorf("pulled %s", body)
			}
			if code, _ := s.stop(); code != 0 {
				t.Errorf("serve exit %d", code)
			}
		})
	}
}
