//go:build !unix

package cli

import "io"

// stdinClosed cannot tell a closed stdin here: Go's runtime gives it no stand-in to recognise.
func stdinClosed(in io.Reader) bool { return false }
