package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// The operator operations (platform.Operator). A queue's messages are read straight from its
// stream, a batch at a time, with JetStream's direct get (next message by subject from a
// sequence), so no listing holds more than a page in memory and none disturbs the consumer. A
// stream message's state follows from its subject and the durable consumer's state:
//   - a schedule (duilie.<q>.s.<unique>) or a held message (duilie.<q>.h.<bucket> or
//     duilie.<q>.H.<bucket>, hold.go) is
//     delayed: a delayed send or retry, due at Duilie-Due;
//   - a message on the ready subject that the consumer has delivered (its sequence is at most
//     the consumer's last delivered one; an acked message is gone from a work-queue stream) is
//     in flight;
//   - any other message on the ready subject is ready.
// These rules live in classify and the listing functions below (scan, listing), which are all
// that depend on the stream layout.

var _ platform.Operator = (*Platform)(nil)

// scanBatch is how many messages one direct get asks for, and scanBytes the most bytes it
// brings: a page, never a whole queue.
const (
	scanBatch = 256
	scanBytes = 4 << 20
)

// storedMsg is one stream message as a direct get returns it.
type storedMsg struct {
	seq     uint64
	subject string
	msg     *nats.Msg
}

// storedAt is when the stream stored m (its direct get's Nats-Time-Stamp).
func (m storedMsg) storedAt() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, m.msg.Header.Get(jetstream.TimeStampHeaer))
}

// scan reads the stream's messages whose subject matches filter, from sequence from on, up to
// n of them (and at most scanBytes), oldest first. It returns fewer than n only at the end of
// the stream.
func (p *Platform) scan(ctx context.Context, queue, filter string, from uint64, n int) ([]storedMsg, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	req, _ := json.Marshal(map[string]any{"seq": max(from, 1), "next_by_subj": filter, "batch": n, "max_bytes": scanBytes})
	if err := p.nc.PublishRequest("$JS.API.DIRECT.GET."+streamName(queue), inbox, req); err != nil {
		return nil, err
	}
	var out []storedMsg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				return nil, fmt.Errorf("queue %s: %w", queue, platform.ErrNoQueue)
			}
			return nil, fmt.Errorf("read queue %s: %w", queue, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204", "404": // the end of the batch, or nothing (more) to read
				return out, nil
			case "503":
				return nil, fmt.Errorf("queue %s: %w", queue, platform.ErrNoQueue)
			}
			return nil, fmt.Errorf("read queue %s: %s %s", queue, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read queue %s: a message without its sequence", queue)
		}
		out = append(out, storedMsg{seq: seq, subject: m.Header.Get(jetstream.SubjectHeader), msg: m})
	}
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, requestTimeout)
}

// listing is what the state of a queue's stream messages follows from.
type listing struct {
	queue     string
	delivered uint64 // the consumer's last delivered stream sequence; 0 when it has none
	flights   map[uint64]flight
}

// listing reads the queue's consumer state. It fails with ErrNoQueue when the stream is gone.
func (p *Platform) listing(ctx context.Context, queue string) (listing, error) {
	l := listing{queue: queue}
	// One request for the usual case, a queue that has its consumer; the stream is looked up
	// only when it has none.
	ci, err := p.js.Consumer(ctx, streamName(queue), consumerName)
	pending := 0
	switch {
	case err == nil:
		l.delivered = ci.CachedInfo().Delivered.Stream
		pending = ci.CachedInfo().NumAckPending
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if _, err := p.js.Stream(ctx, streamName(queue)); err != nil {
			return l, p.queueErr(queue, err)
		}
	default:
		return l, p.queueErr(queue, err)
	}
	l.flights = p.flights(queue)
	if pending > len(l.flights) {
		// Other processes (the serve a command is attached to, other serves of a cluster)
		// hold deliveries: ask them.
		p.gatherFlights(ctx, queue, l.flights)
	}
	return l, nil
}

// flightsSubject is where the processes consuming a queue answer what they have in flight. It
// is outside duilie's stream subjects, so no stream stores the question.
func flightsSubject(queue string) string { return "_DUILIE.flights." + queue }

// flightsWait is how long a question about deliveries in flight waits for more answers after
// the first; flightsTimeout, for any answer at all.
const (
	flightsWait    = 50 * time.Millisecond
	flightsTimeout = 500 * time.Millisecond
)

