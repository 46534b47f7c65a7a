// Package platformtest is the conformance suite every duilie platform runs: the rows of SPEC
// §12, every message of §9, the check order of §3/§4, the resolution rules of §7 with retries
// and the dead-letter queue, delays, and concurrent events. It drives a platform only through
// the platform contract and the interface's functions, so the same tests judge the in-memory
// platform, the embedded engine, a NATS cluster and, where it applies, Cloudflare.
//
// A platform's test file needs only a harness:
//
//	func TestConformance(t *testing.T) {
//		platformtest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (platformtest.Harness, error) {
//			return &harness{...}, nil
//		})
//	}
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
	MakePlatform(ctx context.Context, t *testing.T) (platform.Platform, error)
	// Close releases what the harness holds.
	Close()
}

// HarnessMaker makes a harness for one run of the suite.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Recorder is implemented by a harness whose platforms record every platform call, as the
// in-memory platform does; rows of SPEC §12 that speak of platform calls are then asserted
// exactly. Other platforms are judged through what they deliver.
type Recorder interface {
	// Calls returns the calls p has received so far, each rendered as in the memory package:
	// send(<body>, <options>), sendBatch(<items>), ack(<id>), retry(<id>[, <options>]).
	Calls(p platform.Platform) []string
}

// Rejecter is implemented by a harness that can make a platform refuse sends with a given
// message, as the in-memory platform can. The row of SPEC §12 about a refusing platform is
// skipped, with a reason, on harnesses that cannot.
type Rejecter interface {
	RejectSends(p platform.Platform, queue, message string)
}

// Injector is implemented by a harness that can place messages on a platform's queue exactly as
// given: any content type and body, as a foreign producer would write them. Tests of bodies
// that are not JSON values are skipped, with a reason, on harnesses that cannot.
type Injector interface {
	// Inject enqueues messages with these bodies and content types; the platform assigns ids,
	// timestamps and attempts as for any send.
	Inject(p platform.Platform, queue string, msgs ...platform.Message)
}
