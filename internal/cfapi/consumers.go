package cfapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// Consumer types.
const (
	workerType = "worker"    // the serve's program, once per batch
	pullType   = "http_pull" // clients pull over this API
)

// consumerState is a queue's one consumer.
type consumerState struct {
	kind       string
	configured bool // from the configuration: read-only here
	created    time.Time
	script     string              // worker
	worker     host.ConsumerConfig // worker
	pull       *puller             // http_pull
}

// consumerJSON is Cloudflare's consumer object; settings are those of its type.
type consumerJSON struct {
	ConsumerID      string `json:"consumer_id"`
	CreatedOn       string `json:"created_on"`
	DeadLetterQueue string `json:"dead_letter_queue"`
	QueueName       string `json:"queue_name"`
	ScriptName      string `json:"script_name,omitempty"`
	Settings        any    `json:"settings"`
	Type            string `json:"type"`
}

type workerSettingsJSON struct {
	BatchSize      int   `json:"batch_size"`
	MaxConcurrency int   `json:"max_concurrency"`
	MaxRetries     int   `json:"max_retries"`
	MaxWaitTimeMs  int64 `json:"max_wait_time_ms"`
	RetryDelay     int64 `json:"retry_delay"`
}

type pullSettingsJSON struct {
	BatchSize           int   `json:"batch_size"`
	MaxRetries          int   `json:"max_retries"`
	RetryDelay          int64 `json:"retry_delay"`
	VisibilityTimeoutMs int64 `json:"visibility_timeout_ms"`
}

func (a *API) consumerObject(queue string, cs *consumerState) consumerJSON {
	out := consumerJSON{ConsumerID: consumerID(queue), CreatedOn: cs.created.UTC().Format(time.RFC3339Nano), QueueName: queue, Type: cs.kind}
	if cs.kind == workerType {
		w := cs.worker
		out.ScriptName, out.DeadLetterQueue = cs.script, w.DeadLetterQueue
		out.Settings = workerSettingsJSON{BatchSize: w.MaxBatchSize, MaxConcurrency: w.MaxConcurrency, MaxRetries: w.MaxRetries,
			MaxWaitTimeMs: w.MaxBatchTimeout.Milliseconds(), RetryDelay: int64(w.RetryDelay / time.Second)}
		return out
	}
	c := cs.pull.cfg
	out.DeadLetterQueue = c.DeadLetterQueue
	out.Settings = pullSettingsJSON{BatchSize: c.BatchSize, MaxRetries: c.MaxRetries,
		RetryDelay: int64(c.RetryDelay / time.Second), VisibilityTimeoutMs: c.VisibilityTimeout.Milliseconds()}
	return out
}

func (a *API) listConsumers(w http.ResponseWriter, r *http.Request, name string) {
	a.mu.Lock()
	cs := a.state(name).consumer
	out := []consumerJSON{}
	if cs != nil {
		out = append(out, a.consumerObject(name, cs))
	}
	a.mu.Unlock()
	okPage(w, out, resultInfo{Page: 1, PerPage: max(len(out), 1), Count: len(out), TotalCount: len(out), TotalPages: 1})
}