// answerFlights answers a question about this consumer's deliveries in flight:
// {"<stream sequence>":[<delivery time, Unix ms>,<JetStream's delivery count>],…}.
func (c *consumer) answerFlights(m *nats.Msg) {
	c.fmu.Lock()
	out := make(map[string][2]int64, len(c.flying))
	for seq, f := range c.flying {
		out[strconv.FormatUint(seq, 10)] = [2]int64{f.at.UnixMilli(), int64(f.delivered)}
	}
	c.fmu.Unlock()
	b, _ := json.Marshal(out)
	_ = m.Respond(b)
}

// gatherFlights asks every process consuming the queue what it has in flight, and adds the
// answers to flights. It is best effort: what no process answers within flightsTimeout stays
// unknown (a message in flight is then listed without its delivery time).
func (p *Platform) gatherFlights(ctx context.Context, queue string, flights map[uint64]flight) {
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		return
	}
	defer sub.Unsubscribe()
	if err := p.nc.PublishRequest(flightsSubject(queue), inbox, nil); err != nil {
		return
	}
	deadline := time.Now().Add(flightsTimeout)
	for {
		wait, cancel := context.WithDeadline(ctx, deadline)
		m, err := sub.NextMsgWithContext(wait)
		cancel()
		if err != nil || m.Header.Get("Status") == "503" { // the end, or no process consumes the queue
			return
		}
		var answer map[string][2]int64
		if json.Unmarshal(m.Data, &answer) == nil {
			for k, v := range answer {
				if seq, err := strconv.ParseUint(k, 10, 64); err == nil {
					if _, mine := flights[seq]; !mine {
						flights[seq] = flight{at: time.UnixMilli(v[0]), delivered: int(v[1])}
					}
				}
			}
		}
		// More processes may answer: wait a moment for them.
		deadline = time.Now().Add(flightsWait)
	}
}

func (p *Platform) queueErr(queue string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("jetstream: queue %s: %w", queue, platform.ErrNoQueue)
	}
	return fmt.Errorf("jetstream: queue %s: %w", queue, err)
}

// classify returns the state of a stream message.
func (l listing) classify(m storedMsg) platform.State {
	switch {
	case m.subject != readySubject(l.queue):
		return platform.Delayed
	case m.seq <= l.delivered:
		return platform.InFlight
	}
	return platform.Ready
}

// stored turns a stream message into the operator's view of it.
func (l listing) stored(m storedMsg) platform.StoredMessage {
	h := m.msg.Header
	s := platform.StoredMessage{State: l.classify(m)}
	s.Body = m.msg.Data
	s.ID = messageID(h, m.seq)
	s.ContentType = contentTypeOf(h)
	var err error
	if s.Timestamp, err = strconv.ParseInt(h.Get(hdrTime), 10, 64); err != nil {
		if t, err := m.storedAt(); err == nil {
			s.Timestamp = t.UnixMilli()
		}
	}
	base, _ := strconv.Atoi(h.Get(hdrAttempts))
	s.Attempts = max(base, 0)
	switch s.State {
	case platform.Delayed:
		s.Due, _ = strconv.ParseInt(h.Get(hdrDue), 10, 64)
	case platform.InFlight:
		if f, ok := l.flights[m.seq]; ok {
			s.Attempts += f.delivered
			s.Delivered = f.at.UnixMilli()
		} else {
			s.Attempts++ // delivered at least once; by another process, which knows more
		}
	}
	return s
}

// filterOf is the subject filter of a state's messages.
func filterOf(queue string, state platform.State) string {
	switch state {
	case platform.Ready, platform.InFlight:
		return readySubject(queue)
	case platform.Delayed: // schedules (.s.<unique>) and held messages (.h.<bucket>, .H.<bucket>)
		return subjectPrefix + queue + ".*.*"
	}
	return subjectPrefix + queue + ".>"
}

