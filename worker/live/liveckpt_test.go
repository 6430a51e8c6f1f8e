package live

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// runLiveChild is the worker process of the live multi-process tests
// (runChild with EDL_WORKER_LIVE set): an exec worker in live mode whose
// folder is EDL_WORKER_LIVEDIR/<id>; its program dies with it (Pdeathsig).
func runLiveChild(ctx context.Context, cfg core.Config, deps core.Deps, env func(string) string) int {
	deps.Transport = nil
	pw, err := core.NewProgramWorker(cfg, core.ExecConfig{Dir: filepath.Join(env("LIVEDIR"), cfg.Worker), Env: []string{"PATH=" + os.Getenv("PATH")},
		Stdout: os.Stdout, Stderr: os.Stderr, Poll: 50 * time.Millisecond, LiveTimeout: 5 * time.Second}, deps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new exec worker:", err)
		return 2
	}
	w := New(pw)
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// liveCluster is a live job whose workers are processes (the test binary
// as a live exec worker), reporting to a job store, checkpointing to a
// file store.
func liveCluster(t *testing.T, min, max int, samples int64, parts int, every int, args ...string) (*workertest.Cluster, *jobstore.Store) {
	return liveClusterRestarts(t, min, max, samples, parts, every, 0, args...)
}

func liveClusterRestarts(t *testing.T, min, max int, samples int64, parts int, every, restarts int, args ...string) (*workertest.Cluster, *jobstore.Store) {
	t.Helper()
	needTorch(t)
	r := testenv.NewRedis(t)
	st := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	root, _ := testenv.RepoRoot()
	grace := 5
	cmd := append([]string{livePython, "examples/torch/train_live.py", "--samples", fmt.Sprint(samples)}, args...)
	spec := jobs.Spec{Name: "live", Workers: jobs.WorkerRange{Min: min, Max: max},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Mode: jobs.ExecLive,
			Command: cmd, Workdir: root, Env: map[string]string{"OMP_NUM_THREADS": "1"},
			Dataset:      &jobs.ExecDataset{Samples: samples, Partitions: parts},
			GracePeriodS: &grace, MaxRestarts: &restarts}},
		Checkpoint: jobs.CheckpointPolicy{EverySteps: every, Keep: 2}}
	ctx := context.Background()
	j, _, err := st.Create(ctx, "tenant", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, j.ID, jobs.Starting, "placed"); err != nil {
		t.Fatal(err)
	}
	c := workertest.NewCluster(t, r, j.Spec, 0)
	c.Job, c.Jobs = j.ID, true
	c.Store = "file://" + t.TempDir()
	c.Env = []string{"EDL_WORKER_LIVE=1", "EDL_WORKER_LIVEDIR=" + t.TempDir()}
	return c, st
}

// livePrograms are the pids of the job's programs still running.
func livePrograms(dir string) []int {
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "EDL_SOCKET="+dir) {
			var pid int
			fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid)
			out = append(out, pid)
		}
	}
	return out
}

func jobEvents(t *testing.T, st *jobstore.Store, id string) []jobs.Event {
	t.Helper()
	evs, err := st.Events(context.Background(), id, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eventMessages is the events' messages, one a line, for a failure.
func eventMessages(evs []jobs.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Type, e.Message)
	}
	return b.String()
}

func hasEvent(evs []jobs.Event, sub string) bool {
	for _, e := range evs {
		if strings.Contains(e.Message, sub) {
			return true
		}
	}
	return false
}

