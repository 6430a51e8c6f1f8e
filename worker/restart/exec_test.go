package restart

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// execRun runs exec workers of one job in this process, each with its
// own folder, until they all return.
type execRun struct {
	t     *testing.T
	r     *testenv.Redis
	out   string // the programs' shared output folder ($OUT)
	jobs  *workertest.ExecJobs
	store checkpoint.Store
	errs  chan error
	n     int

	warmTimeout time.Duration // ExecConfig.WarmTimeout (0: the default)
}

func startExec(t *testing.T, n int, script string, restarts int) *execRun {
	t.Helper()
	run := newExecRun(t, n, n, script, restarts)
	for i := range n {
		run.add(fmt.Sprintf("w%d", i))
	}
	return run
}

func newExecRun(t *testing.T, min, max int, script string, restarts int) *execRun {
	return newExecRunOf(t, min, max, restarts, func(e *jobs.ExecTrainer) { e.Command = []string{"/bin/sh", "-c", script} })
}

// newExecRunOf is a job of min..max workers whose exec trainer set
// makes (its env has OUT, the programs' output folder).
func newExecRunOf(t *testing.T, min, max, restarts int, set func(*jobs.ExecTrainer)) *execRun {
	t.Helper()
	r := testenv.NewRedis(t)
	out := t.TempDir()
	grace := 5
	ex := &jobs.ExecTrainer{Env: map[string]string{"OUT": out}, GracePeriodS: &grace, MaxRestarts: &restarts}
	set(ex)
	spec := jobs.Spec{Name: "x", Workers: jobs.WorkerRange{Min: min, Max: max}, Checkpoint: jobs.CheckpointPolicy{Keep: 2},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: ex}}
	store, err := checkpoint.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &execRun{t: t, r: r, out: out, jobs: &workertest.ExecJobs{Job: jobs.Job{ID: "j1", State: jobs.Running, Spec: spec}},
		store: store, errs: make(chan error, 16)}
}

