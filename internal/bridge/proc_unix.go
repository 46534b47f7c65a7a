//go:build unix

package bridge

import (
	"os"
	"os/exec"
	"syscall"
)

// setGroup makes the program the leader of a new process group, so that it and every process
// it starts can be killed together; on Linux the kernel also kills it when its host dies.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// killGroup kills the program's process group. The group's id is the program's pid, which the
// kernel does not hand out again while any process of the group is left.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}
