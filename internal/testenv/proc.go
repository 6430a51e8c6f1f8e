package testenv

import (
	"os/exec"
	"syscall"
	"time"
)

// startChild starts cmd so that it dies with the test process and can be
// stopped as a whole process group.
func startChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd.Start()
}

// stopChild sends SIGTERM to the child's group, then SIGKILL after grace.
func stopChild(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
