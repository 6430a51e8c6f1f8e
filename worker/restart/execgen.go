package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/redis/go-redis/v9"
)

// outcomeKind is how one generation ended for this worker.
type outcomeKind int

const (
	outcomeNext      outcomeKind = iota // wait for the next generation
	outcomeSucceeded                    // rank 0's program exited 0
	outcomeFailed                       // the restart budget is spent
	outcomeDone                         // the job ended elsewhere
	outcomeLeave                        // this worker leaves
	outcomeStop                         // the job is cancelled
)

type genOutcome struct {
	kind   outcomeKind
	reason string
}

// countScript counts generation G's failure once, however many members
// see it, and keeps its record as the latest failure; it returns the
// failure restarts so far.
var countScript = redis.NewScript(`
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', 86400) then
  redis.call('INCR', KEYS[2])
  local f = redis.call('GET', KEYS[3])
  if f then redis.call('SET', KEYS[4], f) end
end
return tonumber(redis.call('GET', KEYS[2]) or '0')`)

// runGen runs generation g: it counts the restart if g follows a failure,
// meets the other members at g's start barrier, brings the newest
// checkpoint into the folder, starts the program and watches it.
func (w *Worker) runGen(ctx context.Context, g *coord.Generation) genOutcome {
	rank := g.Rank(w.Cfg.Worker)
	w.rank0.Store(rank == 0)
	rdb := w.Deps.Redis
	if min := w.minWorkers(ctx); len(g.Members) < min {
		// torchrun --nnodes MIN:MAX never runs a world below MIN, and a
		// script may rely on it: wait for the leader to admit more.
		w.Log.Info("generation below the job's minimum; waiting for more workers", "gen", g.Number, "world", len(g.Members), "min", min)
		return genOutcome{kind: outcomeNext}
	}
	if w.Last != nil {
		w.countRestart(ctx, w.Last, g)
	}
	// The run ahead of the last one's warmAfter (or a failed prestart):
	// its interpreter starts now, beside the barrier and the restore.
	w.warm.prestart(w.jobEnv().BaseEnviron())
	entry := execEntry{Seq: w.seq()}
	if rank == 0 {
		port, err := w.masterPort()
		if err != nil {
			w.Log.Warn("no rendezvous port", "err", err)
			w.report(ctx, g)
			return genOutcome{kind: outcomeNext}
		}
		entry.Port = port
	}
	b, _ := json.Marshal(entry)
	if err := core.Retry(ctx, w.Log, "start barrier", func() error {
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, w.keys.Gen(g.Number), w.Cfg.Worker, b)
			p.Expire(ctx, w.keys.Gen(g.Number), 24*time.Hour)
			p.Publish(ctx, w.Co.Keys().Channel(), "exec:"+strconv.FormatInt(g.Number, 10)+":"+w.Cfg.Worker)
			return nil
		})
		return err
	}); err != nil {
		return genOutcome{kind: outcomeNext}
	}
	start := time.Now()
	entries, out := w.waitBarrier(ctx, g)
	if entries == nil {
		return out
	}
	restarts, _ := rdb.Get(ctx, w.keys.Restarts()).Int()
	if max := w.Ex.Restarts(); restarts > max {
		return genOutcome{kind: outcomeFailed, reason: w.failedReason(ctx, restarts, max)}
	}
	if _, err := w.restore(ctx); err != nil {
		w.Log.Warn("checkpoint not restored; the program starts from what its folder holds", "err", err)
	}
	master, _, err := net.SplitHostPort(g.Addrs[0])
	if err != nil {
		master = w.Ecfg.Host
	}
	if rank == 0 && w.sync != nil {
		w.setRoot(ctx, rootRecord{Gen: g.Number, Worker: w.Cfg.Worker, Seq: w.seq()})
	}
	env := w.jobEnv()
	_ = os.Remove(env.ErrorFile)
	env.Generation, env.Rank, env.World, env.RestartCount = g.Number, rank, len(g.Members), restarts
	env.MasterAddr, env.MasterPort = master, entries[g.Members[0]].Port
	var gate func() bool
	sig, who := sigNone, ""
	if rank > 0 {
		over := func() bool {
			if v, err := readPeers(ctx, rdb, w.Co.Keys(), g); err == nil {
				sig, who = judgePeers(g, w.Cfg.Worker, v)
			}
			return sig != sigNone
		}
		gate = func() bool {
			return w.warm.awaitRendezvous(ctx, net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort)), over)
		}
	}
	prog, abandoned := w.warm.start(ctx, env.Environ(), gate)
	if abandoned {
		// The generation ended before this rank's run started.
		w.Log.Info("generation ended before the program started", "gen", g.Number, "signal", sig, "member", who)
		switch sig {
		case sigDone:
			return genOutcome{kind: outcomeDone}
		case sigPeerFailed:
			w.report(ctx, g)
		}
		return genOutcome{kind: outcomeNext}
	}
	warmRun := prog != nil
	if !warmRun {
		prog = core.StartProgram(w.Ex.Command, w.Ex.Workdir, env.Environ(), w.Ecfg.Stdout, w.Ecfg.Stderr, w.Ecfg.TailLines)
	}
	w.Last = g
	if w.State != coord.Active {
		_ = w.Register(ctx, coord.Active)
	}
	w.Log.Info("program started", "gen", g.Number, "rank", rank, "world", len(g.Members), "pid", prog.Pid(),
		"master", net.JoinHostPort(master, strconv.Itoa(env.MasterPort)), "restart_count", restarts, "seq", w.seq(), "warm", warmRun,
		"barrier", time.Since(start).Round(time.Millisecond), "since_stop", sinceStop(w.stoppedAt))
	w.Rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s started the program in generation %d as rank %d of %d", w.Cfg.Worker, g.Number, rank, len(g.Members)),
		map[string]any{"worker": w.Cfg.Worker, "generation": g.Number, "rank": rank, "world": len(g.Members), "restart_count": restarts, "warm": warmRun})
	if rank == 0 {
		w.Rep.Progress(jobs.Progress{Step: 0, WorldSize: len(g.Members), Generation: g.Number})
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		go w.followMetrics(mctx, env.MetricsFile, len(g.Members), g.Number) // metricsfile.go
	}
	return w.monitor(ctx, g, rank, prog)
}

