package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// ExecConfig configures a worker in exec mode (trainer.kind "exec"); the
// rest comes from Config (job, worker id, lease, ...).
type ExecConfig struct {
	// Dir is this worker's own folder: the program's checkpoint folder
	// (Dir/checkpoint, EDL_CHECKPOINT_DIR) and its error file. Required.
	Dir string
	// Host is where the other workers reach this one: MASTER_ADDR when it
	// is rank 0. Default 127.0.0.1.
	Host string
	// MasterPort, when > 0, is the port reserved for rank 0's rendezvous
	// store (on Nomad the group's network port); 0: a free port is picked
	// for every generation.
	MasterPort int
	// Env is the worker's environment, the base of the program's.
	Env []string
	// Stdout and Stderr get the program's output (default: discarded).
	Stdout, Stderr io.Writer
	// TailLines of the program's stderr go into a failed job's reason
	// (default 20).
	TailLines int
	// Poll is how often a running generation looks at its members, besides
	// the pub/sub wake-ups (default 100ms).
	Poll time.Duration
	// SyncEvery is how often rank 0's worker looks for a new checkpoint in
	// the folder while the program runs (default 500ms).
	SyncEvery time.Duration
	// LiveTimeout bounds, in live mode, the program's collectives and
	// process-group setup (a frozen or dead peer fails the step on every
	// survivor within it) and a claim's round trips (default 5s).
	LiveTimeout time.Duration
}

// Validate names the field at fault.
func (c ExecConfig) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("exec config: dir: empty")
	case c.MasterPort < 0 || c.MasterPort > 65535:
		return fmt.Errorf("exec config: master port %d: want 0-65535", c.MasterPort)
	case c.TailLines < 0:
		return errors.New("exec config: tail lines: must be >= 0")
	}
	return nil
}

// ExecWorker runs a user's program (a torchrun script) in one worker's
// place: the membership, leader and generations are the elastic worker's
// (worker/coord); instead of training in process it starts the program
// with torchrun's environment for every generation, and restarts it at
// every generation change (restart mode). See docs/exec.md.
type ExecWorker struct {
	cfg  Config
	ecfg ExecConfig
	deps Deps
	log  *slog.Logger
	spec jobs.Spec
	ex   jobs.ExecTrainer

	// membership is the built-in worker's (membership.go): the member
	// record, the leader, the generations watched, the leave and stop
	// requests. trainedIn is not used (last is the exec worker's); addr is
	// set by register (the address changes in live mode).
	membership
	keys execKeys
	rep  *reporter
	sync *dirSync // nil without a store

	ckptDir string
	wake    chan struct{}

	// last is the generation this worker's program last ran in (nil: none yet).
	last      *coord.Generation
	stoppedAt time.Time // when the last program run began to end

	liveAddr string // live mode: host:port of the program's store (worker/live.go)
}

