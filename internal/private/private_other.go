//go:build !unix

package private

import "os"

// Owned accepts every file: without Unix owners and modes there is nothing to check.
func Owned(path string, info os.FileInfo) error { return nil }

// Links accepts every path: without Unix owners there is nothing to check.
func Links(dir string) error { return nil }

// NoFollow is 0: there is no O_NOFOLLOW.
const NoFollow = 0