// Browse lists a page of the queue's messages, oldest first. A cursor is the stream sequence
// of the last message of the page before.
func (p *Platform) Browse(ctx context.Context, queue string, opts platform.BrowseOptions) (platform.MessagePage, error) {
	var page platform.MessagePage
	var from uint64 = 1
	if opts.Cursor != "" {
		after, err := strconv.ParseUint(opts.Cursor, 10, 64)
		if err != nil {
			return page, fmt.Errorf("jetstream: cursor %q: %w", opts.Cursor, platform.ErrCursor)
		}
		from = after + 1
	}
	if opts.State != "" {
		if _, err := platform.ParseState(string(opts.State)); err != nil {
			return page, fmt.Errorf("jetstream: %w", err)
		}
	}
	l, err := p.listing(ctx, queue)
	if err != nil {
		return page, err
	}
	if opts.State == platform.Ready {
		from = max(from, l.delivered+1)
	}
	limit := opts.PageLimit()
	var last uint64
	err = p.each(ctx, l, filterOf(queue, opts.State), from, limit+1, func(m storedMsg) bool {
		if opts.State == platform.InFlight && m.seq > l.delivered {
			return false
		}
		if opts.State != "" && l.classify(m) != opts.State {
			return true
		}
		if len(page.Messages) == limit {
			page.Next = strconv.FormatUint(last, 10)
			return false
		}
		page.Messages = append(page.Messages, l.stored(m))
		last = m.seq
		return true
	})
	return page, err
}

// each calls fn on the queue's stream messages matching filter from sequence from on, oldest
// first, a batch at a time, until fn returns false or the stream ends. The first batch asks for
// first messages (a page needs no more when every message matches), the others for scanBatch.
func (p *Platform) each(ctx context.Context, l listing, filter string, from uint64, first int, fn func(storedMsg) bool) error {
	n := min(max(first, 1), scanBatch)
	for {
		ms, err := p.scan(ctx, l.queue, filter, from, n)
		n = scanBatch
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		for _, m := range ms {
			if m.subject == envelopeSubject(l.queue) { // a batch, whose messages are listed once stored
				from = m.seq + 1
				continue
			}
			if !fn(m) {
				return nil
			}
			from = m.seq + 1
		}
		if len(ms) == 0 {
			return nil
		}
	}
}

// find returns the stream message of the message with this id.
func (p *Platform) find(ctx context.Context, l listing, id string) (storedMsg, error) {
	var found storedMsg
	ok := false
	err := p.each(ctx, l, filterOf(l.queue, ""), 1, scanBatch, func(m storedMsg) bool {
		if messageID(m.msg.Header, m.seq) == id {
			found, ok = m, true
			return false
		}
		return true
	})
	if err == nil && !ok {
		err = fmt.Errorf("jetstream: message %s in queue %s: %w", id, l.queue, platform.ErrNotFound)
	}
	return found, err
}

// Get returns the message with this id. It reads the queue from its oldest message until it
// finds it.
func (p *Platform) Get(ctx context.Context, queue, id string) (platform.StoredMessage, error) {
	l, err := p.listing(ctx, queue)
	if err != nil {
		return platform.StoredMessage{}, err
	}
	m, err := p.find(ctx, l, id)
	if err != nil {
		return platform.StoredMessage{}, err
	}
	return l.stored(m), nil
}

