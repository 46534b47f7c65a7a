package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/server"
)

// FuzzAPI sends any body and query to every route of the dashboard: bad input gets a clear 4xx
// status with a JSON error, never a panic or a 5xx. Seeds are in testdata/fuzz/FuzzAPI.
func FuzzAPI(f *testing.F) {
	cc := server.DefaultConsumerConfig("jobs")
	cc.DeadLetterQueue = "jobs-dead"
	srv, err := server.New(server.Config{Platform: &memory.Config{}, Logger: slog.New(slog.DiscardHandler),
		Permissions: server.Permissions{Queue: []string{"JOBS"}}, Bindings: map[string]string{"JOBS": "jobs"},
		Consumers: []server.ConsumerConfig{cc}, Program: &duilie.Program{Queue: func(*duilie.Event) error { return errors.New("kept") }}})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Shutdown(ctx) })
	if err := srv.Client().Send(ctx, "JOBS", `{"n":1}`, 3600); err != nil {
		f.Fatal(err)
	}
	d := New(srv.Client(), Options{})
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
