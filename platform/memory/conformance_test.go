package memory_test

import (
	"context"
	"testing"

	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
	"github.com/duilie/duilie/platform/platformtest"
)

// harness makes in-memory platforms, recording their calls unless they are for benchmarks. It
// is no Restarter: nothing outlives a Platform.
type harness struct{ record bool }

func (h harness) MakePlatform(ctx context.Context, t testing.TB) (platform.Platform, error) {
	return memory.New(memory.Options{Record: h.record}), nil
}

func (harness) Close() {}

func (harness) Calls(p platform.Platform) []string {
	var out []string
	for _, c := range p.(*memory.Platform).Calls() {
		out = append(out, c.String())
	}
	return out
}

func (harness) Inject(p platform.Platform, queue string, msgs ...platform.Message) {
	for i := range msgs {
		msgs[i].ID, msgs[i].Timestamp = platform.NewMessageID(), 1700000000000
	}
	p.(*memory.Platform).Put(queue, msgs...)
}

func TestConformance(t *testing.T) {
	platformtest.RunConformanceTests(t, func(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
		return harness{record: true}, nil
	})
}

// BenchmarkPlatform: docs/server.md has the command.
func BenchmarkPlatform(b *testing.B) {
	platformtest.RunBenchmarks(b, func(ctx context.Context, t testing.TB) (platformtest.Harness, error) {
		return harness{}, nil
	})
}
