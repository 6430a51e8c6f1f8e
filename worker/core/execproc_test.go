package core

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/childproc"
)

func TestProgramOutputAndExit(t *testing.T) {
	var out, errb childproc.Buffer
	p := StartProgram([]string{"/bin/sh", "-c", `echo "hello $WHO"; for i in 1 2 3 4 5; do echo "err $i" >&2; done; printf partial >&2; exit 3`},
		t.TempDir(), []string{"WHO=edl"}, &out, &errb, 3)
	<-p.Done
	if p.Res.Code != 3 || p.Res.Stopped || p.Res.Signal != "" {
		t.Fatalf("result %+v, want exit code 3, not stopped", p.Res)
	}
	if out.String() != "hello edl\n" {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.HasPrefix(errb.String(), "err 1\n") {
		t.Errorf("stderr %q", errb.String())
	}
	if want := "err 4\nerr 5\npartial"; p.Res.Tail != want {
		t.Errorf("tail %q, want %q", p.Res.Tail, want)
	}
	if got := JudgeExit(0, p.Res); got != ExitFailed {
		t.Errorf("verdict %v, want failed", got)
	}
}

func TestProgramStop(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		grace    time.Duration
		wantCode int
		wantSig  string
		atLeast  time.Duration
	}{
		// The program handles SIGTERM and exits on its own within the grace period.
		{"graceful", `trap 'echo bye; exit 7' TERM; echo up; while :; do sleep 0.05; done`, 5 * time.Second, 7, "", 0},
		// It ignores SIGTERM: SIGKILL after the grace period.
		{"killed after grace", `trap '' TERM; echo up; while :; do sleep 0.05; done`, 300 * time.Millisecond, -1, "SIGKILL", 300 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out childproc.Buffer
			p := StartProgram([]string{"/bin/sh", "-c", tc.script}, "", nil, &out, &out, 5)
			for !strings.Contains(out.String(), "up") {
				time.Sleep(10 * time.Millisecond)
			}
			start := time.Now()
			res := p.Stop(tc.grace)
			if !res.Stopped || res.Code != tc.wantCode || res.Signal != tc.wantSig {
				t.Fatalf("result %+v, want stopped, code %d, signal %q", res, tc.wantCode, tc.wantSig)
			}
			if took := time.Since(start); took < tc.atLeast {
				t.Errorf("stopped after %s, before the grace period %s", took, tc.atLeast)
			}
		})
	}
}

func TestProgramNotFound(t *testing.T) {
	p := StartProgram([]string{"/nonexistent/prog"}, "", nil, &childproc.Buffer{}, &childproc.Buffer{}, 5)
	<-p.Done
	if p.Res.StartErr == nil || JudgeExit(0, p.Res) != ExitFailed || !strings.Contains(p.Res.Describe(), "could not start") {
		t.Fatalf("result %+v (%s), want a start error judged a failure", p.Res, p.Res.Describe())
	}
	if r := p.Stop(time.Second); r.StartErr == nil {
		t.Error("stop of a program that never started lost its result")
	}
}

// Descriptors handed to StartProgram reach the program as 3, 4, ...
// through its reaper, and the reaper keeps no copy: the program's exit
// is the pipe's end.
func TestProgramGetsFiles(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out childproc.Buffer
	p := StartProgram([]string{"/bin/sh", "-c", `read line <&3; echo "got $line" >&4; sleep 0.2`}, "", nil, &out, &out, 5, inR, outW)
	inR.Close()
	outW.Close()
	if _, err := inW.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	got, err := io.ReadAll(outR) // EOF only once the program and the reaper let go of fd 4
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done
	if string(got) != "got hello\n" || p.Res.Code != 0 {
		t.Fatalf("program read %q, exit %+v (output %q)", got, p.Res, out.String())
	}
}

// The program gets descriptors 0, 1, 2 and those handed to StartProgram,
// nothing else, as torchrun's workers (Popen's close_fds): not its
// reaper's status and environment pipes (a program could write a status
// line of its own), not second copies of its files (a warm interpreter's
// pipes held open past its closing them), not what the worker inherited.
func TestProgramGetsNoOtherDescriptors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out, errb childproc.Buffer
	// ls's own listing is the one descriptor past the program's.
	p := StartProgram([]string{"/bin/ls", "/proc/self/fd"}, "", nil, &out, &errb, 5, w)
	w.Close()
	<-p.Done
	got := strings.Fields(out.String())
	if p.Res.Code != 0 || len(got) != 5 || strings.Join(got[:4], " ") != "0 1 2 3" {
		t.Fatalf("the program's descriptors: %q (exit %+v, stderr %q); want 0 1 2 3 and ls's own", got, p.Res, errb.String())
	}
}

// A progress bar (tqdm's: "\r" and the bar again, no newline) is one line
// whose last state counts, as a terminal shows it: a failed job's reason
// shows the bar where it stopped and the traceback after it, not the first
// 512 bytes of the bar's first states. "\r\n" ends a line.
func TestTailKeepsWhatATerminalShows(t *testing.T) {
	tail := newLineTail(3)
	var bar strings.Builder
	for i := range 200 {
		fmt.Fprintf(&bar, "\rEpoch 1: %3d%%|%-10s| %d/200", i/2, strings.Repeat("#", i/20), i)
	}
	for _, chunk := range []string{bar.String(), "Traceback (most recent call last):\r", "\n  File \"train.py\", line 6\r\n", "RuntimeError: boom\n"} {
		if _, err := tail.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	want := "Epoch 1:  99%|######### | 199/200Traceback (most recent call last):\n  File \"train.py\", line 6\nRuntimeError: boom"
	if got := tail.String(); got != want {
		t.Errorf("tail:\n%q\nwant:\n%q", got, want)
	}
	tail = newLineTail(2)
	_, _ = tail.Write([]byte("done\n\r 10%\r 20%"))
	if got := tail.String(); got != "done\n 20%" {
		t.Errorf("unfinished bar: %q, want %q", got, "done\n 20%")
	}
}