// Delete removes the message with this id, in whatever state it is.
func (p *Platform) Delete(ctx context.Context, queue, id string) error {
	// A delayed message that fires meanwhile moves to a new sequence: look again.
	for range 3 {
		l, err := p.listing(ctx, queue)
		if err != nil {
			return err
		}
		m, err := p.find(ctx, l, id)
		if err != nil {
			return err
		}
		err = p.deleteSeq(ctx, queue, m.seq)
		if err == nil {
			p.tellGone(ctx, queue, goneNote{Seq: m.seq}) // consumers holding it leave it (gone.go)
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
	}
	return fmt.Errorf("jetstream: message %s in queue %s kept moving while it was deleted; try again", id, queue)
}

func (p *Platform) deleteSeq(ctx context.Context, queue string, seq uint64) error {
	st, err := p.js.Stream(ctx, streamName(queue))
	if err != nil {
		return p.queueErr(queue, err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		// A message deleted meanwhile (by a concurrent move, say) is refused with the API's
		// "no message found", which nats.go passes on as text only.
		if errors.Is(err, jetstream.ErrMsgNotFound) ||
			errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && strings.Contains(err.Error(), "no message found") {
			return jetstream.ErrMsgNotFound
		}
		return fmt.Errorf("jetstream: delete message %d of queue %s: %w", seq, queue, err)
	}
	return nil
}

// Purge removes every message of the queue: its whole stream.
func (p *Platform) Purge(ctx context.Context, queue string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := p.js.Stream(ctx, streamName(queue)); err != nil {
		return 0, p.queueErr(queue, err)
	}
	r, err := p.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+streamName(queue), nil)
	if err != nil {
		return 0, fmt.Errorf("jetstream: purge queue %s: %w", queue, err)
	}
	var resp struct {
		Purged uint64 `json:"purged"`
		Error  *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return 0, fmt.Errorf("jetstream: purge queue %s: unreadable reply %q", queue, r.Data)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("jetstream: purge queue %s: %s", queue, resp.Error.Description)
	}
	// Consumers holding purged messages leave them (gone.go): everything below the stream's
	// first sequence now.
	if st, err := p.js.Stream(ctx, streamName(queue)); err == nil && st.CachedInfo().State.FirstSeq > 0 {
		p.tellGone(ctx, queue, goneNote{Floor: st.CachedInfo().State.FirstSeq - 1})
	} else if err != nil {
		return int64(resp.Purged), fmt.Errorf("jetstream: purge queue %s: telling its consumers: %w", queue, err)
	}
	return int64(resp.Purged), nil
}

// Move moves ready and delayed messages, oldest first, to the queue to: each copy is published
// (deduplicated by the original's sequence, so a move repeated after a crash stores it once),
// and the original is deleted once the copy is stored.
func (p *Platform) Move(ctx context.Context, from, to string, opts platform.MoveOptions) (int, error) {
	if err := platform.CheckQueueName(to); err != nil {
		return 0, fmt.Errorf("jetstream: %w", err)
	}
	if from == to {
		return 0, errors.New("jetstream: a queue's messages cannot be moved to the queue itself")
	}
	l, err := p.listing(ctx, from)
	if err != nil {
		return 0, err
	}
	dst, err := p.queue(ctx, to)
	if err != nil {
		return 0, err
	}
	moved := 0
	var batch []storedMsg
	flush := func() error {
		n, err := p.moveBatch(ctx, from, dst, batch, opts.Delay)
		moved += n
		batch = batch[:0]
		return err
	}
	var ferr error
	err = p.each(ctx, l, filterOf(from, ""), 1, scanBatch, func(m storedMsg) bool {
		if opts.Limit > 0 && moved+len(batch) >= opts.Limit {
			return false
		}
		if l.classify(m) == platform.InFlight || len(opts.IDs) > 0 && !slices.Contains(opts.IDs, messageID(m.msg.Header, m.seq)) {
			return true
		}
		batch = append(batch, m)
		if len(batch) == scanBatch {
			ferr = flush()
		}
		return ferr == nil
	})
	if err == nil && ferr == nil && len(batch) > 0 {
		ferr = flush()
	}
	return moved, errors.Join(err, ferr)
}

// moveBatch publishes a copy of each message to dst, then deletes each original whose copy was
// stored, and returns how many it moved.
func (p *Platform) moveBatch(ctx context.Context, from string, dst *queue, ms []storedMsg, delay time.Duration) (int, error) {
	futures := make([]jetstream.PubAckFuture, len(ms))
	var errs []error
	for i, m := range ms {
		h := m.msg.Header
		t, _ := strconv.ParseInt(h.Get(hdrTime), 10, 64)
		c := dst.message(envelope{id: messageID(h, m.seq), time: t, ctype: contentTypeOf(h)}, m.msg.Data, delay)
		if delay <= 0 {
			c.Header[hdrDue] = []string{strconv.FormatInt(time.Now().UnixMilli(), 10)}
		}
		c.Header[hdrMsgID] = []string{"moved." + from + "." + strconv.FormatUint(m.seq, 10)}
		f, err := p.js.PublishMsgAsync(c, jetstream.WithStallWait(requestTimeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("jetstream: move message %d of queue %s: %w", m.seq, from, err))
			continue
		}
		futures[i] = f
	}
	moved := 0
	for i, f := range futures {
		if f == nil {
			continue
		}
		var duplicate bool
		select {
		case ack := <-f.Ok():
			// A copy another move of the same message stored first: that move counts it.
			duplicate = ack.Duplicate
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("jetstream: move message %d of queue %s: %w", ms[i].seq, from, err))
			continue
		case <-ctx.Done():
			return moved, errors.Join(append(errs, ctx.Err())...)
		}
		if err := p.deleteSeq(ctx, from, ms[i].seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			errs = append(errs, err)
			continue
		}
		if !duplicate {
			moved++
		}
	}
	return moved, errors.Join(errs...)
}