// countRestart counts prev's failure against max_restarts when g restarts
// the same members after it (countsAsRestart).
func (w *Worker) countRestart(ctx context.Context, prev, g *coord.Generation) {
	rdb := w.Deps.Redis
	n, err := rdb.Exists(ctx, w.keys.Failed(prev.Number)).Result()
	if err != nil || !countsAsRestart(prev, g, n > 0) {
		return
	}
	restarts, err := countScript.Run(ctx, rdb, []string{w.keys.Counted(prev.Number), w.keys.Restarts(),
		w.keys.Failed(prev.Number), w.keys.base + "lastfailure"}).Int()
	if err != nil {
		w.Log.Warn("count restart", "err", err)
		return
	}
	w.Log.Info("restart after a program failure", "failed_gen", prev.Number, "gen", g.Number, "restarts", restarts)
}

func (w *Worker) failedReason(ctx context.Context, restarts, max int) string {
	var f execFailure
	if b, err := w.Deps.Redis.Get(ctx, w.keys.base+"lastfailure").Bytes(); err == nil {
		_ = json.Unmarshal(b, &f)
	}
	reason := fmt.Sprintf("program failed %s (max_restarts %d); last: worker %s (rank %d): %s", core.Times(restarts), max, f.Worker, f.Rank, f.describe())
	if strings.TrimSpace(f.Tail) == "" {
		return reason // it wrote nothing to stderr (or never started)
	}
	return reason + "; last stderr lines:\n" + f.Tail
}

