package bridge_test

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/duilie/duilie/internal/bridge"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform/memory"
)

// A host that runs app.py once per batch of queue "page-render" and once per HTTP request,
// each time with its own bridge URL in DUILIE_BRIDGE.
func ExampleRunner() {
	ctx := context.Background()
	h, err := host.New(host.Config{
		Platform:    memory.New(memory.Options{}),
		Permissions: host.Permissions{Queue: []string{"PAGE_QUEUE"}},
		Bindings:    map[string]string{"PAGE_QUEUE": "page-render"},
	})
	if err != nil {
		panic(err)
	}
	br, err := bridge.Listen("127.0.0.1:0", slog.Default())
	if err != nil {
		panic(err)
	}
	defer br.Close()
	prog := &bridge.Runner{Command: []string{"python3", "app.py"}, Dir: ".", Bridge: br, Logger: slog.Default()}

	go func() { _ = http.ListenAndServe("127.0.0.1:8787", prog.Fetch(h)) }()
	_ = h.Consume(ctx, host.DefaultConsumerConfig("page-render"), prog.Queue)
}
