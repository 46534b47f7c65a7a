// Package platformtest is the conformance suite every duilie platform runs: what concerns a
// platform, not the interface. It stores and restores bodies byte for byte; delivers them in
// order with their ids, attempts and millisecond timestamps, in batches by size and timeout;
// settles them by SPEC §7 (acks, retries with their delays, failed events, the first call
// winning, retries ending in the dead-letter queue or a drop); honours send and batch delays;
// keeps concurrent events apart; counts its messages; and keeps them across a restart. The
// rows of SPEC §12 that speak of platform calls are asserted exactly on a harness that records
// them. It drives a platform only through the platform contract and the interface's functions,
// so the same tests judge the in-memory platform, the embedded engine, a NATS cluster and,
// where it applies, Cloudflare.
//
// The interface's own rules (check order, every message of §9, exceptions and aborts) are the
// root package's tests, on the in-memory platform.
//
// A platform's test file needs only a harness:
//
//	func newHarness(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
//		return &harness{...}, nil
//	}
//
//	func TestConformance(t *testing.T)  { platformtest.RunConformanceTests(t, newHarness) }
//	func BenchmarkPlatform(b *testing.B) { platformtest.RunBenchmarks(b, newHarness) }
//
// A harness implements more of the interfaces below to be judged on more: Recorder, Injector,
// Restarter. A test part that needs one the harness lacks is skipped with the reason.
package platformtest

import (
	"context"
	"testing"

	"github.com/duilie/duilie/platform"
)

// Harness gives the suite fresh platforms to test.
type Harness interface {
	// MakePlatform returns a platform with no queues or messages left by other tests. The
	// suite closes it. Tests run in parallel, so platforms made by one harness must not see
	// each other's queues.
	MakePlatform(ctx context.Context, t testing.TB) (platform.Platform, error)
	// Close releases what the harness holds.
	Close()
}

// HarnessMaker makes a harness for one run of the suite.
type HarnessMaker func(ctx context.Context, t testing.TB) (Harness, error)

// Recorder is implemented by a harness whose platforms record every platform call, as the
// in-memory platform does; rows of SPEC §12 that speak of platform calls are then asserted
// exactly. Other platforms are judged through what they deliver.
type Recorder interface {
	// Calls returns the calls p has received so far, each rendered as in the memory package:
	// send(<body>, <options>), sendBatch(<items>), ack(<id>), retry(<id>[, <options>]).
	Calls(p platform.Platform) []string
}

// Injector is implemented by a harness that can place messages on a platform's queue exactly as
// given: any content type and body, as a foreign producer would write them. The test of foreign
// content types is skipped, with a reason, on harnesses that cannot.
type Injector interface {
	// Inject enqueues messages with these bodies and content types; the platform assigns ids,
	// timestamps and attempts as for any send.
	Inject(p platform.Platform, queue string, msgs ...platform.Message)
}

// Restarter is implemented by a harness whose platforms keep their messages in a store that
// outlives them, as the embedded engine's data directory does. The restart test is skipped,
// with a reason, on harnesses that cannot.
type Restarter interface {
	// Restart closes p and opens its store again, as a process that stops and starts does, and
	// returns the new platform. The suite closes it.
	Restart(ctx context.Context, p platform.Platform) (platform.Platform, error)
}

// Reclaimer is implemented by a Restarter whose restarted platform is the only consumer of its
// store, as the embedded engine is (it holds its data directory's lock): a message left in flight
// before the restart is delivered again as soon as a consumer starts, with attempts + 1, not
// when its ack wait ends. Without it the restart test expects the ack wait.
type Reclaimer interface {
	Restarter
	// ReclaimsFlights reports whether the platforms it restarts do.
	ReclaimsFlights() bool
}
