package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// readStdin reads a command's input, up to limit bytes and one more. An input over limit fails
// the size check that comes before any other use of the text (SPEC §3, §4), which the first
// limit+1 bytes decide as the whole would: so no more is read, and no more held. A stdin that
// cannot be read, or is closed, is exit status 74.
func readStdin(cmd *cobra.Command, limit int) ([]byte, error) {
	in := cmd.InOrStdin()
	if stdinClosed(in) {
		return nil, &exitError{exitIOErr, errors.New("reading stdin: it is closed (give the input on stdin, or < /dev/null for none)")}
	}
	b, err := io.ReadAll(io.LimitReader(in, int64(limit)+1))
	if err != nil {
		return nil, &exitError{exitIOErr, fmt.Errorf("reading stdin: %w", err)}
	}
	return b, nil
}
