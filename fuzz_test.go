package duilie

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/duilie/duilie/platform"
)

// FuzzCheckBody: no panic; every failure is an *Exception; an accepted body is valid JSON within
// the limits, and checking it again gives the same bytes.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{`{"kind":"page","url":"/release/x"}`, `1e21`, `-0`, `{"$句柄":1}`, `[[[[1]]]]`, "\"\\ud800\"", `{"a":1,"a":2}`, `{"1":0,"0":1}`, "\ufeff1", `{`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, text []byte, delay int) {
		norm, err := CheckBody(text, delay)
		if err != nil {
			var ex *Exception
			if !errors.As(err, &ex) {
				t.Fatalf("CheckBody(%q) failed with %T %v, not an exception", text, err, err)
			}
			return
		}
		if !json.Valid(norm) || len(norm) > MaxBodyBytes || delay < 0 || delay > MaxDelaySeconds {
			t.Fatalf("CheckBody(%q, %d) accepted %q", text, delay, norm)
		}
		again, err := CheckBody(norm, 0)
		if err != nil || !bytes.Equal(again, norm) {
			t.Fatalf("checking %q again gave %q, %v", norm, again, err)
		}
	})
}

// FuzzCheckBatch: no panic; every failure is an *Exception; accepted items are within the limits,
// their rendering is valid JSON, and a batch rebuilt from them checks to the same items.
func FuzzCheckBatch(f *testing.F) {
	for _, s := range []string{
		`[{"body":1}]`, `[{"body":{"x":"],["},"delaySeconds":1e1}]`, `[{"delaySeconds":-0,"body":null}]`,
		`[{"body":1,"contentType":"json"}]`, `[{"body":1,"delaySeconds":1.5}]`, `[]`, `{}`, `[1]`,
		`[{"body":[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]}]`, `[{"bo\u0064y":"\ud83d\ude00"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		items, err := CheckBatch(text)
		if err != nil {
			var ex *Exception
			if !errors.As(err, &ex) {
				t.Fatalf("CheckBatch(%q) failed with %T %v, not an exception", text, err, err)
			}
			return
		}
		rendered := platform.AppendItemsJSON(nil, items)
		if !json.Valid(rendered) || len(items) == 0 || len(items) > MaxBatchItems {
			t.Fatalf("CheckBatch(%q) accepted %q", text, rendered)
		}
		rebuilt := []byte{'['}
		total := 0
		for i, it := range items {
			if it.ContentType != platform.JSON || it.DelaySeconds < 0 || it.DelaySeconds > MaxDelaySeconds || len(it.Body) > MaxBodyBytes {
				t.Fatalf("item %d out of bounds: %+v", i, it)
			}
			total += len(it.Body)
			if i > 0 {
				rebuilt = append(rebuilt, ',')
			}
			rebuilt = append(rebuilt, `{"body":`...)
			rebuilt = append(rebuilt, it.Body...)
			if it.DelaySeconds > 0 {
				rebuilt = append(rebuilt, `,"delaySeconds":`...)
				rebuilt = strconv.AppendInt(rebuilt, int64(it.DelaySeconds), 10)
			}
			rebuilt = append(rebuilt, '}')
		}
		rebuilt = append(rebuilt, ']')
		if total > MaxBatchBodyBytes {
			t.Fatalf("accepted %d bytes of bodies", total)
		}
		again, err := CheckBatch(rebuilt)
		if err != nil || !bytes.Equal(platform.AppendItemsJSON(nil, again), rendered) {
			t.Fatalf("rebuilt batch %q checked to %v, %v", rebuilt, again, err)
		}
	})
}
