//go:build js && wasm

package workers

import (
	"fmt"
	"math"
	"syscall/js"

	"github.com/duilie/duilie/platform"
)

// maxBatch is the most messages a MessageBatch holds: max_batch_size is at most 100.
const maxBatch = 100

// readBatch reads a MessageBatch: its queue, and each message's id, attempts, timestamp and
// body. It reads what the platform hands over defensively, since a test's mock or another host
// may shape it differently from Cloudflare: a batch that is not an object, or whose messages
// are not an array of at most 100, fails the event with an error saying so; in a message, an
// id that is not a string is its String() when it is a number or a boolean and "" otherwise,
// attempts that are not a number are 1, a timestamp is a Date or a number of milliseconds (0
// when neither), and a body the entry cannot read as a JSON value is one that is not (ReadBatch
// says so). Reading a property that throws reads it as missing.
func (w *worker) readBatch(batch js.Value) (queue string, ds []platform.Delivery, err error) {
	if !isObject(batch) {
		return "", nil, fmt.Errorf("duilie: the queue handler's first argument is %s, not a MessageBatch", describe(batch))
	}
	if q := get(batch, "queue"); typeOf(q) == js.TypeString {
		queue = q.String()
	}
	msgs := get(batch, "messages")
	n := -1
	if js.Global().Get("Array").Call("isArray", msgs).Bool() {
		if l := get(msgs, "length"); typeOf(l) == js.TypeNumber {
			n = l.Int()
		}
	}
	switch {
	case n < 0:
		return "", nil, fmt.Errorf("duilie: the MessageBatch's messages are %s, not an array", describe(msgs))
	case n > maxBatch:
		return "", nil, fmt.Errorf("duilie: the MessageBatch has %d messages; a batch holds at most %d", n, maxBatch)
	}
	ds = make([]platform.Delivery, n)
	for i := range ds {
		m := index(msgs, i)
		d := platform.Delivery{Token: m, Message: platform.Message{
			ID:        messageID(get(m, "id")),
			Attempts:  attempts(get(m, "attempts")),
			Timestamp: timestamp(get(m, "timestamp")),
		}}
		if text := w.text(m); text.Type() == js.TypeString {
			d.Body, d.ContentType = []byte(text.String()), platform.JSON
		} else {
			d.ContentType = platform.V8 // not a JSON value: ReadBatch says so
		}
		ds[i] = d
	}
	return queue, ds, nil
}

// text is the entry's jsonText(m): the body's JSON text, or undefined.
func (w *worker) text(m js.Value) (v js.Value) {
	defer func() {
		if recover() != nil {
			v = js.Undefined()
		}
	}()
	return w.jsonText.Invoke(m)
}

func messageID(v js.Value) string {
	switch typeOf(v) {
	case js.TypeString:
		return v.String()
	case js.TypeNumber, js.TypeBoolean:
		return js.Global().Call("String", v).String()
	}
	return ""
}

func attempts(v js.Value) int {
	if typeOf(v) != js.TypeNumber {
		return 1
	}
	f := v.Float()
	switch {
	case math.IsNaN(f):
		return 1
	case f < 0:
		return 0
	case f > math.MaxInt32:
		return math.MaxInt32
	}
	return int(f)
}

// maxTime is the largest time a JavaScript Date holds, in ms either side of 1970.
const maxTime = 8.64e15

func timestamp(v js.Value) int64 {
	if isObject(v) && typeOf(get(v, "getTime")) == js.TypeFunction {
		v = tryCall(v, "getTime")
	}
	if typeOf(v) != js.TypeNumber {
		return 0
	}
	f := v.Float()
	if math.IsNaN(f) || math.Abs(f) > maxTime {
		return 0
	}
	return int64(f)
}

// typeOf is v's type. A value syscall/js has no type for (a bigint, on which Type panics)
// reads as TypeSymbol, a kind the adapter never reads, so it counts as missing.
func typeOf(v js.Value) (t js.Type) {
	defer func() {
		if recover() != nil {
			t = js.TypeSymbol
		}
	}()
	return v.Type()
}

func isObject(v js.Value) bool {
	t := typeOf(v)
	return t == js.TypeObject || t == js.TypeFunction
}

// reflectGet is Reflect.get. Reading a property through it, a call, is safe: syscall/js turns
// an exception thrown by a call into a panic Go can recover, whereas one thrown by Value.Get
// or Value.Index (a getter, a proxy) unwinds through the Go program and ends it.
var reflectGet = js.Global().Get("Reflect").Get("get")

// get is v[key], or undefined when v is not an object or reading the property throws.
func get(v js.Value, key string) (r js.Value) {
	defer func() {
		if recover() != nil {
			r = js.Undefined()
		}
	}()
	if !isObject(v) {
		return js.Undefined()
	}
	return reflectGet.Invoke(v, key)
}

// index is v[i], or undefined when reading it throws.
func index(v js.Value, i int) (r js.Value) {
	defer func() {
		if recover() != nil {
			r = js.Undefined()
		}
	}()
	return reflectGet.Invoke(v, i)
}

// tryCall is v.method(), or undefined when it throws.
func tryCall(v js.Value, method string) (r js.Value) {
	defer func() {
		if recover() != nil {
			r = js.Undefined()
		}
	}()
	return v.Call(method)
}

// describe names v's kind for an error message: "undefined", "null", "a number", ….
func describe(v js.Value) string {
	switch typeOf(v) {
	case js.TypeUndefined:
		return "undefined"
	case js.TypeNull:
		return "null"
	case js.TypeBoolean:
		return "a boolean"
	case js.TypeNumber:
		return "a number"
	case js.TypeString:
		return "a string"
	case js.TypeFunction:
		return "a function"
	case js.TypeObject:
		return "an object"
	}
	return "a value of another kind"
}
