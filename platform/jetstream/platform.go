package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/duilie/duilie/platform"
)

// Names in JetStream. Queue names follow platform.CheckQueueName, so they are valid both as
// a stream name suffix and as a subject token.
const (
	streamPrefix  = "DUILIE_"
	subjectPrefix = "duilie."
	consumerName  = "duilie"
)

func streamName(queue string) string      { return streamPrefix + queue }
func readySubject(queue string) string    { return subjectPrefix + queue + ".m" }
func scheduleSubject(queue string) string { return subjectPrefix + queue + ".s." + nuid.Next() }

// LockWait is how long Open waits for a data directory that another process holds: for a
// holder that does not serve (often another short-lived command) to let it go, or for a
// serving holder to answer. It is the same for every command, whatever its context allows.
const LockWait = 5 * time.Second

// startWait is how long Open waits for the embedded server to start.
const startWait = 10 * time.Second

// attachTimeout bounds one attempt to connect to a serving holder.
const attachTimeout = time.Second

// Platform is the JetStream platform: the embedded engine, a client of another process's
// embedded engine, or a client of a NATS cluster. It implements platform.Platform.
type Platform struct {
	cfg      Config
	log      *slog.Logger
	srv      *server.Server // the embedded engine; nil when attached or on a cluster
	lock     *dirLock       // held while srv runs
	attached bool           // connected to another process's engine
	nc       *nats.Conn
	js       jetstream.JetStream
	dial     func() (*nats.Conn, error) // another connection to the same engine (Dial)

	mu        sync.Mutex
	queues    map[string]*queue
	consumers map[*consumer]struct{}
	closed    bool

	stopSweep func() // ends the retention sweep of a serving process, and waits for it
	unloaded  unloaded

	holding holding                   // which delays are held, and how they are moved (hold.go)
	movers  map[string]*mover         // by queue, while this process consumes it
	movedTo positions                 // where the mover left each bucket (hold.go)
	room    diskRoom                  // what roomFor last saw of the disk
	acks    atomic.Pointer[batchAcks] // acknowledgements of sends and batches (puback.go); made at the first
	drops   *envelopeDrops            // deletions of finished batches' envelopes (drop.go); made at the first batch

	reclaimed sync.Map // queues whose deliveries left by a stopped process were nakked (reclaim.go)
	gone      goneBook // what Purge and Delete removed while a consumer may hold it (gone.go)
}

var (
	_ platform.Platform = (*Platform)(nil)
	_ platform.Stater   = (*Platform)(nil)
)

// Open starts the embedded engine on cfg.DataDir, or attaches to the process that runs it
// there, or connects to the cluster at cfg.URL.
//
// The embedded engine locks its data directory. If another live process holds the lock and
// serves (Config.Serve), Open connects to it, unless cfg.Serve is set too: two serving
// processes never share a directory. If the holder does not serve, Open waits a moment for
// it (it is often another short-lived command) and then fails with an error naming the
// directory.
func Open(ctx context.Context, cfg Config) (*Platform, error) {
	serving := cfg.Serve // a cluster's Config.Serve is cleared, but its serve sweeps too
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Platform{cfg: cfg, log: cfg.Logger, queues: map[string]*queue{}, consumers: map[*consumer]struct{}{}, holding: defaultHolding}
	if cfg.URL != "" {
		err = p.connectCluster()
	} else {
		err = p.openEmbedded(ctx)
	}
	if err != nil {
		return nil, err
	}
	// Settle publishes retries and dead letters asynchronously, up to 100 per batch and 250
	// batches at once.
	p.js, err = jetstream.New(p.nc, jetstream.WithPublishAsyncMaxPending(1<<16))
	if err != nil {
		p.shutdown()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if p.srv != nil {
		if err := p.takeAccount(ctx); err != nil {
			p.shutdown()
			return nil, fmt.Errorf("jetstream: taking account of %s: %w", cfg.DataDir, err)
		}
	}
	// Batches whose sender stopped after storing them get their messages: on the embedded
	// engine by whoever runs it, on a cluster by every serve that starts.
	if p.srv != nil || serving {
		n, err := p.finishBatches(ctx, time.Time{})
		if n > 0 {
			p.log.Warn("jetstream: batches stored by a sender that stopped before their messages were all stored are complete now", "batches", n)
		}
		if err != nil {
			p.log.Error("jetstream: finishing stored batches", "err", err)
		}
	}
	if serving {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.sweep(ctx) }()
		p.stopSweep = func() { cancel(); <-done }
	}
	return p, nil
}

