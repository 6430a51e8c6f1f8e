package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// program is one run of the user's program: its own process group (so
// edl dev's SIGTERM to the worker's group does not reach it before the
// worker decides), killed with the worker if the worker dies (Pdeathsig).
type program struct {
	cmd  *exec.Cmd
	tail *lineTail
	done chan struct{} // closed when it has exited and its output is drained
	res  programResult

	mu      sync.Mutex
	stopped bool // we sent SIGTERM: its exit is ours, not its own
}

// programResult is how a program run ended.
type programResult struct {
	Code     int    // exit status; -1 when killed by a signal
	Signal   string // the signal that killed it, if any
	Stopped  bool   // edl stopped it (resize, leave, cancel)
	Tail     string // last lines of its stderr
	StartErr error  // it could not be started at all
}

// startProgram starts argv in dir with env; stdout goes to stdout, stderr
// to stderr and to a tail of the last tailLines lines.
func startProgram(argv []string, dir string, env []string, stdout, stderr io.Writer, tailLines int) *program {
	p := &program{tail: newLineTail(tailLines), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout = stdout
	p.cmd.Stderr = io.MultiWriter(stderr, p.tail)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child exits;
		// keep this goroutine on its thread until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			p.res = programResult{Code: -1, StartErr: err}
			close(p.done)
			return
		}
		started <- nil
		err := p.cmd.Wait()
		p.mu.Lock()
		p.res = programResult{Stopped: p.stopped, Tail: p.tail.String()}
		p.mu.Unlock()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.res.Code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.res.Signal = signalName(ws.Signal())
			}
		default:
			p.res.Code = -1
		}
		// The group may hold children of the program; none outlives it.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		close(p.done)
	}()
	<-started
	return p
}

// Pid is the program's process id (0 if it never started).
func (p *program) Pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop sends SIGTERM to the program's group and SIGKILL after grace, and
// waits for it to exit.
func (p *program) stop(grace time.Duration) programResult {
	p.mu.Lock()
	already := p.stopped
	p.stopped = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return p.res
	default:
	}
	if !already {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return p.res
}

// describe is an exit for a job's reason and event log.
func (r programResult) describe() string {
	switch {
	case r.StartErr != nil:
		return fmt.Sprintf("could not start: %v", r.StartErr)
	case r.Signal != "":
		return "killed by " + r.Signal
	}
	return fmt.Sprintf("exit code %d", r.Code)
}

// lineTail keeps the last n lines written to it (each cut at 512 bytes).
type lineTail struct {
	mu    sync.Mutex
	n     int
	lines []string
	part  []byte
}

func newLineTail(n int) *lineTail { return &lineTail{n: max(n, 1)} }

func (t *lineTail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.part = append(t.part, b...)
			if len(t.part) > 512 {
				t.part = t.part[:512]
			}
			break
		}
		t.add(append(t.part, b[:i]...))
		t.part, b = t.part[:0], b[i+1:]
	}
	return n, nil
}

func (t *lineTail) add(line []byte) {
	if len(line) > 512 {
		line = line[:512]
	}
	t.lines = append(t.lines, string(line))
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

// String is the last n lines, oldest first, an unfinished one included.
func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := append([]string(nil), t.lines...)
	if len(t.part) > 0 {
		lines = append(lines, string(t.part))
	}
	if len(lines) > t.n {
		lines = lines[len(lines)-t.n:]
	}
	return strings.Join(lines, "\n")
}
