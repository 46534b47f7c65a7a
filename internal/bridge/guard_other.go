//go:build !linux

package bridge

import (
	"os/exec"
	"syscall"
)

// Without a parent-death signal (Linux's), a program and its process group are killed when
// their event ends, or by Program.Kill, but not when the host is killed outright.

func dieWithParent(*syscall.SysProcAttr) {}

func guardGroup(pgid int) (over func(), err error) { return func() {}, nil }

func startLocked(cmd *exec.Cmd) error { return cmd.Start() }