// NewExec checks its arguments; it does no I/O. Deps.Transport is not used.
func NewExec(cfg Config, ecfg ExecConfig, deps Deps) (*ExecWorker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ecfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Redis == nil {
		return nil, errors.New("worker: Redis is required")
	}
	if deps.Jobs == nil && deps.Spec == nil {
		return nil, errors.New("worker: either Jobs or Spec is required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if ecfg.Host == "" {
		ecfg.Host = "127.0.0.1"
	}
	if ecfg.Stdout == nil {
		ecfg.Stdout = io.Discard
	}
	if ecfg.Stderr == nil {
		ecfg.Stderr = io.Discard
	}
	if ecfg.TailLines == 0 {
		ecfg.TailLines = 20
	}
	if ecfg.Poll <= 0 {
		ecfg.Poll = 100 * time.Millisecond
	}
	if ecfg.SyncEvery <= 0 {
		ecfg.SyncEvery = 500 * time.Millisecond
	}
	if ecfg.LiveTimeout <= 0 {
		ecfg.LiveTimeout = 5 * time.Second
	}
	dir, err := filepath.Abs(ecfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("exec config: dir: %w", err)
	}
	ecfg.Dir = dir
	log := deps.Log.With("component", "worker", "mode", "exec", "job", cfg.Job, "worker", cfg.Worker)
	cc := coord.Config{Prefix: cfg.Prefix, Job: cfg.Job, Worker: cfg.Worker, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat}
	co, err := coord.New(deps.Redis, cc, deps.Log)
	if err != nil {
		return nil, err
	}
	return &ExecWorker{cfg: cfg, ecfg: ecfg, deps: deps, log: log, keys: newExecKeys(co.Keys()),
		membership: membership{self: cfg.Worker, log: log, now: deps.Now, co: co},
		ckptDir:    filepath.Join(ecfg.Dir, "checkpoint"), wake: make(chan struct{}, 1)}, nil
}

// Run prepares (restores the newest checkpoint into the folder), joins the
// job and runs the program in every generation that names this worker,
// until the job ends. When ctx ends (SIGTERM) the worker stops its
// program (grace period, then SIGKILL), syncs the checkpoint folder if it
// was rank 0, leaves and returns nil.
func (w *ExecWorker) Run(ctx context.Context) error {
	if spec, err := w.readSpec(ctx); err == nil && spec.Trainer.Exec != nil && spec.Trainer.Exec.Live() {
		w.spec, w.ex = *spec, *spec.Trainer.Exec
		return w.runLive(ctx) // worker/live.go
	}
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
		w.leaveReq.Store(true)
		w.poke()
	}()
	go func() { _ = w.co.RunHeartbeat(bg) }()
	go w.rep.run(bg)
	met := newMetricSink(w.deps.Redis, w.cfg.Prefix, w.cfg.Job) // execmetrics.go
	stopMet := met.start(func(err error) { w.log.Warn("metrics", "err", err) })
	mf := &metricsFile{path: filepath.Join(w.ecfg.Dir, metricsFileName), sink: met, rep: w.rep}
	go mf.run(bg)
	defer func() { mf.read(); stopMet() }() // the program's last lines too
	go w.poll(bg)
	go w.listen(bg)
	lctx, lcancel := context.WithCancel(bg)
	w.stopLead = lcancel
	go func() { _ = w.leader.Run(lctx) }()
	return w.loop(bg)
}

// readSpec returns the job's spec (Deps.Spec, else the job store's).
func (w *ExecWorker) readSpec(ctx context.Context) (*jobs.Spec, error) {
	if w.deps.Spec != nil {
		return w.deps.Spec, nil
	}
	j, err := w.deps.Jobs.Get(ctx, w.cfg.Job)
	if err != nil {
		return nil, fmt.Errorf("worker: read job %s: %w", w.cfg.Job, err)
	}
	return &j.Spec, nil
}

func (w *ExecWorker) prepare(ctx context.Context) error {
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
	minStart, maxW := w.cfg.MinStart, w.cfg.MaxWorkers
	if minStart == 0 {
		minStart = max(1, spec.Workers.Min)
	}
	if maxW == 0 {
		maxW = 1024 // the planner decides how many run (see Worker.prepare)
	}
	w.leader = coord.NewLeader(w.co, coord.LeaderOptions{MinStart: minStart, MaxWorkers: maxW, Window: w.cfg.ReportWindow}, w.deps.Now)
	w.watch = w.co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	if err := w.register(ctx, coord.Ready); err != nil {
		return err
	}
	w.log.Info("ready", "program", w.ex.Command[0], "checkpoint_dir", w.ckptDir, "seq", w.seq())
	return nil
}

// restore brings the newest checkpoint of the store into the folder.
func (w *ExecWorker) restore(ctx context.Context) (int64, error) {
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

func (w *ExecWorker) seq() int64 {
	if w.sync == nil {
		return -1
	}
	return w.sync.Seq()
}

func (w *ExecWorker) register(ctx context.Context, s coord.MemberState) error {
	addr := net.JoinHostPort(w.ecfg.Host, strconv.Itoa(w.ecfg.MasterPort))
	switch {
	case w.liveAddr != "":
		addr = w.liveAddr // live mode: rank 0's program hosts the group's store
	case w.cfg.Advertise != "":
		addr = w.cfg.Advertise
	}
	w.addr = addr
	return w.membership.register(ctx, s)
}

func (w *ExecWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// listen wakes the loop on every event of the job's channel (reports,
// leaves, member states, generations, the end).
func (w *ExecWorker) listen(ctx context.Context) {
	ps := w.deps.Redis.Subscribe(ctx, w.co.Keys().Channel())
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			w.poke()
		}
	}
}

