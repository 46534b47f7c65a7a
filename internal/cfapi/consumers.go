package cfapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/duilie/duilie/server"
)

// Consumer types.
const (
	workerType = "worker"    // the serve's program, once per batch
	pullType   = "http_pull" // clients pull over this API
)

// consumerJSON is Cloudflare's consumer object; settings are those of its type. A worker
// consumer names its script twice: script_name, as the API documents it, and script, which
// wrangler reads.
type consumerJSON struct {
	ConsumerID      string `json:"consumer_id"`
	CreatedOn       string `json:"created_on"`
	DeadLetterQueue string `json:"dead_letter_queue"`
	QueueName       string `json:"queue_name"`
	Script          string `json:"script,omitempty"`
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

// consumer is the queue's running consumer, if it has one.
func (a *API) consumer(queue string) (server.ConsumerInfo, bool) {
	for _, ci := range a.c.Consumers() {
		if ci.Queue == queue {
			return ci, true
		}
	}
	return server.ConsumerInfo{}, false
}

// consumerID is the consumer_id of a queue's consumer: one the configuration names has the
// same id always; one created over the API a fresh one, kept while it runs.
func (a *API) consumerID(ci server.ConsumerInfo) string {
	if ci.Configured {
		sum := sha256.Sum256([]byte("duilie consumer " + ci.Queue))
		return hex.EncodeToString(sum[:16])
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state(ci.Queue)
	if st.consumerID == "" || !st.consumerSince.Equal(ci.Started) {
		var b [16]byte
		_, _ = rand.Read(b[:])
		st.consumerID, st.consumerSince = hex.EncodeToString(b[:]), ci.Started
	}
	return st.consumerID
}

func (a *API) consumerObject(ci server.ConsumerInfo) consumerJSON {
	out := consumerJSON{ConsumerID: a.consumerID(ci), CreatedOn: stamp(ci.Started), QueueName: ci.Queue,
		DeadLetterQueue: ci.DeadLetterQueue()}
	if !ci.Pull {
		w := ci.Consumer.WithDefaults()
		script := a.o.Script
		a.mu.Lock()
		if st := a.state(ci.Queue); !ci.Configured && st.consumerScript != "" {
			script = st.consumerScript
		}
		a.mu.Unlock()
		out.Type, out.Script, out.ScriptName = workerType, script, script
		out.Settings = workerSettingsJSON{BatchSize: w.MaxBatchSize, MaxConcurrency: w.MaxConcurrency, MaxRetries: w.MaxRetries,
			MaxWaitTimeMs: w.MaxBatchTimeout.Milliseconds(), RetryDelay: int64(w.RetryDelay / time.Second)}
		return out
	}
	c := ci.PullConsumer.WithDefaults()
	out.Type = pullType
	out.Settings = pullSettingsJSON{BatchSize: c.MaxBatchSize, MaxRetries: c.MaxRetries,
		RetryDelay: int64(c.RetryDelay / time.Second), VisibilityTimeoutMs: c.VisibilityTimeout.Milliseconds()}
	return out
}

func (a *API) listConsumers(w http.ResponseWriter, r *http.Request, name string) {
	out := []consumerJSON{}
	if ci, ok := a.consumer(name); ok {
		out = append(out, a.consumerObject(ci))
	}
	okPage(w, out, resultInfo{Page: 1, PerPage: max(len(out), 1), Count: len(out), TotalCount: len(out), TotalPages: 1})
}

var errNoConsumer = &apiError{http.StatusNotFound, 11001, "Consumer does not exist"}

// theConsumer checks that the path's consumer id is the queue's consumer.
func (a *API) theConsumer(r *http.Request, name string) (server.ConsumerInfo, error) {
	id := r.PathValue("consumer")
	if !isID(id) {
		return server.ConsumerInfo{}, &apiError{http.StatusBadRequest, 10107, "The consumer ID in the request URL is not a valid consumer identifier"}
	}
	ci, ok := a.consumer(name)
	if !ok || a.consumerID(ci) != id {
		return server.ConsumerInfo{}, errNoConsumer
	}
	return ci, nil
}

func (a *API) getConsumer(w http.ResponseWriter, r *http.Request, name string) {
	ci, err := a.theConsumer(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, a.consumerObject(ci))
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
	pull   bool
	script string // a worker's
	worker server.ConsumerConfig
	puller server.PullConsumer
}

// readSpec reads a consumer request, {type, script_name?|script?, dead_letter_queue?,
// settings?}, into the consumer's settings, which their own Validate checks: the ranges are
// the same as in duilie.toml and in Go.
func readSpec(body object, queue string) (spec, error) {
	var s spec
	kind, present, err := body.str("type")
	if err != nil {
		return s, err
	}
	if !present || kind != workerType && kind != pullType {
		return s, errInvalid(`type must be "worker" or "http_pull"`)
	}
	s.pull = kind == pullType
	dlq, _, err := body.str("dead_letter_queue")
	if err != nil {
		return s, err
	}
	settings, _, err := body.sub("settings")
	if err != nil {
		return s, err
	}
	// Each setting given replaces its default; the struct's Validate judges the value. A
	// value beyond any int (or not an integer) is refused here.
	num := func(key string, set func(int64)) error {
		v, present, err := settings.integer(key, -1<<53, 1<<53, errInvalid)
		if present && err == nil {
			set(v)
		}
		return err
	}
	var errs []error
	if !s.pull {
		script, present, err := body.str("script_name")
		if err == nil && !present {
			script, present, err = body.str("script") // wrangler's name for it
		}
		if err == nil && (!present || script == "") {
			err = errInvalid("script_name is required for a worker consumer (duilie runs its own program, whatever the name)")
		}
		if err != nil {
			return s, err
		}
		s.script = script
		cc := server.DefaultConsumerConfig(queue)
		cc.DeadLetterQueue = dlq
		errs = append(errs,
			num("batch_size", func(v int64) { cc.MaxBatchSize = int(v) }),
			num("max_concurrency", func(v int64) { cc.MaxConcurrency = int(v) }),
			num("max_retries", func(v int64) { cc.MaxRetries = retries(v) }),
			num("max_wait_time_ms", func(v int64) {
				if cc.MaxBatchTimeout = time.Duration(v) * time.Millisecond; v == 0 {
					cc.MaxBatchTimeout = server.NoBatchTimeout
				}
			}),
			num("retry_delay", func(v int64) { cc.RetryDelay = time.Duration(v) * time.Second }))
		if err := errors.Join(errs...); err != nil {
			return s, firstAPIError(errs)
		}
		s.worker = cc
		return s, settingsErr(cc.Validate(), workerKeys)
	}
	pc := server.DefaultPullConsumer(queue)
	pc.DeadLetterQueue = dlq
	errs = append(errs,
		num("batch_size", func(v int64) { pc.MaxBatchSize = int(v) }),
		num("max_retries", func(v int64) { pc.MaxRetries = retries(v) }),
		num("retry_delay", func(v int64) { pc.RetryDelay = time.Duration(v) * time.Second }),
		num("visibility_timeout_ms", func(v int64) { pc.VisibilityTimeout = time.Duration(v) * time.Millisecond }))
	if err := errors.Join(errs...); err != nil {
		return s, firstAPIError(errs)
	}
	s.puller = pc
	return s, settingsErr(pc.Validate(), pullKeys)
}

// retries is a request's max_retries as the settings hold it: 0 is none, not the default.
func retries(v int64) int {
	if v == 0 {
		return server.NoRetries
	}
	return int(v)
}

// The request's key of each setting, by the settings struct's field.
var (
	workerKeys = map[string]string{"Queue": "queue_name", "DeadLetterQueue": "dead_letter_queue", "MaxBatchSize": "settings.batch_size",
		"MaxConcurrency": "settings.max_concurrency", "MaxRetries": "settings.max_retries",
		"MaxBatchTimeout": "settings.max_wait_time_ms", "RetryDelay": "settings.retry_delay"}
	pullKeys = map[string]string{"Queue": "queue_name", "DeadLetterQueue": "dead_letter_queue", "MaxBatchSize": "settings.batch_size",
		"MaxRetries": "settings.max_retries", "RetryDelay": "settings.retry_delay",
		"VisibilityTimeout": "settings.visibility_timeout_ms"}
)

// settingsErr is Cloudflare's validation error for the first mistake Validate found, naming the
// request's key and the setting's rule.
func settingsErr(err error, keys map[string]string) error {
	if err == nil {
		return nil
	}
	if fe := server.FieldErrors(err); len(fe) > 0 {
		key := keys[fe[0].Field]
		if key == "" {
			key = fe[0].Field
		}
		return errInvalid(key + ": " + fe[0].Rule)
	}
	return errInvalid(err.Error())
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
	old, had := a.consumer(name)
	switch {
	case had && old.Configured:
		fail(w, errConflict(10256, "The consumer of queue "+name+" is configured in duilie's configuration; change it there"))
		return
	case had && !replace:
		fail(w, errConflict(11004, "Queue "+name+" already has a consumer: a queue has one consumer at most"))
		return
	}
	if had {
		if err := a.c.StopConsumer(ctx, name); err != nil {
			fail(w, a.clientErr("stop the consumer of "+name, err))
			return
		}
	}
	if sp.pull {
		err = a.c.StartPullConsumer(ctx, sp.puller)
	} else {
		err = a.c.StartConsumer(sp.worker)
	}
	if err != nil {
		fail(w, a.clientErr("start the consumer of "+name, err))
		return
	}
	a.mu.Lock()
	a.state(name).consumerScript = sp.script
	a.mu.Unlock()
	ci, _ := a.consumer(name)
	ok(w, a.consumerObject(ci))
}

func (a *API) deleteConsumer(w http.ResponseWriter, r *http.Request, name string) {
	ci, err := a.theConsumer(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	if ci.Configured {
		fail(w, errConflict(10256, "The consumer of queue "+name+" is configured in duilie's configuration; remove it there"))
		return
	}
	if err := a.c.StopConsumer(r.Context(), name); err != nil {
		fail(w, a.clientErr("stop the consumer of "+name, err))
		return
	}
	ok(w, nil)
}
