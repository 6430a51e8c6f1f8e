package live

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/core"
)

// afterLoop runs the live run's program under python/tests/after_loop.py
// in mode (what rank 0 does once its loop returned).
func (l *liveRun) afterLoop(mode string) {
	ex := l.spec.Trainer.Exec
	ex.Command = append([]string{livePython, "python/tests/after_loop.py", mode}, ex.Command[1:]...)
	l.jobs.Job.Spec = l.spec
}

// waitEnd waits for every worker to return and for a terminal job state;
// it returns the state, its reason and when it was first seen.
func (l *liveRun) waitEnd(timeout time.Duration) (jobs.State, string, time.Time) {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	var seen time.Time
	for returned := 0; returned < l.n; {
		select {
		case err := <-l.errs:
			if err != nil {
				l.t.Errorf("worker returned %v", err)
			}
			returned++
		case <-time.After(5 * time.Millisecond):
		}
		if st, _ := l.jobs.State(); st.Terminal() && seen.IsZero() {
			seen = time.Now()
		}
		if time.Now().After(deadline) {
			st, reason := l.jobs.State()
			l.t.Fatalf("workers still running after %s; job %s (%s)", timeout, st, reason)
		}
	}
	st, reason := l.jobs.State()
	if seen.IsZero() {
		seen = time.Now()
	}
	return st, reason, seen
}

var afterLoopRE = regexp.MustCompile(`AFTERLOOP exit time=([0-9.]+)`)

// The job is succeeded only once rank 0's program has returned from its
// loop and exited 0: here it still works for 2 s after the loop (before,
// the job was succeeded at the last step, while the program still ran).
func TestLiveSucceededOnceTheProgramExited(t *testing.T) {
	t.Parallel()
	l := startLive(t, 2, 2, 480, 4, "--batch", "24", "--hidden", "16")
	l.afterLoop("sleep")
	l.add("w0")
	l.add("w1")
	st, reason, at := l.waitEnd(3 * time.Minute)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	var m []string
	for _, id := range []string{"w0", "w1"} {
		if m = afterLoopRE.FindStringSubmatch(l.logs[id].String()); m != nil {
			break
		}
	}
	if m == nil {
		t.Fatal("no program printed AFTERLOOP")
	}
	sec, _ := strconv.ParseFloat(m[1], 64)
	exited := time.Unix(0, int64(sec*1e9))
	if at.Before(exited) {
		t.Errorf("job succeeded %s before rank 0's program left its post-loop work", exited.Sub(at).Round(time.Millisecond))
	}
}

// A program that fails after its loop (saving the model) fails the job
// with its exit code and stderr tail.
func TestLiveProgramFailingAfterItsLoopFailsTheJob(t *testing.T) {
	t.Parallel()
	l := startLive(t, 2, 2, 480, 4, "--batch", "24", "--hidden", "16")
	l.afterLoop("fail")
	l.add("w0")
	l.add("w1")
	st, reason, _ := l.waitEnd(3 * time.Minute)
	if st != jobs.Failed || !strings.Contains(reason, "exit code 3") || !strings.Contains(reason, "saving the model failed") {
		t.Fatalf("job %s (%q), want failed with the exit code and the stderr tail", st, reason)
	}
}

// A program that never returns after its loop is stopped after
// grace_period_s, and the job fails saying so.
func TestLiveProgramHangingAfterItsLoopIsStopped(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 240, 2, "--batch", "24", "--hidden", "16")
	grace := 2
	l.spec.Trainer.Exec.GracePeriodS = &grace
	l.afterLoop("hang")
	l.add("w0")
	l.waitProgress("a step", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 1 })
	st, reason, _ := l.waitEnd(2 * time.Minute)
	if st != jobs.Failed || !strings.Contains(reason, "did not exit within grace_period_s (2s)") {
		t.Fatalf("job %s (%q), want failed: the program did not exit within the grace period", st, reason)
	}
}

// A program that breaks out of its ctx.steps() loop and exits 0 fails the
// job saying so: the reason names the early exit and quotes the package's
// line on stderr (before: "failed ... last: exit code 0" and nothing else).
func TestLiveProgramLeavingItsLoopEarlyIsNamed(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 480, 2, "--batch", "24", "--hidden", "16")
	l.afterLoop("break")
	l.add("w0")
	st, reason, _ := l.waitEnd(2 * time.Minute)
	for _, want := range []string{"exit code 0 before training ended (it left its ctx.steps() loop early",
		"left its ctx.steps() loop before training ended (a break"} {
		if st != jobs.Failed || !strings.Contains(reason, want) {
			t.Fatalf("job %s (%q), want failed with %q", st, reason, want)
		}
	}
}

// Events name a signal by its name ("killed by SIGKILL"; before: "killed
// by killed").
func TestProgramKilledBySignalIsNamed(t *testing.T) {
	p := core.StartProgram([]string{"/bin/sh", "-c", "kill -KILL $$"}, "", nil, &lockedWriter{b: &strings.Builder{}}, &lockedWriter{b: &strings.Builder{}}, 5)
	<-p.Done
	if got := p.Res.Describe(); got != "killed by SIGKILL" {
		t.Errorf("describe() = %q, want %q", got, "killed by SIGKILL")
	}
}

// A line longer than liveMaxLine on the live socket is not read whole:
// the read fails with errLineTooLong after at most liveMaxLine bytes,
// while a normal request still reads.
func TestLiveConnBoundsALine(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		w := bufio.NewWriter(b)
		fmt.Fprintf(w, "{\"op\":\"next\",\"batch\":3}\n")
		chunk := strings.Repeat("x", 1<<16)
		for range (300 << 20) / len(chunk) {
			if _, err := w.WriteString(chunk); err != nil {
				return // the reader gave up: the rest is never read
			}
		}
		_ = w.Flush()
		b.Close()
	}()
	c := newLiveConn(a)
	req, err := c.read()
	if err != nil || req.Op != "next" || req.Batch != 3 {
		t.Fatalf("read() = %+v, %v; want the next request", req, err)
	}
	_, err = c.read()
	if !errors.Is(err, errLineTooLong) {
		t.Fatalf("read() of a 300 MiB line: %v, want errLineTooLong", err)
	}
	a.Close()
}

// A live program that sends a line of 300 MiB without a newline: the
// worker closes its connection with a job event saying why and stops it
// (before, the worker grew by the whole line).
func TestLiveLongLineEndsTheProgram(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 240, 2)
	l.spec.Trainer.Exec.Command = []string{livePython, "-c", longLineProgram}
	l.jobs.Job.Spec = l.spec
	l.add("w0")
	st, reason, _ := l.waitEnd(2 * time.Minute)
	if st != jobs.Failed {
		t.Errorf("job %s (%s), want failed (max_restarts 0)", st, reason)
	}
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	for _, e := range l.jobs.Events {
		if strings.Contains(e.Message, fmt.Sprintf("sent a line of more than %d bytes", liveMaxLine)) {
			return
		}
	}
	t.Errorf("no event about the long line among %+v", l.jobs.Events)
}

const longLineProgram = `
import json, os, socket, time
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["EDL_SOCKET"])
s.sendall(json.dumps({"op": "hello", "dataset_len": 240, "store_port": 1, "epochs": 1, "pid": os.getpid()}).encode() + b"\n")
s.recv(65536)
chunk = b"x" * (1 << 20)
try:
    for _ in range(300):
        s.sendall(chunk)
except OSError:
    pass
time.sleep(60)
`
