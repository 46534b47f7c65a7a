package jetstream

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/duilie/duilie/platform"
)

// A batch's envelope is written by hand with exactly the bytes encoding/json would write, so
// that it reads back the same and costs the same to store; strings JSON would escape go to
// encoding/json itself. Random envelopes, from a fixed seed.
func TestEnvelopeMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		switch r.IntN(4) {
		case 0:
			return platform.NewMessageID()
		case 1:
			return []string{"json", "text", "bytes", "v8", ""}[r.IntN(5)]
		default: // anything, escapes and invalid UTF-8 included
			const chars = "az09\"\\<>&\x00\x1f\x7f\xc3\xa9\xe2\x80\xa8\xff"
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = chars[r.IntN(len(chars))]
			}
			return string(b)
		}
	}
	var reused []byte
	for n := range 5000 {
		env := batchEnvelope{Items: make([]envelopeItem, r.IntN(6))}
		for i := range env.Items {
			it := envelopeItem{ID: str(), Time: r.Int64() - r.Int64(), Type: str()}
			if r.IntN(2) == 0 {
				it.Due = r.Int64() - r.Int64()
			}
			if r.IntN(8) > 0 { // else a nil body
				it.Body = make([]byte, r.IntN(300))
				for k := range it.Body {
					it.Body[k] = byte(r.IntN(256))
				}
			}
			env.Items[i] = it
		}
		want, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		got, err := env.marshal(reused[:0]) // as SendBatch does, over the last envelope's bytes
		reused = got
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("envelope %d: marshal:\n%s (%v)\nencoding/json:\n%s", n, got, err, want)
		}
	}
}
