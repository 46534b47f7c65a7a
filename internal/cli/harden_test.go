package cli

import (
	"os"
	"regexp"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A program and what it started die with serve, however serve dies: here kill -9, which
// gives serve no chance to kill them itself.
func TestProgramsDieWithServe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's")
	}
	t.Parallel()
	cfg := e2eConfig(t, 60000, 30000)
	appLog, env := appLogEnv(t)
	s := startServe(t, cfg, env...)
	if r := runDuilie(t, `{"name":"orphan","sleep_ms":60000}`, nil, "send", "--binding", "JOBS", "--config", cfg); r.code != 0 {
		t.Fatalf("send: %+v", r)
	}
	waitAppLog(t, appLog, `pids orphan \d+ \d+`, 1)
	b, _ := os.ReadFile(appLog)
	m := regexp.MustCompile(`pids orphan (\d+) (\d+)`).FindStringSubmatch(string(b))
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	for _, pid := range m[1:] {
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %s of the program outlived serve's kill -9 by 5 s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
