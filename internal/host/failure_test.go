package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
	"github.com/duilie/duilie/platform/memory"
)

// failing wraps a platform whose consumers fail to receive with err, n times (or forever for a
// negative n), then deliver as the platform does.
type failing struct {
	platform.Platform
	err error
	n   int
}

func (f *failing) Consume(ctx context.Context, name string, o platform.ConsumerOptions) (platform.Consumer, error) {
	c, err := f.Platform.Consume(ctx, name, o)
	return &failingConsumer{Consumer: c, f: f}, err
}

type failingConsumer struct {
	platform.Consumer
	f *failing

	mu    sync.Mutex
	calls int
}

func (c *failingConsumer) Receive(ctx context.Context, max int) ([]platform.Delivery, error) {
	c.mu.Lock()
	c.calls++
	fail := c.f.n < 0 || c.calls <= c.f.n
	c.mu.Unlock()
	if fail {
		return nil, c.f.err
	}
	return c.Consumer.Receive(ctx, max)
}

// syncLog is a log a test reads while the host writes it.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A platform failing permanently stops its consumer at once, with one line naming the queue
// and the cause; Consume returns the error.
func TestPermanentErrorStopsConsumer(t *testing.T) {
	cause := platform.Permanent(errors.New("queue qa does not exist (10104)"))
	if !platform.IsPermanent(cause) || !platform.IsPermanent(errors.Join(errors.New("x"), cause)) ||
		platform.IsPermanent(errors.New("x")) || platform.Permanent(nil) != nil {
		t.Fatal("Permanent / IsPermanent")
	}
	log := &syncLog{}
	p := &failing{Platform: memory.New(memory.Options{}), err: cause, n: -1}
	h, _ := host.New(host.Config{Platform: p, Logger: slog.New(slog.NewTextHandler(log, nil))})
	start := time.Now()
	err := h.Consume(context.Background(), host.DefaultConsumerConfig("qa"), func(*host.Event) error { return nil })
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "qa") {
		t.Fatalf("Consume returned %v", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("stopping took %v: longer than one backoff step", took)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=ERROR msg="consumer stopped" queue=qa err="queue qa does not exist (10104)"`) {
		t.Errorf("log:\n%s", log.String())
	}
}

// noConsumer is a platform that refuses to consume any queue, with err, n times (or forever
// for n ≤ 0), then consumes as its platform does.
type noConsumer struct {
	platform.Platform
	err error
	n   int

	mu    sync.Mutex
	calls int
}

func (p *noConsumer) Consume(ctx context.Context, name string, o platform.ConsumerOptions) (platform.Consumer, error) {
	p.mu.Lock()
	p.calls++
	refuse := p.n <= 0 || p.calls <= p.n
	p.mu.Unlock()
	if refuse {
		return nil, p.err
	}
	return p.Platform.Consume(ctx, name, o)
}

// A platform that refuses to start a consumer at all (a queue Cloudflare does not have) stops
// it with the same one line as a consumer whose deliveries fail: the log names the queue and
// the cause, not only the server's account of every consumer at the end.
func TestConsumeRefusedIsLogged(t *testing.T) {
	log := &syncLog{}
	cause := platform.Permanent(errors.New("queue qa does not exist (10104)"))
	h, _ := host.New(host.Config{Platform: &noConsumer{Platform: memory.New(memory.Options{}), err: cause},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	err := h.Consume(context.Background(), host.DefaultConsumerConfig("qa"), func(*host.Event) error { return nil })
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "qa") {
		t.Fatalf("Consume returned %v", err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=ERROR msg="consumer stopped" queue=qa err="queue qa does not exist (10104)"`) {
		t.Errorf("log:\n%s", log.String())
	}

	// Stopped before it started: not a failure, and nothing to log.
	log = &syncLog{}
	h, _ = host.New(host.Config{Platform: &noConsumer{Platform: memory.New(memory.Options{}), err: context.Canceled},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Consume(ctx, host.DefaultConsumerConfig("qa"), func(*host.Event) error { return nil }); err != nil || log.String() != "" {
		t.Errorf("Consume after its context ended: %v, log %q", err, log.String())
	}
}

// A platform that cannot start a consumer for the moment (a cluster electing a leader) is asked
// again, backing off as for a failed delivery, and the consumer runs once it can; a halt ends
// the waiting.
func TestConsumeRefusedTemporarily(t *testing.T) {
	log := &syncLog{}
	mem := memory.New(memory.Options{})
	mem.Put("qa", platform.Message{ID: "1", Attempts: 1, Body: []byte("1"), ContentType: platform.JSON})
	h, _ := host.New(host.Config{Platform: &noConsumer{Platform: mem, err: errors.New("no leader"), n: 2},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time, 1)
	done := make(chan error)
	start := time.Now()
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxBatchTimeout = host.NoBatchTimeout
	go func() {
		done <- h.Consume(ctx, cc, func(*host.Event) error { ran <- time.Now(); return nil })
	}()
	var at time.Time
	select {
	case at = <-ran:
	case err := <-done:
		t.Fatalf("Consume returned %v; log:\n%s", err, log.String())
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery once the platform could consume")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 0.1 + 0.2 s of backoff before the third Consume.
	if waited := at.Sub(start); waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Errorf("delivered after %v, want about 0.3 s", waited)
	}
	text := log.String()
	for _, want := range []string{"retry_in=100ms", "retry_in=200ms"} {
		if !strings.Contains(text, `level=ERROR msg=consume queue=qa err="no leader" `+want) {
			t.Errorf("no line with %s in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "consumer stopped") {
		t.Errorf("a temporary refusal stopped the consumer:\n%s", text)
	}

	// Refused for ever: a halt ends the waiting, as a stop, not a failure.
	h, _ = host.New(host.Config{Platform: &noConsumer{Platform: memory.New(memory.Options{}), err: errors.New("no leader")}, Logger: quiet()})
	go func() { done <- h.Consume(context.Background(), cc, func(*host.Event) error { return nil }) }()
	time.Sleep(150 * time.Millisecond)
	h.Halt()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Consume after a halt: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a halt did not end a consumer waiting for its platform")
	}
}

// A temporary failure backs off, doubling from 0.1 s, logging each, and delivery resumes once
// the platform recovers.
func TestTemporaryErrorBacksOff(t *testing.T) {
	log := &syncLog{}
	mem := memory.New(memory.Options{})
	mem.Put("qa", platform.Message{ID: "1", Attempts: 1, Body: []byte("1"), ContentType: platform.JSON})
	p := &failing{Platform: mem, err: errors.New("connection lost"), n: 3}
	h, _ := host.New(host.Config{Platform: p, Logger: slog.New(slog.NewTextHandler(log, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time, 1)
	start := time.Now()
	done := make(chan error)
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxBatchTimeout = host.NoBatchTimeout
	go func() {
		done <- h.Consume(ctx, cc, func(*host.Event) error { ran <- time.Now(); return nil })
	}()
	var at time.Time
	select {
	case at = <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery after the platform recovered")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 0.1 + 0.2 + 0.4 s of backoff before the fourth Receive.
	if waited := at.Sub(start); waited < 700*time.Millisecond || waited > 3*time.Second {
		t.Errorf("delivered after %v, want about 0.7 s", waited)
	}
	text := log.String()
	for _, want := range []string{"retry_in=100ms", "retry_in=200ms", "retry_in=400ms"} {
		if !strings.Contains(text, `level=ERROR msg=receive queue=qa err="connection lost" `+want) {
			t.Errorf("no line with %s in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "consumer stopped") {
		t.Errorf("a temporary failure stopped the consumer:\n%s", text)
	}
}

// retrying declares that it applies retries itself, as Cloudflare does.
type retrying struct{ *memory.Platform }

func (retrying) Capabilities() platform.Capabilities { return platform.Capabilities{Retries: true} }

// On a platform that applies retries and dead-lettering itself, the host never dead-letters,
// drops or holds back a message: it hands over each call and the event's outcome.
func TestPlatformThatRetries(t *testing.T) {
	mem := memory.New(memory.Options{Record: true})
	p := retrying{mem}
	if !platform.CapabilitiesOf(p).Retries || platform.CapabilitiesOf(mem).Retries {
		t.Fatal("CapabilitiesOf")
	}
	h, _ := host.New(host.Config{Platform: p, Logger: quiet()})
	cc := host.DefaultConsumerConfig("qa")
	cc.MaxRetries, cc.DeadLetterQueue, cc.MaxBatchTimeout = host.NoRetries, "dead", host.NoBatchTimeout
	// Attempts far beyond max_retries: the platform counts, so the program still runs.
	mem.Put("qa", platform.Message{ID: "a", Attempts: 9, Body: []byte("1"), ContentType: platform.JSON},
		platform.Message{ID: "b", Attempts: 9, Body: []byte("2"), ContentType: platform.JSON},
		platform.Message{ID: "c", Attempts: 9, Body: []byte("3"), ContentType: platform.JSON})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- h.Consume(ctx, cc, func(ev *host.Event) error {
			defer cancel()
			if err := duilie.Ack(ev, 0); err != nil {
				return err
			}
			if err := duilie.Retry(ev, 1, 7); err != nil {
				return err
			}
			return errors.New("c is left to the failure")
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := mem.Settlements()
	if len(s) != 1 || len(s[0].Messages) != 3 || !s[0].Failed {
		t.Fatalf("settlements %+v", s)
	}
	want := []platform.Action{{Kind: platform.Done}, {Kind: platform.Redeliver, Delay: 7 * time.Second}, {Kind: platform.Redeliver}}
	for i, r := range s[0].Messages {
		if r.Action != want[i] {
			t.Errorf("message %s: action %+v, want %+v", r.ID, r.Action, want[i])
		}
	}
}

// A handler that says its program could not be started (a *host.StartError) costs its
// messages no attempt: they are released, attempts unchanged, whatever max_retries is; the
// consumer waits 0.1 s, 0.2 s, 0.4 s before its next batches; the report's outcome is
// not_started. Once the program starts, the message arrives with attempts 1.
func TestStartErrorReleases(t *testing.T) {
	o := newObserved(t, time.Second)
	o.put(jsonMessage("m", 1))
	cc := consumerOf(0, "") // max_retries 0: one failed attempt would drop the message
	var mu sync.Mutex
	var starts []time.Time
	var attempts []int
	all := o.consume(cc, 10, func(ev *host.Event) error { // a StartReport and an EventReport each
		b, _ := duilie.ReadBatchOf[any](ev)
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		attempts = append(attempts, b.Messages[0].Attempts)
		if len(starts) < 5 {
			return &host.StartError{Err: errors.New("fork/exec ./app: too many open files")}
		}
		return nil
	})
	var reports []*host.EventReport
	for _, r := range all {
		if e, ok := r.(*host.EventReport); ok {
			reports = append(reports, e)
		}
	}
	if len(reports) != 5 {
		t.Fatalf("%d event reports, want 5", len(reports))
	}
	for i, e := range reports {
		wantOutcome, wantAction := host.NotStarted, platform.Release
		if i == 4 {
			wantOutcome, wantAction = host.OK, platform.Done
		}
		if e.Outcome != wantOutcome || e.Messages[0].Action.Kind != wantAction || e.Messages[0].Attempts != 1 {
			t.Errorf("event %d: %s, %+v", i, e.Outcome, e.Messages)
		}
	}
	if !slices.Equal(attempts, []int{1, 1, 1, 1, 1}) {
		t.Errorf("attempts %v, want 1 every time", attempts)
	}
	for i, want := range []time.Duration{100, 200, 400, 800} {
		if gap := starts[i+1].Sub(starts[i]); gap < want*time.Millisecond-10*time.Millisecond {
			t.Errorf("batch %d came %v after a failed start, want at least %d ms", i+2, gap, want)
		}
	}
	if err := (&host.StartError{Err: os.ErrPermission}); !errors.Is(err, os.ErrPermission) || host.OutcomeOf(fmt.Errorf("x: %w", err)) != host.NotStarted {
		t.Error("a StartError does not unwrap, or a wrapped one is not not_started")
	}
}

// A fetch event whose program could not be started answers 503 with Retry-After, not 500.
func TestStartErrorFetch(t *testing.T) {
	o := newObserved(t, time.Second)
	srv := httptest.NewServer(o.h.Fetch(func(ev *host.Event, w http.ResponseWriter, r *http.Request) error {
		return &host.StartError{Err: errors.New("fork/exec ./app: argument list too long")}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("%d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var e *host.EventReport
	for _, r := range o.all() {
		if er, ok := r.(*host.EventReport); ok {
			e = er
		}
	}
	if e == nil || e.Outcome != host.NotStarted || e.Status != 503 {
		t.Errorf("report %s %d", e.Outcome, e.Status)
	}
}
