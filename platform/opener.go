package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Opener opens one kind of platform: it is that kind's configuration, what the [platform]
// table of duilie.toml holds and what a Go program sets to choose a platform. Each driver owns
// its Opener type, registers it by kind, and checks its own settings.
//
// Fields that duilie.toml sets carry a `toml:"key"` tag, and a `rule:"…"` tag saying what the
// key allows, which both Validate and the configuration reader quote. A tag option names the
// key's form where it is not the field's own: ",path" (a file path, relative to the
// configuration file), ",seconds" and ",ms" (an integer number of seconds or milliseconds for a
// time.Duration; without one a duration is a string such as "96h").
type Opener interface {
	// Kind is the name the driver is registered under: "jetstream", "memory", …
	Kind() string
	// Validate checks every setting. Its error joins one *FieldError per mistake.
	Validate() error
	// Open opens the platform. Open validates the configuration first.
	Open(ctx context.Context, o OpenOptions) (Platform, error)
}

// OpenOptions are what every opening of a platform takes.
type OpenOptions struct {
	// Logger receives the driver's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// An OwnerOpener is an Opener of a platform whose store one long-running process owns (the
// embedded engine in its data directory, the in-memory platform in its process): OpenOwner
// opens it as that process, which lets other processes reach the store through it, and Open
// as one of them (it reaches the owner, or opens the store itself for a moment when none
// runs). A server opens its platform with OpenOwner when the Opener has it; every other
// opening, and every Opener without it, uses Open.
type OwnerOpener interface {
	Opener
	OpenOwner(ctx context.Context, o OpenOptions) (Platform, error)
}

var (
	registryMu sync.Mutex
	registry   = map[string]func() Opener{}
)

// DefaultKind is the platform duilie runs on when no kind is named: the embedded engine.
const DefaultKind = "jetstream"

// Register makes a kind of platform available by name. newConfig returns that kind's
// configuration with every default filled in. Drivers call it from an init function; a kind
// registered twice panics.
func Register(kind string, newConfig func() Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic("platform: kind " + kind + " registered twice")
	}
	registry[kind] = newConfig
}

// NewConfig returns the default configuration of the named kind, or an error listing the
// kinds there are.
func NewConfig(kind string) (Opener, error) {
	registryMu.Lock()
	newConfig, ok := registry[kind]
	registryMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown platform kind %q; known: %s", kind, strings.Join(Kinds(), ", "))
	}
	return newConfig(), nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	kinds := make([]string, 0, len(registry))
	for k := range registry {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// FieldError is one setting that is mistaken. Field is the Go field's name; Rule says what is
// allowed (by default the field's rule tag).
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Invalid returns the *FieldError of a field of the struct cfg (or a pointer to it), whose
// rule is the field's rule tag.
func Invalid(cfg any, field string) *FieldError {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	f, ok := t.FieldByName(field)
	if !ok {
		panic("platform.Invalid: " + t.String() + " has no field " + field)
	}
	return &FieldError{Field: field, Rule: f.Tag.Get("rule")}
}

// FieldErrors returns every *FieldError joined into err (with errors.Join), in order.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}
