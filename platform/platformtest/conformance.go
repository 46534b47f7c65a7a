package platformtest

import (
	"context"
	"testing"
)

// RunConformanceTests runs the whole suite against the platforms a harness makes. Subtests run
// in parallel; the slowest wait a few seconds for delays. Parts of a test that need a capability
// the harness lacks (Recorder, Injector, Restarter, platform.Stater) are skipped with the
// reason, and the rest of the test still runs.
func RunConformanceTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	ctx := context.Background()
	hn, err := newHarness(ctx, t)
	if err != nil {
		t.Fatalf("making harness: %v", err)
	}
	t.Cleanup(hn.Close)
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		// Storing (send.go).
		{"Row01SendSameValue", testRow01SendSameValue},
		{"Row02DelaysReachPlatform", testRow02DelaysReachPlatform},
		{"Row04BodyOf128000Bytes", testRow04BodyOf128000Bytes},
		{"Row05BatchesOf1And100", testRow05BatchesOf1And100},
		{"Row07BodiesRestored", testRow07BodiesRestored},
		{"ContentTypesRestored", testContentTypesRestored},
		// Delivering (deliver.go).
		{"Row09ReadBatchOfThree", testRow09ReadBatchOfThree},
		{"BatchSizeAndTimeout", testBatchSizeAndTimeout},
		// Settling (settle.go).
		{"Row10AckRetryLeave", testRow10AckRetryLeave},
		{"Row12UncaughtFailure", testRow12UncaughtFailure},
		{"AckFinalWhenEventFails", testAckFinalWhenEventFails},
		{"FirstCallWins", testFirstCallWins},
		{"RetryDelay", testRetryDelay},
		{"RetriesThenDeadLetter", testRetriesThenDeadLetter},
		{"ExplicitRetriesCount", testExplicitRetriesCount},
		{"RetriesThenDrop", testRetriesThenDrop},
		// Delays (delay.go).
		{"SendDelaysHonoured", testSendDelaysHonoured},
		{"BatchDelaysHonoured", testBatchDelaysHonoured},
		// Concurrency (concurrency.go), stats (stats.go), restart (restart.go).
		{"ConcurrentEvents", testConcurrentEvents},
		{"Stats", testStats},
		{"Restart", testRestart},
		{"Operator", testOperator}, // operator.go
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, hn)
		})
	}
}
