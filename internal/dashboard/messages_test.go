package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/duilie/duilie/internal/serve"
	"github.com/duilie/duilie/server"

	"github.com/duilie/duilie/platform/memory"
)

// GET /api/queues/{queue}/messages?match= lists the messages whose id or body text holds the
// text, ignoring case, across as many pages of the queue as it takes, and its next continues
// the scan: the pages together list every match once, oldest first.
func TestMessagesMatch(t *testing.T) {
	t.Parallel()
	srv, err := serve.New(server.Config{Platform: &memory.Config{}, Logger: quietLog(), Dashboard: server.DashboardConfig{Listen: "127.0.0.1:0", Token: "dt"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	// 2500 messages, more than two pages of the scan: every 100th of team Red, one text body.
	var msgs []server.PushMessage
	for i := range 2500 {
		team := "blue"
		if i%100 == 7 {
			team = "Red"
		}
		msgs = append(msgs, server.PushMessage{Body: fmt.Appendf(nil, `{"n":%d,"team":"%s"}`, i, team), ContentType: "json"})
	}
	msgs = append(msgs, server.PushMessage{Body: []byte(`plain RED text`), ContentType: "text"})
	if err := srv.Client().Push(ctx, "jobs", msgs...); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Messages []struct {
			ID   string          `json:"id"`
			Body json.RawMessage `json:"body"`
		} `json:"messages"`
		Next    string `json:"next"`
		Scanned int    `json:"scanned"`
	}
	get := func(query url.Values) (int, page) {
		t.Helper()
		code, body := request(t, "GET", "http://"+srv.DashboardAddr()+"/api/queues/jobs/messages?"+query.Encode(), "", "Authorization", "Bearer dt")
		var p page
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
		}
		return code, p
	}

	// Fifteen matches a page: the first reads two pages of the scan (ten matches each) to have
	// them, and lists all twenty.
	var bodies []string
	q := url.Values{"match": {`"team":"red"`}, "limit": {"15"}}
	var scans []int
	for {
		code, p := get(q)
		if code != 200 {
			t.Fatalf("status %d", code)
		}
		for _, m := range p.Messages {
			bodies = append(bodies, string(m.Body))
		}
		scans = append(scans, p.Scanned)
		if p.Next == "" {
			break
		}
		q.Set("cursor", p.Next)
	}
	if len(bodies) != 25 || bodies[0] != `{"n":7,"team":"Red"}` || bodies[24] != `{"n":2407,"team":"Red"}` {
		t.Errorf("matched %d: %q", len(bodies), bodies)
	}
	if fmt.Sprint(scans) != "[2000 501]" {
		t.Errorf("read %v messages a page, want [2000 501]: two pages of the scan to fifteen matches, then the rest", scans)
	}
	// A text body by its text; a message by a piece of its id.
	if _, p := get(url.Values{"match": {"plain red"}}); len(p.Messages) != 1 || string(p.Messages[0].Body) != `"plain RED text"` {
		t.Errorf("by a text body's text: %+v", p)
	}
	_, all := get(url.Values{"limit": {"3"}})
	if _, p := get(url.Values{"match": {all.Messages[2].ID[8:20]}}); len(p.Messages) != 1 || p.Messages[0].ID != all.Messages[2].ID {
		t.Errorf("by a piece of the id %s: %+v", all.Messages[2].ID, p)
	}
	if _, p := get(url.Values{"match": {"nowhere"}}); len(p.Messages) != 0 || p.Next != "" || p.Scanned != 2501 {
		t.Errorf("no match: %+v", p)
	}
	for _, bad := range []url.Values{{"match": {"x"}, "limit": {"0"}}, {"match": {"x"}, "limit": {"1001"}}, {"match": {"x"}, "state": {"gone"}}, {"match": {"x"}, "cursor": {"nope"}}} {
		if code, _ := get(bad); code != 400 {
			t.Errorf("%v: status %d, want 400", bad, code)
		}
	}
}
