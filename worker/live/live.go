package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// Live mode (trainer.exec.mode "live", docs/live.md): the program is
// started once and keeps running through every generation. It uses the
// edl Python package (python/edl), which talks to this worker over a Unix
// socket (EDL_SOCKET, in the worker's folder) with one JSON request per
// line and one JSON reply per request. The worker keeps owning what it
// owns in the built-in trainer: membership, the leader, generations, the
// data partitions (datapipe) and the training state's counters
// (progressState); the program owns the model, its process group (gloo,
// rebuilt in process at every generation from a fresh store prefix) and
// the all-reduce. The exactly-once mechanisms of datapipe/doc.go hold as
// in the built-in trainer, site by site:
//
//   - the fact (a step counts only when its all-reduce completed on every
//     member): the program reports a step ("step") only after both its
//     collectives returned; a failed one is "failed" and nothing is applied;
//   - consumption at step L: every rank's slot rides in the step's metadata
//     all-reduce; liveApply keeps it in st.Meta; the root's goes into
//     Reconcile (liveJoin);
//   - flush before claim and asOf: liveClaim is the built-in trainer's
//     core.DataCursor.Claim (core/datacursor.go): it flushes the committer before it
//     claims and stamps claims with st.Applied;
//   - one-level rollback and the commit fence: Reconcile, commitScript.
//
// Requests (op): hello, gen, latest, adopt, next, step, failed, fallback, report,
// and the store's store_* (livestore.go); protocol.json describes each
// op's request and reply, and protocol.go holds every message to it.

// LiveExitRestart is the exit status by which the edl package asks its
// worker to restart it (the in-process re-initialisation failed): the
// fallback to restart mode, for this one program.
const LiveExitRestart = 75

// liveRequest is one request of the program.
type liveRequest struct {
	Op string `json:"op"`
	// hello
	DatasetLen int64 `json:"dataset_len"`
	StorePort  int   `json:"store_port"`
	Epochs     int   `json:"epochs"`
	PID        int   `json:"pid"`
	// Gen, latest, next, step, failed, fallback
	Gen   int64 `json:"gen"`
	After int64 `json:"after"`
	// next
	Batch int `json:"batch"`
	// step
	Meta []int64 `json:"meta"`
	Loss float64 `json:"loss"`
	// LossNonFinite names a loss JSON cannot carry ("NaN", "Infinity",
	// "-Infinity": a diverged run); Loss is then null.
	LossNonFinite string `json:"loss_non_finite"`
	// adopt
	Progress *core.ProgressState `json:"progress"`
	// failed, fallback
	Error string `json:"error"`
	// report: metric values at an applied step, with the epochs done then
	Step   int64              `json:"step"`
	Epoch  int                `json:"epoch"`
	Values map[string]float64 `json:"values"`
	// NonFinite: metric name -> "NaN", "Infinity" or "-Infinity".
	NonFinite map[string]string `json:"non_finite"`

	liveStoreRequest // store_*: livestore.go

	bad string // why the request does not match protocol.json ("": it does)
}

// liveReply is the worker's answer; Error set means the request was wrong.
type liveReply struct {
	Error string `json:"error,omitempty"`

	// hello
	Job        string  `json:"job,omitempty"`
	Worker     string  `json:"worker,omitempty"`
	Samples    int64   `json:"samples,omitempty"`
	Partitions int     `json:"partitions,omitempty"`
	TimeoutS   float64 `json:"timeout_s,omitempty"`
	// InitialWorld is the job's initial size (workers.min): fixed_local
	// scales the learning rate by world/initial_world.
	InitialWorld int `json:"initial_world,omitempty"`

	// gen: action run|leave|stop|done; step: continue|switch|leave|done|stop
	Action     string              `json:"action,omitempty"`
	Gen        int64               `json:"gen,omitempty"`
	Rank       int                 `json:"rank"`
	World      int                 `json:"world,omitempty"`
	Root       int                 `json:"root"`
	MasterAddr string              `json:"master_addr,omitempty"`
	MasterPort int                 `json:"master_port,omitempty"`
	Have       bool                `json:"have"` // this member holds state at step Applied
	Applied    int64               `json:"applied"`
	Epoch      int                 `json:"epoch"`
	Progress   *core.ProgressState `json:"progress,omitempty"` // the root's, to broadcast
	// latest: generation Gen's collectives can no longer complete
	// (genBroken): the program leaves the one it waits in.
	Broken bool `json:"broken,omitempty"`

	// next
	Part    int   `json:"part"`
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	First   int64 `json:"first"` // global index of the partition's first sample
	Fin     bool  `json:"fin"`
	Leaving bool  `json:"leaving"`
	Switch  bool  `json:"switch"`
	Stop    bool  `json:"stop"`
	Blocked bool  `json:"blocked"`

	// report: the values went to the job's metric log (rank 0 only)
	Kept bool `json:"kept,omitempty"`

	liveCkptReply  // checkpoint, restore, save: liveckpt.go
	liveStoreReply // store_*: livestore.go
}

