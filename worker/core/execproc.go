package core

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Program is one run of the user's program under its reaper (reaper.go):
// the reaper is in its own process group (so edl dev's SIGTERM to the
// worker's group does not reach it before the worker decides), kills every
// process of the program when asked or when the worker dies, and reports
// the program's pid and exit on a status pipe.
type Program struct {
	cmd  *exec.Cmd // the reaper
	pid  int       // the program's first process
	tail *lineTail
	Done chan struct{} // closed when it has exited and its output is drained
	Res  ProgramResult

	mu      sync.Mutex
	stopped bool // we sent SIGTERM: its exit is ours, not its own
}

// ProgramResult is how a program run ended.
type ProgramResult struct {
	Code     int    // exit status; -1 when killed by a signal
	Signal   string // the signal that killed it, if any
	Stopped  bool   // edl stopped it (resize, leave, cancel)
	Tail     string // last lines of its stderr
	StartErr error  // it could not be started at all
}

// pipeDrain bounds how long the worker waits for the program's output
// after its reaper exited: every process that could hold the pipes is
// dead by then, so this only matters if the reaper itself was killed.
const pipeDrain = 500 * time.Millisecond

// StartProgram starts argv in dir with env; stdout goes to stdout, stderr
// to stderr and to a tail of the last tailLines lines. files, if any, are
// the program's descriptors 3, 4, ... (through its reaper); the caller
// closes its own copies once StartProgram returns.
func StartProgram(argv []string, dir string, env []string, stdout, stderr io.Writer, tailLines int, files ...*os.File) *Program {
	return startContained(containAuto, argv, dir, env, stdout, stderr, tailLines, files...)
}

func startContained(mode containMode, argv []string, dir string, env []string, stdout, stderr io.Writer, tailLines int, files ...*os.File) *Program {
	p := &Program{tail: newLineTail(tailLines), Done: make(chan struct{})}
	fail := func(err error) *Program {
		p.Res = ProgramResult{Code: -1, StartErr: err}
		close(p.Done)
		return p
	}
	target := exec.Command(argv[0], argv[1:]...) // resolves argv[0] on PATH
	if target.Err != nil {
		return fail(target.Err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("find the reaper (this binary): %w", err))
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	envR, envW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return fail(err)
	}
	if env == nil {
		env = os.Environ()
	}
	// The program's environment goes to the reaper on a pipe: the
	// reaper's own holds only reaperEnv, so that /proc/<reaper>/environ
	// tells nothing and nobody takes the reaper for the program.
	go func() {
		_, _ = envW.Write([]byte(strings.Join(env, "\x00")))
		envW.Close()
	}()
	p.cmd = exec.Command(self)
	p.cmd.Args = append([]string{"edl-reaper", target.Path}, argv...)
	p.cmd.Dir = dir
	p.cmd.Env = []string{reaperEnv + "=" + string(mode), reaperFilesEnv + "=" + strconv.Itoa(len(files))}
	p.cmd.Stdout = stdout
	p.cmd.Stderr = io.MultiWriter(stderr, p.tail)
	p.cmd.ExtraFiles = append([]*os.File{statusW, envR}, files...)
	p.cmd.WaitDelay = pipeDrain
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR2}
	lines := make(chan string, 4)
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child exits;
		// keep this goroutine on its thread until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := p.cmd.Start()
		statusW.Close()
		envR.Close()
		if err != nil {
			statusR.Close()
			started <- err
			p.Res = ProgramResult{Code: -1, StartErr: err}
			close(p.Done)
			return
		}
		go readStatus(statusR, lines)
		first, ok := <-lines
		if pid, found := strings.CutPrefix(first, "pid "); found {
			p.pid, _ = strconv.Atoi(pid)
			started <- nil
		} else {
			msg, _ := strings.CutPrefix(first, "starterr ")
			if !ok {
				msg = "its reaper ended before it started"
			}
			started <- errors.New(msg)
		}
		err = p.cmd.Wait()
		last := ""
		for l := range lines {
			last = l
		}
		p.mu.Lock()
		p.Res = ProgramResult{Stopped: p.stopped, Tail: p.tail.String()}
		p.mu.Unlock()
		if p.pid == 0 {
			p.Res.Code, p.Res.StartErr = -1, errors.New(strings.TrimPrefix(first, "starterr "))
			if !ok {
				p.Res.StartErr = fmt.Errorf("its reaper ended before it started (%v)", err)
			}
			close(p.Done)
			return
		}
		p.Res.Code, p.Res.Signal = exitOf(last, err)
		close(p.Done)
	}()
	if err := <-started; err != nil {
		<-p.Done // never ran: its result is there when we return
	}
	return p
}

