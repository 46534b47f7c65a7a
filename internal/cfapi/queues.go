package cfapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/duilie/duilie/platform"
)

// queueState is what the API keeps of a queue beyond the platform's messages: its times, its
// delivery delay, its consumer and its last purge. It lives in the serving process.
type queueState struct {
	created, modified time.Time
	delay             int // delivery_delay, seconds
	consumer          *consumerState
	purged            time.Time
}

// state returns the queue's state, making it for a queue the API has not seen yet (one that
// was there when the serve started, or that a program's send created). a.mu must be held, or
// the API not yet serving.
func (a *API) state(name string) *queueState {
	q, ok := a.queues[name]
	if !ok {
		q = &queueState{created: a.started, modified: a.started}
		a.queues[name] = q
	}
	return q
}

// queueJSON is Cloudflare's queue object.
type queueJSON struct {
	QueueID             string         `json:"queue_id"`
	QueueName           string         `json:"queue_name"`
	CreatedOn           string         `json:"created_on"`
	ModifiedOn          string         `json:"modified_on"`
	Producers           []producerJSON `json:"producers"`
	ProducersTotalCount int            `json:"producers_total_count"`
	Consumers           []consumerJSON `json:"consumers"`
	ConsumersTotalCount int            `json:"consumers_total_count"`
	Settings            settingsJSON   `json:"settings"`
}

type producerJSON struct {
	Type   string `json:"type"`
	Script string `json:"script"`
}

type settingsJSON struct {
	DeliveryDelay          int   `json:"delivery_delay"`
	DeliveryPaused         bool  `json:"delivery_paused"`
	MessageRetentionPeriod int64 `json:"message_retention_period"`
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// queueObject describes a queue whose stats are s.
func (a *API) queueObject(s platform.QueueStats) queueJSON {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state(s.Queue)
	out := queueJSON{
		QueueID: QueueID(s.Queue), QueueName: s.Queue,
		CreatedOn: stamp(st.created), ModifiedOn: stamp(st.modified),
		Producers: []producerJSON{}, Consumers: []consumerJSON{},
		Settings: settingsJSON{DeliveryDelay: st.delay, DeliveryPaused: s.Paused, MessageRetentionPeriod: int64(a.cfg.Retention / time.Second)},
	}
	if len(a.cfg.Producers[s.Queue]) > 0 {
		out.Producers = append(out.Producers, producerJSON{Type: "worker", Script: a.cfg.Script})
	}
	if st.consumer != nil {
		out.Consumers = append(out.Consumers, a.consumerObject(s.Queue, st.consumer))
	}
	out.ProducersTotalCount, out.ConsumersTotalCount = len(out.Producers), len(out.Consumers)
	return out
}

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) {
	all, err := a.queueNames(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	// One page holds every queue unless the client asks for pages: the SDKs read one page.
	perPage, page := len(all), 1
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			fail(w, errInvalid("per_page must be 1–1000"))
			return
		}
		perPage = n
	}
	if v := r.URL.Query().Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, errInvalid("page must be a positive integer"))
			return
		}
		page = n
	}
	pages := 1
	if perPage > 0 {
		pages = max(1, (len(all)+perPage-1)/perPage)
	}
	from := min((page-1)*perPage, len(all))
	to := min(from+perPage, len(all))
	out := make([]queueJSON, 0, to-from)
	for _, s := range all[from:to] {
		out = append(out, a.queueObject(s))
	}
	okPage(w, out, resultInfo{Page: page, PerPage: max(perPage, 1), Count: len(out), TotalCount: len(all), TotalPages: pages})
}