// poll notices that this worker was marked leaving or that the job is
// being cancelled.
func (w *ExecWorker) poll(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ms, err := w.co.Members(ctx); err == nil {
			if m, ok := ms[w.cfg.Worker]; ok && m.State == coord.Leaving {
				w.leaveReq.Store(true)
				w.poke()
			}
		}
		if n, err := w.deps.Redis.Exists(ctx, w.co.Keys().Stop()).Result(); err == nil && n > 0 {
			w.stopReq.Store(true)
			w.poke()
		}
		if w.deps.Jobs != nil {
			if j, err := w.deps.Jobs.Get(ctx, w.cfg.Job); err == nil && (j.State == jobs.Cancelling || j.State.Terminal()) {
				w.stopReq.Store(true)
				w.poke()
			}
		}
	}
}

// loop waits for generations that name this worker and runs each:
//
//	ready --generation names me--> barrier --all set--> running
//	running --newer generation / peer lost / own failure--> stop program --> barrier of the next
//	running --rank 0 exits 0--> succeeded;  --restart budget spent--> failed
//	any --SIGTERM or marked leaving--> stop program, sync, leave
//	any --cancel--> stop program, sync, cancelled
func (w *ExecWorker) loop(ctx context.Context) error {
	var seen int64
	for {
		switch {
		case w.leaveReq.Load():
			return w.leave(ctx)
		case w.stopReq.Load():
			return w.finish(ctx, nil, jobs.Cancelled, "cancelled")
		}
		g, done, err := w.next(ctx, seen)
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

// next waits for a generation numbered above after, the job's end, or a
// wake-up for a leave or a stop (nil, false).
func (w *ExecWorker) next(ctx context.Context, after int64) (*coord.Generation, bool, error) {
	t := time.NewTicker(w.ecfg.Poll)
	defer t.Stop()
	for {
		if w.leaveReq.Load() || w.stopReq.Load() {
			return nil, false, nil
		}
		if g, err := w.co.ReadGen(ctx); err == nil && g != nil && g.Number > after {
			return g, false, nil
		}
		if d, err := w.co.Done(ctx); err == nil && d {
			return nil, true, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-w.wake:
		case <-w.watch.Changed():
		case <-t.C:
		}
	}
}

// leave is the graceful exit: peers are told first (state leaving) so
// they stop their programs at once, the program is stopped, rank 0's
// folder synced, the lease handed over, the record deleted.
func (w *ExecWorker) leave(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+w.grace())
	defer cancel()
	w.log.Info("leaving")
	_ = w.register(ctx, coord.Leaving)
	w.membership.leave(ctx, w.last, w.rep)
	return nil
}

// finish ends the job: to is succeeded (rank 0's program exited 0),
// failed (restart budget spent) or cancelled. Rank 0 of g, or the only
// one left when g is nil, records it.
func (w *ExecWorker) finish(ctx context.Context, g *coord.Generation, to jobs.State, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if g == nil || g.Rank(w.cfg.Worker) == 0 {
		if err := retry(ctx, w.log, "mark done", func() error { return w.co.MarkDone(ctx, string(to)) }); err != nil {
			w.log.Warn("mark job done", "err", err)
		}
		if g != nil || to != jobs.Cancelled {
			w.rep.transition(ctx, to, reason)
		}
	}
	return w.exit(ctx, reason)
}

func (w *ExecWorker) exit(ctx context.Context, reason string) error {
	w.membership.exit(ctx)
	w.rep.flush(ctx)
	w.log.Info("exiting", "reason", reason)
	return nil
}

func (w *ExecWorker) grace() time.Duration { return time.Duration(w.ex.Grace()) * time.Second }
