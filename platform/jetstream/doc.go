// Package jetstream is duilie's default platform: NATS JetStream, either embedded in the process
// (durable file storage in a data directory, no setup) or an existing JetStream cluster. It
// implements the platform contract of package platform; the host decides what becomes of every
// message and this package carries it out.
//
// # Modes
//
// Open with a zero Config runs the embedded engine: a nats-server inside the process, JetStream
// file storage under Config.DataDir, reached through an in-process connection (no TCP port).
// The process holds an exclusive flock on <data dir>/LOCK, so no second process opens the same
// store. The data directory is created with mode 0700; the directory, LOCK and serve.json must
// belong to the user running duilie and be writable by nobody else, or Open refuses them (a
// *platform.FieldError of DataDir, naming the path and the fix), as ssh refuses a loose key:
// otherwise another local user could hold the lock and record a serve of their own. Open waits
// LockWait (5 s) for a directory another process holds, whatever its context allows. With Config.Serve the engine also listens on a random loopback port guarded by a random
// token, and records {url, token, pid} in <data dir>/serve.json (mode 0600); an Open of a data
// directory whose lock a live process holds then connects there (Platform.Attached reports it),
// and fails with an error naming the directory when the holder does not serve. The record is
// removed when the holder closes, and ignored (then removed) once the lock is free, for example
// after the holder was killed.
//
// With Config.URL the same driver connects to a JetStream cluster (credentials file, TLS,
// Replicas 1, 3 or 5). The servers must run nats-server 2.12 or later (message schedules).
//
// # Layout
//
// Each queue is one stream, DUILIE_<queue>, with work-queue retention (an ack removes the
// message) and one durable pull consumer, "duilie", filtered on the ready subject
// duilie.<queue>.m. A delayed message is a JetStream message schedule on its own subject,
// duilie.<queue>.s.<unique>, with the header "Nats-Schedule: @at <RFC 3339 with milliseconds>"
// and the ready subject as its target; at its due time JetStream stores a new message on the
// ready subject and purges the schedule, in one step. Because that message has a new timestamp
// and no Nats-Msg-Id, a message's identity travels in duilie's own headers: Duilie-Id (32
// lowercase hex), Duilie-Time (enqueue time in Unix ms), Duilie-Type (content type),
// Duilie-Attempts (deliveries before this stream message, on retries) and Duilie-Due (a delayed
// message's due time in Unix ms). A delay over 2 minutes is held instead: a plain message on
// duilie.<queue>.h.<due time in Unix ms / 60000>, which a mover in each process consuming the
// queue turns into a schedule a minute or two before it is due; one due in an hour that begins
// more than an hour ahead is held first on duilie.<queue>.H.<due time in Unix ms / 3600000> and
// held again on its minute about an hour before (hold.go; docs/delays-at-scale.md).
//
// JetStream's scheduler runs at most every 250 ms, so a schedule fires up to a quarter second
// after its time. A delayed message is therefore scheduled 150 ms before it is due, and the
// consumer holds one that fired early until its Duilie-Due: never early, and typically tens of
// milliseconds late instead of a hundred and fifty.
//
// Nothing expires by itself (the engine would drop a message without a word): a serving process
// (Config.Serve, and every serve on a cluster) removes, at its start and every minute, the ready
// messages that became ready more than Config.Retention ago, and logs how many per queue at
// WARN. A delayed message becomes ready at its due time. When no serve runs, messages wait.
//
// # Delivery
//
// Receive sends one pull request at a time for exactly the messages the host asks for, with
// no_wait and an expiry: JetStream holds it until at least one message is ready, then answers
// with every ready message up to the limit and ends it. Nothing is fetched ahead, so a message
// the host never asked for is neither delivered nor counted as an attempt. The rare message that
// arrives after a Receive gave up waiting is kept for the next one; so is a delayed message held
// until it is due. Close gives any left back to the queue, ready at once, with attempts
// unchanged.
//
// attempts is JetStream's delivery count of the stream message plus Duilie-Attempts, so every
// redelivery counts: a retry, a failed event, an ack wait that ran out, a crash.
//
// InProgress sends JetStream's progress signal, except for deliveries received within the last
// twentieth of the ack wait: each signal costs the server a write of the consumer's state.
//
// # Settling
//
// Done and Drop are acks that JetStream confirms (the message is then gone for good). Redeliver
// publishes a copy carrying the same id, time, body and the attempts so far (ready at once, or a
// schedule for a delay), then acks the delivery. Not a nak: a nakked message stays among the
// consumer's pending deliveries, and after a restart it returns only when its ack wait runs out;
// a delayed nak also holds a slot among the unacknowledged messages for the whole delay. The copy
// survives restarts with its exact due time and is precise to a quarter second. DeadLetter publishes the message to the dead-letter queue's stream (created if
// missing) with the same id, time, body and content type and no attempts header (so attempts
// start again at 1), then acks the original. A crash between the publish and the ack leaves both
// copies, and the original is delivered again: at least once, never lost; a copy of the same
// stream message published twice within two minutes is deduplicated by its Nats-Msg-Id, which
// names the original's stream sequence (not its attempts, which a crash can leave unchanged).
//
// # Batches
//
// SendBatch is all or nothing: the whole batch, delayed messages included, is first stored as
// one stream message, its envelope, on duilie.<queue>.b (no consumer reads it); that is the
// commit. Its messages are then published in a pipeline, as one JetStream fast batch that the
// engine acknowledges once (fastbatch.go; one by one on a stream that takes none), their
// acknowledgements collected on one subscription (puback.go), and the envelope is deleted
// without waiting for the answer (drop.go; Close waits for the answers still to come). An
// envelope the server refuses leaves nothing behind; an envelope whose acknowledgement was
// lost (a timeout) may or may not have been stored, like any send. Messages whose publish failed,
// or all of a batch whose sender stopped after the envelope was stored, are looked for in the
// stream by their Duilie-Id and published again only if not found (then with a deduplication
// id): by the sender itself, or by the next open of the embedded engine (or the next serve
// started on a cluster, or a serving process's sweep, for envelopes over 30 s old), which then
// deletes the envelope. One already delivered and acked is not found, and comes twice (at
// least once). A queue with damage on record keeps its envelopes until lost.json is deleted (a damaged
// block file can give back an envelope whose deletion it lost). JetStream's atomic batch, used
// before, staged every batch in a store of its own and was slower than single sends.
//
// # Disk space
//
// An engine that runs out of space in the middle of a batch has stored part of it (and shuts
// JetStream down). So a store on this machine (the embedded engine, or the one a local serve
// runs) keeps DiskReserve (16 MiB) free on its file system: a send or a batch that would leave
// less (counting a batch twice, its envelope and its messages, and 1 KiB per message beyond its body) is
// refused before anything of it is written, with an error that says how much is free; the
// reserve serves settling the messages there are. A send or a batch waits at most 5 s for
// JetStream's acknowledgement, whatever the caller's deadline, and then fails: an engine that
// stopped answering is the platform's failure, not the event's time limit.
//
// # Stats
//
// For each stream DUILIE_<queue>: ready is the ready subject's message count less the consumer's
// unacknowledged deliveries, delayed is the rest of the stream (pending schedules: delayed sends
// and retries), in_flight is the consumer's unacknowledged deliveries. The counts come from two
// snapshots taken a moment apart, so under load they are approximate; at rest they are exact.
// Lost and Damage report damaged storage (below); a queue whose stream cannot be loaded or read
// has a row with Damage saying why.
//
// # Damaged storage
//
// The engine rebuilds a damaged block file from what is left and drops the rest, and skips a
// stream whose metadata is damaged, with at most a warning. So at every clean close the process
// that ran the embedded engine records each queue's message count and sequences in
// <data dir>/state.json, and the next open, before anything runs, counts every message missing
// since then as lost (the directory was locked meanwhile and nothing expires by itself); it takes
// the engine's own report (stream state's Lost) too, and a stream directory the engine did not
// load makes its queue one that cannot be loaded: Queue refuses to create it anew over its
// stored messages (a permanent error). Findings are logged at ERROR when found and kept in
// <data dir>/lost.json, reported by every later Stats, until an operator deletes the file. After
// a crash there is no state.json: only the engine's own report counts. On a cluster, Stats
// reports what the servers report lost.
//
// # Operators
//
// The operator operations (platform.Operator) read a queue's stream a page at a time with
// batched direct gets (the stream allows them), and tell a message's state from its subject and
// the durable consumer's last delivered sequence (operator.go). A delivery's time and count are
// known to the process that made it; another process asks for them on _DUILIE.flights.<queue>.
// Pause is the durable consumer's pause, kept in its configuration across restarts. Move
// publishes a copy (deduplicated by the original's sequence) and deletes the original once the
// copy is stored.
//
// # Durability
//
// A send returns only once JetStream has stored the message, and an ack that Settle reports done
// has been applied, so both survive kill -9 of the process. What survives a machine crash
// depends on Config.Sync and on replicas; docs/jetstream.md states the guarantees and their
// measured cost.
package jetstream
