package jetstream

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/platformtest"
)

// embeddedHarness makes a fresh embedded engine, in its own data directory, per test.
type embeddedHarness struct{}

func newEmbeddedHarness(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
	return embeddedHarness{}, nil
}

func (embeddedHarness) MakePlatform(ctx context.Context, t testing.TB) (platform.Platform, error) {
	return Open(ctx, Config{DataDir: t.TempDir(), Logger: quiet})
}

func (embeddedHarness) Close() {}

func (embeddedHarness) Inject(p platform.Platform, queue string, msgs ...platform.Message) {
	inject(p, queue, msgs...)
}

func (embeddedHarness) Restart(ctx context.Context, p platform.Platform) (platform.Platform, error) {
	return restart(ctx, p)
}

// ReclaimsFlights: the embedded engine's process holds its data directory, so what was in flight
// at a restart is delivered again at once (reclaim.go).
func (embeddedHarness) ReclaimsFlights() bool { return true }

// clusterHarness connects each test to its own account of one 3-node cluster, with R3 streams.
type clusterHarness struct{ tc *testCluster }

func (h clusterHarness) MakePlatform(ctx context.Context, t testing.TB) (platform.Platform, error) {
	return Open(ctx, Config{URL: h.tc.url(h.tc.account(t)), Replicas: 3, Logger: quiet})
}

func (clusterHarness) Close() {}

func (clusterHarness) Inject(p platform.Platform, queue string, msgs ...platform.Message) {
	inject(p, queue, msgs...)
}

func (clusterHarness) Restart(ctx context.Context, p platform.Platform) (platform.Platform, error) {
	return restart(ctx, p)
}

// restart closes the platform and opens it again with the same configuration: the embedded
// engine on the same data directory, or a new connection to the same cluster account.
func restart(ctx context.Context, pl platform.Platform) (platform.Platform, error) {
	p := pl.(*Platform)
	if err := p.Close(); err != nil {
		return nil, err
	}
	return Open(ctx, p.cfg)
}

// inject publishes messages as a foreign producer may: with duilie's headers, but any content
// type and body.
func inject(pl platform.Platform, queue string, msgs ...platform.Message) {
	p := pl.(*Platform)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.queue(ctx, queue); err != nil {
		panic(err)
	}
	for _, m := range msgs {
		msg := nats.NewMsg(readySubject(queue))
		msg.Header.Set(hdrID, platform.NewMessageID())
		msg.Header.Set(hdrTime, strconv.FormatInt(time.Now().UnixMilli(), 10))
		msg.Header.Set(hdrType, string(m.ContentType))
		msg.Data = m.Body
		if _, err := p.js.PublishMsg(ctx, msg); err != nil {
			panic(err)
		}
	}
}

func TestConformanceEmbedded(t *testing.T) {
	platformtest.RunConformanceTests(t, newEmbeddedHarness)
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	if raceEnabled {
		// Three servers replicating every stream, slowed down by the race detector, answer
		// JetStream's API in seconds on a 2-core machine: the suite's timing rows would judge
		// the machine, not the driver. The driver's races are covered by the embedded run.
		t.Skip("the cluster conformance run is too slow under -race; it runs without it")
	}
	platformtest.RunConformanceTests(t, newClusterHarness(64))
}

// newClusterHarness starts a 3-node cluster with room for accounts platforms, one account each.
func newClusterHarness(accounts int) platformtest.HarnessMaker {
	return func(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
		return clusterHarness{startCluster(t, accounts)}, nil
	}
}

// BenchmarkPlatformEmbedded and BenchmarkPlatformCluster: docs/server.md has the command.
func BenchmarkPlatformEmbedded(b *testing.B) {
	platformtest.RunBenchmarks(b, newEmbeddedHarness)
}

func BenchmarkPlatformCluster(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a 3-node cluster")
	}
	// Every run of a benchmark makes two platforms, and the framework runs each a few times.
	platformtest.RunBenchmarks(b, newClusterHarness(256))
}