// add starts worker id, env added to its own environment; cancelling the
// returned function is its SIGTERM.
func (run *execRun) add(id string, env ...string) context.CancelFunc {
	t := run.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := core.DefaultConfig("j1", id)
	cfg.Prefix = run.r.Prefix
	pw, err := core.NewProgramWorker(cfg, core.ExecConfig{Dir: filepath.Join(t.TempDir(), "w"), Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...),
		Poll: 50 * time.Millisecond, SyncEvery: 100 * time.Millisecond, WarmTimeout: run.warmTimeout},
		core.Deps{Redis: run.r.Client, Jobs: run.jobs, Store: run.store, Log: slog.New(slog.NewTextHandler(workertest.TestWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	w := New(pw)
	run.n++
	go func() { run.errs <- w.Run(ctx) }()
	return cancel
}

// wait waits for every worker to return and for the job to end.
func (r *execRun) wait(timeout time.Duration) (jobs.State, string) {
	r.t.Helper()
	deadline := time.After(timeout)
	for range r.n {
		select {
		case err := <-r.errs:
			if err != nil {
				r.t.Errorf("worker returned %v", err)
			}
		case <-deadline:
			st, reason := r.jobs.State()
			r.t.Fatalf("workers still running after %s; job %s (%s)", timeout, st, reason)
		}
	}
	return r.jobs.State()
}

// lines reads the program output files named glob in $OUT, in order.
func (r *execRun) lines(glob string) []string {
	files, _ := filepath.Glob(filepath.Join(r.out, glob))
	sort.Strings(files)
	var out []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

func TestExecOneWorkerSucceeds(t *testing.T) {
	r := startExec(t, 1, `echo "$RANK $WORLD_SIZE $LOCAL_RANK $EDL_GENERATION $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_RUN_ID" > "$OUT/env"; [ "$MASTER_PORT" -gt 0 ] && [ -d "$EDL_CHECKPOINT_DIR" ]`, 3)
	st, reason := r.wait(30 * time.Second)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	if got := r.lines("env"); len(got) != 1 || got[0] != "0 1 0 1 0 j1" {
		t.Errorf("program saw %q, want rank 0 of 1, generation 1, restart 0, run id j1", got)
	}
}

func TestExecFailureIsRestartedThenFailsTheJob(t *testing.T) {
	r := startExec(t, 1, `echo "run $TORCHELASTIC_RESTART_COUNT/$TORCHELASTIC_MAX_RESTARTS" >> "$OUT/runs"; echo "bad input at line 7" >&2; exit 5`, 2)
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Failed {
		t.Fatalf("job %s (%s), want failed", st, reason)
	}
	if got, want := strings.Join(r.lines("runs"), ","), "run 0/2,run 1/2,run 2/2"; got != want {
		t.Errorf("runs %q, want %q (one start and max_restarts restarts)", got, want)
	}
	for _, part := range []string{"exit code 5", "bad input at line 7", "max_restarts 2"} {
		if !strings.Contains(reason, part) {
			t.Errorf("reason %q lacks %q", reason, part)
		}
	}
}

// Two workers, min == max: the program of rank 0 fails once after writing
// a checkpoint; at the restart rank 1's folder holds it (uploaded by rank
// 0's worker, restored by rank 1's), and the job succeeds.
func TestExecCheckpointFolderFollowsTheRestart(t *testing.T) {
	script := `
echo "$RANK $WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $TORCHELASTIC_RESTART_COUNT" >> "$OUT/env.$RANK"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "$RANK" = 0 ]; then echo 42 > "$EDL_CHECKPOINT_DIR/c.tmp"; mv "$EDL_CHECKPOINT_DIR/c.tmp" "$EDL_CHECKPOINT_DIR/c"; sleep 0.5; exit 1; fi
  while :; do sleep 0.05; done
fi
if [ "$RANK" = 1 ]; then cat "$EDL_CHECKPOINT_DIR/c" > "$OUT/seen.1" 2>&1; exit 0; fi
while [ ! -f "$OUT/seen.1" ]; do sleep 0.05; done
exit 0`
	r := startExec(t, 2, script, 3)
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	if got := r.lines("seen.1"); len(got) != 1 || got[0] != "42" {
		t.Errorf("rank 1 saw %q in its checkpoint folder after the restart, want rank 0's 42", got)
	}
	e0, e1 := r.lines("env.0"), r.lines("env.1")
	if len(e0) != 2 || len(e1) != 2 {
		t.Fatalf("runs: rank 0 %q, rank 1 %q; want two each", e0, e1)
	}
	for i := range 2 {
		f0, f1 := strings.Fields(e0[i]), strings.Fields(e1[i])
		if f0[1] != "2" || f1[1] != "2" || f0[2] != f1[2] || f0[3] != fmt.Sprint(i) {
			t.Errorf("run %d: rank 0 saw %q, rank 1 %q; want world 2, one master, restart count %d", i, e0[i], e1[i], i)
		}
	}
	if e0[0] == e0[1] {
		t.Errorf("the restart reused the master port: %q", e0)
	}
}

// A world below workers.min never runs the program: after one of two
// workers (min 2) leaves, the other waits for a replacement.
func TestExecWaitsForMinWorkers(t *testing.T) {
	// Rank 0's exit 0 ends the job and stops the others, so after the
	// replacement rank 0 waits for rank 1's second run to be on record.
	script := `echo "$WORLD_SIZE" >> "$OUT/world.$RANK.$$"
if [ -f "$OUT/finish" ]; then
  while [ "$RANK" = 0 ] && [ "$(ls "$OUT" | grep -c '^world\.1\.')" -lt 2 ]; do sleep 0.05; done
  exit 0
fi
while :; do sleep 0.05; done`
	r := newExecRun(t, 2, 3, script, 3)
	r.add("w0")
	leave := r.add("w1")
	waitFiles(t, r.out, "world.0.*", 1)
	waitFiles(t, r.out, "world.1.*", 1)
	leave()
	time.Sleep(2 * time.Second) // a window in which a world of 1 would start
	if err := os.WriteFile(filepath.Join(r.out, "finish"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.add("w2")
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	for _, w := range r.lines("world.*") {
		if w != "2" {
			t.Errorf("a program ran with WORLD_SIZE %s, below workers.min 2 (all: %v)", w, r.lines("world.*"))
		}
	}
	if n := len(r.lines("world.*")); n != 4 {
		t.Errorf("%d program runs, want 4 (2 before the leave, 2 after the replacement)", n)
	}
}

// TestExecWorkersStartedTogetherStartTogether: two workers started
// together, one of which prepares longer than the heartbeat lease (its
// warm interpreter's preload takes 4 s, as `import torch` can on a loaded
// machine), start the program once, at world 2: the ready one waits out
// the last call for the one still preparing. Before, a preparing worker
// renewed no heartbeat until it was ready, so after the 2-s lease the
// leader took it for dead, started the program at world 1 and restarted
// it at world 2 when the other came.
func TestExecWorkersStartedTogetherStartTogether(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	mod := "import os, time\ntime.sleep(float(os.environ.get('EDL_TEST_SLOW', '0')))\n"
	if err := os.WriteFile(filepath.Join(dir, "edl_test_slow.py"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := `import os, sys, time
out, world = os.environ["OUT"], os.environ["WORLD_SIZE"]
with open(os.path.join(out, "world.%s.%d" % (os.environ["RANK"], os.getpid())), "w") as f:
    f.write(world)
while world == "2" and os.environ["RANK"] == "0" and len([f for f in os.listdir(out) if f.startswith("world.")]) < 2:
    time.sleep(0.05) # rank 0's exit 0 ends the job: after rank 1's run is on record
if world == "2":
    sys.exit(0)
time.sleep(3600)
`
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newExecRunOf(t, 1, 2, 3, func(e *jobs.ExecTrainer) {
		e.Command = []string{python, "prog.py"}
		e.Workdir = dir
		e.Preload = []string{"edl_test_slow"}
		e.Env["PYTHONPATH"] = dir
	})
	r.add("w0")
	r.add("w1", "EDL_TEST_SLOW=4")
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	if got := r.lines("world.*"); len(got) != 2 || got[0] != "2" || got[1] != "2" {
		t.Errorf("program runs saw WORLD_SIZE %v, want one run per worker at world 2", got)
	}
}

func waitFiles(t *testing.T, dir, glob string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, glob)); len(m) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %d files %s in %s", n, glob, dir)
}

// TestExecLostWorkerIsNamed: a member that dies without leaving (its
// worker SIGKILLed, its node gone: here a member whose heartbeat stops)
// is named in a job event when the generation without it forms, as the
// built-in trainer names it. Before, restart mode's leader had no such
// hook: the job's events showed only the survivors' programs failing
// ("Connection reset by peer"), not which worker was gone or why.
func TestExecLostWorkerIsNamed(t *testing.T) {
	r := newExecRun(t, 1, 2, `echo "$WORLD_SIZE" >> "$OUT/world"; [ "$WORLD_SIZE" = 1 ] && exit 0; sleep 3600`, 3)
	workertest.Ghost(t, r.r, "j1", "ghost")
	r.add("w0")
	st, reason := r.wait(60 * time.Second)
	if st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
	var lost []string
	for _, e := range r.jobs.Events {
		if strings.Contains(e.Message, "ghost") && e.Type == jobs.EventWorker {
			lost = append(lost, e.Message)
		}
	}
	if len(lost) != 1 || !strings.Contains(lost[0], "worker ghost lost: its heartbeat lease lapsed") {
		t.Errorf("events about the dead member: %q, want one saying it was lost and why", lost)
	}
}

// TestExecRankZeroFailingAtStartIsOneRestart: rank 0's program fails at
// once (a bad argument: argparse's exit 2) while rank 1's warm run waits
// for rank 0's rendezvous store. Every failure is one restart, the
// members stay members, and no worker is named lost. Before, rank 1
// waited out the 3-s rendezvous wait blind to the failure, sent no
// report in the leader's window and was dropped as lost
// (ring_broken_no_report); the failure then did not count (a member was
// lost), so the program ran once more than max_restarts allows, and the
// worker turned its rendezvous wait off for the rest of the job.
func TestExecRankZeroFailingAtStartIsOneRestart(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	prog := `import os, sys, time
rank = os.environ["RANK"]
open(os.path.join(os.environ["OUT"], "run.%s.%d" % (rank, os.getpid())), "w").close()
if rank == "0":
    sys.stderr.write("usage: prog.py [-h]\nprog.py: error: argument --rounds: invalid int value: 'x'\n")
    sys.exit(2)
time.sleep(3600)
`
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newExecRunOf(t, 2, 2, 1, func(e *jobs.ExecTrainer) {
		e.Command = []string{python, "prog.py"}
		e.Workdir = dir
		e.Preload = []string{"json"}
	})
	r.add("w0")
	r.add("w1")
	st, reason := r.wait(90 * time.Second)
	if st != jobs.Failed || !strings.Contains(reason, "invalid int value") {
		t.Fatalf("job %s (%q), want failed naming the program's error", st, reason)
	}
	if m, _ := filepath.Glob(filepath.Join(r.out, "run.0.*")); len(m) != 2 {
		t.Errorf("rank 0's program ran %d times, want 2 (max_restarts 1)", len(m))
	}
	for _, e := range r.jobs.Events {
		if strings.Contains(e.Message, " lost: ") {
			t.Errorf("event %q: no worker was lost", e.Message)
		}
	}
}

// TestExecSpentRestartsFailTheJobFromAnyRank: the restart budget is found
// spent at a generation's start barrier by a member that is not rank 0.
// It fails the job itself. Before, only rank 0 marked the job failed;
// rank 1 exited, and a rank 0 that had not yet read the barrier saw a
// member leave instead, waited below workers.min for one to come, and
// the job stayed running for ever (1 run in 25 of
// TestExecRankZeroFailingAtStartIsOneRestart under load). Here rank 0
// is a member that writes its barrier entry and never reads the barrier.
func TestExecSpentRestartsFailTheJobFromAnyRank(t *testing.T) {
	r := newExecRun(t, 2, 2, `echo ran > "$OUT/ran.$$"`, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	co, err := coord.New(r.r.Client, coord.Config{Prefix: r.r.Prefix, Job: "j1", Worker: "a-rank0", Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond}, workertest.TestLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := co.SetMember(ctx, coord.Member{Addr: "127.0.0.1:1", State: coord.Ready, Since: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = co.RunHeartbeat(ctx) }()
	keys := newExecKeys(co.Keys())
	if err := r.r.Client.Set(ctx, keys.Restarts(), 2, 0).Err(); err != nil { // past max_restarts 1
		t.Fatal(err)
	}
	go func() { // rank 0's barrier entry, once generation 1 names it
		for ctx.Err() == nil {
			if g, err := co.ReadGen(ctx); err == nil && g != nil && g.Rank("a-rank0") == 0 {
				r.r.Client.HSet(ctx, keys.Gen(g.Number), "a-rank0", `{"port":1,"seq":-1}`)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r.add("w1")
	st, reason := r.wait(30 * time.Second)
	if st != jobs.Failed || !strings.Contains(reason, "max_restarts 1") {
		t.Fatalf("job %s (%q), want failed: restart budget spent", st, reason)
	}
	if len(r.lines("ran.*")) != 0 {
		t.Error("the program ran with the restart budget spent")
	}
}
