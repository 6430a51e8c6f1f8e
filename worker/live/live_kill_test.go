package live

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// Live mode under kills, freezes and random events: survivors, restarts
// and the state that must not be lost.

// A program SIGKILLed in a world of 3: both survivors' collectives end
// at once, far under the live timeout (5 s), wherever the kill lands. The
// survivor whose collective waits on the other survivor (not on the dead
// one) used to wait out the timeout whenever the other's failed step
// still held a reference to its metadata all-reduce, which kept that
// group's connections open after its destroy: now its worker says the
// generation is over ("latest": broken) and it leaves the collective.
func TestLiveKillFailsEverySurvivorAtOnce(t *testing.T) {
	t.Parallel()
	l := startLive(t, 3, 3, 6000, 8, "--batch", "24", "--hidden", "512,512")
	l.setMaxRestarts(1)
	for _, id := range []string{"w0", "w1", "w2"} {
		l.add(id)
	}
	p := l.waitProgress("steps at world 3", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 3 })
	pid := l.mustProgramPid("w1")
	mark := len(l.wlog.String())
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	l.waitProgress("steps after the kill", 2*time.Minute, func(q jobs.Progress) bool { return q.Generation > p.Generation && q.Step >= p.Step+5 })
	after := l.wlog.String()[mark:]
	failed := map[string]time.Duration{}
	for _, line := range strings.Split(after, "\n") {
		if !strings.Contains(line, "collective failed") || !strings.Contains(line, fmt.Sprintf("gen=%d ", p.Generation)) {
			continue
		}
		if strings.Contains(line, "Timed out") || strings.Contains(line, "Socket Timeout") {
			t.Errorf("a survivor's collective waited out the live timeout: %s", line)
		}
		m := regexp.MustCompile(`time=(\S+) .* worker=(w\d+) `).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no time and worker in %q", line)
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatal(err)
		}
		failed[m[2]] = at.Sub(killed)
	}
	if len(failed) != 2 || failed["w0"] == 0 || failed["w2"] == 0 {
		t.Errorf("survivors whose collective of generation %d failed: %v, want w0 and w2", p.Generation, failed)
	}
	// A fifth of the live timeout: far above the milliseconds it takes,
	// far below the timeout a survivor waited before.
	for id, d := range failed {
		if d > time.Second {
			t.Errorf("%s's collective ended %s after the kill, want at once (the live timeout is 5 s)", id, d.Round(time.Millisecond))
		}
	}
	t.Logf("each survivor's collective ended after the kill: %v", failed)
	l.wait(3*time.Minute, 1)
}

// The only member holding the state freezes before the newcomer received
// it: the model is out of reach (no checkpoint). The job fails saying so, instead of
// the stateless root reporting the leader's restore generation broken and
// the leader forming it again, thousands of times a second.
func TestLiveStateLostFailsTheJob(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 2, 4000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.5")
	l.setMaxRestarts(3)
	l.add("w0")
	p := l.waitProgress("steps at world 1", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 1 })
	co, err := coord.New(l.r.Client, coord.Config{Prefix: l.r.Prefix, Job: "j1", Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.add("w1")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if g, err := co.ReadGen(context.Background()); err == nil && g != nil && g.Number > p.Generation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no generation admitting w1")
		}
	}
	// w0's program sleeps after its step: it has not handed its state
	// over. Frozen, it never will; w1's setup fails, and the leader finds
	// no live member holding the state (w0 never reports).
	pid := l.programPid("w0")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if st, _ := l.jobs.State(); st.Terminal() {
			break
		}
		if time.Now().After(end) {
			g, _ := co.ReadGen(context.Background())
			t.Fatalf("job still running; generation %d", g.Number)
		}
	}
	// Thawed, w0's program is told the job ended, and its worker returns.
	_ = syscall.Kill(pid, syscall.SIGCONT)
	deadline := time.After(2 * time.Minute)
	for range l.n {
		select {
		case <-l.errs:
		case <-deadline:
			g, _ := co.ReadGen(context.Background())
			t.Fatalf("workers still running; generation %d", g.Number)
		}
	}
	st, reason := l.jobs.State()
	if st != jobs.Failed || !strings.Contains(reason, "the model is lost") {
		t.Fatalf("job %s (%s), want failed: the model is lost", st, reason)
	}
	if g, _ := co.ReadGen(context.Background()); g.Number > 20 {
		t.Errorf("%d generations formed, want a few", g.Number)
	}
}