// Every worker of a live job SIGKILLed at once (their programs die with
// them): the model survives in the checkpoints; two new workers restore
// the newest one, the data pipeline goes back to its position, the steps
// after it are redone (a job event says so), and the job finishes with
// every sample of every epoch in exactly one applied step of the final
// model's lineage, and exactly epochs x samples samples counted.
func TestLiveCheckpointSurvivesTotalLoss(t *testing.T) {
	t.Parallel()
	const samples, parts, epochs = 3000, 8, 2
	c, st := liveCluster(t, 2, 2, samples, parts, 10, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03",
		"--epochs", fmt.Sprint(epochs))
	c.Start()
	c.Start()
	ctx := context.Background()
	store, err := checkpoint.Open(ctx, c.Store, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitFor("a checkpoint and steps after it", 3*time.Minute, func() bool {
		j, err := st.Get(ctx, c.Job)
		return err == nil && j.LastCheckpoint != nil && j.Progress.Step >= j.LastCheckpoint.Step+4 && j.Progress.WorldSize == 2
	})
	// Freeze both workers (SIGSTOP: the workers upload the checkpoints and
	// report the progress) at a moment when the progress on record is past
	// the newest committed checkpoint, then kill them. Read while they ran,
	// a checkpoint could be committed between the read and the kill while
	// the progress on record still lagged behind it: the fresh workers then
	// restored a checkpoint at or past the recorded progress and had
	// nothing to call redone (seen once in five full runs).
	var cp, last int64
	c.WaitFor("both workers stopped with progress on record after the newest checkpoint", time.Minute, func() bool {
		c.Stop("w1", "w2")
		j, err := st.Get(ctx, c.Job)
		cp, last = c.NewestCheckpoint(), j.Progress.Step
		if err == nil && cp >= 0 && last > cp {
			return true
		}
		c.Signal("w1", syscall.SIGCONT)
		c.Signal("w2", syscall.SIGCONT)
		time.Sleep(100 * time.Millisecond)
		return false
	})
	c.Signal("w1", syscall.SIGKILL)
	c.Signal("w2", syscall.SIGKILL)
	_ = c.Wait("w1", 10*time.Second)
	_ = c.Wait("w2", 10*time.Second)
	c.WaitFor("the programs gone with their workers", 10*time.Second, func() bool { return len(livePrograms(c.LiveDir())) == 0 })
	t.Logf("killed both workers at step %d (on record); newest checkpoint at step %d", last, cp)
	c.Start()
	c.Start()
	c.Finish(4 * time.Minute)
	j, err := st.Get(ctx, c.Job)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", j.State, j.Reason)
	}
	if want := int64(epochs * samples); j.Progress.Samples != want {
		t.Errorf("progress counts %d samples, want %d (the restored counters go on from the checkpoint)", j.Progress.Samples, want)
	}
	c.CheckLiveExactlyOnce(samples, parts, epochs)
	evs := jobEvents(t, st, c.Job)
	if want := fmt.Sprintf("restored the checkpoint of step %d", cp); !hasEvent(evs, want) || !hasEvent(evs, "are redone") {
		t.Errorf("no event saying %q and the steps after it redone among %d events: %s", want, len(evs), eventMessages(evs))
	}
	ms, err := checkpoint.List(ctx, store, core.CheckpointJob(c.Job))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || len(ms) > 2 {
		t.Errorf("%d checkpoints kept, want 1-2 (keep 2)", len(ms))
	}
	for _, m := range ms {
		if _, ok := m.Shard(liveStateShard); !ok {
			t.Errorf("checkpoint %d has no %s shard: %+v", m.Step, liveStateShard, m.Shards)
		}
	}
}