// readStatus sends the reaper's status lines, then closes lines.
func readStatus(r *os.File, lines chan<- string) {
	defer close(lines)
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines <- sc.Text()
	}
}

// exitOf is the program's exit from the reaper's last status line, or,
// when the reaper could not write one (it was killed), from its own.
func exitOf(last string, waitErr error) (code int, sig string) {
	if v, ok := strings.CutPrefix(last, "exit "); ok {
		code, _ = strconv.Atoi(v)
		return code, ""
	}
	if v, ok := strings.CutPrefix(last, "signal "); ok {
		n, _ := strconv.Atoi(v)
		return -1, signalName(syscall.Signal(n))
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		return 0, ""
	case errors.As(waitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, signalName(ws.Signal())
		}
		return ee.ExitCode(), ""
	}
	return -1, ""
}

// Pid is the program's process id (0 if it never started).
func (p *Program) Pid() int { return p.pid }

// Stop asks the reaper to SIGTERM the program's processes, to SIGKILL
// them after grace, and waits until they are all gone.
func (p *Program) Stop(grace time.Duration) ProgramResult {
	p.mu.Lock()
	already := p.stopped
	p.stopped = true
	p.mu.Unlock()
	select {
	case <-p.Done:
		return p.Res
	default:
	}
	reaper := p.cmd.Process.Pid
	if !already {
		_ = syscall.Kill(reaper, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done:
		return p.Res
	case <-t.C:
	}
	_ = syscall.Kill(reaper, syscall.SIGUSR1)
	select {
	case <-p.Done:
	case <-time.After(time.Second):
		// The reaper itself is stuck: kill it; the program's first
		// process has it as parent-death signal.
		_ = syscall.Kill(-reaper, syscall.SIGKILL)
		<-p.Done
	}
	return p.Res
}

// Describe is an exit for a job's reason and event log.
func (r ProgramResult) Describe() string {
	switch {
	case r.StartErr != nil:
		return fmt.Sprintf("could not start: %v", r.StartErr)
	case r.Signal != "":
		return "killed by " + r.Signal
	}
	return fmt.Sprintf("exit code %d", r.Code)
}

// lineTail keeps the last n lines written to it (each cut at 512 bytes).
// A "\r" not followed by "\n" starts its line over, as a terminal shows a
// progress bar (tqdm's): its last state, not its first 512 bytes.
type lineTail struct {
	mu    sync.Mutex
	n     int
	lines []string
	part  []byte
	cr    bool // the last write ended in "\r": a line end if "\n" follows
}

func newLineTail(n int) *lineTail { return &lineTail{n: max(n, 1)} }

func (t *lineTail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		if t.cr {
			t.cr = false
			if b[0] != '\n' {
				t.part = t.part[:0]
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			t.keep(b)
			break
		}
		t.keep(b[:i])
		if b[i] == '\n' {
			t.add(t.part)
			t.part = t.part[:0]
		} else {
			t.cr = true
		}
		b = b[i+1:]
	}
	return n, nil
}

// keep adds b to the unfinished line, up to 512 bytes.
func (t *lineTail) keep(b []byte) {
	if room := 512 - len(t.part); room > 0 {
		t.part = append(t.part, b[:min(len(b), room)]...)
	}
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

// ExitVerdict is what a program's own exit (not one edl caused) means.
type ExitVerdict int

const (
	ExitSucceeded ExitVerdict = iota // rank 0 exited 0: the job succeeded
	ExitFinished                     // another rank exited 0: wait for rank 0's
	ExitFailed                       // non-zero or killed: a failure, restarted within max_restarts
)

func JudgeExit(rank int, r ProgramResult) ExitVerdict {
	switch {
	case r.StartErr != nil || r.Code != 0 || r.Signal != "":
		return ExitFailed
	case rank == 0:
		return ExitSucceeded
	}
	return ExitFinished
}
