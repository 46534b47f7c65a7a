package cfapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/duilie/duilie/server"
)

// queueState is what the API keeps of a queue beyond what the server knows of it: its times
// and its last purge, as Cloudflare reports them. It lives in the serving process.
type queueState struct {
	created, modified time.Time
	purged            time.Time
	// consumerID is the id given to the consumer started over the API at consumerSince, and
	// consumerScript the script a worker consumer's request named.
	consumerID     string
	consumerSince  time.Time
	consumerScript string
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

// queueObject describes a queue whose counts are q.
func (a *API) queueObject(q server.QueueInfo) queueJSON {
	a.mu.Lock()
	st := a.state(q.Queue)
	out := queueJSON{
		QueueID: QueueID(q.Queue), QueueName: q.Queue,
		CreatedOn: stamp(st.created), ModifiedOn: stamp(st.modified),
		Producers: []producerJSON{}, Consumers: []consumerJSON{},
		Settings: settingsJSON{DeliveryDelay: a.c.DeliveryDelay(q.Queue), DeliveryPaused: q.Paused,
			MessageRetentionPeriod: int64(a.c.Retention() / time.Second)},
	}
	a.mu.Unlock()
	if len(q.Bindings) > 0 {
		out.Producers = append(out.Producers, producerJSON{Type: "worker", Script: a.o.Script})
	}
	if ci, ok := a.consumer(q.Queue); ok {
		out.Consumers = append(out.Consumers, a.consumerObject(ci))
	}
	out.ProducersTotalCount, out.ConsumersTotalCount = len(out.Producers), len(out.Consumers)
	return out
}

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) {
	all, err := a.queueInfos(r.Context())
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
	if _, err := a.stat(r.Context(), name); err == nil {
		fail(w, errConflict(11009, "Queue name is already taken: "+name))
		return
	} else if !errors.Is(err, errQueueNotFound) {
		fail(w, err)
		return
	}
	if err := a.c.CreateQueue(r.Context(), name); err != nil {
		fail(w, a.clientErr("create queue "+name, err))
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
	retention := int64(a.c.Retention() / time.Second)
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
		op := a.c.Resume
		if paused {
			op = a.c.Pause
		}
		if err := op(ctx, name); err != nil {
			fail(w, a.clientErr("pause or resume "+name, err))
			return
		}
	}
	if hasDelay {
		if err := a.c.SetDeliveryDelay(name, int(delay)); err != nil {
			fail(w, a.clientErr("set the delivery delay of "+name, err))
			return
		}
	}
	a.mu.Lock()
	a.state(name).modified = time.Now()
	a.mu.Unlock()
	a.answerQueue(w, ctx, name)
}

func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request, name string) {
	err := a.c.DeleteQueue(r.Context(), name)
	switch {
	case errors.Is(err, server.ErrConfigured):
		fail(w, errConflict(10254, "Queue "+name+" is named in duilie's configuration; remove it there instead"))
		return
	case err != nil && !errors.Is(err, server.ErrNoQueue):
		fail(w, a.clientErr("delete queue "+name, err))
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
	a.state(name).purged = time.Now()
	a.mu.Unlock()
	if _, err := a.c.Purge(ctx, name); err != nil {
		fail(w, a.clientErr("purge "+name, err))
		return
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