// A newcomer's program killed before its hello (while it imports torch),
// then a member's program killed and its restarted one killed again
// before its hello: each one more failed restart, not the worker's end;
// the next program joins as a newcomer and the job finishes with every
// sample once.
func TestLiveProgramKilledWhileRestarting(t *testing.T) {
	t.Parallel()
	// Long enough (667 steps of at least 30 ms) that the job is still
	// running when w1's last program has imported torch on a loaded
	// machine (8 s and more under -race in CI; 4,000 samples finished first).
	// Slow steps only until the kills are done (the file's removal below).
	slow := slowFile(t)
	l := startLive(t, 1, 2, 16000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03", "--step-sleep-while", slow)
	l.setMaxRestarts(3)
	// killNext kills w1's next program (a pid other than prev) as soon as
	// it exists, long before it has imported torch.
	killNext := func(prev int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		next := 0
		for next == 0 || next == prev {
			if time.Now().After(deadline) {
				t.Fatal("w1's program was not started")
			}
			time.Sleep(5 * time.Millisecond)
			next = l.programPid("w1")
		}
		if err := syscall.Kill(next, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	l.add("w0")
	l.waitProgress("steps at world 1", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 2 })
	l.add("w1")
	killNext(0)
	l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 2 })
	pid := l.mustProgramPid("w1")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killNext(pid)
	p := l.waitProgress("world 2 after the kills", 2*time.Minute, func(p jobs.Progress) bool { return p.Generation > 2 && p.WorldSize == 2 })
	l.waitProgress("steps after the kills", time.Minute, func(q jobs.Progress) bool { return q.Step >= p.Step+5 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	for _, want := range []string{"program of worker w1 failed before it connected", "program of worker w1 failed while restarting"} {
		found := false
		for _, e := range l.jobs.Events {
			found = found || strings.Contains(e.Message, want)
		}
		if !found {
			t.Errorf("no event %q among %+v", want, l.jobs.Events)
		}
	}
}

// Rank 0's program killed the moment a generation forms (a newcomer's
// join): the others' setup cannot use its store; the survivors form the
// next generation from their own state, the restarted program rejoins as
// a newcomer, every sample once.
func TestLiveRootKilledAsGenerationForms(t *testing.T) {
	t.Parallel()
	// Slow steps while the kill comes, full speed after. The slow phase
	// spans two program starts (w2's, then w0's restart: 8-10 s each on a
	// loaded machine), so it must not run out of samples: 24,000 at 0.1 s a
	// step of 48 last about 50 s; with 6,000 at 0.03 s (12 s) the job once
	// finished before the restarted program was back.
	slow := slowFile(t)
	l := startLive(t, 2, 3, 24000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.1", "--step-sleep-while", slow)
	l.setMaxRestarts(3)
	l.add("w0")
	l.add("w1")
	p := l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	co, err := coord.New(l.r.Client, coord.Config{Prefix: l.r.Prefix, Job: "j1", Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
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
	pid := l.mustProgramPid(g.Members[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s's program (rank 0 of generation %d %v)", g.Members[0], g.Number, g.Members)
	q := l.waitProgress("a world of 3 after the kill", 2*time.Minute, func(q jobs.Progress) bool { return q.Generation > g.Number && q.WorldSize == 3 })
	l.waitProgress("steps after the kill", time.Minute, func(x jobs.Progress) bool { return x.Step >= q.Step+5 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
}

// A frozen program (SIGSTOP: its sockets stay open) fails the survivor's
// collective within the live timeout; the survivor goes on alone, and the
// thawed program rejoins as a newcomer; nothing missed or repeated.
func TestLiveFrozenProgramIsDroppedThenRejoins(t *testing.T) {
	t.Parallel()
	// 16,000 samples: with 4,000 the job once finished (in CI, under
	// -race) before the thawed program was back. Slow steps only until it
	// is back (the file's removal below), full speed for the rest.
	slow := slowFile(t)
	l := startLive(t, 1, 2, 16000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03", "--step-sleep-while", slow)
	l.spec.Workers.Min = 2
	l.jobs.Job.Spec = l.spec
	l.add("w0")
	l.add("w1")
	l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	pid := l.mustProgramPid("w1")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	p := l.waitProgress("the survivor alone", time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 1 })
	t.Logf("survivor went on alone %.1fs after the SIGSTOP (live timeout 5s)", time.Since(stopped).Seconds())
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	l.waitProgress("the thawed one back", 2*time.Minute, func(q jobs.Progress) bool { return q.WorldSize == 2 && q.Generation > p.Generation })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
}

// 20 random joins, leaves and program kills (seeded: the seed is logged,
// EDL_TEST_SEED replays it) while a live job trains; every sample of both
// epochs exactly once.
// liveRandomEvents is how many joins, leaves and kills TestLiveRandomEvents
// draws: 12 (20 before) takes about 25 s off the suite's longest package;
// each run draws a new seed, so runs together cover more sequences.
const liveRandomEvents = 12

func TestLiveRandomEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long multi-process test")
	}
	seed := workertest.TestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	// Slow steps while the events come, full speed for the rest (the
	// file's removal below).
	slow := slowFile(t)
	l := startLive(t, 2, 3, 20000, 16, "--batch", "24", "--hidden", "32", "--step-sleep", "0.05", "--step-sleep-while", slow, "--epochs", "2")
	l.setMaxRestarts(100)
	running := []string{"w0", "w1"}
	l.add("w0")
	l.add("w1")
	next := 2
	progress := func() (jobs.Progress, jobs.State) {
		l.jobs.Mu.Lock()
		defer l.jobs.Mu.Unlock()
		return l.jobs.Job.Progress, l.jobs.Job.State
	}
	l.waitProgress("first steps", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 5 })
	co, err := coord.New(l.r.Client, coord.Config{Prefix: l.r.Prefix, Job: "j1", Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	member := func(id string) bool {
		g, err := co.ReadGen(context.Background())
		return err == nil && g.Rank(id) >= 0
	}
	var log []string
	ended := false
	for tries := 0; len(log) < liveRandomEvents && tries < 2000; tries++ {
		p, st := progress()
		if st.Terminal() {
			ended = true
			break
		}
		// A leave or a kill only while the generation has another member
		// holding the state: the last holder's loss loses the model (live
		// mode keeps no checkpoint of its own; docs/live.md, Limits).
		cur, _ := co.ReadGen(context.Background())
		shared := p.WorldSize >= 2 && cur != nil && cur.Number == p.Generation // every member synced
		// done: the job has taken the event in (a newer generation, or
		// the joiner admitted) and applied 5 more steps.
		var done func(q jobs.Progress) bool
		switch ev := rng.IntN(3); {
		case ev == 0 && len(running) < 3:
			id := fmt.Sprintf("w%d", next)
			next++
			running = append(running, id)
			l.add(id)
			log = append(log, "join "+id)
			done = func(q jobs.Progress) bool { return q.Step >= p.Step+5 && q.Generation > p.Generation && member(id) }
		case ev == 1 && len(running) > 1 && shared:
			i := rng.IntN(len(running))
			id := running[i]
			in := member(id) // else it is still preparing (or restarting)
			l.cancel[id]()
			log = append(log, "leave "+id)
			running = append(running[:i], running[i+1:]...)
			done = func(q jobs.Progress) bool { return q.Step >= p.Step+5 && (!in || q.Generation > p.Generation) }
		case ev == 2 && len(running) > 1 && shared:
			id := running[rng.IntN(len(running))]
			pid := l.programPid(id)
			if pid == 0 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			in := member(id)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			log = append(log, "kill "+id+"'s program")
			done = func(q jobs.Progress) bool { return q.Step >= p.Step+5 && (!in || q.Generation > p.Generation) }
		default: // not possible now: draw again
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// Go on once the job has taken the event in (or ended).
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			q, st := progress()
			if st.Terminal() || done(q) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Logf("event %q not taken in within a minute", log[len(log)-1])
		}
	}
	t.Logf("%d events: %s", len(log), strings.Join(log, ", "))
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	if len(log) < liveRandomEvents {
		t.Errorf("%d events before the job ended (ended early: %v), want %d", len(log), ended, liveRandomEvents)
	}
	l.wait(4*time.Minute, 2)
}

// slowFile is the file train_live.py's --step-sleep-while watches: steps
// sleep while it exists; a test removes it once it has acted on the job,
// and the rest trains at full speed.
func slowFile(t *testing.T) string {
	t.Helper()
	slow := filepath.Join(t.TempDir(), "slow")
	if err := os.WriteFile(slow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return slow
}

// A member that dies once admitted (its worker SIGKILLed, its node gone:
// here one whose heartbeat stops) is named in a job event when the
// generation without it forms, as the built-in trainer names it. Before,
// live mode's leader had no such hook: the world shrank without a word
// about which worker was gone or why.
func TestLiveLostWorkerIsNamed(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 2, 960, 8, "--batch", "24", "--hidden", "32")
	workertest.Ghost(t, l.r, "j1", "ghost")
	l.add("w0")
	l.wait(3*time.Minute, 1)
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	var lost []string
	for _, e := range l.jobs.Events {
		if strings.Contains(e.Message, "ghost") && e.Type == jobs.EventWorker {
			lost = append(lost, e.Message)
		}
	}
	if len(lost) != 1 || !strings.Contains(lost[0], "worker ghost lost: its heartbeat lease lapsed") {
		t.Errorf("events about the dead member: %q, want one saying it was lost and why", lost)
	}
}
