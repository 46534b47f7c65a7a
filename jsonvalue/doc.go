// Package jsonvalue normalizes JSON text exactly as V8 does, and measures
// the value for duilie's limits (SPEC §5).
//
// # Guarantee
//
// For every input, Append gives exactly the bytes of JavaScript's
// JSON.stringify(JSON.parse(text)) in V8, and rejects exactly the inputs
// that JSON.parse rejects, with one deliberate difference: input that is not
// valid UTF-8 is rejected (V8 would first decode it with replacement
// characters; SPEC §5.1 says it is not a JSON text). In particular:
//
//   - Grammar: strict RFC 8259. Whitespace is space, tab, LF and CR only; a
//     BOM, trailing commas, leading zeros, +1, .5, 1., NaN, Infinity, single
//     quotes, raw U+0000..U+001F inside strings and anything after the value
//     are errors.
//   - Numbers are IEEE 754 doubles printed as ECMAScript's Number::toString:
//     -0 is 0, 1e21 is 1e+21, 12345678901234567890 is 12345678901234567000,
//     1e-400 is 0. A number that overflows to ±Infinity (1e999) is printed as
//     null, as JSON.stringify prints Infinity, and is reported in
//     Stats.Marker.
//   - Strings are decoded with UTF-16 semantics (an escaped surrogate pair is
//     one code point; a lone surrogate is kept) and printed as JSON.stringify
//     prints them: \" \\ \b \f \n \r \t, other controls as \u00xx, lone
//     surrogates as \udxxx (lowercase), everything else as raw UTF-8,
//     including /, U+007F, U+2028 and U+2029.
//   - Object keys are in V8's order: canonical array indices ("0" ..
//     "4294967294") first in ascending order, then the other keys in
//     insertion order. A duplicate key keeps the position of its first
//     occurrence and the value of its last. __proto__ is an ordinary key.
//
// Stats describes the parsed value, after duplicates are resolved: in
// {"a":1e999,"a":1} the overwritten member is gone, so Marker is false.
//
// The proof is a corpus written by V8 itself (testdata/gen/v8corpus.mjs,
// checked against node whenever node is on PATH) and fuzz tests; see the
// README for how to run them and the benchmarks.
//
// # Normalized text
//
// The output of Append is canonical: no whitespace, one spelling for every
// value. Normalizing it again gives the same bytes. Elements, Members and
// Unquote take it apart cheaply; the parts they yield are normalized text
// too. On other input their result is unspecified, but they never panic.
//
// # Limits and cost
//
// Append does not recurse, so any nesting depth is fine (the caller enforces
// SPEC's limits with Stats.Depth), and it never panics; it refuses input over
// 256 MiB, more than V8 can hold as a string. It normalizes in one pass
// straight into dst; a document with an object whose keys V8 reorders or
// deduplicates is parsed a second time into a tree. With enough capacity in
// dst, the one-pass path allocates nothing unless the document nests deeper
// than 16, holds over 32 keys in the objects open at one time, or has an
// object of over 24 keys.
package jsonvalue
