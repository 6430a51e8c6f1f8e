package live

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// liveRun runs live-mode workers of one job in this process, each with its
// own context (a test stops one to make it leave), over the example
// script examples/torch/train_live.py with real torch and gloo.
type liveRun struct {
	t      *testing.T
	r      *testenv.Redis
	jobs   *workertest.ExecJobs
	spec   jobs.Spec
	errs   chan error
	cancel map[string]context.CancelFunc
	logs   map[string]*lockedWriter
	dirs   map[string]string
	wlog   *lockedWriter // the workers' own log lines
	n      int
}

const livePython = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(livePython, "-c", "import torch, torch.distributed").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s with torch is required under CI: %v", livePython, err)
		}
		t.Skipf("no %s with torch: %v", livePython, err)
	}
	// The programs these tests run read these; the result cache must see them.
	testenv.TrackSources(t, "python/edl", "python/tests", "examples/torch")
}

func startLive(t *testing.T, min, max int, samples int64, parts int, args ...string) *liveRun {
	t.Helper()
	needTorch(t)
	r := testenv.NewRedis(t)
	root, _ := testenv.RepoRoot()
	grace := 30 // the programs' exit after their loop is awaited that long (slow on a loaded machine)
	restarts := 0
	cmd := append([]string{livePython, "examples/torch/train_live.py", "--samples", fmt.Sprint(samples)}, args...)
	spec := jobs.Spec{Name: "live", Workers: jobs.WorkerRange{Min: min, Max: max},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Mode: jobs.ExecLive,
			Command: cmd, Workdir: root, Env: map[string]string{"OMP_NUM_THREADS": "1"},
			Dataset:      &jobs.ExecDataset{Samples: samples, Partitions: parts},
			GracePeriodS: &grace, MaxRestarts: &restarts}}}
	run := &liveRun{t: t, r: r, jobs: &workertest.ExecJobs{Job: jobs.Job{ID: "j1", State: jobs.Running, Spec: spec}}, spec: spec,
		errs: make(chan error, 8), cancel: map[string]context.CancelFunc{}, logs: map[string]*lockedWriter{}, dirs: map[string]string{}, wlog: &lockedWriter{b: &strings.Builder{}}}
	if f := os.Getenv("EDL_LIVE_WLOG"); f != "" {
		// The workers' log lines as they come, for a run that hangs.
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Close() })
		run.wlog.tee = out
	}
	t.Cleanup(func() {
		if t.Failed() {
			s := run.wlog.String()
			if len(s) > 6000 {
				s = s[len(s)-6000:]
			}
			t.Logf("workers' log (tail):\n%s", s)
		}
	})
	return run
}

// add starts worker id.
func (l *liveRun) add(id string) {
	l.t.Helper()
	l.addTee(id, nil)
}

// addTee starts worker id with its program's stderr also written to
// stderr (when not nil).
func (l *liveRun) addTee(id string, stderr io.Writer) {
	l.t.Helper()
	progErr := io.Writer(os.Stderr)
	if stderr != nil {
		progErr = io.MultiWriter(os.Stderr, stderr)
	}
	cfg := core.DefaultConfig("j1", id)
	cfg.Prefix = l.r.Prefix
	cfg.DebugSamples = true
	cfg.MinStart = l.spec.Workers.Min
	cfg.Heartbeat, cfg.Lease = 200*time.Millisecond, 2*time.Second
	out := &lockedWriter{b: &strings.Builder{}}
	l.logs[id] = out
	l.dirs[id] = filepath.Join(l.t.TempDir(), id)
	pw, err := core.NewProgramWorker(cfg, core.ExecConfig{Dir: l.dirs[id], Env: []string{"PATH=" + os.Getenv("PATH")},
		Stdout: out, Stderr: progErr, Poll: 50 * time.Millisecond, LiveTimeout: 5 * time.Second},
		core.Deps{Redis: l.r.Client, Jobs: l.jobs, Log: slog.New(slog.NewTextHandler(l.wlog, nil))})
	if err != nil {
		l.t.Fatal(err)
	}
	w := New(pw)
	ctx, cancel := context.WithCancel(context.Background())
	l.t.Cleanup(cancel)
	l.cancel[id] = cancel
	l.n++
	go func() { l.errs <- w.Run(ctx) }()
}

