package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duilie/duilie/internal/cfapi"
	"github.com/duilie/duilie/internal/serve"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

const (
	account = "0123456789abcdef0123456789abcdef"
	token   = "secret-token"
)

// What clients of Cloudflare's API do is counted as a program's sends and deliveries are:
// pushes as sends, pulls as deliveries, acks and retries as settlements, in /metrics and in the
// dashboard's history.
func TestAPITrafficObserved(t *testing.T) {
	t.Parallel()
	pc := server.DefaultPullConsumer("pulled")
	srv, err := serve.New(server.Config{
		Platform: &memory.Config{}, Logger: slog.New(slog.DiscardHandler),
		Dashboard:     server.DashboardConfig{Listen: "127.0.0.1:0", Token: "dashboard-token"},
		CloudflareAPI: server.CloudflareAPI{Listen: "127.0.0.1:0", AccountID: account, Token: token, PullConsumers: []server.PullConsumer{pc}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	api := "http://" + srv.CloudflareAPIAddr() + "/client/v4/accounts/" + account + "/queues/" + cfapi.QueueID("pulled")
	call := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Success bool           `json:"success"`
			Result  map[string]any `json:"result"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &out); err != nil || !out.Success {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return out.Result
	}
	call("/messages", `{"body":{"n":1}}`)
	call("/messages/batch", `{"messages":[{"body":{"n":2}},{"body":{"n":3}},{"body":"text","content_type":"text"}]}`)
	var leases []string
	for deadline := time.Now().Add(10 * time.Second); len(leases) < 4 && time.Now().Before(deadline); {
		for _, m := range call("/messages/pull", `{"batch_size":10}`)["messages"].([]any) {
			leases = append(leases, m.(map[string]any)["lease_id"].(string))
		}
	}
	if len(leases) != 4 {
		t.Fatalf("pulled %d messages, want 4", len(leases))
	}
	ack := call("/messages/ack", `{"acks":[{"lease_id":"`+leases[0]+`"},{"lease_id":"`+leases[1]+`"},{"lease_id":"`+leases[2]+`"}],`+
		`"retries":[{"lease_id":"`+leases[3]+`","delay_seconds":60}]}`)
	if ack["ackCount"] != 3.0 || ack["retryCount"] != 1.0 {
		t.Fatalf("ack: %v", ack)
	}

	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+srv.DashboardAddr()+path, nil)
		req.Header.Set("Authorization", "Bearer dashboard-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	metrics := get("/metrics")
	for _, want := range []string{
		`duilie_messages_sent_total{queue="pulled"} 4`,
		`duilie_messages_delivered_total{queue="pulled"} 4`,
		`duilie_messages_settled_total{queue="pulled",result="acked"} 3`,
		`duilie_messages_settled_total{queue="pulled",result="retried"} 1`,
		`duilie_delivery_lag_seconds_count{queue="pulled"} 4`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(metrics, "pulled"))
		}
	}
	var series struct{ Sent, Delivered, Acked, Retried []int }
	if err := json.Unmarshal([]byte(get("/api/queues/pulled/series?seconds=60")), &series); err != nil {
		t.Fatal(err)
	}
	if sum(series.Sent) != 4 || sum(series.Delivered) != 4 || sum(series.Acked) != 3 || sum(series.Retried) != 1 {
		t.Errorf("the dashboard's series: %+v", series)
	}
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

// grep is the lines of text that match re.
func grep(text, re string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if regexp.MustCompile(re).MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
