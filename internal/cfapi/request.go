package cfapi

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/duilie/duilie/jsonvalue"
)

// object is a request body's JSON object as JSON.parse reads it: its members' values as
// normalized JSON text, by key (case-sensitive; a duplicate key keeps its last value). A null
// member counts as absent, as Cloudflare's optional fields do. path is the object's place in
// the body, for messages ("" for the body, "settings." for a member object).
type object struct {
	path string
	m    map[string][]byte
}

// readObject reads r's body as a JSON object. An empty body is an empty object when empty is
// true (endpoints whose fields are all optional). A body that is not JSON is 10208; one that
// is JSON but not an object is 10207; one over the request limit is tooBig.
func readObject(r *http.Request, empty bool, tooBig *apiError) (object, error) {
	text, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return object{}, tooBig
		}
		return object{}, errMalformed("the body could not be read: " + err.Error())
	}
	if len(text) == 0 && empty {
		return object{m: map[string][]byte{}}, nil
	}
	return parseObject(text)
}

// parseObject parses a request body's text as a JSON object.
func parseObject(text []byte) (object, error) {
	norm, _, err := jsonvalue.Append(nil, text)
	if err != nil {
		return object{}, errMalformed(err.Error())
	}
	if norm[0] != '{' {
		return object{}, errInvalid("the body must be a JSON object")
	}
	return members("", norm), nil
}

// members takes a normalized JSON object apart.
func members(path string, norm []byte) object {
	o := object{path: path, m: map[string][]byte{}}
	for k, v := range jsonvalue.Members(norm) {
		key, _ := jsonvalue.Unquote(k)
		if string(v) != "null" {
			o.m[key] = v
		}
	}
	return o
}

// integer reads member key as an integer lo–hi. It reports whether the member is present, and
// bad(what was wrong) when it is not such an integer.
func (o object) integer(key string, lo, hi int64, bad func(string) *apiError) (int64, bool, error) {
	v, present := o.m[key]
	if !present {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, true, bad(o.path + key + " must be an integer " + strconv.FormatInt(lo, 10) + "–" + strconv.FormatInt(hi, 10) + ", not " + clip(v))
	}
	return int64(f), true, nil
}

// str reads member key as a string.
func (o object) str(key string) (string, bool, error) {
	v, present := o.m[key]
	if !present {
		return "", false, nil
	}
	s, ok := jsonvalue.Unquote(v)
	if !ok || v[0] != '"' {
		return "", true, errInvalid(o.path + key + " must be a string, not " + clip(v))
	}
	return s, true, nil
}

// boolean reads member key as true or false.
func (o object) boolean(key string) (bool, bool, error) {
	v, present := o.m[key]
	switch {
	case !present:
		return false, false, nil
	case string(v) == "true":
		return true, true, nil
	case string(v) == "false":
		return false, true, nil
	}
	return false, true, errInvalid(o.path + key + " must be true or false, not " + clip(v))
}

// sub reads member key as an object.
func (o object) sub(key string) (object, bool, error) {
	v, present := o.m[key]
	if !present {
		return object{path: o.path + key + ".", m: map[string][]byte{}}, false, nil
	}
	if v[0] != '{' {
		return object{}, true, errInvalid(o.path + key + " must be an object, not " + clip(v))
	}
	return members(o.path+key+".", v), true, nil
}

// clip shortens a value for a message.
func clip(v []byte) string {
	if len(v) > 40 {
		return string(v[:37]) + "…"
	}
	return string(v)
}