// Worker is an exec worker in live mode.
type Worker struct {
	*core.ProgramWorker
	ds     jobs.ExecDataset
	epochs int

	// Training state (as the built-in trainer's): the counters of the last
	// applied step and every rank's consumption in it. synced: st is the
	// state of this member's program (false before the first generation
	// and after its program restarted).
	st     core.ProgressState
	synced bool
	// dc is this worker's side of the data pipeline, the built-in
	// trainer's (datacursor.go): the partition held, claimed at its last
	// applied end and dropped at every generation start (the claim returns
	// the worker's own unfinished partition at its committed offset), and
	// the commits of its applied steps. The partition order is not
	// shuffled (seed 0), partitions as execPartition cuts them.
	dc core.DataCursor
	g  *coord.Generation // the generation the program runs in (nil: none)

	// minGen: a restarted program joins no generation up to this one (they
	// may carry its old program's address).
	minGen int64

	sock     string
	ln       net.Listener
	accepted chan net.Conn // the pending Accept's connection (nil: none pending)
	prog     *core.Program
	restarts int
	rate     core.Rate // rank 0's reported speed

	met *core.MetricSink // the program's reports (livereport.go)
	lck *liveCkpt        // nil without a checkpoint store (liveckpt.go)
	fb  liveRestart      // the job-level fallback to restart mode (liverestart.go)
}

// newLive is pw in live mode.
func New(pw *core.ProgramWorker) *Worker {
	return &Worker{ProgramWorker: pw, st: core.ProgressState{Applied: -1}}
}

