package host

import (
	"errors"
	"time"

	"github.com/duilie/duilie/internal/event"
	"github.com/duilie/duilie/platform"
)

// Observer hears of everything the host does, one Report at a time: a *StartReport when a
// queue event starts, an *EventReport when an event ends, a *SettleReport for messages resolved
// without an event, a *SendReport for every send through the interface. It is called on the host's goroutines, after the event's
// messages have been settled, so it must be quick and safe for concurrent use; it must not
// keep a report's slices past its return unless it copies them.
type Observer func(Report)

// Report is an *EventReport, a *StartReport, a *SettleReport, a *PullReport, a *SendReport or
// an *OperationReport.
type Report interface{ report() }

// Outcome names how an event ended.
type Outcome string

// Outcomes.
const (
	OK      Outcome = "ok"      // the program ended normally
	Failed  Outcome = "failed"  // an error, a panic, a non-zero exit
	Aborted Outcome = "aborted" // an abort: a binding, a malformed bridge call, the time limit
	// NotStarted: the host could not start the program (a *StartError). The program never
	// ran: a queue event's messages are released with their attempts unchanged.
	NotStarted Outcome = "not_started"
)

// OutcomeOf names how an event that ended with failure (nil for a normal end) ended.
func OutcomeOf(failure error) Outcome {
	var a *event.Abort
	var se *StartError
	switch {
	case failure == nil:
		return OK
	case errors.As(failure, &se):
		return NotStarted
	case errors.As(failure, &a):
		return Aborted
	}
	return Failed
}

// StartError is the failure of an event whose program never ran because the host could not
// start it: too many open files, an argument list too long, an executable it cannot run. It
// is the host's failure, not the program's, so it never counts as a delivery attempt: the
// consumer runtime releases the batch's messages with their attempts unchanged and backs off
// (0.1 s, doubling to 5 s, while starts keep failing) before it takes the next batch, and a
// fetch event answers 503 with Retry-After. A handler that runs programs (package bridge)
// returns it; a Go handler, which always runs, never does.
type StartError struct {
	Err error
}

func (e *StartError) Error() string { return "the program did not start: " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// EventReport is how one event ended.
type EventReport struct {
	ID       string
	Kind     Kind
	Outcome  Outcome
	Err      error // why the event failed (an *Abort when aborted); nil when it ended normally
	Start    time.Time
	Duration time.Duration

	// Queue events.
	Queue     string
	Batch     int             // messages in the batch
	Messages  []MessageReport // what became of each, in index order
	SettleErr error           // the platform failed to carry out the settlement

	// Fetch events.
	Method string
	Path   string
	Status int // the response's status

	// BridgeCalls counts the calls its program made over the bridge, by interface name and
	// reply status; nil for a program that made none (a Go handler).
	BridgeCalls map[BridgeCall]int
}

// BridgeCall is one kind of bridge call: the interface name ("" for a call naming none) and the
// reply's status (200, 400 for an exception, 500 for an abort).
type BridgeCall = event.BridgeCall

// StartReport is a queue event of the consumer runtime starting, once its batch has been taken
// from the platform; its EventReport follows when it ends. (Host.RunBatch, whose caller settles,
// reports neither.)
type StartReport struct {
	ID    string
	Kind  Kind
	Queue string
	Batch int
	Start time.Time
}

// MessageReport is what became of one message.
type MessageReport struct {
	ID       string
	Attempts int           // deliveries so far, counting this one
	Call     platform.Call // the program's first explicit call, if any
	Action   platform.Action
	Result   Result // Action, named
	// Lag is how long the message waited to be handled: from when it became deliverable (its
	// enqueue time, or the end of its delay) to the start of its handler. Zero for messages
	// that no handler saw.
	Lag time.Duration
}

// Result names what became of a message, as logs and metrics count it.
type Result string

// Results, one per platform.ActionKind.
const (
	Acked        Result = "acked"         // done: acked, or its event ended normally
	Retried      Result = "retried"       // to be delivered again
	DeadLettered Result = "dead_lettered" // moved to its consumer's dead-letter queue
	Dropped      Result = "dropped"       // deleted: its retries were spent and there is no dead-letter queue
	Released     Result = "released"      // given back undelivered, attempts unchanged
)

// ResultOf names an action.
func ResultOf(a platform.Action) Result {
	switch a.Kind {
	case platform.Done:
		return Acked
	case platform.Redeliver:
		return Retried
	case platform.DeadLetter:
		return DeadLettered
	case platform.Drop:
		return Dropped
	}
	return Released
}

// OperationReport is one operator operation, from whichever surface asked for it (a command,
// the dashboard, Cloudflare's API, a Go program through the server's Client).
type OperationReport struct {
	Op       Op
	Queue    string
	To       string // replay: the queue the messages went to
	Messages int64  // how many messages it removed, moved or read; -1 when the platform cannot tell
	Err      error
	Start    time.Time
	Duration time.Duration
}

// Op names an operator operation.
type Op string

// Operator operations.
const (
	OpPeek        Op = "peek"
	OpReplay      Op = "replay"
	OpPurge       Op = "purge"
	OpDelete      Op = "delete"
	OpPause       Op = "pause"
	OpResume      Op = "resume"
	OpDeleteQueue Op = "delete_queue"
	OpCreateQueue Op = "create_queue"
)

// SettleReport is messages the host resolved without running an event.
type SettleReport struct {
	Queue    string
	Reason   SettleReason
	Messages []MessageReport
	Err      error // the platform failed to carry out the settlement
}

// SettleReason says why messages were resolved without an event.
type SettleReason string

// Settle reasons.
const (
	// Exhausted: delivered once more than max_retries allows (a crash or shutdown redelivered
	// them before their last failure was recorded), so dead-lettered or dropped undelivered.
	Exhausted SettleReason = "exhausted"
	// Halting: received while the host was halting; given back, attempts unchanged.
	Halting SettleReason = "released"
	// Pulled: pulled messages settled by their client (an ack or a retry) or by their lease
	// running out.
	Pulled SettleReason = "pulled"
)

// PullReport is messages a client pulled from a pull consumer, each now leased.
type PullReport struct {
	Queue    string
	Start    time.Time
	Messages []MessageReport // ID, Attempts and Lag: what became of them follows in a SettleReport
}

// SendReport is one call of 发送队列消息 or 批量发送队列消息 that passed its checks.
type SendReport struct {
	Event    string // the id of the event that sent
	Binding  string
	Queue    string // "" when the binding aborted
	Batch    bool   // 批量发送队列消息
	Messages int
	Bytes    int // normalized bodies
	Delayed  int // messages with a delay
	Err      error
	Start    time.Time
	Duration time.Duration
}

func (*EventReport) report()     {}
func (*StartReport) report()     {}
func (*SettleReport) report()    {}
func (*SendReport) report()      {}
func (*OperationReport) report() {}
func (*PullReport) report()      {}

// lag is how long m waited for a handler that started at start.
func lag(m platform.Message, start time.Time) time.Duration {
	ready := max(m.Timestamp, m.Due)
	if ready == 0 {
		return 0
	}
	return max(start.Sub(time.UnixMilli(ready)), 0)
}
