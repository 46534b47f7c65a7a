package jetstream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie/platform"
)

// Three processes open one fresh cluster at once and each creates the same four R3 queues and
// their consumers, as serves started together do: every creation succeeds.
func TestCreateTogether(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 3*8)
	for i := range 3 {
		wg.Go(func() {
			p, err := Open(context.Background(), Config{URL: tc.url(0), Replicas: 3, Logger: quiet})
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			for q := range 4 {
				name := fmt.Sprintf("q%d", q)
				if _, err := p.Queue(context.Background(), name); err != nil {
					errs <- fmt.Errorf("process %d: %w", i, err)
					continue
				}
				c, err := p.Consume(context.Background(), name, platform.ConsumerOptions{MaxBatchSize: 10, MaxConcurrency: 1, AckWait: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("process %d: %w", i, err)
					continue
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