// Run reads the job's spec (an exec trainer in live mode) and runs the
// worker in live mode until the job ends.
func (w *Worker) Run(ctx context.Context) error {
	spec, err := w.ReadSpec(ctx)
	if err != nil {
		return err
	}
	if ex := spec.Trainer.Exec; spec.Trainer.Kind != jobs.TrainerExec || ex == nil || !ex.Live() || ex.Dataset == nil || len(ex.Command) == 0 {
		return fmt.Errorf("job spec: trainer: not an exec trainer in live mode with a command and a dataset")
	}
	w.Spec, w.Ex = *spec, *spec.Trainer.Exec
	w.ds = *w.Ex.Dataset
	if st, ended := w.jobEnded(ctx); ended {
		// A worker its cluster started again after the job ended (a
		// worker that failed the job exits non-zero when its program's
		// hello was refused): its program is not started again.
		w.Log.Info("the job has ended; not starting its program", "state", st)
		return nil
	}
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Log = w.Log.With("mode", "live")
	w.Membership.Log = w.Log
	w.Rep = core.NewReporter(w.Deps.Jobs, w.Cfg.Job, w.Cfg.ProgressEvery, w.Log)
	w.dc = core.NewDataCursor(datapipe.New(w.Deps.Redis, w.Co.Keys(), w.Cfg.Worker), w.Log)
	w.dc.Parts, w.dc.Seed = w.ds.Partitions, 0
	w.dc.Size = func(p int) int64 { _, size := core.ExecPartition(w.ds.Samples, w.ds.Partitions, p); return size }
	lck, err := newLiveCkpt(w)
	if err != nil {
		return err
	}
	w.lck = lck
	go w.lck.run(bg)
	if err := w.Register(ctx, coord.Preparing); err != nil {
		return err
	}
	if err := os.MkdirAll(w.CkptDir, 0o755); err != nil {
		return fmt.Errorf("worker: checkpoint folder: %w", err)
	}
	w.sock = filepath.Join(w.Ecfg.Dir, "edl.sock")
	_ = os.Remove(w.sock)
	ln, err := net.Listen("unix", w.sock)
	if err != nil {
		return fmt.Errorf("worker: live mode socket %s: %w", w.sock, err)
	}
	w.ln = ln
	defer os.Remove(w.sock)
	defer ln.Close()
	go func() { _ = w.Co.RunHeartbeat(bg) }()
	go w.Rep.Run(bg)
	go w.dc.Com.Run(bg)
	w.met = core.NewMetricSink(w.Deps.Redis, w.Cfg.Prefix, w.Cfg.Job)
	defer w.met.Start(func(err error) { w.Log.Warn("metrics", "err", err) })() // flushed before the worker returns
	// The newcomer prepares (its program imports torch, builds its model
	// and data loader) while the members train: it is registered ready
	// only once its program said hello.
	conn, err := w.startProgram(ctx)
	for errors.Is(err, errExitedBeforeHello) && w.restarts < w.Ex.Restarts() && ctx.Err() == nil {
		// Killed while it prepared (or it fails before edl.torch.init()):
		// a failed start, counted against max_restarts as any later one.
		w.restarts++
		res := w.prog.Res
		w.Log.Warn("program ended before its hello; starting it again", "exit", res.Describe(), "restarts", w.restarts, "stderr_tail", res.Tail)
		w.Rep.Event(jobs.EventError, fmt.Sprintf("program of worker %s failed before it connected: %s", w.Cfg.Worker, res.Describe()),
			map[string]any{"worker": w.Cfg.Worker, "exit_code": res.Code})
		conn, err = w.startProgram(ctx)
	}
	if err != nil {
		lctx, lcancel := context.WithTimeout(bg, 5*time.Second)
		defer lcancel()
		_ = w.Co.Leave(lctx)
		if ctx.Err() != nil {
			w.Rep.Flush(lctx)
			return nil
		}
		return w.failStart(bg, err)
	}
	w.Leader = core.NewLeader(w.Cfg, w.Spec, w.Co, w.Deps.Now, w.Rep.Lost) // names the dead members
	w.Watch = w.Co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	if err := w.Register(ctx, coord.Ready); err != nil {
		return err
	}
	w.Log.Info("ready", "program", w.Ex.Command[0], "socket", w.sock, "addr", w.LiveAddr)
	go func() {
		<-ctx.Done()
		w.RequestLeave()
	}()
	go w.Poll(bg, w.Deps.Redis, w.Deps.Jobs, w.Cfg.Job)
	go w.Listen(bg, w.Deps.Redis)
	lctx, lcancel := context.WithCancel(bg)
	w.StopLead = lcancel
	go func() { _ = w.Leader.Run(lctx) }()
	return w.serve(bg, conn)
}

// nextGen is the generation wait (membership.waitGen) that also returns
// (nil, false, nil) when the program ends.
func (w *Worker) nextGen(ctx context.Context, after int64) (*coord.Generation, bool, error) {
	return w.WaitGen(ctx, after, w.Ecfg.Poll, w.prog.Done)
}

