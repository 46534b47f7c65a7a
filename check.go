package duilie

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/duilie/duilie/jsonvalue"
	"github.com/duilie/duilie/platform"
)

// Limits of the interface (SPEC §3–§5).
const (
	MaxBodyBytes      = 128000  // a body's input text and its normalized text
	MaxBatchBytes     = 1048576 // a sendBatch input text (1 MiB)
	MaxBatchBodyBytes = 256000  // the sum of a batch's normalized bodies
	MaxBatchItems     = 100
	MaxDelaySeconds   = 43200 // 12 hours
	MaxBodyDepth      = 24    // nesting of a body
	MaxHostDepth      = 32    // nesting the host bridge carries at all
)

// CheckBody applies the checks of SPEC §3 steps 2–5 to a body's JSON text and a delay, and
// returns the normalized text the platform would receive: exactly JavaScript's
// JSON.stringify(JSON.parse(text)) as V8 prints it. Errors are *Exception with the spec's
// message. Send runs the same checks.
func CheckBody(text []byte, delaySeconds int) ([]byte, error) {
	if delaySeconds < 0 || delaySeconds > MaxDelaySeconds {
		return nil, ErrDelayRange.detailed("%d seconds", delaySeconds)
	}
	if len(text) > MaxBodyBytes {
		return nil, ErrBodyTooLarge.detailed("%d bytes", len(text))
	}
	norm, err := normalize(text, MaxBodyDepth, bodyExceptions)
	if err != nil {
		return nil, err
	}
	if len(norm) > MaxBodyBytes {
		return nil, ErrBodyTooLarge.detailed("%d bytes once normalized (%d as sent)", len(norm), len(text))
	}
	return norm, nil
}

// textExceptions are the exceptions of normalizing a body's text, or a batch's.
type textExceptions struct{ notJSON, tooDeep, hostOnly *Exception }

var (
	bodyExceptions  = textExceptions{ErrBodyNotJSON, ErrBodyTooDeep, ErrBodyHostOnly}
	batchExceptions = textExceptions{ErrBatchNotJSON, ErrBatchTooDeep, ErrBatchHostOnly}
)

// normalize is §3 step 4 and §4 step 3: normalization, then nesting and markers judged on the
// parsed value in the reference host's order. The host bridge carries 32 levels at all, so
// deeper values fail on nesting before markers are looked at; maxDepth is the interface's own
// limit, checked last. The exceptions are those of a body or of a batch.
func normalize(text []byte, maxDepth int, ex textExceptions) ([]byte, error) {
	norm, st, err := jsonvalue.Append(make([]byte, 0, len(text)+len(text)/8+16), text)
	switch {
	case err != nil:
		return nil, ex.notJSON.detailed("%s", syntaxDetail(err))
	case st.Depth > MaxHostDepth:
		return nil, ex.tooDeep.detailed("more than %d levels", MaxHostDepth)
	case st.Marker:
		return nil, ex.hostOnly
	case st.Depth > maxDepth:
		return nil, ex.tooDeep.detailed("%d levels", st.Depth)
	}
	return norm, nil
}

// CheckBatch applies the checks of SPEC §4 steps 2–6 to a sendBatch input text and returns the
// items the platform would receive, in input order, each body the normalized text of the item's
// body (a sub-slice of one normalized text). Errors are *Exception with the spec's message.
// SendBatch runs the same checks.
func CheckBatch(text []byte) ([]platform.BatchItem, error) {
	if len(text) > MaxBatchBytes {
		return nil, ErrBatchTooLarge.detailed("%d bytes", len(text))
	}
	// The array and the item object add two levels to the 24 a body may have.
	norm, err := normalize(text, MaxBodyDepth+2, batchExceptions)
	if err != nil {
		return nil, err
	}
	if norm[0] != '[' {
		return nil, ErrBatchNotArray
	}
	// An item takes at least 11 bytes (`{"body":0},`): room for them all at once.
	items := make([]platform.BatchItem, 0, min(MaxBatchItems, len(norm)/11+1))
	for elem := range jsonvalue.Elements(norm) {
		if len(items) == MaxBatchItems {
			return nil, ErrBatchTooMany
		}
		items = append(items, platform.BatchItem{Body: elem, ContentType: platform.JSON})
	}
	if len(items) == 0 {
		return nil, ErrBatchEmpty
	}
	total := 0
	for i := range items {
		if ex := checkItem(&items[i]); ex != nil {
			return nil, ex.detailed("item %d (counting from 0)", i)
		}
		total += len(items[i].Body)
	}
	if total > MaxBatchBodyBytes {
		return nil, ErrBatchBodiesTooLarge.detailed("%d bytes", total)
	}
	return items, nil
}

// syntaxDetail says where a text fails to parse, for people.
func syntaxDetail(err error) string {
	var se *jsonvalue.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("at byte %d: %s", se.Offset, se.Msg)
	}
	return err.Error()
}

// CheckBatchText applies CheckBatch's checks to a sendBatch input text and returns the items as
// sendBatch receives them, as JSON text:
// [{"body":<v>,"contentType":"json"[,"delaySeconds":n]},…], keys in that order.
func CheckBatchText(text []byte) ([]byte, error) {
	items, err := CheckBatch(text)
	if err != nil {
		return nil, err
	}
	return platform.AppendItemsJSON(nil, items), nil
}

// checkItem checks one normalized batch item, held in item.Body, and replaces it with the
// item's body and delay.
func checkItem(item *platform.BatchItem) *Exception {
	obj := item.Body
	if obj[0] != '{' {
		return ErrItemNotObject
	}
	var body, delay []byte
	extra := false
	for key, value := range jsonvalue.Members(obj) {
		switch string(key) {
		case `"body"`:
			body = value
		case `"delaySeconds"`:
			delay = value
		default:
			extra = true
		}
	}
	switch {
	case body == nil:
		return ErrItemNoBody
	case extra:
		return ErrItemExtraKey
	}
	if delay != nil {
		d, ok := delaySeconds(delay)
		if !ok {
			return ErrItemDelay
		}
		item.DelaySeconds = d
	}
	if len(body) > MaxBodyBytes {
		return ErrItemBodyTooLarge
	}
	item.Body = body
	return nil
}

// delaySeconds reads a normalized JSON value as an item's delaySeconds: an integer 0..43200
// after normalization, so 1e1 (normalized to 10) is allowed and 1.5, "5" or 1e+21 are not.
func delaySeconds(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 5 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n > MaxDelaySeconds {
		return 0, false
	}
	return n, true
}
