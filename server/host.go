package server

import (
	"log/slog"

	"github.com/duilie/duilie/internal/host"
)

// The host's settings and reports: what a Go program configures a Server with and what its
// Observers hear. The host itself is internal; these are its public names.
type (
	// Permissions is the host's allow-list (许可), shaped {"QUEUE":["PAGE_QUEUE", …]}: the
	// bindings programs may use ([permissions] QUEUE).
	Permissions = host.Permissions
	// ConsumerConfig configures the consumer of one queue (SPEC §11), a [[queues.consumers]]
	// table of duilie.toml. Start from DefaultConsumerConfig.
	ConsumerConfig = host.ConsumerConfig

	// Observer hears of everything the server does, one Report at a time. It is called on the
	// server's goroutines, so it must be quick and safe for concurrent use, and must not keep a
	// report's slices past its return unless it copies them.
	Observer = host.Observer
	// Report is an *EventReport, a *StartReport, a *SettleReport, a *SendReport or an
	// *OperationReport.
	Report = host.Report
	// EventReport is how one event ended.
	EventReport = host.EventReport
	// StartReport is a queue event starting, once its batch has been taken from the platform;
	// its EventReport follows when it ends.
	StartReport = host.StartReport
	// SettleReport is messages resolved without an event: retries exhausted before delivery,
	// or given back at a halt.
	SettleReport = host.SettleReport
	// PullReport is messages a client pulled from a pull consumer, each now leased.
	PullReport = host.PullReport
	// SendReport is one send through the interface that passed its checks, or one message
	// pushed over Cloudflare's API.
	SendReport = host.SendReport
	// OperationReport is one operator operation (peek, replay, purge, delete, pause, resume,
	// delete or create a queue), from whichever surface asked for it.
	OperationReport = host.OperationReport
	// MessageReport is what became of one message.
	MessageReport = host.MessageReport
	// Outcome names how an event ended: OK, Failed, Aborted or NotStarted.
	Outcome = host.Outcome
	// Result names what became of a message: Acked, Retried, DeadLettered, Dropped or Released.
	Result = host.Result
	// SettleReason says why messages were resolved without an event.
	SettleReason = host.SettleReason
	// Op names an operator operation in an OperationReport.
	Op = host.Op
	// BridgeCall is one kind of bridge call of a program: its interface name and reply status.
	BridgeCall = host.BridgeCall

	// StartError is the failure of an event whose program never ran because the host could
	// not start it; it costs the messages no attempt.
	StartError = host.StartError
	// PanicError is the failure of an event whose Go handler panicked.
	PanicError = host.PanicError
)

// Outcomes of an event.
const (
	OK         = host.OK
	Failed     = host.Failed
	Aborted    = host.Aborted
	NotStarted = host.NotStarted
)

// Results of a message.
const (
	Acked        = host.Acked
	Retried      = host.Retried
	DeadLettered = host.DeadLettered
	Dropped      = host.Dropped
	Released     = host.Released
)

// Reasons of a SettleReport.
const (
	Exhausted = host.Exhausted
	Halting   = host.Halting
	Pulled    = host.Pulled
)

// Operator operations.
const (
	OpPeek        = host.OpPeek
	OpReplay      = host.OpReplay
	OpPurge       = host.OpPurge
	OpDelete      = host.OpDelete
	OpPause       = host.OpPause
	OpResume      = host.OpResume
	OpDeleteQueue = host.OpDeleteQueue
	OpCreateQueue = host.OpCreateQueue
)

// The zero consumer settings that are not defaults (a ConsumerConfig's zero values are).
const (
	NoBatchTimeout = host.NoBatchTimeout // MaxBatchTimeout: deliver a batch as soon as it has a message
	NoRetries      = host.NoRetries      // MaxRetries: never deliver a failed message again
)

// DefaultConsumerConfig returns the consumer settings of SPEC §11 for queue, each written out:
// batches of up to 10 messages or 5 s, 3 retries without delay, no dead-letter queue, one batch
// at a time. ConsumerConfig{Queue: queue} means the same.
func DefaultConsumerConfig(queue string) ConsumerConfig { return host.DefaultConsumerConfig(queue) }

// LogObserver writes duilie's log lines from the reports: one per event, one per batch of
// messages resolved without an event, a debug line per send. Every Server logs through one.
func LogObserver(log *slog.Logger) Observer { return host.LogObserver(log) }