// handle answers one request; after, when set, ends the worker's life
// once the reply is sent.
func (w *Worker) handle(ctx context.Context, req liveRequest) (liveReply, func() error) {
	if req.bad != "" {
		return liveReply{Error: req.bad}, nil // not a request of protocol.json
	}
	w.liveOp(req.Op)
	if rep, ok := w.liveStoreOp(ctx, req); ok {
		return rep, nil // the generation's rendezvous store (livestore.go)
	}
	if req.Op == "report" {
		return w.liveReport(req), nil // any time between steps (livereport.go)
	}
	if req.Op == "latest" {
		// The program sets up generation req.Gen and asks whether a newer
		// one replaced it (a member that skipped it would never come), or
		// waits in one of its collectives and asks whether it can still
		// complete (broken: leave it now, not at the backend's timeout).
		cur, _ := w.Co.ReadGen(ctx)
		n := w.Watch.Latest()
		if cur != nil {
			n = max(n, cur.Number)
		}
		return liveReply{Gen: n, Broken: w.genBroken(ctx, req.Gen, cur)}, nil
	}
	if req.Op != "hello" && req.Op != "gen" && req.Op != "adopt" && (w.g == nil || req.Gen != w.g.Number) {
		return liveReply{Error: fmt.Sprintf("%s: generation %d is not the worker's current one", req.Op, req.Gen)}, nil
	}
	switch req.Op {
	case "gen":
		return w.liveGen(ctx, req.After)
	case "adopt":
		if req.Progress == nil {
			return liveReply{Error: "adopt: progress missing"}, nil
		}
		w.st, w.synced = *req.Progress, true
		w.dc.Restart()
		return liveReply{Applied: w.st.Applied, Epoch: w.st.Epoch}, nil
	case "next":
		return w.liveNext(ctx, req.Batch), nil
	case "step":
		return w.liveStep(ctx, req)
	case "failed", "fallback":
		w.Log.Warn("collective failed; step discarded", "gen", req.Gen, "step", w.st.Applied+1, "op", req.Op, "err", req.Error)
		if req.Op == "fallback" {
			w.Rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s: live re-initialisation failed in generation %d (%s); falling back to restarting its program", w.Cfg.Worker, req.Gen, req.Error),
				map[string]any{"worker": w.Cfg.Worker, "generation": req.Gen, "fallback": "restart"})
		}
		w.reportLive(ctx, w.g)
		return liveReply{liveCkptReply: w.fallbackReply(ctx, req)}, nil
	case "hello":
		return liveReply{Error: "hello: already said"}, nil
	}
	return liveReply{Error: fmt.Sprintf("unknown op %q", req.Op)}, nil
}

// errStateLost: this worker, without the training state, is the root of a
// generation the leader formed because no live member holds it.
var errStateLost = errors.New("named root of a restore generation without training state")

// liveGen waits for a generation after `after` that names this worker and
// joins it: the root reconciles the data pipeline with its state (as the
// built-in trainer's join), every member flushes its commits and drops
// its cursor; the program then rebuilds its group and, unless every
// member holds the state of the same step, takes the root's.
func (w *Worker) liveGen(ctx context.Context, after int64) (liveReply, func() error) {
	if rep, ok := w.restartAtSwitch(ctx); ok {
		return rep, nil
	}
	after = max(after, w.minGen)
	for {
		switch {
		case w.LeaveReq.Load():
			rep := liveReply{Action: string(core.ActLeave), Applied: w.st.Applied, Epoch: w.st.Epoch}
			rep.Checkpoint = w.lck.beforeLeave(ctx)
			return rep, w.liveLeave(ctx)
		case w.StopReq.Load():
			return liveReply{Action: string(core.ActStop)}, w.liveFinish(ctx, nil, jobs.Cancelled, "cancelled")
		}
		if w.programExited() {
			return liveReply{}, nil // serve restarts it
		}
		g, done, err := w.nextGen(ctx, after)
		if err != nil {
			return liveReply{Action: string(core.ActLeave)}, w.liveLeave(ctx)
		}
		if w.programExited() {
			return liveReply{}, nil
		}
		if done {
			return liveReply{Action: string(core.ActDone)}, w.liveExit(ctx, "the job is done")
		}
		if g == nil {
			continue
		}
		after = g.Number
		rank := g.Rank(w.Cfg.Worker)
		if rank < 0 {
			if w.State != coord.Ready {
				w.Log.Info("not in generation; waiting to be admitted", "gen", g.Number)
				_ = w.Register(ctx, coord.Ready)
			}
			continue
		}
		rep, err := w.liveJoin(ctx, g, rank)
		if errors.Is(err, errStateLost) {
			// Before, this named root reported the generation broken, and
			// the leader formed the same one again, thousands a second.
			reason := fmt.Sprintf("live mode: generation %d has no member holding the training state (every holder died or left), and there is no checkpoint to restore: the model is lost", g.Number)
			w.Log.Error("training state lost", "gen", g.Number)
			_ = core.Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(jobs.Failed)) })
			w.Rep.Transition(ctx, jobs.Failed, reason)
			return liveReply{Action: string(core.ActStop)}, w.liveExit(ctx, reason)
		}
		if err != nil {
			w.Log.Warn("join failed", "gen", g.Number, "err", err)
			w.reportLive(ctx, g)
			continue
		}
		return rep, nil
	}
}

