//go:build !unix

package jetstream

import "os"

// private accepts every file: without Unix owners and modes there is nothing to check.
func private(path string, info os.FileInfo) error { return nil }

const noFollow = 0

// linksPrivate accepts every path: without Unix owners there is nothing to check.
func linksPrivate(dir string) error { return nil }