func (a *API) createQueue(w http.ResponseWriter, r *http.Request) {
	body, err := readObject(r, false, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	name, present, err := body.str("queue_name")
	switch {
	case err != nil:
		fail(w, err)
		return
	case !present:
		fail(w, errInvalid("queue_name is required"))
		return
	}
	if err := platform.CheckQueueName(name); err != nil {
		fail(w, errInvalid(err.Error()))
		return
	}
	if _, err := a.stat(r.Context(), name); err == nil {
		fail(w, errConflict(11009, "Queue name is already taken: "+name))
		return
	} else if !errors.Is(err, errQueueNotFound) {
		fail(w, err)
		return
	}
	if _, err := a.cfg.Platform.Queue(r.Context(), name); err != nil {
		fail(w, a.internal("create queue "+name, err))
		return
	}
	now := time.Now()
	a.mu.Lock()
	a.queues[name] = &queueState{created: now, modified: now}
	a.mu.Unlock()
	a.answerQueue(w, r.Context(), name)
}

// answerQueue answers with the queue's object.
func (a *API) answerQueue(w http.ResponseWriter, ctx context.Context, name string) {
	s, err := a.stat(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	ok(w, a.queueObject(s))
}

func (a *API) getQueue(w http.ResponseWriter, r *http.Request, name string) {
	a.answerQueue(w, r.Context(), name)
}

// updateQueue is PUT: the whole configuration, settings left out taking their defaults.
func (a *API) updateQueue(w http.ResponseWriter, r *http.Request, name string) {
	a.changeQueue(w, r, name, true)
}

// editQueue is PATCH: only the settings given change.
func (a *API) editQueue(w http.ResponseWriter, r *http.Request, name string) {
	a.changeQueue(w, r, name, false)
}

func (a *API) changeQueue(w http.ResponseWriter, r *http.Request, name string, replace bool) {
	body, err := readObject(r, !replace, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	if n, present, err := body.str("queue_name"); err != nil {
		fail(w, err)
		return
	} else if present && n != name {
		fail(w, errInvalid("duilie cannot rename a queue (queue_name "+strconv.Quote(n)+"); create a queue of that name instead"))
		return
	}
	settings, _, err := body.sub("settings")
	if err != nil {
		fail(w, err)
		return
	}
	delay, hasDelay, err := settings.integer("delivery_delay", 0, MaxDelaySeconds, errInvalid)
	if err != nil {
		fail(w, err)
		return
	}
	paused, hasPaused, err := settings.boolean("delivery_paused")
	if err != nil {
		fail(w, err)
		return
	}
	retention := int64(a.cfg.Retention / time.Second)
	if v, present, err := settings.integer("message_retention_period", 60, 1209600, errInvalid); err != nil {
		fail(w, err)
		return
	} else if present && v != retention {
		fail(w, errInvalid("settings.message_retention_period: duilie keeps every queue's unconsumed messages for "+
			strconv.FormatInt(retention, 10)+" s, the platform's retention ([platform] retention); it cannot be set per queue"))
		return
	}
	if replace {
		hasDelay, hasPaused = true, true // PUT: what is left out is reset
	}
	ctx := r.Context()
	if hasPaused {
		op := a.op.Resume
		if paused {
			op = a.op.Pause
		}
		if err := op(ctx, name); err != nil {
			fail(w, a.internal("pause or resume "+name, err))
			return
		}
	}
	a.mu.Lock()
	st := a.state(name)
	if hasDelay {
		st.delay = int(delay)
	}
	st.modified = time.Now()
	a.mu.Unlock()
	s, err := a.stat(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	if hasPaused {
		s.Paused = paused // a resume takes effect within a moment (jetstream.Platform.Resume)
	}
	ok(w, a.queueObject(s))
}

func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request, name string) {
	if slices.Contains(a.cfg.Configured, name) {
		fail(w, errConflict(10254, "Queue "+name+" is named in duilie's configuration; remove it there instead"))
		return
	}
	ctx := r.Context()
	a.mu.Lock()
	st := a.state(name)
	cs := st.consumer
	a.mu.Unlock()
	if cs != nil {
		if err := a.stopConsumer(ctx, name, cs); err != nil {
			fail(w, err)
			return
		}
	}
	if err := a.op.DeleteQueue(ctx, name); err != nil && !errors.Is(err, platform.ErrNoQueue) {
		fail(w, a.internal("delete queue "+name, err))
		return
	}
	a.mu.Lock()
	delete(a.queues, name)
	a.mu.Unlock()
	ok(w, nil)
}

// purgeJSON is Cloudflare's purge status.
type purgeJSON struct {
	StartedAt string `json:"started_at"`
	Completed string `json:"completed"`
}

func (a *API) purge(w http.ResponseWriter, r *http.Request, name string) {
	body, err := readObject(r, true, errInvalid("the body is too large"))
	if err != nil {
		fail(w, err)
		return
	}
	sure, _, err := body.boolean("delete_messages_permanently")
	if err != nil {
		fail(w, err)
		return
	}
	if !sure {
		fail(w, errInvalid("delete_messages_permanently must be true: a purge deletes every message for good"))
		return
	}
	ctx := r.Context()
	a.mu.Lock()
	st := a.state(name)
	st.purged = time.Now()
	var pl *puller
	if st.consumer != nil {
		pl = st.consumer.pull
	}
	a.mu.Unlock()
	if _, err := a.op.Purge(ctx, name); err != nil {
		fail(w, a.internal("purge "+name, err))
		return
	}
	if pl != nil {
		pl.forgetAll(ctx) // leased messages are gone too: an expiry must not bring them back
	}
	a.answerQueue(w, ctx, name)
}

func (a *API) purgeStatus(w http.ResponseWriter, r *http.Request, name string) {
	a.mu.Lock()
	purged := a.state(name).purged
	a.mu.Unlock()
	out := purgeJSON{Completed: "true"}
	if !purged.IsZero() {
		out.StartedAt = stamp(purged)
	}
	ok(w, out)
}