func (w *Worker) liveJoin(ctx context.Context, g *coord.Generation, rank int) (liveReply, error) {
	start := time.Now()
	w.g = g
	w.lck.joined(g)
	joiner := slices.Contains(g.Joiners, w.Cfg.Worker)
	if joiner {
		w.synced = false // whatever it held from an earlier membership is stale
	}
	fctx, cancel := context.WithTimeout(ctx, w.Ecfg.LiveTimeout)
	err := w.dc.Com.Flush(fctx)
	cancel()
	if err != nil {
		return liveReply{}, fmt.Errorf("flush commits: %w", err)
	}
	root := g.Root
	var restore string
	switch {
	case (root < 0 || g.Restore) && w.lck != nil:
		// Nobody holds the state: rank 0 restores the newest checkpoint,
		// the others take it from the broadcast (liveckpt.go).
		root, w.synced = 0, false
		if rank == 0 {
			if restore, err = w.lck.restore(ctx, g); err != nil {
				return liveReply{}, err
			}
		}
	case root < 0:
		root = 0
		if !w.synced {
			w.st, w.synced = core.ProgressState{Applied: -1}, true
		}
	case rank == root:
		if !w.synced && g.Restore {
			return liveReply{}, errStateLost
		}
		if !w.synced {
			return liveReply{}, errors.New("named root without training state")
		}
		returned, err := w.dc.Reconcile(ctx, g, w.st)
		if err != nil {
			return liveReply{}, err
		}
		w.Log.Info("reconciled", "gen", g.Number, "step", w.st.Applied, "returned_partitions", returned)
	}
	w.dc.Restart()
	host, port, err := net.SplitHostPort(g.Addrs[0])
	if err != nil {
		return liveReply{}, fmt.Errorf("rank 0's address %q: %w", g.Addrs[0], err)
	}
	mp, _ := strconv.Atoi(port)
	if w.State != coord.Active {
		_ = w.Register(ctx, coord.Active)
	}
	w.Rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s joined generation %d as rank %d of %d", w.Cfg.Worker, g.Number, rank, len(g.Members)),
		map[string]any{"worker": w.Cfg.Worker, "generation": g.Number, "rank": rank, "world": len(g.Members), "live": true})
	w.Log.Info("joined", "gen", g.Number, "rank", rank, "world", len(g.Members), "root", root, "step", w.st.Applied,
		"have_state", w.synced, "took", time.Since(start).Round(time.Millisecond))
	rep := liveReply{Action: "run", Gen: g.Number, Rank: rank, World: len(g.Members), Root: root, MasterAddr: host, MasterPort: mp,
		Have: w.synced, Applied: w.st.Applied, Epoch: w.st.Epoch}
	rep.Restore = w.restoreFor(restore)
	if rank == root {
		st := w.st
		rep.Progress = &st
	}
	return rep, nil
}

// liveNext is this rank's share of the next step: a range of its
// partition (claiming one first if it holds none), and its votes. The
// range is batch samples, fewer at the partition's end, or batch+1 when
// batch would leave a single sample behind (core.ShareSize: the tail
// merges into the last batch instead of ending in a one-sample batch).
func (w *Worker) liveNext(ctx context.Context, batch int) liveReply {
	rep := liveReply{Part: -1, Leaving: w.LeaveReq.Load(), Stop: w.StopReq.Load()}
	if batch < 1 {
		return liveReply{Error: fmt.Sprintf("next: batch %d: want >= 1", batch)}
	}
	blocked, stale := w.liveClaim(ctx)
	rep.Blocked = blocked
	rep.Switch = stale || max(w.dc.SeenGen(), w.Watch.Latest()) > w.g.Number
	if w.dc.Cur.Part >= 0 {
		my := w.dc.Take(core.ShareSize(w.dc.Left(), batch), rep.Leaving)
		first, _ := core.ExecPartition(w.ds.Samples, w.ds.Partitions, my.Part)
		rep.Part, rep.Start, rep.End, rep.First, rep.Fin = my.Part, my.Start, my.End, first, my.Fin
	}
	return rep
}

