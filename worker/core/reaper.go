package core

// The program's reaper: a small process between the worker and the
// program (this same binary, run again with reaperEnv set), so that no
// process of a program outlives it (contain.go says how) and a stop ends
// once the program's processes are gone, even when some of them hold the
// worker's stdout and stderr pipes.
//
//	worker --(fd 3: status lines)-- reaper (subreaper, own cgroup if any) -- program and all its descendants
//
// Signals from the worker: SIGTERM forwards SIGTERM to the program's
// group and to every descendant outside it; SIGUSR1 (the grace period is
// over) and SIGUSR2 (the worker died: its parent-death signal) SIGKILL
// every descendant. When the program's first process exits, whatever
// else is left is SIGKILLed; once the reaper has no child left it writes
// the program's exit to fd 3 and exits. The program's environment comes
// on fd 4 (NUL-separated, to EOF); descriptors 5, 6, ... (as many as
// reaperFilesEnv says) are the program's 3, 4, ... Status lines: "pid N" once the
// program runs, or "starterr MESSAGE"; then "exit CODE" or "signal N".

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaperEnv, set to a containMode, makes this binary a program's reaper
// (reaperInit) instead of whatever it is otherwise.
const reaperEnv = "EDL_PROGRAM_REAPER"

// reaperFilesEnv is how many descriptors after the reaper's own two it
// hands on to the program.
const reaperFilesEnv = "EDL_PROGRAM_REAPER_FILES"

// maxPassFiles bounds reaperFilesEnv.
const maxPassFiles = 8

func init() {
	if mode, ok := os.LookupEnv(reaperEnv); ok {
		os.Exit(reaperMain(containMode(mode), os.Args[1:]))
	}
}

// reaperMain runs the program args[0] with argv args[1:] and returns the
// reaper's exit code (0 once the status line is written).
func reaperMain(mode containMode, args []string) int {
	runtime.LockOSThread() // the program's Pdeathsig is this thread's
	status := os.NewFile(3, "status")
	envBytes, err := io.ReadAll(os.NewFile(4, "env"))
	if err != nil {
		fmt.Fprintf(status, "starterr reaper: read the program's environment: %v\n", err)
		return 2
	}
	env := []string{} // not nil: nil would hand the program the reaper's own
	if len(envBytes) > 0 {
		env = strings.Split(string(envBytes), "\x00")
	}
	if len(args) < 2 {
		fmt.Fprintf(status, "starterr reaper: no program\n")
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(status, "starterr reaper: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	var cg *progCgroup
	if mode == containAuto {
		cg, _ = newProgCgroup()
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintf(status, "starterr %v\n", err)
		return 2
	}
	files := []*os.File{devnull, os.Stdout, os.Stderr}
	n, _ := strconv.Atoi(os.Getenv(reaperFilesEnv))
	for i := range min(max(n, 0), maxPassFiles) {
		files = append(files, os.NewFile(uintptr(5+i), "program-fd"))
	}
	closeOnExec()
	start := func() (*os.Process, error) {
		attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if cg != nil {
			attr.UseCgroupFD, attr.CgroupFD = true, cg.fd
		}
		return os.StartProcess(args[0], args[1:], &os.ProcAttr{Env: env, Files: files, Sys: attr})
	}
	proc, err := start()
	if err != nil && cg != nil {
		cg.remove() // clone3 into the cgroup refused: the subreaper alone
		cg = nil
		proc, err = start()
	}
	for _, f := range files[3:] {
		f.Close() // the program's own: a pipe's EOF must not wait for the reaper
	}
	devnull.Close()
	if err != nil {
		fmt.Fprintf(status, "starterr %v\n", err)
		return 0
	}
	main := proc.Pid
	fmt.Fprintf(status, "pid %d\n", main)

	mainExit := make(chan syscall.WaitStatus, 1)
	allGone := make(chan struct{})
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			switch {
			case err == syscall.EINTR:
			case err != nil: // ECHILD: no child left
				close(allGone)
				return
			case pid == main:
				mainExit <- ws
			}
		}
	}()
	killAll := func() {
		if cg != nil {
			cg.kill()
		}
		_ = syscall.Kill(-main, syscall.SIGKILL)
		for _, p := range descendants(os.Getpid()) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	var ws syscall.WaitStatus
	gotMain := false
	var tick <-chan time.Time
	for done := false; !done; {
		select {
		case s := <-sigs:
			switch s {
			case syscall.SIGUSR1, syscall.SIGUSR2:
				killAll()
				tick = time.Tick(20 * time.Millisecond)
			default:
				_ = syscall.Kill(-main, syscall.SIGTERM)
				for _, p := range descendants(os.Getpid()) {
					if g, err := syscall.Getpgid(p); err == nil && g != main {
						_ = syscall.Kill(p, syscall.SIGTERM)
					}
				}
			}
		case ws = <-mainExit:
			gotMain = true
			killAll()
			tick = time.Tick(20 * time.Millisecond)
		case <-tick:
			killAll() // a process forked while the last round killed
		case <-allGone:
			if !gotMain {
				ws = <-mainExit // sent before allGone closed
			}
			done = true
		}
	}
	if cg != nil {
		cg.remove()
	}
	if ws.Signaled() {
		fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
	} else {
		fmt.Fprintf(status, "exit %s\n", strconv.Itoa(ws.ExitStatus()))
	}
	return 0
}

// closeOnExec marks every descriptor from 3 up close-on-exec, so that the
// program gets only what start hands it (0, 1, 2 and its files, which
// os.StartProcess dup2s into place), as torchrun's workers get only
// theirs (Popen's close_fds): not the reaper's status pipe (a program
// writing to it could forge its own exit), not the originals of the files
// it passes on (a warm interpreter's pipes stayed open after boot.py
// closed them), not whatever the worker inherited from its own parent.
func closeOnExec() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil { // Linux 5.11
		return
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
