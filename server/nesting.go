package server

import (
	"bytes"
	"fmt"
)

// MaxConfigDepth is how deeply arrays and tables may nest in a configuration file: a table
// header is 1, an array in it 2, and duilie's own settings need no more than 3. The TOML
// parser recurses once per level with no bound of its own (100,000 nested inline tables
// overflow its stack; 100,000 nested arrays took seconds to describe in a mistake), so the
// text is measured before it is parsed.
const MaxConfigDepth = 32

// MaxConfigBytes is the largest configuration file read: 1 MiB.
const MaxConfigBytes = 1 << 20

// tooDeep returns the line of the first '[' or '{' in text that opens a level beyond limit,
// outside strings and comments, or 0 when there is none. With toml it skips TOML's strings
// (basic and literal, on one line or multi-line) and # comments; otherwise JSON's strings.
// Whether brackets match is the parser's business.
func tooDeep(text []byte, limit int, toml bool) int {
	depth, line := 0, 1
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\n':
			line++
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return line
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		case c == '#' && toml:
			if end := bytes.IndexByte(text[i:], '\n'); end >= 0 {
				i += end - 1 // the newline is counted next
			} else {
				i = len(text)
			}
		case c == '"' || c == '\'' && toml:
			end := stringEnd(text, i, toml)
			line += bytes.Count(text[i:end], []byte("\n"))
			i = end - 1
		}
	}
	return 0
}

// stringEnd returns the index just past the string that starts at text[i] (a quote), or
// len(text) for one that does not end.
func stringEnd(text []byte, i int, toml bool) int {
	q := text[i]
	escapes := q == '"'
	if toml && bytes.HasPrefix(text[i:], []byte{q, q, q}) { // multi-line
		for j := i + 3; j+2 < len(text); j++ {
			switch {
			case escapes && text[j] == '\\':
				j++
			case text[j] == q && text[j+1] == q && text[j+2] == q:
				end := j + 3
				for k := 0; k < 2 && end < len(text) && text[end] == q; k++ { // """a"""" ends in a quote
					end++
				}
				return end
			}
		}
		return len(text)
	}
	for j := i + 1; j < len(text); j++ {
		switch {
		case escapes && text[j] == '\\':
			j++
		case text[j] == q:
			return j + 1
		case text[j] == '\n' && toml: // a one-line string ends at its line: the parser says how
			return j
		}
	}
	return len(text)
}

// nestingMistake is the mistake of a configuration text nested beyond MaxConfigDepth, or "".
func nestingMistake(file string, text []byte, toml bool) string {
	if line := tooDeep(text, MaxConfigDepth, toml); line > 0 {
		return fmt.Sprintf("%s: line %d: arrays and tables nest more than %d deep", file, line, MaxConfigDepth)
	}
	return ""
}