// liveClaim is the built-in trainer's claim (core/datacursor.go:
// (*DataCursor).Claim, called by builtin/step.go: (*Worker).train) for the live
// data plane: flush before claim, asOf = the last applied step, within
// half the live timeout (the program's collectives wait that long).
func (w *Worker) liveClaim(ctx context.Context) (blocked, stale bool) {
	return w.dc.Claim(ctx, w.Ecfg.LiveTimeout/2, w.g.Number, w.st.Epoch, w.st.Applied)
}

// liveStep takes a step whose all-reduce completed on every member.
func (w *Worker) liveStep(ctx context.Context, req liveRequest) (liveReply, func() error) {
	g := w.g
	world, rank := len(g.Members), g.Rank(w.Cfg.Worker)
	if len(req.Meta) != core.BlockLen(world) {
		return liveReply{Error: fmt.Sprintf("step: metadata of %d values, want %d for world %d", len(req.Meta), core.BlockLen(world), world)}, nil
	}
	loss := req.Loss
	if req.LossNonFinite != "" {
		var err error
		if loss, err = jobs.ParseNonFinite(req.LossNonFinite); err != nil {
			return liveReply{Error: "step: loss_non_finite: " + err.Error()}, nil
		}
	}
	v := core.DecideStep(req.Meta, world, rank, w.st.Epoch, w.epochs)
	if v.Apply {
		w.liveApply(g, rank, req.Meta, loss)
	}
	if v.EpochDone {
		w.Log.Info("epoch done", "epoch", w.st.Epoch, "step", w.st.Applied)
		w.st.Epoch++
		w.dc.Restart()
	}
	if v.Wait {
		time.Sleep(20 * time.Millisecond) // someone cannot reach Redis; do not spin
	}
	rep := liveReply{Action: string(v.Action), Applied: w.st.Applied, Epoch: w.st.Epoch}
	rep.Checkpoint = w.lck.afterStep(ctx, g, rank, v, req.Meta)
	switch v.Action {
	case core.ActDone:
		return rep, w.liveFinish(ctx, g, jobs.Succeeded, "training finished")
	case core.ActStop:
		return rep, w.liveFinish(ctx, g, jobs.Cancelled, "cancelled")
	case core.ActLeave:
		return rep, w.liveLeave(ctx)
	}
	return rep, nil
}

// liveApply is the built-in trainer's apply (builtin/step.go) without the model:
// the counters and every rank's consumption (progressState.advance), this
// rank's commit (dataCursor.applied).
func (w *Worker) liveApply(g *coord.Generation, rank int, meta []int64, loss float64) {
	total := meta[core.BlockCount]
	cons, dbg := core.Consumption(meta, g.Members, w.st.Epoch, w.Cfg.DebugSamples)
	w.st.Advance(total, loss, cons, dbg)
	var debug []datapipe.DebugRecord
	if w.Cfg.DebugSamples {
		debug = append(debug, datapipe.DebugRecord{Step: w.st.Applied, Payload: w.st.Debug})
	}
	w.dc.Applied(g.Number, w.st.Applied, w.st.Epoch, core.ReadSlot(meta, rank), debug...)
	if rank == 0 {
		now := w.Deps.Now()
		rate := w.rate.Step(now, g.Number, int64(total))
		w.Rep.Progress(jobs.Progress{Epoch: w.st.Epoch, Step: w.st.Applied, Samples: w.st.Samples, Loss: w.st.Loss,
			SamplesPerS: rate, WorldSize: len(g.Members), Generation: g.Number, TotalEpochs: w.epochs})
	}
}

// reportLive tells the leader that g's group broke for this worker and
// what it applied last (NoState without state), unless a newer generation
// replaced g already.
func (w *Worker) reportLive(ctx context.Context, g *coord.Generation) {
	applied := coord.NoState
	if w.synced {
		applied = w.st.Applied
	}
	w.Log.Info("reporting broken group", "gen", g.Number, "applied", applied)
	_ = core.Retry(ctx, w.Log, "report", func() error {
		if cur, err := w.Co.ReadGen(ctx); err == nil && cur != nil && cur.Number > g.Number {
			return nil
		}
		return w.Co.Report(ctx, g.Number, applied)
	})
}
