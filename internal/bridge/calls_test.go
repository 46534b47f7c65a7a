//go:build unix

package bridge

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
)

// Each event's report counts its program's bridge calls by interface name and reply status.
func TestBridgeCallsReported(t *testing.T) {
	e := newEnv(t, 0)
	srv := e.fetchServer(t)
	for _, c := range []struct {
		mode, body string
		want       map[host.BridgeCall]int
	}{
		{"echo", `{}`, map[host.BridgeCall]int{{Name: nameKind, Status: 200}: 1, {Name: nameAck, Status: 400}: 1, {Name: nameSend, Status: 200}: 1}},
		{"echo", `{`, map[host.BridgeCall]int{{Name: nameKind, Status: 200}: 1, {Name: nameAck, Status: 400}: 1, {Name: nameSend, Status: 400}: 1}},
		{"send", ``, map[host.BridgeCall]int{{Name: nameSend, Status: 500}: 1}}, // binding X is not permitted: an abort
		{"nostatus", ``, nil},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader(c.body))
		fetch(t, req, c.mode)
		e.mu.Lock()
		got := e.reports[len(e.reports)-1].BridgeCalls
		e.mu.Unlock()
		if len(got) != len(c.want) {
			t.Errorf("%s %q: calls %v, want %v", c.mode, c.body, got, c.want)
			continue
		}
		for k, n := range c.want {
			if got[k] != n {
				t.Errorf("%s %q: calls %v, want %v", c.mode, c.body, got, c.want)
			}
		}
	}
}

// A malformed call counts under the empty name.
func TestMalformedCallCounted(t *testing.T) {
	h, err := host.New(host.Config{Platform: memory.New(memory.Options{}), Permissions: testPermissions, Bindings: testBindings})
	if err != nil {
		t.Fatal(err)
	}
	var calls map[host.BridgeCall]int
	_ = h.Do(context.Background(), func(ev *duilie.Event) error {
		handle(ev, []byte(`["读取入站事件种类"]`))
		handle(ev, []byte(`not json`))
		handle(ev, []byte(`["读取入站事件种类"]`)) // after the abort: 500
		calls = event.BridgeCalls(ev)
		return nil
	})
	// The call after the abort is answered with the abort, under its own name.
	want := map[host.BridgeCall]int{{Name: nameKind, Status: 200}: 1, {Name: "", Status: 500}: 1, {Name: nameKind, Status: 500}: 1}
	if len(calls) != len(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for k, n := range want {
		if calls[k] != n {
			t.Errorf("calls %v, want %v", calls, want)
		}
	}
}
