//go:build !unix

package cli

import "os"

// dieBy ends the process at once, with the status of an interrupted command.
func dieBy(os.Signal) { os.Exit(130) }
