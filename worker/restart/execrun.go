package restart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

// Worker runs a user's program (a torchrun script) in one worker's
// place: the membership, leader and generations are the elastic worker's
// (worker/coord); instead of training in process it starts the program
// with torchrun's environment for every generation, and restarts it at
// every generation change (restart mode). See docs/exec.md.
type Worker struct {
	*core.ProgramWorker
	keys execKeys
	sync *dirSync // nil without a store

	stoppedAt time.Time   // when the last program run began to end
	rank0     atomic.Bool // this worker is rank 0 of the generation running
	warm      *warmer     // the next run's interpreter (warmstart.go)
}

// newRestart is pw in restart mode.
func New(pw *core.ProgramWorker) *Worker {
	return &Worker{ProgramWorker: pw, keys: newExecKeys(pw.Co.Keys())}
}

// Run prepares (restores the newest checkpoint into the folder), joins the
// job and runs the program in every generation that names this worker,
// until the job ends. When ctx ends (SIGTERM) the worker stops its
// program (grace period, then SIGKILL), syncs the checkpoint folder if it
// was rank 0, leaves and returns nil.
func (w *Worker) Run(ctx context.Context) error {
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() { w.warm.discard() }()
	// The heartbeat runs from the start: a worker still preparing (its
	// interpreter importing torch, a restore) is alive for the leader's
	// last call however long that takes. Before, it was renewed only
	// once the worker was ready, so one preparing longer than the lease
	// (2 s) was taken for dead and its peers started without it.
	hb, stopHB := context.WithCancel(bg)
	defer stopHB()
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); _ = w.Co.RunHeartbeat(hb) }()
	if err := w.prepare(ctx); err != nil {
		stopHB()
		<-hbDone // no renewal after the leave below
		lctx, lcancel := context.WithTimeout(bg, 5*time.Second)
		defer lcancel()
		_ = w.Co.Leave(lctx)
		if ctx.Err() != nil {
			w.Log.Info("stopped while preparing", "err", err)
			return nil
		}
		return err
	}
	go func() {
		<-ctx.Done()
		w.RequestLeave()
	}()
	go w.Rep.Run(bg)
	met := core.NewMetricSink(w.Deps.Redis, w.Cfg.Prefix, w.Cfg.Job) // metricpoints.go
	stopMet := met.Start(func(err error) { w.Log.Warn("metrics", "err", err) })
	mf := &metricsFile{path: filepath.Join(w.Ecfg.Dir, MetricsFileName), sink: met, rep: w.Rep, rank0: w.rank0.Load}
	go mf.run(bg)
	defer func() { mf.read(); stopMet() }() // the program's last lines too
	go w.Poll(bg, w.Deps.Redis, w.Deps.Jobs, w.Cfg.Job)
	go w.Listen(bg, w.Deps.Redis)
	lctx, lcancel := context.WithCancel(bg)
	w.StopLead = lcancel
	go func() { _ = w.Leader.Run(lctx) }()
	return w.loop(bg)
}

// DefaultLastCall is how long an exec job's ready workers wait for
// those still preparing (core.Config.LastCall 0): a program restarts at
// every change of the world, so workers started together start it
// together (torchrun's rendezvous has a last call too).
const DefaultLastCall = 10 * time.Second

func (w *Worker) prepare(ctx context.Context) error {
	spec, err := w.ReadSpec(ctx)
	if err != nil {
		return err
	}
	if spec.Trainer.Kind != jobs.TrainerExec || spec.Trainer.Exec == nil || len(spec.Trainer.Exec.Command) == 0 {
		return fmt.Errorf("job spec: trainer: kind %q is not an exec trainer with a command", spec.Trainer.Kind)
	}
	w.Spec, w.Ex = *spec, *spec.Trainer.Exec
	w.Rep = core.NewReporter(w.Deps.Jobs, w.Cfg.Job, w.Cfg.ProgressEvery, w.Log)
	w.warm = newWarmer(w) // imports beside the registration and the restore
	w.warm.prestart(w.jobEnv().BaseEnviron())
	if err := w.Register(ctx, coord.Preparing); err != nil {
		return err
	}
	if err := os.MkdirAll(w.CkptDir, 0o755); err != nil {
		return fmt.Errorf("worker: checkpoint folder: %w", err)
	}
	if w.Deps.Store != nil {
		cat, err := checkpoint.NewCatalog(w.Deps.Store, checkpoint.Config{Job: core.CheckpointJob(w.Cfg.Job), Keep: max(w.Spec.Checkpoint.Keep, 1), Log: w.Deps.Log})
		if err != nil {
			return fmt.Errorf("worker: checkpoints: %w", err)
		}
		w.sync = newDirSync(cat, w.CkptDir, w.Log)
		// A newcomer prepares before the switch: the newest checkpoint is
		// in its folder before a generation names it.
		if _, err := w.restore(ctx); err != nil {
			return err
		}
	}
	lc := w.Cfg
	if lc.LastCall == 0 {
		lc.LastCall = DefaultLastCall
	}
	w.Leader = core.NewLeader(lc, *spec, w.Co, w.Deps.Now, w.Rep.Lost) // names the dead members
	w.Watch = w.Co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	// A newcomer's interpreter is warm before the leader may admit it: a
	// join does not wait for Python's start and its imports.
	w.warm.waitReady(ctx)
	if err := w.Register(ctx, coord.Ready); err != nil {
		return err
	}
	w.Log.Info("ready", "program", w.Ex.Command[0], "checkpoint_dir", w.CkptDir, "seq", w.seq())
	return nil
}

