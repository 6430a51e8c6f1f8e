package worker

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// restartWorker runs a user's program (a torchrun script) in one worker's
// place: the membership, leader and generations are the elastic worker's
// (worker/coord); instead of training in process it starts the program
// with torchrun's environment for every generation, and restarts it at
// every generation change (restart mode). See docs/exec.md.
type restartWorker struct {
	*programWorker
	keys execKeys
	sync *dirSync // nil without a store

	stoppedAt time.Time // when the last program run began to end
}

// newRestart is pw in restart mode.
func newRestart(pw *programWorker) *restartWorker {
	return &restartWorker{programWorker: pw, keys: newExecKeys(pw.co.Keys())}
}

// Run prepares (restores the newest checkpoint into the folder), joins the
// job and runs the program in every generation that names this worker,
// until the job ends. When ctx ends (SIGTERM) the worker stops its
// program (grace period, then SIGKILL), syncs the checkpoint folder if it
// was rank 0, leaves and returns nil.
func (w *restartWorker) Run(ctx context.Context) error {
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.prepare(ctx); err != nil {
		lctx, lcancel := context.WithTimeout(bg, 5*time.Second)
		defer lcancel()
		_ = w.co.Leave(lctx)
		if ctx.Err() != nil {
			w.log.Info("stopped while preparing", "err", err)
			return nil
		}
		return err
	}
	go func() {
		<-ctx.Done()
		w.requestLeave()
	}()
	go func() { _ = w.co.RunHeartbeat(bg) }()
	go w.rep.run(bg)
	go w.poll(bg, w.deps.Redis, w.deps.Jobs, w.cfg.Job)
	go w.listen(bg, w.deps.Redis)
	lctx, lcancel := context.WithCancel(bg)
	w.stopLead = lcancel
	go func() { _ = w.leader.Run(lctx) }()
	return w.loop(bg)
}

func (w *restartWorker) prepare(ctx context.Context) error {
	spec, err := w.readSpec(ctx)
	if err != nil {
		return err
	}
	if spec.Trainer.Kind != jobs.TrainerExec || spec.Trainer.Exec == nil || len(spec.Trainer.Exec.Command) == 0 {
		return fmt.Errorf("job spec: trainer: kind %q is not an exec trainer with a command", spec.Trainer.Kind)
	}
	w.spec, w.ex = *spec, *spec.Trainer.Exec
	w.rep = newReporter(w.deps.Jobs, w.cfg.Job, w.cfg.ProgressEvery, w.log)
	if err := w.register(ctx, coord.Preparing); err != nil {
		return err
	}
	if err := os.MkdirAll(w.ckptDir, 0o755); err != nil {
		return fmt.Errorf("worker: checkpoint folder: %w", err)
	}
	if w.deps.Store != nil {
		cat, err := checkpoint.NewCatalog(w.deps.Store, checkpoint.Config{Job: CheckpointJob(w.cfg.Job), Keep: max(w.spec.Checkpoint.Keep, 1), Log: w.deps.Log})
		if err != nil {
			return fmt.Errorf("worker: checkpoints: %w", err)
		}
		w.sync = newDirSync(cat, w.ckptDir, w.log)
		// A newcomer prepares before the switch: the newest checkpoint is
		// in its folder before a generation names it.
		if _, err := w.restore(ctx); err != nil {
			return err
		}
	}
	w.leader = newLeader(w.cfg, *spec, w.co, w.deps.Now, nil)
	w.watch = w.co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	if err := w.register(ctx, coord.Ready); err != nil {
		return err
	}
	w.log.Info("ready", "program", w.ex.Command[0], "checkpoint_dir", w.ckptDir, "seq", w.seq())
	return nil
}

// restore brings the newest checkpoint of the store into the folder.
func (w *restartWorker) restore(ctx context.Context) (int64, error) {
	if w.sync == nil {
		return -1, nil
	}
	before := w.sync.Seq()
	seq, err := w.sync.Restore(ctx, func(s checkpoint.Skip) {
		w.rep.event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint %d skipped at restore: %v", s.Step, s.Reason),
			map[string]any{"step": s.Step, "corrupt": true})
	})
	if err != nil {
		return seq, fmt.Errorf("worker: restore checkpoint folder: %w", err)
	}
	if seq != before {
		w.log.Info("checkpoint restored into the folder", "seq", seq)
	}
	return seq, nil
}

func (w *restartWorker) seq() int64 {
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
func (w *restartWorker) loop(ctx context.Context) error {
	var seen int64
	for {
		switch {
		case w.leaveReq.Load():
			return w.leave(ctx)
		case w.stopReq.Load():
			return w.finish(ctx, nil, jobs.Cancelled, "cancelled")
		}
		g, done, err := w.waitGen(ctx, seen, w.ecfg.Poll, nil)
		if err != nil {
			return err
		}
		if done {
			return w.exit(ctx, "the job is done")
		}
		if g == nil {
			continue // woken for a leave or a stop
		}
		seen = g.Number
		if g.Rank(w.cfg.Worker) < 0 {
			if w.state != coord.Ready {
				w.log.Info("not in generation; waiting to be admitted", "gen", g.Number)
				_ = w.register(ctx, coord.Ready)
			}
			continue
		}
		out := w.runGen(ctx, g)
		switch out.kind {
		case outcomeSucceeded:
			return w.finish(ctx, g, jobs.Succeeded, out.reason)
		case outcomeFailed:
			return w.finish(ctx, g, jobs.Failed, out.reason)
		case outcomeDone:
			return w.exit(ctx, "the job is done")
		case outcomeLeave:
			return w.leave(ctx)
		case outcomeStop:
			return w.finish(ctx, g, jobs.Cancelled, "cancelled")
		}
	}
}
