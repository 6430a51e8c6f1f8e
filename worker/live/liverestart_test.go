package live

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// Re-initialising in process fails (python/tests/fail_reinit.py runs the
// program so: every group setup after a process's first fails, as NCCL may): at the first switch
// (a newcomer joins) the members' rebuilds fail, one program asks for the
// fallback, and the job switches to restart mode (a job event says so):
// from then on every program restarts at each generation change (a
// newcomer joining, a member leaving) and gets its own state back from the
// file it wrote; the job finishes with every sample exactly once, and
// every restarted program loaded the state of the step its worker was at.
func TestLiveFallbackToRestartMode(t *testing.T) {
	t.Parallel()
	// Slow steps until the join and the leave have been seen, full speed
	// after: with 4,000 samples at 0.03 s a step the epoch once ended while
	// the newcomer's program and the restarted ones were still starting
	// (several seconds each on a loaded machine), before any step at world 3.
	slow := slowFile(t)
	l := startLive(t, 2, 3, 24000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.1", "--step-sleep-while", slow)
	l.spec.Trainer.Exec.Command = append([]string{livePython, "python/tests/fail_reinit.py"}, l.spec.Trainer.Exec.Command[1:]...)
	l.jobs.Job.Spec = l.spec
	stderr := map[string]*lockedWriter{}
	add := func(id string) {
		stderr[id] = &lockedWriter{b: &strings.Builder{}}
		l.addTee(id, stderr[id])
	}
	add("w0")
	add("w1")
	l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	add("w2")
	p := l.waitProgress("world 3", 3*time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 3 })
	at := p.Step
	l.waitProgress("steps at world 3", time.Minute, func(p jobs.Progress) bool { return p.Step >= at+10 })
	l.cancel["w1"]()
	l.waitProgress("world 2 again", 2*time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 2 && p.Step > at+10 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(4*time.Minute, 1)

	l.jobs.Mu.Lock()
	events := append([]jobs.Event(nil), l.jobs.Events...)
	l.jobs.Mu.Unlock()
	switched := 0
	for _, e := range events {
		if strings.Contains(e.Message, "the job falls back to restart mode") {
			switched++
		}
	}
	if switched != 1 {
		t.Errorf("%d events saying the job falls back to restart mode, want 1", switched)
	}
	// w0 trained from the start to the end: its program started once, was
	// restarted for w2's join and for w1's leave (at least), and every
	// restarted program loaded its state (a program counts its batches
	// from 1).
	starts := strings.Count(l.logs["w0"].String(), "STEP step=1 ")
	loads := strings.Count(stderr["w0"].String(), "loaded from "+liveLocalFile)
	if starts < 3 || loads < starts-1 {
		t.Errorf("w0's program started %d times and loaded its state %d times; want >= 3 starts, each restart loading", starts, loads)
	}
	for id, e := range stderr {
		if s := e.String(); strings.Contains(s, "EdlError") || strings.Contains(s, "Traceback") {
			t.Errorf("%s's program failed:\n%s", id, workertest.Tail(s, 20))
		}
	}
	wl := l.wlog.String()
	t.Logf("w0: %d program starts, %d state loads; workers: %d restarts in place, %d on another store port, %d reports for a program in setup",
		starts, loads, strings.Count(wl, "program restarted in place"), strings.Count(wl, "store on another port"),
		strings.Count(wl, "reported the generation broken for the program in setup"))
}
