package core

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/childproc"
)

// escapeScript is a hostile program: it leaves a setsid() daemon (double
// fork) and a child in a process group of its own, both ignoring SIGTERM
// and holding the program's stdout and stderr, writes their pids to
// argv[1], says "up" and waits (ignoring SIGTERM itself when argv[2] is
// "stubborn").
const escapeScript = `
import os, signal, sys, time
out = sys.argv[1]
def linger(tag):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(out, tag + ".tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(out, tag + ".tmp"), os.path.join(out, tag))
    while True:
        time.sleep(0.05)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        linger("daemon")
    os._exit(0)
if os.fork() == 0:
    os.setpgid(0, 0)
    linger("group")
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while not (os.path.exists(os.path.join(out, "daemon")) and os.path.exists(os.path.join(out, "group"))):
    time.sleep(0.01)
print("up", flush=True)
while True:
    time.sleep(0.05)
`

// escapedPids reads the pids the hostile program wrote into dir.
func escapedPids(t *testing.T, dir string) []int {
	t.Helper()
	var out []int
	for _, tag := range []string{"daemon", "group"} {
		b, err := os.ReadFile(filepath.Join(dir, tag))
		if err != nil {
			t.Fatalf("the program did not write its %s pid: %v", tag, err)
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("%s pid %q: %v", tag, b, err)
		}
		out = append(out, pid)
	}
	return out
}

// alive lists the pids that still exist (zombies included: not reaped).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			out = append(out, p)
		}
	}
	return out
}

func pythonOrSkip(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3")
	}
	t.Skip("no python3")
	return ""
}

// TestStopKillsEscapedProcesses: whatever the program does with sessions
// and process groups, stop leaves none of its processes and returns once
// they are gone, though they held its output pipes.
func TestStopKillsEscapedProcesses(t *testing.T) {
	py := pythonOrSkip(t)
	tests := []struct {
		name  string
		mode  containMode
		main  string // "polite": dies on SIGTERM; "stubborn": ignores it
		grace time.Duration
	}{
		{"subreaper, program dies on SIGTERM", containSubreaper, "polite", 5 * time.Second},
		{"subreaper, program ignores SIGTERM", containSubreaper, "stubborn", 300 * time.Millisecond},
		{"auto, program dies on SIGTERM", containAuto, "polite", 5 * time.Second},
		{"auto, program ignores SIGTERM", containAuto, "stubborn", 300 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out childproc.Buffer
			p := startContained(tc.mode, []string{py, "-c", escapeScript, dir, tc.main}, "", nil, &out, &out, 5)
			t.Cleanup(func() { p.Stop(0) })
			waitFor(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "up") }, "the program's up line")
			pids := append(escapedPids(t, dir), p.Pid())
			res := make(chan ProgramResult, 1)
			go func() { res <- p.Stop(tc.grace) }()
			// A correctness bound, not a benchmark: the stop must not wait
			// for the processes that hold the pipes (before, it never ended).
			select {
			case r := <-res:
				if !r.Stopped || r.StartErr != nil {
					t.Errorf("result %+v, want stopped", r)
				}
			case <-time.After(tc.grace + 5*time.Second):
				t.Fatalf("stop did not return within grace %s + 5s; alive: %v", tc.grace, alive(pids))
			}
			if left := alive(pids); len(left) > 0 {
				t.Fatalf("processes %v of the program outlived its stop", left)
			}
		})
	}
}

// TestProgramExitKillsItsDaemons: a program that exits on its own takes
// its daemons with it, and its exit is reported as it was.
func TestProgramExitKillsItsDaemons(t *testing.T) {
	py := pythonOrSkip(t)
	dir := t.TempDir()
	script := strings.Replace(escapeScript, "print(\"up\", flush=True)", "print(\"up\", flush=True); sys.exit(4)", 1)
	var out childproc.Buffer
	p := StartProgram([]string{py, "-c", script, dir, "polite"}, "", nil, &out, &out, 5)
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		p.Stop(0)
		t.Fatal("the program's run did not end though its first process exited")
	}
	if p.Res.Code != 4 || p.Res.Stopped || p.Res.Signal != "" {
		t.Errorf("result %+v, want exit code 4", p.Res)
	}
	if left := alive(escapedPids(t, dir)); len(left) > 0 {
		t.Fatalf("processes %v outlived the program", left)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
