package worker

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// Rank 0's program SIGKILLed, first the moment a generation forms (the
// others are at its setup), then mid-training in a world of 3: the
// survivors' store clients used to be connected to rank 0's TCPStore, and
// torch 1.13 aborted a survivor whose client saw that store reset
// ("terminate called ... Connection reset by peer"); its worker then
// restarted it without state. With the store behind each program's own
// worker (livestore.go) only the killed programs restart: every survivor's
// program runs from start to end in one process.
func TestLiveRootKilledSurvivorsKeepRunning(t *testing.T) {
	l := startLive(t, 2, 3, 9000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03")
	three := 3
	l.spec.Trainer.Exec.MaxRestarts = &three
	l.jobs.job.Spec = l.spec
	l.add("w0")
	l.add("w1")
	p := l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	co, err := coord.New(l.r.Client, coord.Config{Prefix: l.r.Prefix, Job: "j1", Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	killed := map[string]bool{}
	kill := func(id string, why string) {
		t.Helper()
		pid := l.programPid(id)
		if pid == 0 {
			t.Fatalf("no program of %s", id)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed[id] = true
		t.Logf("killed %s's program (%s)", id, why)
	}
	// 1: at the setup of the generation admitting w2.
	l.add("w2")
	var g *coord.Generation
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if g, err = co.ReadGen(ctx); err == nil && g != nil && g.Number > p.Generation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no generation admitting w2")
		}
	}
	kill(g.Members[0], "rank 0 of the forming generation")
	q := l.waitProgress("a world of 3 after the kill", 2*time.Minute, func(q jobs.Progress) bool { return q.Generation > g.Number && q.WorldSize == 3 })
	q = l.waitProgress("steps at world 3", time.Minute, func(x jobs.Progress) bool { return x.Step >= q.Step+10 })
	// 2: mid-training, rank 0 of the running generation.
	g, err = co.ReadGen(ctx)
	if err != nil || g == nil {
		t.Fatalf("generation: %v", err)
	}
	kill(g.Members[0], "rank 0 mid-training")
	q = l.waitProgress("a world of 3 after the second kill", 2*time.Minute, func(x jobs.Progress) bool { return x.Generation > g.Number && x.WorldSize == 3 })
	l.waitProgress("steps after the second kill", time.Minute, func(x jobs.Progress) bool { return x.Step >= q.Step+5 })
	l.wait(3*time.Minute, 1)
	l.jobs.mu.Lock()
	events := append([]jobs.Event(nil), l.jobs.events...)
	l.jobs.mu.Unlock()
	failed := regexp.MustCompile(`program of worker (w\d) failed`)
	for _, e := range events {
		if m := failed.FindStringSubmatch(e.Message); m != nil && !killed[m[1]] {
			t.Errorf("survivor %s's program was restarted: %s", m[1], e.Message)
		}
	}
	for _, id := range []string{"w0", "w1", "w2"} {
		if killed[id] {
			continue
		}
		if n := strings.Count(l.logs[id].String(), "DONE "); n != 1 {
			t.Errorf("survivor %s's program printed DONE %d times, want once (it never restarted)", id, n)
		}
	}
}