// waitProgress waits until the job's progress satisfies ok.
func (l *liveRun) waitProgress(what string, timeout time.Duration, ok func(jobs.Progress) bool) jobs.Progress {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		l.jobs.Mu.Lock()
		p, st := l.jobs.Job.Progress, l.jobs.Job.State
		l.jobs.Mu.Unlock()
		if ok(p) {
			return p
		}
		if st.Terminal() {
			l.t.Fatalf("job %s before %s (progress %+v)", st, what, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.t.Fatalf("no %s within %s", what, timeout)
	return jobs.Progress{}
}

// wait waits for every worker to return and checks the sample accounting.
func (l *liveRun) wait(timeout time.Duration, epochs int) {
	l.t.Helper()
	deadline := time.After(timeout)
	for range l.n {
		select {
		case err := <-l.errs:
			if err != nil {
				l.t.Errorf("worker returned %v", err)
			}
		case <-deadline:
			st, reason := l.jobs.State()
			l.t.Fatalf("workers still running after %s; job %s (%s)", timeout, st, reason)
		}
	}
	if st, reason := l.jobs.State(); st != jobs.Succeeded {
		l.t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	pipe := datapipe.New(l.r.Client, coord.NewKeys(l.r.Prefix, "j1"), "check")
	recs, err := pipe.DebugRecords(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	ds := l.spec.Trainer.Exec.Dataset
	missed, repeated, err := core.CheckLiveSamples(recs, ds.Samples, ds.Partitions, epochs)
	if err != nil {
		l.t.Fatal(err)
	}
	if missed != 0 || repeated != 0 {
		l.t.Errorf("samples missed %d, repeated %d over %d applied steps; want 0 and 0", missed, repeated, len(recs))
	}
}

func TestLiveStaticTwoWorkers(t *testing.T) {
	t.Parallel()
	l := startLive(t, 2, 2, 960, 8, "--batch", "24", "--hidden", "32", "--epochs", "2")
	l.add("w0")
	l.add("w1")
	l.wait(3*time.Minute, 2)
}

// 2 -> 3 -> 2 mid-epoch: a newcomer joins without anybody restarting, then
// a member leaves (SIGTERM's path: its context ends); every sample of every
// epoch is in exactly one applied step.
func TestLiveScaleOutAndIn(t *testing.T) {
	t.Parallel()
	// Slow steps while the join and the leave come, full speed after: at
	// 0.1 s a step 24,000 samples outlast a newcomer's program start
	// (8-10 s on a loaded machine) several times over.
	slow := slowFile(t)
	l := startLive(t, 2, 3, 24000, 16, "--batch", "24", "--hidden", "32", "--step-sleep", "0.1", "--step-sleep-while", slow)
	l.add("w0")
	l.add("w1")
	p := l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 5 && p.WorldSize == 2 })
	l.add("w2")
	p = l.waitProgress("world 3", 2*time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 3 })
	at := p.Step
	l.waitProgress("steps at world 3", time.Minute, func(p jobs.Progress) bool { return p.Step >= at+10 })
	l.cancel["w1"]()
	l.waitProgress("world 2 again", time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 2 && p.Step > at+10 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
	for _, id := range []string{"w0", "w2"} {
		if n := strings.Count(l.logs[id].String(), "DONE "); n != 1 {
			t.Errorf("%s's program printed DONE %d times, want once (it never restarted)", id, n)
		}
	}
}

// The leader leaves: it hands its lease to a survivor as it goes, so the
// next generation forms at once rather than when its lease lapses.
func TestLiveLeaderLeaveHandsOverLease(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 2, 4000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03")
	l.add("w0")
	l.add("w1")
	l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	key := coord.NewKeys(l.r.Prefix, "j1").Leader()
	leader, err := l.r.Client.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("leader key: %v", err)
	}
	survivor := map[string]string{"w0": "w1", "w1": "w0"}[leader]
	l.cancel[leader]()
	select {
	case err := <-l.errs: // the leaver's: the survivor trains to the end
		if err != nil {
			t.Fatalf("leaver %s returned %v", leader, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("leader %s did not leave", leader)
	}
	l.n--
	// Its lease (2 s, renewed every 400 ms) has not lapsed yet: only a
	// hand-over puts the survivor's name there now.
	if now, _ := l.r.Client.Get(context.Background(), key).Result(); now != survivor {
		t.Errorf("leader key %q right after the leader %s left, want %q (handed over)", now, leader, survivor)
	}
	l.waitProgress("world 1", time.Minute, func(p jobs.Progress) bool { return p.WorldSize == 1 })
	l.wait(3*time.Minute, 1)
}

type lockedWriter struct {
	mu  sync.Mutex
	b   *strings.Builder
	tee io.Writer // also gets every write, when set
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tee != nil {
		_, _ = w.tee.Write(p)
	}
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A data set whose length differs from trainer.exec.dataset.samples: the
// worker refuses it with both numbers, the program exits with the error.
func TestLiveDatasetLengthMismatch(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 1000, 4, "--hidden", "8")
	l.spec.Trainer.Exec.Command[3] = "900" // --samples 900
	l.jobs.Job.Spec = l.spec
	l.add("w0")
	select {
	case err := <-l.errs:
		if err == nil || !strings.Contains(err.Error(), "data set has 900 samples but the job's trainer.exec.dataset.samples is 1000") {
			t.Fatalf("worker returned %v, want the length mismatch", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("worker still running")
	}
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	if n := len(l.jobs.Events); n == 0 || !strings.Contains(l.jobs.Events[n-1].Message, "dataset.samples is 1000") {
		t.Errorf("events %+v: want the mismatch as the last one", l.jobs.Events)
	}
	// The job fails saying so (before, it kept its state while its
	// cluster started the worker again and again).
	if l.jobs.Job.State != jobs.Failed || !strings.Contains(l.jobs.Job.Reason, "dataset.samples is 1000") {
		t.Errorf("job %s (%q), want failed with the mismatch", l.jobs.Job.State, l.jobs.Job.Reason)
	}
}

// A program that fails before it connects (an ImportError at its top, as
// a typo gives) fails the job once max_restarts restarts are spent, with
// the exit and the last stderr lines in the reason; its worker exits 0
// (nothing for its cluster to start again). Before, the worker returned an
// error: edl dev's local cluster (or Nomad) started a fresh worker with a
// fresh count in its place, again and again, and the job stayed starting.
// A worker started again for a job that has ended starts no program.
func TestLiveProgramFailingBeforeHelloFailsTheJob(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 1000, 4)
	script := filepath.Join(t.TempDir(), "typo.py")
	if err := os.WriteFile(script, []byte("import sys\nprint('TYPO START', flush=True)\nimport edl_no_such_module_typo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.spec.Trainer.Exec.Command = []string{livePython, script}
	l.setMaxRestarts(2)
	l.jobs.Job.State = jobs.Starting
	l.add("w0")
	select {
	case err := <-l.errs:
		if err != nil {
			t.Fatalf("worker returned %v, want nil (the job failed; nothing to start again)", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("worker still running")
	}
	st, reason := l.jobs.State()
	for _, want := range []string{"failed 3 times before it connected", "max_restarts 2", "exit code 1",
		"ModuleNotFoundError: No module named 'edl_no_such_module_typo'"} {
		if st != jobs.Failed || !strings.Contains(reason, want) {
			t.Errorf("job %s (%q), want failed with %q in the reason", st, reason, want)
		}
	}
	if n := strings.Count(l.logs["w0"].String(), "TYPO START"); n != 3 {
		t.Errorf("program started %d times, want 3 (max_restarts 2)", n)
	}
	l.jobs.Mu.Lock()
	n := 0
	for _, e := range l.jobs.Events {
		if strings.Contains(e.Message, "program of worker w0 failed before it connected: exit code 1") {
			n++
		}
	}
	l.jobs.Mu.Unlock()
	if n != 3 {
		t.Errorf("%d events for the failed starts, want 3", n)
	}
	// Its cluster starts a worker in its place after all: no program.
	l.add("w1")
	select {
	case err := <-l.errs:
		if err != nil {
			t.Fatalf("second worker returned %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("second worker still running")
	}
	if n := strings.Count(l.logs["w1"].String(), "TYPO START"); n != 0 {
		t.Errorf("the worker started for the failed job started its program %d times, want 0", n)
	}
}

// A program that fails after et.init() connected but before its hello
// (the code between init() and steps(): a DDP wrapper without a process
// group, a bad path) is named by its own exit, not as "killed by
// SIGTERM": the worker waits for the ending program, whose closed
// connection it sees while Python still tears down torch, before it
// stops it. Before, it sent SIGTERM at once, and every event and the
// job's reason said the program had been killed.
func TestLiveProgramFailingAfterInitIsNamedByItsExit(t *testing.T) {
	t.Parallel()
	l := startLive(t, 1, 1, 1000, 4)
	root, _ := testenv.RepoRoot()
	script := filepath.Join(t.TempDir(), "after_init.py")
	prog := "import edl.torch as et, torch\nctx = et.init()\nraise RuntimeError('Default process group has not been initialized')\n"
	if err := os.WriteFile(script, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	l.spec.Trainer.Exec.Command = []string{livePython, script}
	l.spec.Trainer.Exec.Env["PYTHONPATH"] = filepath.Join(root, "python")
	l.setMaxRestarts(1)
	l.jobs.Job.State = jobs.Starting
	l.add("w0")
	select {
	case <-l.errs:
	case <-time.After(2 * time.Minute):
		t.Fatal("worker still running")
	}
	st, reason := l.jobs.State()
	if st != jobs.Failed || !strings.Contains(reason, "last: exit code 1;") || !strings.Contains(reason, "RuntimeError: Default process group") {
		t.Errorf("job %s (%q), want failed with the program's exit code 1 and its error in the reason", st, reason)
	}
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	for _, e := range l.jobs.Events {
		if strings.Contains(e.Message, "SIGTERM") {
			t.Errorf("event %q: nothing killed the program", e.Message)
		}
	}
}

// programPid is the pid of worker id's program (its environment names the
// worker's socket).
// setMaxRestarts sets the job's trainer.exec.max_restarts.
func (l *liveRun) setMaxRestarts(n int) {
	l.spec.Trainer.Exec.MaxRestarts = &n
	l.jobs.Job.Spec = l.spec
}

// mustProgramPid is programPid failing the test when id has no program.
func (l *liveRun) mustProgramPid(id string) int {
	l.t.Helper()
	pid := l.programPid(id)
	if pid == 0 {
		l.t.Fatalf("no program of %s", id)
	}
	return pid
}

func (l *liveRun) programPid(id string) int {
	want := []byte("EDL_SOCKET=" + filepath.Join(l.dirs[id], "edl.sock") + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), string(want)) {
			var pid int
			fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid)
			return pid
		}
	}
	return 0
}

// A program SIGKILLed while its worker lives: the survivor's collective
// fails, the worker restarts its program (counted against max_restarts,
// an error event), which joins as a member without state and gets the
// survivor's; nothing missed or repeated.
func TestLiveProgramKilledIsRestarted(t *testing.T) {
	t.Parallel()
	// Slow steps until the restarted program has rejoined (its start takes
	// 8-10 s on a loaded machine), full speed after.
	slow := slowFile(t)
	l := startLive(t, 2, 2, 24000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.1", "--step-sleep-while", slow)
	l.setMaxRestarts(1)
	l.add("w0")
	l.add("w1")
	l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	pid := l.mustProgramPid("w1")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p := l.waitProgress("a generation after the kill", 2*time.Minute, func(p jobs.Progress) bool { return p.Generation > 1 && p.WorldSize == 2 })
	l.waitProgress("steps after the kill", time.Minute, func(q jobs.Progress) bool { return q.Step >= p.Step+5 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
	if n := strings.Count(l.logs["w0"].String(), "DONE "); n != 1 {
		t.Errorf("w0's program printed DONE %d times, want once (the survivor never restarted)", n)
	}
	l.jobs.Mu.Lock()
	defer l.jobs.Mu.Unlock()
	found := false
	for _, e := range l.jobs.Events {
		found = found || strings.Contains(e.Message, "program of worker w1 failed")
	}
	if !found {
		t.Errorf("no event for the killed program among %+v", l.jobs.Events)
	}
}