// pausedUntil is how long Pause pauses: for good, in practice, until Resume.
func pausedUntil() time.Time { return time.Now().AddDate(100, 0, 0) }

// Pause pauses the queue's durable consumer (JetStream's consumer pause, kept in its
// configuration, so across restarts), creating the consumer if the queue has none yet. Sends
// are still stored; the consumer delivers nothing, and redelivers nothing, until Resume.
func (p *Platform) Pause(ctx context.Context, queue string) error {
	if _, err := p.js.Stream(ctx, streamName(queue)); err != nil {
		return p.queueErr(queue, err)
	}
	_, err := p.js.PauseConsumer(ctx, streamName(queue), consumerName, pausedUntil())
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cfg := consumerConfig(queue, defaultAck)
		until := pausedUntil()
		cfg.PauseUntil = &until
		_, err = p.js.CreateOrUpdateConsumer(ctx, streamName(queue), cfg)
	}
	if err != nil {
		return fmt.Errorf("jetstream: pause queue %s: %w", queue, err)
	}
	return p.waitPaused(ctx, queue, true)
}

// waitPaused waits until the queue's consumer reports itself paused. On a cluster the pause's
// reply comes from the meta leader once it has proposed the change, before the consumer's
// leader applies it: without the wait, a message sent just after Pause returned could still be
// delivered. The consumer's info is answered by its leader, which delivers nothing once it
// reports the pause.
func (p *Platform) waitPaused(ctx context.Context, queue string, paused bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	what := map[bool]string{true: "pause", false: "resume"}[paused]
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		c, err := p.js.Consumer(ctx, streamName(queue), consumerName)
		if err == nil && c.CachedInfo().Paused == paused {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("the consumer does not report the " + what)
			}
			return fmt.Errorf("jetstream: %s queue %s: %w (%w)", what, queue, err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// resumeLead is how soon after Resume the consumer's pause ends. Resume does not clear the
// pause but moves its end this close: JetStream serves the pull requests waiting on a paused
// consumer when its pause time comes, while a pause cleared at once would leave them waiting
// until they expire.
const resumeLead = 200 * time.Millisecond

// Resume resumes the queue's durable consumer, and returns once it reports itself resumed
// (resumeLead later): a pull made after Resume returns is served.
func (p *Platform) Resume(ctx context.Context, queue string) error {
	st, err := p.js.Stream(ctx, streamName(queue))
	if err != nil {
		return p.queueErr(queue, err)
	}
	ci, err := st.Consumer(ctx, consumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil // never paused
	case err != nil:
		return fmt.Errorf("jetstream: resume queue %s: %w", queue, err)
	case !ci.CachedInfo().Paused:
		return nil
	}
	if _, err := p.js.PauseConsumer(ctx, streamName(queue), consumerName, time.Now().Add(resumeLead)); err != nil {
		return fmt.Errorf("jetstream: resume queue %s: %w", queue, err)
	}
	return p.waitPaused(ctx, queue, false)
}

// messageID is a stream message's message id: duilie's own, or a foreign producer's
// Nats-Msg-Id, or else its stream sequence.
func messageID(h nats.Header, seq uint64) string {
	if id := h.Get(hdrID); id != "" {
		return id
	}
	if id := h.Get(hdrMsgID); id != "" {
		return id
	}
	return strconv.FormatUint(seq, 10)
}

// contentTypeOf is a stream message's content type; a foreign producer's message without one is
// bytes.
func contentTypeOf(h nats.Header) platform.ContentType {
	if t := platform.ContentType(h.Get(hdrType)); t != "" {
		return t
	}
	return platform.Bytes
}

// DeleteQueue closes this process's consumers of the queue, then deletes its stream, with its
// messages and its durable consumer.
func (p *Platform) DeleteQueue(ctx context.Context, queue string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := p.js.Stream(ctx, streamName(queue)); err != nil {
		return p.queueErr(queue, err)
	}
	p.mu.Lock()
	delete(p.queues, queue)
	var cs []*consumer
	for c := range p.consumers {
		if c.q.name == queue {
			cs = append(cs, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	if err := p.js.DeleteStream(ctx, streamName(queue)); err != nil {
		return p.queueErr(queue, err)
	}
	return nil
}
