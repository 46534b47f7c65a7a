package server

import (
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/duilie/duilie/internal/host"
	"github.com/duilie/duilie/platform"
)

// A settings struct is a struct whose fields carry `toml:"key[,form]"` and `rule:"…"` tags
// (see platform.Config): the consumer settings of package host, each driver's platform
// configuration, and this package's Config for the [app] table. The configuration reader maps
// a TOML table onto one with decode; every range is checked by the struct's owner.

// field is one tagged field of a settings struct.
type field struct {
	name  string // the Go field's name
	key   string // the TOML key
	form  string // "", "path", "seconds" or "ms"
	rule  string
	index []int
	// A setting whose Go zero value means its default: with nonzero, 0 is a mistake in
	// duilie.toml; with none, 0 in duilie.toml is the Go field's "none" value, -1, and a
	// negative value is a mistake.
	nonzero, none bool
}

// fieldsOf lists the tagged fields of a struct type (or a pointer to one) that hold a setting,
// in declaration order.
func fieldsOf(t reflect.Type) []field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []field
	for _, sf := range reflect.VisibleFields(t) {
		tag, ok := sf.Tag.Lookup("toml")
		if !ok || tag == "-" || !settingType(sf.Type) {
			continue
		}
		opts := strings.Split(tag, ",")
		f := field{name: sf.Name, key: opts[0], rule: ruleOf(t, sf), index: sf.Index}
		for _, o := range opts[1:] {
			switch o {
			case "nonzero":
				f.nonzero = true
			case "none":
				f.none = true
			default:
				f.form = o
			}
		}
		out = append(out, f)
	}
	return out
}

// ruleOf is what a field allows: its rule tag, or, for a setting whose range the host owns,
// the host's rule.
func ruleOf(t reflect.Type, sf reflect.StructField) string {
	if t == reflect.TypeFor[Config]() && sf.Name == "TimeLimit" {
		return platform.Invalid(host.Config{}, "TimeLimit").Rule
	}
	return sf.Tag.Get("rule")
}

var durationType = reflect.TypeFor[time.Duration]()

func settingType(t reflect.Type) bool {
	switch {
	case t == durationType:
		return true
	case t.Kind() == reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int:
		return true
	}
	return false
}

// keys lists the TOML keys of a settings struct, in declaration order.
func keys(v any) []string {
	var out []string
	for _, f := range fieldsOf(reflect.TypeOf(v)) {
		out = append(out, f.key)
	}
	return out
}

// keyOf is the TOML key of the Go field name of a settings struct, or "" if it has none.
func keyOf(v any, name string) string {
	for _, f := range fieldsOf(reflect.TypeOf(v)) {
		if f.name == name {
			return f.key
		}
	}
	return ""
}

// decode sets the fields of the settings struct that v points to from the TOML table t (whose
// own key is table), records a mistake for every value of the wrong type, and makes path
// settings absolute, relative to the configuration's directory. It returns the fields that
// had a mistake, so that a range check does not report them again.
func (c *checker) decode(table string, t map[string]any, v any) map[string]bool {
	bad := map[string]bool{}
	rv := reflect.ValueOf(v).Elem()
	for _, f := range fieldsOf(rv.Type()) {
		fv := rv.FieldByIndex(f.index)
		raw, present := t[f.key]
		ok := !present || set(fv, raw, f.form)
		switch {
		case !present:
		case ok && f.nonzero && fv.Int() == 0, ok && f.none && fv.Int() < 0:
			ok = false
		case ok && f.none && fv.Int() == 0:
			fv.SetInt(-1)
		}
		if !ok {
			c.bad(join(table, f.key), raw, f.rule)
			bad[f.name] = true
		}
		if f.form == "path" && fv.String() != "" && !filepath.IsAbs(fv.String()) {
			fv.SetString(filepath.Clean(filepath.Join(c.dir, fv.String())))
		}
	}
	return bad
}

// set stores a decoded TOML value in a field, and reports whether it had the field's type.
func set(fv reflect.Value, raw any, form string) bool {
	switch {
	case fv.Type() == durationType:
		switch form {
		case "seconds", "ms":
			n, ok := raw.(int64)
			if !ok {
				return false
			}
			unit := time.Second
			if form == "ms" {
				unit = time.Millisecond
			}
			fv.SetInt(int64(time.Duration(n) * unit))
		default:
			s, ok := raw.(string)
			if !ok {
				return false
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return false
			}
			fv.SetInt(int64(d))
		}
		return true
	case fv.Kind() == reflect.String:
		s, ok := raw.(string)
		if ok {
			fv.SetString(s)
		}
		return ok
	case fv.Kind() == reflect.Bool:
		b, ok := raw.(bool)
		if ok {
			fv.SetBool(b)
		}
		return ok
	case fv.Kind() == reflect.Int:
		n, ok := raw.(int64)
		if ok {
			fv.SetInt(n)
		}
		return ok
	case fv.Kind() == reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return false
		}
		out := make([]string, 0, len(list))
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return false
			}
			out = append(out, s)
		}
		fv.Set(reflect.ValueOf(out))
		return true
	}
	return false
}

// fieldValue is a field's value as the configuration file would write it, for messages about
// settings made in Go.
func fieldValue(v any, name string) any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	for _, f := range fieldsOf(rv.Type()) {
		if f.name != name {
			continue
		}
		fv := rv.FieldByIndex(f.index)
		switch {
		case fv.Type() == durationType:
			d := time.Duration(fv.Int())
			switch f.form {
			case "seconds":
				return int64(d / time.Second)
			case "ms":
				return int64(d / time.Millisecond)
			}
			return d.String()
		case fv.Kind() == reflect.Int:
			return fv.Int()
		case fv.Kind() == reflect.Slice:
			list := make([]any, fv.Len())
			for i := range list {
				list[i] = fv.Index(i).String()
			}
			return list
		}
		return fv.Interface()
	}
	return nil
}
