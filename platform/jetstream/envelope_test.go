package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func testEnvelope() batchEnvelope {
	return batchEnvelope{Items: []envelopeItem{
		{ID: "0190c1f2a3b4c5d6e7f8a9b0c1d2e3f4", Time: 1_780_000_000_123, Type: "json", Body: []byte(`{"a":[1,2,3]}`)},
		{ID: "b", Time: 1, Type: "text", Due: 1_780_000_060_123, Body: []byte("hé\x00\xff")},
		{ID: "c", Time: -1, Type: "bytes", Body: []byte{}},
	}}
}

// An envelope reads back as it was written, and within the size it was given.
func TestEnvelopeRoundTrip(t *testing.T) {
	for _, env := range []batchEnvelope{testEnvelope(), {Items: []envelopeItem{}}} {
		b := appendEnvelope(nil, env)
		if len(b) > envelopeSize(env) {
			t.Errorf("binary form %d bytes, over its bound %d", len(b), envelopeSize(env))
		}
		got, err := parseEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, env) {
			t.Errorf("read back %+v, want %+v", got, env)
		}
	}
}

// An envelope stored as JSON by an earlier version is still read, so that a batch its sender
// left unfinished is finished after an upgrade.
func TestEnvelopeJSONStillRead(t *testing.T) {
	env := testEnvelope()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"items":[{"id":"0190c1f2a3b4c5d6e7f8a9b0c1d2e3f4","time":1780000000123,"type":"json","body":"eyJhIjpbMSwyLDNdfQ=="}`)) {
		t.Fatalf("the JSON form changed: %s", data)
	}
	got, err := parseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, env) {
		t.Errorf("read back %+v, want %+v", got, env)
	}
}

// A damaged envelope is refused with errEnvelope, never read as a shorter or different batch.
func TestEnvelopeDamaged(t *testing.T) {
	good := appendEnvelope(nil, testEnvelope())
	cases := map[string][]byte{
		"empty":       nil,
		"no marker":   good[len(envelopeMagic):],
		"cut":         good[:len(good)-1],
		"extra":       append(append([]byte{}, good...), 0),
		"huge count":  append(append([]byte{}, envelopeMagic...), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"huge length": append(append([]byte{}, envelopeMagic...), 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a', 'b', 'c', 'd'),
		"bad json":    []byte(`{"items":[{"id":1}]}`),
	}
	for name, data := range cases {
		if _, err := parseEnvelope(data); !errors.Is(err, errEnvelope) {
			t.Errorf("%s: got %v, want errEnvelope", name, err)
		}
	}
}

// FuzzEnvelope: any bytes either read as an envelope that writes back to the same bytes, or are
// refused; never a panic. Seeds are in testdata/fuzz/FuzzEnvelope.
func FuzzEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, testEnvelope()))
	f.Add(appendEnvelope(nil, batchEnvelope{}))
	f.Add([]byte(`{"items":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := parseEnvelope(data)
		if err != nil {
			if !errors.Is(err, errEnvelope) {
				t.Fatalf("error %v is not errEnvelope", err)
			}
			return
		}
		if len(data) > 0 && data[0] == '{' {
			return // JSON has many spellings of one envelope
		}
		if again := appendEnvelope(nil, env); !bytes.Equal(again, data) && !nonCanonicalVarints(data) {
			t.Fatalf("%x read as %+v, written back as %x", data, env, again)
		}
	})
}

// nonCanonicalVarints says whether data, a readable envelope, spells a varint with more bytes
// than it needs (which encoding/binary accepts), so it cannot come back byte for byte.
func nonCanonicalVarints(data []byte) bool {
	for i := 1; i < len(data); i++ {
		if data[i] == 0 && data[i-1]&0x80 != 0 {
			return true
		}
	}
	return false
}
