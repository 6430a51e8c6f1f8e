package childproc

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Proc is a started child in its own process group.
type Proc struct {
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{} // closed when cmd has exited
}

// Start starts cmd in a process group of its own that is killed with this
// process (Pdeathsig), its stdout and stderr collected (Output).
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, out: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the child's process id (and its group's).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Output is what the child has printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Kill sends SIGKILL to the child's group and waits until the child has
// exited.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM to the child's group, waits up to grace for the child
// to exit, then kills what is left of the group (Kill).
func (p *Proc) Stop(grace time.Duration) {
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.Kill()
}

// ErrExited is WaitReady's answer when the child exited before its probe
// succeeded.
var ErrExited = errors.New("exited during start")

// WaitReady calls probe every interval until it succeeds (nil), the child
// has exited and the probe still fails (ErrExited), or ctx ends or
// maxElapsed (0: no bound) passes (then the last probe's error, or
// ctx's).
func (p *Proc) WaitReady(ctx context.Context, interval, maxElapsed time.Duration, probe func() error) error {
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := probe()
		if err != nil {
			select {
			case <-p.done:
				return struct{}{}, backoff.Permanent(ErrExited)
			default:
			}
		}
		return struct{}{}, err
	}, backoff.WithBackOff(backoff.NewConstantBackOff(interval)), backoff.WithMaxElapsedTime(maxElapsed))
	return err
}

// Tail is the last n bytes of s, marked with "..." when cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Buffer collects a child's output: the child's copy goroutines write it
// while others read it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