// Every worker preempted (SIGTERM at once): the members leave after the
// step where every one of them leaves, and rank 0 checkpoints that step
// before it goes; new workers restore it and redo nothing.
func TestLiveCheckpointWhenEveryWorkerLeaves(t *testing.T) {
	t.Parallel()
	const samples, parts, epochs = 2400, 8, 1
	c, st := liveCluster(t, 2, 2, samples, parts, 0, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03")
	c.Start()
	c.Start()
	ctx := context.Background()
	c.WaitFor("steps at world 2", 3*time.Minute, func() bool {
		j, err := st.Get(ctx, c.Job)
		return err == nil && j.Progress.Step >= 10 && j.Progress.WorldSize == 2
	})
	c.Signal("w1", syscall.SIGTERM)
	c.Signal("w2", syscall.SIGTERM)
	for _, id := range []string{"w1", "w2"} {
		if err := c.Wait(id, time.Minute); err != nil {
			t.Fatalf("%s after SIGTERM: %v", id, err)
		}
	}
	j, _ := st.Get(ctx, c.Job)
	if j.LastCheckpoint == nil || j.LastCheckpoint.Step != j.Progress.Step {
		t.Fatalf("after every worker left at step %d: last checkpoint %+v, want one of that step; events:%s",
			j.Progress.Step, j.LastCheckpoint, eventMessages(jobEvents(t, st, c.Job)))
	}
	finishFromLeaveCheckpoint(t, c, st, j.Progress.Step, samples, parts, epochs)
}

// finishFromLeaveCheckpoint starts a new worker after every one left at
// step left, lets the job finish and checks that it restored the
// checkpoint of that step, redid nothing and used every sample once.
func finishFromLeaveCheckpoint(t *testing.T, c *workertest.Cluster, st *jobstore.Store, left, samples int64, parts, epochs int) {
	t.Helper()
	ctx := context.Background()
	c.Start()
	c.Finish(4 * time.Minute)
	j, _ := st.Get(ctx, c.Job)
	if j.State != jobs.Succeeded || j.Progress.Samples != int64(epochs)*samples {
		t.Fatalf("job %s (%s), %d samples; want succeeded with %d", j.State, j.Reason, j.Progress.Samples, int64(epochs)*samples)
	}
	c.CheckLiveExactlyOnce(samples, parts, epochs)
	evs := jobEvents(t, st, c.Job)
	if !hasEvent(evs, fmt.Sprintf("restored the checkpoint of step %d", left)) || hasEvent(evs, "are redone") {
		t.Errorf("want the checkpoint of step %d restored and nothing redone; events:%s", left, eventMessages(evs))
	}
}

// The other member leaves at a step (its SIGTERM came before it took its
// share), this one's SIGTERM comes after it took its share of that step:
// it goes on alone with the only copy of the state, and leaves at the
// next generation's wait. It checkpoints that state before it goes, or the
// model is lost (before, preempting every worker at once lost it whenever
// the signals straddled a step's start).
func TestLiveLastHolderLeavingBetweenStepsCheckpoints(t *testing.T) {
	t.Parallel()
	const samples, parts, epochs = 2400, 8, 1
	slow := slowFile(t)
	c, st := liveCluster(t, 2, 2, samples, parts, 0, "--batch", "24", "--hidden", "32", "--step-sleep", "1", "--step-sleep-while", slow)
	c.Start()
	c.Start()
	ctx := context.Background()
	c.WaitFor("steps at world 2", 3*time.Minute, func() bool {
		j, err := st.Get(ctx, c.Job)
		return err == nil && j.Progress.Step >= 3 && j.Progress.WorldSize == 2
	})
	// Each program sleeps a second after it prints a step's line: a
	// signal sent right after a new line lands before its next share.
	n := strings.Count(c.OutputSoFar("w2"), "STEP step=")
	c.WaitFor("a new step of w2", time.Minute, func() bool { return strings.Count(c.OutputSoFar("w2"), "STEP step=") > n })
	left := lastStepLine(c.OutputSoFar("w2"))
	c.Signal("w2", syscall.SIGTERM)
	// By step number, not by a count of w1's lines taken now: w1's line of
	// the same step can land in its output just after such a count, and w1
	// was then stopped in the same step as w2 (every member leaving at once,
	// another case).
	c.WaitFor(fmt.Sprintf("w1's line of the step w2 leaves at (after %d)", left), time.Minute, func() bool {
		return lastStepLine(c.OutputSoFar("w1")) > left
	})
	c.Signal("w1", syscall.SIGTERM)
	for _, id := range []string{"w1", "w2"} {
		if err := c.Wait(id, time.Minute); err != nil {
			t.Fatalf("%s after SIGTERM: %v", id, err)
		}
	}
	j, _ := st.Get(ctx, c.Job)
	if j.LastCheckpoint == nil || j.LastCheckpoint.Step != j.Progress.Step {
		t.Fatalf("after every worker left at step %d: last checkpoint %+v, want one of that step; events:%s",
			j.Progress.Step, j.LastCheckpoint, eventMessages(jobEvents(t, st, c.Job)))
	}
	if !strings.Contains(c.Output("w1"), "leaving with the only copy of the state") {
		t.Fatalf("w1 did not leave between steps as the last holder of the state (the case this test is for)")
	}
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	finishFromLeaveCheckpoint(t, c, st, j.Progress.Step, samples, parts, epochs)
}

// The program of a job's only member dies (its worker lives): with a
// checkpoint store the job no longer fails; the worker restarts the
// program, the restore generation loads the newest checkpoint, and the
// job finishes exactly once.
func TestLiveCheckpointOnlyMemberProgramDies(t *testing.T) {
	t.Parallel()
	const samples, parts, epochs = 2400, 8, 1
	c, st := liveClusterRestarts(t, 1, 1, samples, parts, 10, 1, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03")
	c.Start()
	ctx := context.Background()
	c.WaitFor("a checkpoint and steps after it", 3*time.Minute, func() bool {
		j, err := st.Get(ctx, c.Job)
		return err == nil && j.LastCheckpoint != nil && j.Progress.Step >= j.LastCheckpoint.Step+3
	})
	pids := livePrograms(c.LiveDir())
	if len(pids) != 1 {
		t.Fatalf("programs %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.Finish(3 * time.Minute)
	j, _ := st.Get(ctx, c.Job)
	if j.State != jobs.Succeeded || j.Progress.Samples != int64(epochs*samples) {
		t.Fatalf("job %s (%s), %d samples; want succeeded with %d", j.State, j.Reason, j.Progress.Samples, epochs*samples)
	}
	c.CheckLiveExactlyOnce(samples, parts, epochs)
	if evs := jobEvents(t, st, c.Job); !hasEvent(evs, "restored the checkpoint of step") {
		t.Errorf("no restore event among %d events", len(evs))
	}
}

func TestLiveCkptReason(t *testing.T) {
	leaving := func(world int, who ...int) []int64 {
		m := make([]int64, core.BlockLen(world))
		for _, r := range who {
			m[core.BlockHead+core.SlotWidth*r+3] = core.FlagLeaving
		}
		return m
	}
	for _, c := range []struct {
		name    string
		v       core.StepVerdict
		applied int64
		every   int64
		meta    []int64
		want    string
	}{
		{"period", core.StepVerdict{Apply: true, Action: core.ActContinue}, 9, 10, leaving(2), "period"},
		{"not yet", core.StepVerdict{Apply: true, Action: core.ActContinue}, 8, 10, leaving(2), ""},
		{"no period", core.StepVerdict{Apply: true, Action: core.ActContinue}, 9, 0, leaving(2), ""},
		{"epoch end without period", core.StepVerdict{EpochDone: true, Action: core.ActContinue}, 5, 0, leaving(2), "epoch end"},
		{"end", core.StepVerdict{EpochDone: true, Action: core.ActDone}, 5, 0, leaving(2), "end"},
		{"cancelled", core.StepVerdict{Apply: true, Action: core.ActStop}, 9, 10, leaving(2), ""},
		{"everyone leaves", core.StepVerdict{Apply: true, Action: core.ActLeave}, 3, 0, leaving(2, 0, 1), "every member leaves"},
		{"one leaves", core.StepVerdict{Apply: true, Action: core.ActSwitch}, 3, 0, leaving(2, 1), ""},
	} {
		if got := liveCkptReason(c.v, c.applied, c.every, c.meta, 2); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAwaitStateFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.pt")
	never := make(chan struct{})
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = os.WriteFile(p+".tmp", []byte("state"), 0o644)
		_ = os.Rename(p+".tmp", p)
	}()
	if b, err := awaitStateFile(p, never, 5*time.Second); err != nil || string(b) != "state" {
		t.Fatalf("got %q, %v", b, err)
	}
	_ = os.WriteFile(p+"2.err", []byte("PicklingError: no"), 0o644)
	if _, err := awaitStateFile(p+"2", never, 5*time.Second); err == nil || !strings.Contains(err.Error(), "PicklingError") {
		t.Fatalf("err %v, want the program's message", err)
	}
	done := make(chan struct{})
	close(done)
	if _, err := awaitStateFile(p+"3", done, 5*time.Second); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("err %v, want the program's end", err)
	}
}

var stepLineRe = regexp.MustCompile(`STEP step=(\d+) `)

// lastStepLine is the step of the newest "STEP step=N" line in a program's
// output (0 for none).
func lastStepLine(out string) int {
	m := stepLineRe.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}