// LogAttrs says which engine p is, for the host's "platform open" log line.
func (p *Platform) LogAttrs() []any {
	switch {
	case p.cfg.URL != "":
		return []any{"platform", "nats", "url", redactURLs(p.cfg.URL), "replicas", p.cfg.Replicas}
	case p.attached:
		return []any{"platform", "embedded (attached to the running serve)", "data_dir", p.cfg.DataDir}
	default:
		return []any{"platform", "embedded", "data_dir", p.cfg.DataDir, "sync", p.cfg.Sync, "retention", p.cfg.Retention.String()}
	}
}

// redactURLs is a comma-separated list of NATS URLs with their passwords (and tokens in the
// user part) replaced by "xxxxx", for logs.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, s := range parts {
		u, err := url.Parse(strings.TrimSpace(s))
		switch {
		case err != nil:
			parts[i] = "(a URL that does not parse)"
		case u.User != nil:
			if _, hasPassword := u.User.Password(); hasPassword {
				parts[i] = u.Redacted()
			} else {
				u.User = url.User("xxxxx") // nats://token@host
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}

// Dial opens another NATS connection to the engine or cluster p uses, with p's credentials,
// for tools that measure the engine itself beside duilie on the same server (duilie bench
// --compare-raw). The caller closes it.
func (p *Platform) Dial() (*nats.Conn, error) {
	if p.dial == nil {
		return nil, errors.New("jetstream: the platform is not open")
	}
	return p.dial()
}

// Replicas is how many copies of each queue's messages the engine keeps.
func (p *Platform) Replicas() int { return p.cfg.Replicas }

// Attached reports whether Open connected to the engine of another process that holds the
// data directory, rather than running the engine itself.
func (p *Platform) Attached() bool { return p.attached }

func (p *Platform) connectCluster() error {
	opts := []nats.Option{
		nats.Name("duilie"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ErrorHandler(p.asyncError),
	}
	if p.cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(p.cfg.Creds))
	}
	if p.cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(p.cfg.TLSCA))
	}
	if p.cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(p.cfg.TLSCert, p.cfg.TLSKey))
	}
	nc, err := nats.Connect(p.cfg.URL, opts...)
	if err != nil {
		return fmt.Errorf("jetstream: connect to %s: %w", p.cfg.URL, err)
	}
	p.nc = nc
	p.dial = func() (*nats.Conn, error) { return nats.Connect(p.cfg.URL, opts...) }
	return nil
}

