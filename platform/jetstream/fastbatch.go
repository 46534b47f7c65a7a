package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// A batch's messages are published as one JetStream fast batch when the queue's stream allows
// it (allow_batched; nats-server 2.14 and later): each message names, in its reply subject, the
// batch, its place in it and whether it starts, continues or ends it, and the engine answers
// the batch as a whole, with one acknowledgement for its end (and a few flow-control notes on
// the way) instead of one per message. Those acknowledgements were a sixth of the stream's
// ingest work, which is one goroutine per stream (docs/bench.md).
//
// A fast batch is not what makes a SendBatch all or nothing: the envelope is (batch.go). It is
// published with gap "fail": the engine stores its messages in order and stops at the first it
// refuses, and its acknowledgement counts how many it stored, so the rest are known to have
// failed and go the way of any failed publish (looked for, then published again one by one).
// Anything else (an answer that cannot be read, a lost connection, an engine that stopped
// answering) leaves the unacknowledged messages of unknown fate, as it always did.
//
// A batch the engine refuses at its start (fast batches not allowed, too many in flight)
// stored nothing, and is published again at once message by message; a stream that does not
// allow fast batches is not asked again.

const (
	// fastBatchFlow is the flow-control interval asked for. The engine answers every so many
	// messages (fewer when many batches are in flight); nothing here waits for those answers.
	fastBatchFlow = "500"
	// fastBatchSuffix ends every fast batch reply subject (nats-server's FastBatchSuffix).
	fastBatchSuffix = ".$FI"
)

// Operations of a fast batch message, in its reply subject (nats-server's FastBatchOp*).
const (
	fastBatchStart  = "0"
	fastBatchAppend = "1"
	fastBatchCommit = "2"
)

// startFast registers a fast batch that will publish the messages of the indexes given (of a
// batch of size), in that order. Its token is the engine's batch id, unique among all senders.
func (a *batchAcks) startFast(idx []int, size int) (token string, w *ackWait) {
	w = &ackWait{left: len(idx), answered: make([]bool, size), done: make(chan bool), order: idx}
	for i := range w.answered {
		w.answered[i] = true
	}
	for _, i := range idx {
		w.answered[i] = false
	}
	token = nuid.Next()
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.left == 0 {
		close(w.done)
	} else {
		a.waits[token] = w
	}
	return token, w
}

// fastSubject is the reply subject of the message at sequence seq (from 1) of a fast batch of n:
// <inbox>.<batch>.<flow>.fail.<seq>.<operation>.$FI.
func (a *batchAcks) fastSubject(token string, seq, n int) string {
	op := fastBatchAppend
	switch seq {
	case n:
		op = fastBatchCommit
	case 1:
		op = fastBatchStart
	}
	return a.fprefix + token + "." + fastBatchFlow + ".fail." + strconv.Itoa(seq) + "." + op + fastBatchSuffix
}

// failAll ends a fast batch's wait: every message not yet acknowledged is of unknown fate.
func (a *batchAcks) failAll(token string, w *ackWait, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, i := range w.order {
		a.settle(token, w, i, err)
	}
}

// fastReply takes one of the engine's answers to a fast batch.
func (a *batchAcks) fastReply(m *nats.Msg) {
	ans := readFastAnswer(m)
	if ans.note && ans.err == nil { // flow control, most answers: nothing to parse
		return
	}
	token, seq, ok := parseFastReply(m.Subject, a.fprefix)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.waits[token]
	if w == nil { // done, or given up on
		return
	}
	if ans.note { // a message refused: the acknowledgement follows
		w.noted = ans.err
		return
	}
	if ans.err == nil {
		// The engine stored the batch's first count messages, in order, and no more.
		stopped := w.noted // why the engine stopped, from its note
		if stopped == nil {
			stopped = fmt.Errorf("jetstream: the batch's messages after the %d stored were not stored", ans.count)
		}
		for s, i := range w.order {
			if s < ans.count {
				a.settle(token, w, i, nil)
			} else {
				a.settle(token, w, i, stopped)
			}
		}
		return
	}
	if seq == 1 && refusedAtStart(ans.err) {
		w.unbegun = ans.err
	}
	for _, i := range w.order {
		a.settle(token, w, i, ans.err)
	}
}

// parseFastReply reads the batch and the sequence from a fast batch reply subject.
func parseFastReply(subject, prefix string) (token string, seq int, ok bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, fastBatchSuffix)
	if !ok {
		return "", 0, false
	}
	// <batch>.<flow>.fail.<seq>.<operation>
	parts := strings.Split(rest, ".")
	if len(parts) != 5 {
		return "", 0, false
	}
	seq, err := strconv.Atoi(parts[3])
	if err != nil || seq < 1 {
		return "", 0, false
	}
	return parts[0], seq, true
}

// fastAnswer is one of the engine's answers to a fast batch: a note (flow control, a gap, or
// the error of one message, in err: the acknowledgement follows), the batch's acknowledgement
// (count messages stored), or the batch's refusal (err).
type fastAnswer struct {
	note  bool
	count int
	err   error
}

// readFastAnswer reads one of the engine's answers to a fast batch.
func readFastAnswer(m *nats.Msg) fastAnswer {
	if len(m.Data) == 0 {
		return fastAnswer{err: answerStatus(m, "batch")}
	}
	if bytes.HasPrefix(m.Data, []byte(`{"type":"err"`)) {
		var note struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &note); err == nil && note.Error != nil {
			return fastAnswer{note: true, err: note.Error}
		}
		return fastAnswer{note: true}
	}
	if bytes.HasPrefix(m.Data, []byte(`{"type":`)) {
		return fastAnswer{note: true}
	}
	var ack struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
		Count  *int                `json:"count"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return fastAnswer{err: fmt.Errorf("jetstream: unreadable answer to a batch: %w", err)}
	}
	switch {
	case ack.Error != nil:
		return fastAnswer{err: ack.Error}
	case ack.Stream == "" || ack.Count == nil || *ack.Count < 0:
		return fastAnswer{err: fmt.Errorf("jetstream: answer to a batch names no stream or count: %.200s", m.Data)}
	}
	return fastAnswer{count: *ack.Count}
}

// Refusals of a fast batch at its start, after which the engine has stored none of it.
const (
	errBatchDisabled       jetstream.ErrorCode = 10205 // the stream does not allow fast batches
	errBatchInvalidPattern jetstream.ErrorCode = 10206 // the reply subject was not understood
	errBatchInvalidID      jetstream.ErrorCode = 10207
	errBatchTooManyInbound jetstream.ErrorCode = 10211 // too many batches in flight
)

func refusedAtStart(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errBatchDisabled, errBatchInvalidPattern, errBatchInvalidID, errBatchTooManyInbound:
		return true
	}
	return false
}

// fastUnsupported says whether a refusal at the start means the stream will never take fast
// batches, so that the queue stops asking.
func fastUnsupported(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == errBatchDisabled || apiErr.ErrorCode == errBatchInvalidPattern)
}
