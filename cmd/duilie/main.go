// Command duilie runs the message-queue host: see `duilie --help`.
package main

import (
	"os"

	"github.com/duilie/duilie/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