func (p *Platform) openEmbedded(ctx context.Context) error {
	dir := p.cfg.DataDir
	// A holder that does not serve is often another short-lived command (parallel sends):
	// wait LockWait for it, or less if ctx ends sooner.
	waitFrom := time.Now()
	deadline := waitFrom.Add(LockWait)
	for {
		l, err := lockDataDir(dir)
		if err == nil {
			return p.startEmbedded(l)
		}
		if errors.Is(err, errUnsafe) {
			return unsafeDataDir(err)
		}
		if !errors.Is(err, errLocked) {
			return fmt.Errorf("jetstream: lock data directory %s: %w", dir, err)
		}
		rec, rerr := readServeRecord(dir)
		if errors.Is(rerr, errUnsafe) {
			return unsafeDataDir(rerr)
		}
		if rerr == nil && p.cfg.Serve {
			return fmt.Errorf("jetstream: data directory %s is in use by another duilie serve; stop it first", dir)
		}
		if rerr == nil {
			if err = p.attach(rec, min(attachTimeout, time.Until(deadline))); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			holder := "another process"
			if pid := lockHolder(dir); pid > 0 {
				holder = fmt.Sprintf("another process (pid %d)", pid)
			}
			if rerr != nil {
				return fmt.Errorf("jetstream: data directory %s is in use by %s that does not accept local commands, and it did not release it within %v (run it as a server, or stop it)",
					dir, holder, time.Since(waitFrom).Round(100*time.Millisecond))
			}
			return fmt.Errorf("jetstream: data directory %s is in use by %s, and connecting to it at %s failed: %w", dir, holder, rec.URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unsafeDataDir is the error of a data directory that another user could capture: a mistake
// of the DataDir setting (platform.FieldError), so the configuration reader names the key.
func unsafeDataDir(err error) error {
	return fmt.Errorf("jetstream: %w", &platform.FieldError{Field: "DataDir", Rule: err.Error()})
}

// attach connects to the engine another process serves on the data directory, giving up after
// timeout.
func (p *Platform) attach(rec serveRecord, timeout time.Duration) error {
	nc, err := nats.Connect(rec.URL, nats.Token(rec.Token), nats.Name("duilie-local"),
		nats.MaxReconnects(0), nats.Timeout(max(timeout, 10*time.Millisecond)), nats.ErrorHandler(p.asyncError))
	if err != nil {
		return err
	}
	p.nc, p.attached = nc, true
	p.dial = func() (*nats.Conn, error) {
		return nats.Connect(rec.URL, nats.Token(rec.Token), nats.Name("duilie-local"), nats.MaxReconnects(0))
	}
	return nil
}

func (p *Platform) startEmbedded(l *dirLock) error {
	dir, err := filepath.Abs(l.dir)
	if err != nil {
		l.release()
		return err
	}
	opts := &server.Options{
		ServerName: "duilie",
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: p.cfg.Sync == SyncAlways,
		NoSigs:     true,
		DontListen: !p.cfg.Serve,
	}
	var token string
	if p.cfg.Serve {
		var b [32]byte
		_, _ = rand.Read(b[:])
		token = hex.EncodeToString(b[:])
		opts.Host, opts.Port, opts.Authorization = "127.0.0.1", server.RANDOM_PORT, token
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		l.release()
		return fmt.Errorf("jetstream: embedded engine: %w", err)
	}
	srv.SetLogger(serverLogger{p.log, &p.unloaded}, false, false)
	srv.Start()
	if !srv.ReadyForConnections(startWait) {
		srv.Shutdown()
		l.release()
		return fmt.Errorf("jetstream: embedded engine on %s did not start within %v", l.dir, startWait)
	}
	connOpts := []nats.Option{nats.InProcessServer(srv), nats.Name("duilie"), nats.ErrorHandler(p.asyncError)}
	if token != "" {
		connOpts = append(connOpts, nats.Token(token))
	}
	nc, err := nats.Connect("", connOpts...)
	if err != nil {
		srv.Shutdown()
		l.release()
		return fmt.Errorf("jetstream: embedded engine: %w", err)
	}
	p.srv, p.lock, p.nc = srv, l, nc
	p.dial = func() (*nats.Conn, error) { return nats.Connect("", connOpts[:len(connOpts):len(connOpts)]...) }
	if p.cfg.Serve {
		if err := l.record(serveRecord{URL: srv.ClientURL(), Token: token, PID: os.Getpid()}); err != nil {
			p.shutdown()
			return fmt.Errorf("jetstream: record the serve address in %s: %w", l.dir, err)
		}
	}
	return nil
}

func (p *Platform) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	subject := ""
	if sub != nil {
		subject = sub.Subject
	}
	p.log.Error("jetstream: connection error", "subject", subject, "err", err)
}

// Queue returns the producer side of the named queue, creating its stream if it is missing.
func (p *Platform) Queue(ctx context.Context, name string) (platform.Queue, error) {
	return p.queue(ctx, name)
}

func (p *Platform) queue(ctx context.Context, name string) (*queue, error) {
	if err := platform.CheckQueueName(name); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, platform.ErrClosed
	}
	q, ok := p.queues[name]
	p.mu.Unlock()
	if ok {
		return q, nil
	}
	d, err := p.localDamage()
	if err != nil {
		return nil, err
	}
	if why := d.unloadable(name); why != "" {
		// Creating the queue anew would write a fresh stream over its stored messages.
		return nil, platform.Permanent(fmt.Errorf("jetstream: queue %s: its stored messages cannot be loaded (%s); duilie will not create it anew over them: restore its files, or move its directory aside, then delete %s",
			name, why, filepath.Join(p.cfg.DataDir, lostFileName)))
	}
	cfg := p.streamConfig(name)
	st, err := p.ensureStream(ctx, cfg) // retried, for serves that start together (create.go)
	if err != nil && unknownField(err, "allow_batched") {
		// A server older than fast batches (2.12, 2.13) that reads requests strictly.
		cfg.AllowBatchPublish = false
		st, err = p.ensureStream(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: create queue %s: %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if q, ok := p.queues[name]; ok {
		return q, nil
	}
	q = newQueue(p, name)
	// A server older than fast batches leaves allow_batched out of the stream it answers with.
	q.fast.Store(st.CachedInfo().Config.AllowBatchPublish)
	p.queues[name] = q
	return q, nil
}

// unknownField says whether err is a server's refusal of a request for naming a field it does
// not know (JetStream's strict reading of requests).
func unknownField(err error, field string) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errInvalidJSON && strings.Contains(apiErr.Description, `"`+field+`"`)
}

// errInvalidJSON is nats-server's JSInvalidJSONErr: "invalid JSON: {err}".
const errInvalidJSON jetstream.ErrorCode = 10025

// streamConfig is the stream of one queue: ready messages on duilie.<q>.m, one schedule
// subject per delayed message under duilie.<q>.s., work-queue retention so that an ack removes
// a message. Nothing expires by itself: a serving process removes messages past their
// retention, and counts them (see expire). (Message TTLs stay allowed: streams made by earlier
// versions have them on, and it cannot be turned off.)
func (p *Platform) streamConfig(name string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               streamName(name),
		Description:        "duilie queue " + name,
		Subjects:           []string{subjectPrefix + name + ".>"},
		Retention:          jetstream.WorkQueuePolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           p.cfg.Replicas,
		Discard:            jetstream.DiscardOld,
		AllowMsgTTL:        true,
		AllowMsgSchedules:  true,
		AllowAtomicPublish: true,
		AllowBatchPublish:  true, // a batch's messages go as one fast batch (fastbatch.go)
		AllowRollup:        true, // message schedules purge their schedule subject
		AllowDirect:        true, // operators read messages with direct gets (operator.go)
		Duplicates:         2 * time.Minute,
	}
}

// Consume starts delivering the named queue's messages, creating the queue if it is missing.
// All Consumers of a queue, in this process or others on the same cluster, share one durable
// JetStream consumer.
func (p *Platform) Consume(ctx context.Context, name string, opts platform.ConsumerOptions) (platform.Consumer, error) {
	q, err := p.queue(ctx, name)
	if err != nil {
		return nil, err
	}
	c, err := newConsumer(ctx, q, opts)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close() // not under p.mu: Close tells the platform through forget, which takes it
		return nil, platform.ErrClosed
	}
	p.consumers[c] = struct{}{}
	p.startMover(q)
	p.mu.Unlock()
	return c, nil
}

func (p *Platform) forget(c *consumer) {
	p.mu.Lock()
	var stopped <-chan struct{}
	if _, ok := p.consumers[c]; ok {
		delete(p.consumers, c)
		stopped = p.stopMover(c.q.name)
	}
	p.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

// Stats reports every duilie queue on the engine or cluster, sorted by name. The three counts
// come from two snapshots (the stream's, then its consumer's) taken a moment apart, so under
// load they are approximate; see the package documentation.
func (p *Platform) Stats(ctx context.Context) ([]platform.QueueStats, error) {
	names, err := p.queueNames(ctx)
	if err != nil {
		return nil, err
	}
	d, err := p.localDamage()
	if err != nil {
		return nil, err
	}
	for q := range d {
		if d.unloadable(q) != "" && !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	slices.Sort(names)
	stats := make([]platform.QueueStats, 0, len(names))
	for _, name := range names {
		s := platform.QueueStats{Queue: name}
		var first uint64
		if d.unloadable(name) == "" {
			s, first, err = p.queueStatsFrom(ctx, name)
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound):
				continue // deleted meanwhile
			case err != nil:
				s = platform.QueueStats{Queue: name, Damage: "its stream cannot be read: " + err.Error()}
			}
		}
		d.stats(&s, first)
		stats = append(stats, s)
	}
	return stats, nil
}

// queueNames lists the duilie queues on the engine or cluster, sorted.
func (p *Platform) queueNames(ctx context.Context) ([]string, error) {
	var names []string
	lister := p.js.StreamNames(ctx, jetstream.WithStreamListSubject(subjectPrefix+">"))
	for n := range lister.Name() {
		if q, ok := strings.CutPrefix(n, streamPrefix); ok && platform.CheckQueueName(q) == nil {
			names = append(names, q)
		}
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return nil, fmt.Errorf("jetstream: list queues: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

func (p *Platform) queueStats(ctx context.Context, name string) (platform.QueueStats, error) {
	s, _, err := p.queueStatsFrom(ctx, name)
	return s, err
}

// queueStatsFrom is queueStats and the stream's first sequence.
func (p *Platform) queueStatsFrom(ctx context.Context, name string) (platform.QueueStats, uint64, error) {
	s := platform.QueueStats{Queue: name}
	st, err := p.js.Stream(ctx, streamName(name))
	if err != nil {
		return s, 0, err
	}
	// The subject filter makes the server count the ready subject and batch envelopes alone
	// (schedule subjects have one token more).
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subjectPrefix+name+".*"))
	if err != nil {
		return s, 0, err
	}
	// The subject's count can outlive messages a damaged store lost: never more than there are.
	ready := min(int64(info.State.Subjects[readySubject(name)]), int64(info.State.Msgs))
	envelopes := int64(info.State.Subjects[envelopeSubject(name)]) // a batch's messages are counted once stored
	s.Delayed = max(int64(info.State.Msgs)-ready-envelopes, 0)     // schedule messages: pending sends and retries
	if ci, err := st.Consumer(ctx, consumerName); err == nil {
		s.InFlight = int64(ci.CachedInfo().NumAckPending)
		s.Paused = ci.CachedInfo().Paused
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return s, 0, err
	}
	// Delivered messages stay in a work-queue stream until they are acked.
	s.Ready = max(ready-s.InFlight, 0)
	if f, ok := engineReport(info.State.Lost, time.Now().UTC().Truncate(time.Second)); ok && p.cfg.URL != "" {
		// A cluster's servers report their losses here (the embedded engine's are accounted
		// for at open, in lost.json).
		damage{name: {f}}.stats(&s, 0)
	}
	return s, info.State.FirstSeq, nil
}

// Close stops the consumers (their unsettled deliveries return after the ack wait), drains
// the connection, shuts the embedded engine down and releases the data directory.
func (p *Platform) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cs := make([]*consumer, 0, len(p.consumers))
	for c := range p.consumers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	if p.stopSweep != nil {
		p.stopSweep()
	}
	p.mu.Lock()
	drops := p.drops
	p.mu.Unlock()
	if drops != nil {
		// A batch's envelope is deleted after SendBatch returns: let the last ones finish, so
		// that the next open has no batch to finish.
		if n := drops.wait(requestTimeout); n > 0 {
			p.log.Warn("jetstream: envelope deletions unanswered at close; an envelope still there is finished at the next open", "envelopes", n)
		}
	}
	if p.srv != nil {
		// Nothing of ours writes any more: the next open counts every message from here.
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		if err := p.writeState(ctx); err != nil {
			p.log.Warn("jetstream: recording the queues' state at close; the next open cannot count losses", "err", err)
		}
		cancel()
	}
	return p.shutdown()
}

func (p *Platform) shutdown() error {
	var errs []error
	if p.nc != nil {
		// Drain lets pending publishes and acks reach the server before the connection closes.
		done := make(chan struct{})
		p.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err := p.nc.Drain(); err == nil {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				p.nc.Close()
			}
		} else {
			p.nc.Close()
		}
	}
	if p.srv != nil {
		p.srv.Shutdown()
		p.srv.WaitForShutdown()
	}
	if p.lock != nil {
		if err := p.lock.release(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serverLogger passes the embedded server's log lines to slog. Its notices (startup banner,
// stream recovery) are routine, so they go to debug level. Its warnings about a stream it did
// not load explain that queue's damage.
type serverLogger struct {
	log      *slog.Logger
	unloaded *unloaded
}

func (l serverLogger) Noticef(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, v...))
	}
}
func (l serverLogger) Warnf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	l.unloaded.heard(line)
	l.log.Warn(line)
}
func (l serverLogger) Fatalf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Debugf(format string, v ...any) {}
func (l serverLogger) Tracef(format string, v ...any) {}
