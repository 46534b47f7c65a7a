package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/duilie/duilie/internal/host"
)

// ConsumerInfo is one queue's consumer as the server runs it, with its settings as they were
// given (WithDefaults says what they come to).
type ConsumerInfo struct {
	Queue string
	// Pull: an http_pull consumer (clients pull over Cloudflare's API), with the settings in
	// PullConsumer; otherwise the program's consumer, with the settings in Consumer.
	Pull         bool
	Consumer     ConsumerConfig
	PullConsumer PullConsumer
	// Configured: the configuration names it, so only the configuration can change it.
	Configured bool
	Started    time.Time
}

// DeadLetterQueue is the consumer's dead-letter queue, "" for none.
func (ci ConsumerInfo) DeadLetterQueue() string {
	if ci.Pull {
		return ci.PullConsumer.DeadLetterQueue
	}
	return ci.Consumer.DeadLetterQueue
}

// running is a consumer that runs: a program's or a pull consumer.
type running struct {
	info   ConsumerInfo
	cancel context.CancelFunc // a program's: stops it
	done   chan struct{}      // a program's: closed once it stopped
	puller *host.Puller       // a pull consumer's
}

// claim records r as its queue's consumer, unless the queue has one. s.cmu must be held.
func (s *Server) claim(r *running) error {
	if s.running == nil {
		return ErrNotStarted
	}
	if _, ok := s.running[r.info.Queue]; ok {
		return invalid("queue %s has a consumer already; a queue has one consumer", r.info.Queue)
	}
	s.running[r.info.Queue] = r
	return nil
}

// consume starts the queue's program consumer. A configured consumer that stops on its own
// counts toward Failed; one started at run time only logs why it stopped.
func (s *Server) consume(cc ConsumerConfig, configured bool) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	ctx, cancel := context.WithCancel(s.consumeCtx)
	r := &running{info: ConsumerInfo{Queue: cc.Queue, Consumer: cc, Configured: configured, Started: time.Now()},
		cancel: cancel, done: make(chan struct{})}
	if err := s.claim(r); err != nil {
		cancel()
		return err
	}
	s.consumers.Go(func() {
		defer close(r.done)
		err := s.h.Consume(ctx, cc, s.run.queue)
		if err == nil || !configured {
			return
		}
		s.cmu.Lock()
		defer s.cmu.Unlock()
		if s.failed = append(s.failed, err); len(s.failed) == len(s.cfg.Consumers) {
			s.fatal <- fmt.Errorf("no consumer is left: %w", errors.Join(s.failed...))
		}
	})
	run := cc.WithDefaults()
	attrs := []any{"queue", run.Queue, "max_batch_size", run.MaxBatchSize, "max_batch_timeout", run.MaxBatchTimeout.String(),
		"max_retries", run.MaxRetries, "retry_delay", run.RetryDelay.String(), "max_concurrency", run.MaxConcurrency}
	if cc.DeadLetterQueue != "" {
		attrs = append(attrs, "dead_letter_queue", cc.DeadLetterQueue)
	}
	s.log.Info("consuming", attrs...)
	return nil
}

// pull starts the queue's pull consumer.
func (s *Server) pull(ctx context.Context, pc PullConsumer, configured bool) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	r := &running{info: ConsumerInfo{Queue: pc.Queue, Pull: true, PullConsumer: pc, Configured: configured, Started: time.Now()}}
	if err := s.claim(r); err != nil {
		return err
	}
	p, err := s.h.Pull(ctx, pc)
	if err != nil {
		delete(s.running, pc.Queue)
		return err
	}
	r.puller = p
	run := pc.WithDefaults()
	attrs := []any{"queue", run.Queue, "max_batch_size", run.MaxBatchSize, "max_retries", run.MaxRetries,
		"retry_delay", run.RetryDelay.String(), "visibility_timeout", run.VisibilityTimeout.String()}
	if pc.DeadLetterQueue != "" {
		attrs = append(attrs, "dead_letter_queue", pc.DeadLetterQueue)
	}
	s.log.Info("consuming by pulls", attrs...)
	return nil
}

// stopConsumer stops the queue's consumer, if it has one that the configuration does not
// name: a program consumer's running events finish and are settled (until ctx ends); a pull
// consumer's leased messages are deliverable again at once.
func (s *Server) stopConsumer(ctx context.Context, queue string) error {
	s.cmu.Lock()
	r, ok := s.running[queue]
	switch {
	case !ok:
		s.cmu.Unlock()
		return nil
	case r.info.Configured:
		s.cmu.Unlock()
		return fmt.Errorf("the consumer of %s: %w; change it there", queue, ErrConfigured)
	}
	delete(s.running, queue)
	s.cmu.Unlock()
	if r.puller != nil {
		r.puller.Release(ctx)
		s.log.Info("stopped consuming by pulls", "queue", queue)
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
		s.log.Info("stopped consuming", "queue", queue)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closePulls stops every pull consumer; their leased messages return after the platform's
// ack wait, as after a crash.
func (s *Server) closePulls() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	for _, r := range s.running {
		if r.puller != nil {
			r.puller.Close()
		}
	}
}

// puller is the queue's pull consumer, or nil.
func (s *Server) puller(queue string) *host.Puller {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if r, ok := s.running[queue]; ok {
		return r.puller
	}
	return nil
}

// consumerInfos lists the running consumers, sorted by queue.
func (s *Server) consumerInfos() []ConsumerInfo {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	out := make([]ConsumerInfo, 0, len(s.running))
	for _, r := range s.running {
		out = append(out, r.info)
	}
	slices.SortFunc(out, func(a, b ConsumerInfo) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}
