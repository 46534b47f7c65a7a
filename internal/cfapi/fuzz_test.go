package cfapi

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/duilie/duilie"
	"github.com/duilie/duilie/jsonvalue"
)

// FuzzPushBody: any request body of a push is refused with an API error or read as a message
// the interface would send: a json body normalized and within 128000 bytes, a text body valid
// UTF-8 within 128000 bytes, a delay 0–86400. Nothing panics.
func FuzzPushBody(f *testing.F) {
	for _, s := range []string{
		`{"body":{"a":1}}`, `{"body":"x","content_type":"text"}`, `{"body":1,"delay_seconds":86400}`,
		`{"body":1,"delay_seconds":1.5}`, `{"body":{"$句柄":1}}`, `{"body":"\ud800","content_type":"text"}`,
		`{"Body":1}`, `{"body":null}`, `{"body":1,"body":2}`, `[]`, `{`, `{"body":[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"body":1,"content_type":"bytes"}`, `{"body":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := parseObject(in)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 {
				t.Fatalf("%q: %v", in, err)
			}
			return
		}
		it, err := item(o, nil)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status/100 != 4 {
				t.Fatalf("%q: %v", in, err)
			}
			return
		}
		if it.DelaySeconds < 0 || int64(it.DelaySeconds) > MaxDelaySeconds || len(it.Body) > duilie.MaxBodyBytes {
			t.Fatalf("%q: accepted %+v", in, it)
		}
		switch it.ContentType {
		case "json":
			again, _, err := jsonvalue.Append(nil, it.Body)
			if err != nil || string(again) != string(it.Body) {
				t.Fatalf("%q: json body %q is not normalized", in, it.Body)
			}
		case "text":
			if !utf8.Valid(it.Body) {
				t.Fatalf("%q: text body %q", in, it.Body)
			}
		default:
			t.Fatalf("%q: content type %q", in, it.ContentType)
		}
	})
}
