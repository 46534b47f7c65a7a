//go:build js && wasm

package app

import (
	"github.com/duilie/duilie"
	"github.com/duilie/duilie/workers"
)

// Main runs p as a Cloudflare Worker's handlers (see package workers) and never returns: in a
// program built for js/wasm by duilie worker build, the Worker's queue handler runs p.Queue and
// its fetch handler runs p.Fetch, once per event.
func Main(p duilie.Program) {
	workers.Serve(p)
}
