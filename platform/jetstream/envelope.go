package jetstream

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// A batch's envelope is stored in a compact binary form: the marker envelopeMagic, the number
// of messages, then each message's id, enqueue time, content type, due time and body, lengths
// and integers as varints. It costs a fraction of the JSON (with base64 bodies) it replaced,
// both to write and to store (docs/bench.md). An envelope left in JSON by an earlier version
// (it begins with '{') is still read.
var envelopeMagic = []byte("DLB\x01")

// appendEnvelope appends env's binary form to b.
func appendEnvelope(b []byte, env batchEnvelope) []byte {
	b = append(b, envelopeMagic...)
	b = binary.AppendUvarint(b, uint64(len(env.Items)))
	for _, it := range env.Items {
		b = appendBytes(b, it.ID)
		b = binary.AppendVarint(b, it.Time)
		b = appendBytes(b, it.Type)
		b = binary.AppendVarint(b, it.Due)
		b = appendBytes(b, it.Body)
	}
	return b
}

func appendBytes[T string | []byte](b []byte, v T) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// envelopeSize is an upper bound of the binary form's length, to size its buffer once.
func envelopeSize(env batchEnvelope) int {
	n := len(envelopeMagic) + binary.MaxVarintLen64
	for _, it := range env.Items {
		n += len(it.ID) + len(it.Type) + len(it.Body) + 5*binary.MaxVarintLen64
	}
	return n
}

// errEnvelope is a stored envelope that cannot be read (damaged, or not an envelope).
var errEnvelope = errors.New("not a readable batch envelope")

// parseEnvelope reads an envelope in either form. The bodies are sub-slices of data.
func parseEnvelope(data []byte) (batchEnvelope, error) {
	var env batchEnvelope
	if len(data) > 0 && data[0] == '{' {
		if err := json.Unmarshal(data, &env); err != nil {
			return batchEnvelope{}, fmt.Errorf("%w: %w", errEnvelope, err)
		}
		return env, nil
	}
	r := envelopeReader{data: data}
	if len(data) < len(envelopeMagic) || string(data[:len(envelopeMagic)]) != string(envelopeMagic) {
		return batchEnvelope{}, errEnvelope
	}
	r.data = data[len(envelopeMagic):]
	n := r.uvarint()
	// Each message takes at least 5 bytes, so a count beyond that is damage, not a reason to
	// allocate.
	if r.err != nil || n > uint64(len(r.data)/5) {
		return batchEnvelope{}, errEnvelope
	}
	env.Items = make([]envelopeItem, n)
	for i := range env.Items {
		it := &env.Items[i]
		it.ID = string(r.bytes())
		it.Time = r.varint()
		it.Type = string(r.bytes())
		it.Due = r.varint()
		it.Body = r.bytes()
	}
	if r.err != nil || len(r.data) != 0 {
		return batchEnvelope{}, errEnvelope
	}
	return env, nil
}

// envelopeReader reads varints and length-prefixed bytes, keeping the first error.
type envelopeReader struct {
	data []byte
	err  error
}

func (r *envelopeReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.data)
	if n <= 0 {
		r.err = errEnvelope
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *envelopeReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.data)
	if n <= 0 {
		r.err = errEnvelope
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *envelopeReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.data)) || n > math.MaxInt {
		r.err = errEnvelope
		return nil
	}
	v := r.data[:n:n]
	r.data = r.data[n:]
	return v
}
