package duilie_test

import (
	"context"
	"errors"
	"testing"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// unreachable is a platform that cannot provide its queues.
type unreachable struct{ *memory.Platform }

func (unreachable) Queue(ctx context.Context, name string) (platform.Queue, error) {
	return nil, errors.New("engine unreachable")
}

// A platform that cannot provide a configured queue is a platform failure, an exception, not
// a deployment error.
func TestQueueUnavailable(t *testing.T) {
	h, _ := host.New(host.Config{Platform: unreachable{memory.New(memory.Options{})},
		Permissions: host.Permissions{Queue: []string{"B"}}, Bindings: map[string]string{"B": "q"}})
	var errs []error
	failure := h.Run(context.Background(), func(ev *host.Event) error {
		errs = append(errs, duilie.Send(ev, "B", "1", 0), duilie.SendBatch(ev, "B", `[{"body":1}]`))
		return nil
	})
	if failure != nil {
		t.Fatalf("the event failed: %v", failure)
	}
	for i, want := range []string{"队列发送失败：engine unreachable", "队列批量发送失败：engine unreachable"} {
		var ex *duilie.Exception
		if !errors.As(errs[i], &ex) || ex.Message != want {
			t.Errorf("got %v, want exception %q", errs[i], want)
		}
	}
}
