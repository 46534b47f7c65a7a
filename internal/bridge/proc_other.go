//go:build !unix

package bridge

import (
	"os"
	"os/exec"
)

// setGroup does nothing here: without process groups only the program itself is killed.
func setGroup(cmd *exec.Cmd) {}

// killGroup kills the program.
func killGroup(p *os.Process) {
	_ = p.Kill()
}