// theConsumer checks that the path's consumer id is the queue's consumer.
func (a *API) theConsumer(r *http.Request, name string) (*consumerState, error) {
	id := r.PathValue("consumer")
	if !isID(id) {
		return nil, &apiError{http.StatusBadRequest, 10107, "The consumer ID in the request URL is not a valid consumer identifier"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cs := a.state(name).consumer
	if cs == nil || consumerID(name) != id {
		return nil, &apiError{http.StatusNotFound, 11001, "Consumer does not exist"}
	}
	return cs, nil
}

func (a *API) getConsumer(w http.ResponseWriter, r *http.Request, name string) {
	cs, err := a.theConsumer(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	a.mu.Lock()
	out := a.consumerObject(name, cs)
	a.mu.Unlock()
	ok(w, out)
}

func (a *API) createConsumer(w http.ResponseWriter, r *http.Request, name string) {
	a.putConsumer(w, r, name, false)
}

// updateConsumer replaces the queue's consumer, or creates it (Cloudflare's PUT does both).
func (a *API) updateConsumer(w http.ResponseWriter, r *http.Request, name string) {
	id := r.PathValue("consumer")
	if !isID(id) {
		fail(w, &apiError{http.StatusBadRequest, 10107, "The consumer ID in the request URL is not a valid consumer identifier"})
		return
	}
	a.putConsumer(w, r, name, true)
}

// spec is a consumer as a request describes it.
type spec struct {
	kind   string
	script string
	worker host.ConsumerConfig
	pull   Pull
}

// readSpec reads a consumer request: {type, script_name?, dead_letter_queue?, settings?}.
func readSpec(body object, queue string) (spec, error) {
	var s spec
	kind, present, err := body.str("type")
	if err != nil {
		return s, err
	}
	if !present || kind != workerType && kind != pullType {
		return s, errInvalid(`type must be "worker" or "http_pull"`)
	}
	s.kind = kind
	dlq, _, err := body.str("dead_letter_queue")
	if err != nil {
		return s, err
	}
	if dlq != "" {
		if err := platform.CheckQueueName(dlq); err != nil {
			return s, errInvalid("dead_letter_queue: " + err.Error())
		}
		if dlq == queue {
			return s, errInvalid("dead_letter_queue must be another queue than the one consumed")
		}
	}
	settings, _, err := body.sub("settings")
	if err != nil {
		return s, err
	}
	num := func(key string, lo, hi, def int64) (int64, error) {
		v, present, err := settings.integer(key, lo, hi, errInvalid)
		if !present {
			return def, err
		}
		return v, err
	}
	if kind == workerType {
		script, present, err := body.str("script_name")
		if err == nil && (!present || script == "") {
			err = errInvalid("script_name is required for a worker consumer (duilie runs its own program, whatever the name)")
		}
		if err != nil {
			return s, err
		}
		s.script = script
		cc := host.DefaultConsumerConfig(queue)
		cc.DeadLetterQueue = dlq
		var errs []error
		v, err := num("batch_size", 1, 100, int64(cc.MaxBatchSize))
		cc.MaxBatchSize, errs = int(v), append(errs, err)
		v, err = num("max_concurrency", 1, 250, int64(cc.MaxConcurrency))
		cc.MaxConcurrency, errs = int(v), append(errs, err)
		v, err = num("max_retries", 0, 100, int64(cc.MaxRetries))
		cc.MaxRetries, errs = int(v), append(errs, err)
		v, err = num("max_wait_time_ms", 0, 60000, cc.MaxBatchTimeout.Milliseconds())
		cc.MaxBatchTimeout, errs = time.Duration(v)*time.Millisecond, append(errs, err)
		v, err = num("retry_delay", 0, 43200, 0)
		cc.RetryDelay, errs = time.Duration(v)*time.Second, append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return s, firstAPIError(errs)
		}
		s.worker = cc
		return s, nil
	}
	pc := DefaultPull(queue)
	pc.DeadLetterQueue = dlq
	var errs []error
	v, err := num("batch_size", 1, MaxPullBatch, int64(pc.BatchSize))
	pc.BatchSize, errs = int(v), append(errs, err)
	v, err = num("max_retries", 0, 100, int64(pc.MaxRetries))
	pc.MaxRetries, errs = int(v), append(errs, err)
	v, err = num("retry_delay", 0, MaxDelaySeconds, 0)
	pc.RetryDelay, errs = time.Duration(v)*time.Second, append(errs, err)
	v, err = num("visibility_timeout_ms", 1, MaxVisibilityTimeout.Milliseconds(), pc.VisibilityTimeout.Milliseconds())
	pc.VisibilityTimeout, errs = time.Duration(v)*time.Millisecond, append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return s, firstAPIError(errs)
	}
	s.pull = pc
	return s, nil
}

func firstAPIError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *API) putConsumer(w http.ResponseWriter, r *http.Request, name string, replace bool) {
	body, err := readObject(r, false, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	sp, err := readSpec(body, name)
	if err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	a.mu.Lock()
	old := a.state(name).consumer
	a.mu.Unlock()
	switch {
	case old != nil && old.configured:
		fail(w, errConflict(10256, "The consumer of queue "+name+" is configured in duilie's configuration; change it there"))
		return
	case old != nil && !replace:
		fail(w, errConflict(11004, "Queue "+name+" already has a consumer: a queue has one consumer at most"))
		return
	case sp.kind == workerType && a.cfg.Programs == nil:
		fail(w, errInvalid("this serve runs no program to be a worker consumer (set app.command)"))
		return
	}
	if old != nil {
		if err := a.stopConsumer(ctx, name, old); err != nil {
			fail(w, err)
			return
		}
	}
	cs := &consumerState{kind: sp.kind, created: time.Now(), script: sp.script, worker: sp.worker}
	if old != nil {
		cs.created = old.created
	}
	switch sp.kind {
	case workerType:
		if err := a.cfg.Programs.StartConsumer(sp.worker); err != nil {
			fail(w, errInvalid("the worker consumer cannot start: "+err.Error()))
			return
		}
	case pullType:
		p, err := a.newPuller(ctx, sp.pull)
		if err != nil {
			fail(w, a.internal("consume "+name, err))
			return
		}
		cs.pull = p
	}
	a.mu.Lock()
	a.state(name).consumer = cs
	out := a.consumerObject(name, cs)
	a.mu.Unlock()
	ok(w, out)
}

func (a *API) deleteConsumer(w http.ResponseWriter, r *http.Request, name string) {
	cs, err := a.theConsumer(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	if cs.configured {
		fail(w, errConflict(10256, "The consumer of queue "+name+" is configured in duilie's configuration; remove it there"))
		return
	}
	if err := a.stopConsumer(r.Context(), name, cs); err != nil {
		fail(w, err)
		return
	}
	ok(w, nil)
}

// stopConsumer stops a queue's consumer and forgets it: a worker's running events finish and
// settle; an http_pull consumer's leased messages become deliverable again.
func (a *API) stopConsumer(ctx context.Context, name string, cs *consumerState) error {
	switch cs.kind {
	case workerType:
		if err := a.cfg.Programs.StopConsumer(ctx, name); err != nil {
			return a.internal("stop the consumer of "+name, err)
		}
	case pullType:
		cs.pull.release(ctx)
	}
	a.mu.Lock()
	if st := a.state(name); st.consumer == cs {
		st.consumer = nil
	}
	a.mu.Unlock()
	return nil
}