// masterPort is rank 0's rendezvous port: the reserved one, else a free
// one (the way torchrun's agent picks it: bind port 0, close).
func (w *Worker) masterPort() (int, error) {
	if w.Ecfg.MasterPort > 0 {
		return w.Ecfg.MasterPort, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(w.Ecfg.Host, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a rendezvous port on %s: %w", w.Ecfg.Host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitBarrier waits until g may start (judgeBarrier). It returns the
// members' entries, or nil and what to do instead.
func (w *Worker) waitBarrier(ctx context.Context, g *coord.Generation) (map[string]execEntry, genOutcome) {
	t := time.NewTicker(w.Ecfg.Poll / 2)
	defer t.Stop()
	for {
		switch {
		case w.StopReq.Load():
			return nil, genOutcome{kind: outcomeStop}
		case w.LeaveReq.Load():
			return nil, genOutcome{kind: outcomeLeave}
		}
		v, err := readBarrier(ctx, w.Deps.Redis, w.Co.Keys(), w.keys, g)
		if err == nil {
			ready, sig, who := judgeBarrier(g, v)
			if ready {
				return v.Entries, genOutcome{}
			}
			switch sig {
			case sigDone:
				return nil, genOutcome{kind: outcomeDone}
			case sigNewer:
				return nil, genOutcome{kind: outcomeNext}
			case sigPeerFailed:
				w.Log.Info("member lost before the start", "gen", g.Number, "member", who)
				w.report(ctx, g)
				return nil, genOutcome{kind: outcomeNext}
			}
		}
		select {
		case <-ctx.Done():
			return nil, genOutcome{kind: outcomeLeave}
		case <-w.Wake:
		case <-t.C:
		}
	}
}

// monitor watches the running program and g's members until the
// generation ends for this worker.
func (w *Worker) monitor(ctx context.Context, g *coord.Generation, rank int, prog *core.Program) genOutcome {
	sctx, scancel := context.WithCancel(ctx)
	synced := make(chan struct{})
	if rank == 0 && w.sync != nil {
		go func() { defer close(synced); w.syncLoop(sctx, g) }()
	} else {
		close(synced)
	}
	running := true
	// end stops the program (if it still runs) and syncs rank 0's folder.
	end := func(kind outcomeKind, reason string) genOutcome {
		w.stoppedAt = time.Now()
		if running {
			res := prog.Stop(w.Grace())
			w.Log.Info("program stopped", "gen", g.Number, "rank", rank, "exit", res.Describe(), "why", reason)
		}
		scancel()
		<-synced
		w.finalSync(ctx, g, rank)
		return genOutcome{kind: kind, reason: reason}
	}
	exited := prog.Done
	t := time.NewTicker(w.Ecfg.Poll)
	defer t.Stop()
	warmAt := time.Now().Add(warmDelay(g))
	for {
		if time.Now().After(warmAt) {
			w.warm.prestart(w.jobEnv().BaseEnviron()) // the next run's, while this one trains
		}
		select {
		case <-exited:
			exited, running = nil, false
			res := prog.Res
			switch core.JudgeExit(rank, res) {
			case core.ExitSucceeded:
				w.Log.Info("program finished", "gen", g.Number, "rank", rank)
				return end(outcomeSucceeded, "the program exited 0")
			case core.ExitFinished:
				w.Log.Info("program finished; waiting for rank 0", "gen", g.Number, "rank", rank)
				continue
			}
			if v, err := readPeers(ctx, w.Deps.Redis, w.Co.Keys(), g); err == nil {
				if sig, who := judgePeers(g, w.Cfg.Worker, v); sig != sigNone {
					// The program failed because the world changed under it.
					w.Log.Info("program exited after a membership change", "gen", g.Number, "exit", res.Describe(), "signal", sig, "member", who)
					if sig == sigPeerFailed {
						w.report(ctx, g)
					}
					out := end(outcomeNext, sig.String())
					if sig == sigDone {
						out.kind = outcomeDone
					}
					return out
				}
			}
			w.recordFailure(ctx, g, rank, res)
			w.report(ctx, g)
			return end(outcomeNext, res.Describe())
		case <-w.Wake:
		case <-t.C:
		}
		switch {
		case w.StopReq.Load():
			return end(outcomeStop, "cancelled")
		case w.LeaveReq.Load():
			// Peers stop their programs while this one stops.
			_ = w.Register(ctx, coord.Leaving)
			return end(outcomeLeave, "leaving")
		}
		v, err := readPeers(ctx, w.Deps.Redis, w.Co.Keys(), g)
		if err != nil {
			continue // Redis away: the program goes on
		}
		switch sig, who := judgePeers(g, w.Cfg.Worker, v); sig {
		case sigDone:
			w.awaitExit(prog, running)
			running = false
			return end(outcomeDone, "the job is done")
		case sigNewer:
			return end(outcomeNext, "newer generation")
		case sigPeerFailed:
			w.Log.Info("member lost", "gen", g.Number, "member", who)
			w.report(ctx, g)
			return end(outcomeNext, "member "+who+" lost")
		case sigPeerLeft:
			return end(outcomeNext, "member "+who+" leaves")
		}
	}
}

// awaitExit gives a program that is finishing on its own (rank 0's
// already did) a moment before it is stopped.
func (w *Worker) awaitExit(prog *core.Program, running bool) {
	if !running {
		return
	}
	select {
	case <-prog.Done:
	case <-time.After(min(w.Grace(), 5*time.Second)):
		prog.Stop(w.Grace())
	}
}

// recordFailure keeps the first failure of g for the job's reason.
func (w *Worker) recordFailure(ctx context.Context, g *coord.Generation, rank int, res core.ProgramResult) {
	rootCause := errorFileMessage(w.jobEnv().ErrorFile)
	w.Log.Warn("program failed", "gen", g.Number, "rank", rank, "exit", res.Describe(), "error", rootCause, "stderr_tail", res.Tail)
	f := execFailure{Worker: w.Cfg.Worker, Rank: rank, Exit: res.Describe(), Code: res.Code, Tail: res.Tail, Error: rootCause}
	b, _ := json.Marshal(f)
	if err := w.Deps.Redis.SetNX(ctx, w.keys.Failed(g.Number), b, 24*time.Hour).Err(); err != nil {
		w.Log.Warn("record program failure", "err", err)
	}
	data := map[string]any{"worker": w.Cfg.Worker, "generation": g.Number, "rank": rank, "exit_code": res.Code}
	if rootCause != "" {
		data["error"] = rootCause
	}
	w.Rep.Event(jobs.EventError, fmt.Sprintf("program of worker %s (rank %d) failed in generation %d: %s", w.Cfg.Worker, rank, g.Number, f.describe()), data)
}

// describe is how the failure exited, and its root cause when the program
// wrote one (TORCHELASTIC_ERROR_FILE).
func (f execFailure) describe() string {
	if f.Error == "" {
		return f.Exit
	}
	return f.Exit + ": " + f.Error
}

// report tells the leader that g is broken for this worker, unless a newer
// generation already replaced it (a late report would break that one).
func (w *Worker) report(ctx context.Context, g *coord.Generation) {
	_ = core.Retry(ctx, w.Log, "report", func() error {
		if cur, err := w.Co.ReadGen(ctx); err == nil && cur != nil && cur.Number > g.Number {
			return nil
		}
		return w.Co.Report(ctx, g.Number, w.seq())
	})
}

// syncLoop uploads rank 0's folder whenever the program wrote a new
// checkpoint into it, so a worker's death loses at most what was not yet
// uploaded.
func (w *Worker) syncLoop(ctx context.Context, g *coord.Generation) {
	_ = periodic.Every(ctx, w.Ecfg.SyncEvery, func() bool {
		w.upload(ctx, g, false)
		return true
	})
}

// finalSync uploads rank 0's folder once its program is gone and tells
// the next generation's members they may restore.
func (w *Worker) finalSync(ctx context.Context, g *coord.Generation, rank int) {
	if rank != 0 || w.sync == nil {
		return
	}
	uctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w.upload(uctx, g, true)
}

func (w *Worker) upload(ctx context.Context, g *coord.Generation, final bool) {
	start := time.Now()
	m, err := w.sync.Upload(ctx, g.Number, len(g.Members))
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		w.Log.Warn("checkpoint folder not uploaded", "err", err, "final", final)
		w.Rep.Event(jobs.EventError, fmt.Sprintf("checkpoint folder not uploaded: %v", err), map[string]any{"generation": g.Number})
	case m != nil:
		w.Log.Info("checkpoint folder uploaded", "seq", m.Step, "bytes", m.Size(), "final", final, "took", time.Since(start).Round(time.Millisecond))
		w.Rep.Checkpoint(jobs.CheckpointRef{Step: m.Step, Epoch: m.Epoch, URL: w.sync.cat.Store().String(), SizeBytes: m.Size(), CreatedAt: m.CreatedAt})
	}
	if m != nil || final {
		w.setRoot(ctx, rootRecord{Gen: g.Number, Worker: w.Cfg.Worker, Synced: final, Seq: w.seq()})
	}
}

func (w *Worker) setRoot(ctx context.Context, r rootRecord) {
	b, _ := json.Marshal(r)
	_ = core.Retry(ctx, w.Log, "root record", func() error {
		_, err := w.Deps.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, w.keys.Root(), b, 0)
			p.Publish(ctx, w.Co.Keys().Channel(), "exec:root")
			return nil
		})
		return err
	})
}

// sinceStop is how long ago the last program run began to end (0: none),
// for the restart's log line: stop, sync, barrier and restore together.
func sinceStop(at time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return time.Since(at).Round(time.Millisecond)
}

// minWorkers is the job's workers.min as the job store says now (a PATCH
// may have changed it), else as the worker started with.
func (w *Worker) minWorkers(ctx context.Context) int {
	min := w.Spec.Workers.Min
	if w.Deps.Jobs != nil {
		if j, err := w.Deps.Jobs.Get(ctx, w.Cfg.Job); err == nil {
			min = j.Spec.Workers.Min
		}
	}
	return max(min, 1)
}