// jobEnv is the program's environment without a generation's part.
func (w *Worker) jobEnv() core.ProgramEnv {
	return core.ProgramEnv{Base: w.Ecfg.Env, Spec: w.Ex.Env, JobID: w.Cfg.Job, MaxRestarts: w.Ex.Restarts(),
		CheckpointDir: w.CkptDir, ErrorFile: filepath.Join(w.Ecfg.Dir, "error.json"),
		MetricsFile: filepath.Join(w.Ecfg.Dir, MetricsFileName)}
}

// restore brings the newest checkpoint of the store into the folder.
func (w *Worker) restore(ctx context.Context) (int64, error) {
	if w.sync == nil {
		return -1, nil
	}
	before := w.sync.Seq()
	seq, err := w.sync.Restore(ctx, func(s checkpoint.Skip) {
		w.Rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint %d skipped at restore: %v", s.Step, s.Reason),
			map[string]any{"step": s.Step, "corrupt": true})
	})
	if err != nil {
		return seq, fmt.Errorf("worker: restore checkpoint folder: %w", err)
	}
	if seq != before {
		w.Log.Info("checkpoint restored into the folder", "seq", seq)
	}
	return seq, nil
}

func (w *Worker) seq() int64 {
	if w.sync == nil {
		return -1
	}
	return w.sync.Seq()
}

// loop waits for generations that name this worker and runs each:
//
//	ready --generation names me--> barrier --all set--> running
//	running --newer generation / peer lost / own failure--> stop program --> barrier of the next
//	running --rank 0 exits 0--> succeeded;  --restart budget spent--> failed
//	any --SIGTERM or marked leaving--> stop program, sync, leave
//	any --cancel--> stop program, sync, cancelled
func (w *Worker) loop(ctx context.Context) error {
	var seen int64
	for {
		switch {
		case w.LeaveReq.Load():
			return w.Leave(ctx)
		case w.StopReq.Load():
			return w.Finish(ctx, nil, jobs.Cancelled, "cancelled")
		}
		g, done, err := w.WaitGen(ctx, seen, w.Ecfg.Poll, nil)
		if err != nil {
			return err
		}
		if done {
			return w.Exit(ctx, "the job is done")
		}
		if g == nil {
			continue // woken for a leave or a stop
		}
		seen = g.Number
		if g.Rank(w.Cfg.Worker) < 0 {
			if w.State != coord.Ready {
				w.Log.Info("not in generation; waiting to be admitted", "gen", g.Number)
				_ = w.Register(ctx, coord.Ready)
			}
			continue
		}
		out := w.runGen(ctx, g)
		switch out.kind {
		case outcomeSucceeded:
			return w.Finish(ctx, g, jobs.Succeeded, out.reason)
		case outcomeFailed:
			// The restart budget is spent (a count every member reads
			// alike): whichever member finds it fails the job, not only
			// rank 0. Before, a rank 1 that found it first exited, and a
			// rank 0 that then saw a member leave instead waited below
			// workers.min: the job stayed running for ever.
			return w.Finish(ctx, nil, jobs.Failed, out.reason)
		case outcomeDone:
			return w.Exit(ctx, "the job is done")
		case outcomeLeave:
			return w.Leave(ctx)
		case outcomeStop:
			return w.Finish(ctx, g, jobs.Cancelled, "cancelled")
		}
	}
}
