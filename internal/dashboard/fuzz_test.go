package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// FuzzAPI sends any body and query to every route of the dashboard: bad input gets a clear 4xx
// status with a JSON error, never a panic or a 5xx. Seeds are in testdata/fuzz/FuzzAPI.
func FuzzAPI(f *testing.F) {
	p := memory.New(memory.Options{})
	q, _ := p.Queue(context.Background(), "jobs")
	_ = q.Send(context.Background(), []byte(`{"n":1}`), platform.SendOptions{ContentType: platform.JSON})
	cc := host.DefaultConsumerConfig("jobs")
	cc.DeadLetterQueue = "jobs-dead"
	d := New(Options{Platform: p, Consumers: []host.ConsumerConfig{cc}, DeadLetterQueues: map[string]string{"jobs": "jobs-dead"},
		Bindings: map[string]string{"JOBS": "jobs"},
		Send: func(ctx context.Context, binding, body string, delay int) error {
			if strings.HasPrefix(body, "{") && strings.HasSuffix(body, "}") {
				return nil
			}
			return duilie.ErrBodyNotJSON
		}})
	f.Fuzz(func(t *testing.T, route, query, body string) {
		method, path := "POST", "/api/queues/jobs/"+url.PathEscape(route)
		switch route {
		case "messages", "series":
			method = "GET"
		}
		req, err := http.NewRequest(method, "http://127.0.0.1:8789"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.RawQuery = query
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		d.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s %q: %d %s", method, path, query, body, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed &&
			!strings.HasPrefix(w.Body.String(), `{"error":`) {
			t.Fatalf("%s %s: %d without a JSON error: %q", method, path, w.Code, w.Body)
		}
	})
}
