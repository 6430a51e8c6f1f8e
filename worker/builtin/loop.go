package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

// outcome is why the step loop of one generation ended.
type outcome int

const (
	outSwitch outcome = iota // a newer generation was announced; go to it
	outFailed                // the ring broke; the step in flight is discarded
	outLeave                 // this worker leaves after its last step
	outDone                  // the last epoch ended
	outStop                  // the job is being cancelled
)

// loop is the worker's life after prepare:
//
//	ready --generation names me--> join --ok--> train
//	train --newer generation--> join (or ready, if it does not name me)
//	train/join --ring broke--> report --> wait for a newer generation
//	train --leave flag committed--> leave;  train --last epoch--> finish
func (w *Worker) loop(ctx, bg context.Context) error {
	var seen int64
	for {
		if w.mem.LeaveReq.Load() {
			return w.leave(bg, nil)
		}
		g, done, err := w.mem.Watch.Next(ctx, seen)
		if err != nil {
			return w.leave(bg, nil)
		}
		if done {
			return w.exit(bg, "the job is done")
		}
		seen = g.Number
		for g != nil {
			if g.Rank(w.cfg.Worker) < 0 {
				w.log.Info("not in generation; waiting to be admitted", "gen", g.Number)
				_ = w.mem.Register(bg, coord.Ready)
				break
			}
			if err := w.join(bg, g); err != nil {
				w.log.Warn("join failed", "gen", g.Number, "err", err)
				w.reportFailure(bg, g)
				break
			}
			out, next := w.train(bg, g)
			switch out {
			case outSwitch:
				g, seen = next, max(seen, next.Number)
			case outFailed:
				w.reportFailure(bg, g)
				g = nil
			case outLeave:
				return w.leave(bg, g)
			case outDone:
				return w.finish(bg, g, jobs.Succeeded, "training finished")
			case outStop:
				return w.finish(bg, g, jobs.Cancelled, "cancelled")
			}
		}
	}
}

// join builds g's ring and takes the root's state.
func (w *Worker) join(ctx context.Context, g *coord.Generation) error {
	if w.ring != nil {
		_ = w.ring.Close()
		w.ring = nil
	}
	w.ts.waitSnapshot() // the state below may be replaced
	w.sw.mark("close")
	rank := g.Rank(w.cfg.Worker)
	prev := w.mem.TrainedIn
	w.mem.TrainedIn = nil
	timeout := w.cfg.RingTimeout
	if !w.ts.synced {
		timeout = w.cfg.JoinTimeout
	}
	w.ts.dropPending()
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.mem.CancelWhenOver(jctx, cancel, g)
	start := time.Now()
	if err := w.handOver(jctx, g); err != nil {
		// The full broadcast below still brings every member up to date.
		w.log.Warn("direct state hand-over failed", "gen", g.Number, "err", err)
	}
	w.sw.mark("handover")
	ring, err := w.deps.Transport.NewRing(jctx, collective.RingConfig{
		Generation: mainRing(g.Number), Rank: rank, Peers: g.Addrs, Timeout: timeout,
		Compression: w.cfg.Compression,
	})
	if err != nil {
		return fmt.Errorf("build ring: %w", err)
	}
	w.ring = ring
	w.sw.mark("ring")
	ringAt := time.Since(start)
	if g.Restore || (g.Root < 0 && w.ck != nil) {
		return w.joinRestore(jctx, ring, g, rank, start)
	}
	switch {
	case g.Root < 0:
		if !w.ts.synced {
			w.ts.st = core.ProgressState{Applied: -1}
			if w.cfg.RestoreFile != "" {
				if err := w.restore(); err != nil {
					return err
				}
			}
			w.ts.synced = true
		}
	case w.sameState(jctx, ring, g, rank):
		// Nobody new and nobody behind: keep state and cursors; the root
		// still hands back the partitions of those who left. "No more
		// partitions" is not kept: a leave or a failure may just have put
		// partitions back in the queue, and a member that believed the
		// queue empty would never claim them (samples missed).
		w.dc.Keep()
		w.sw.mark("same_state")
		if rank == g.Root && !pureJoin(prev, g) {
			if _, err := w.dc.Reconcile(jctx, g, w.ts.st); err != nil {
				return err
			}
			w.sw.mark("reconcile")
		}
		if w.mem.State != coord.Active {
			_ = w.mem.Register(ctx, coord.Active)
		}
		w.sw.mark("register")
		if slices.Contains(g.Joiners, w.cfg.Worker) {
			w.joinedEvent(g, rank)
		}
		w.log.Info("joined", "gen", g.Number, "rank", rank, "world", len(g.Members), "step", w.ts.st.Applied,
			"kept_state", true, "took", time.Since(start).Round(time.Millisecond))
		return nil
	case rank == g.Root:
		w.ts.dropPending()
		if !w.ts.synced {
			return errors.New("named root without training state")
		}
		returned, err := w.dc.Reconcile(jctx, g, w.ts.st)
		if err != nil {
			return err
		}
		payload := w.ts.encode()
		if _, err := ring.Broadcast(jctx, g.Root, payload); err != nil {
			return fmt.Errorf("send state: %w", err)
		}
		w.log.Info("sent state", "gen", g.Number, "step", w.ts.st.Applied, "bytes", len(payload), "returned_partitions", returned,
			"ring", ringAt.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	default:
		w.ts.dropPending() // the full broadcast replaces a direct hand-over
		payload, err := ring.Broadcast(jctx, g.Root, nil)
		if err != nil {
			return fmt.Errorf("receive state: %w", err)
		}
		st, err := w.ts.loadState(payload)
		if err != nil {
			return err
		}
		w.ts.st, w.ts.synced = st, true
	}
	w.dc.Restart()
	_ = w.mem.Register(ctx, coord.Active)
	w.joinedEvent(g, rank)
	w.log.Info("joined", "gen", g.Number, "rank", rank, "world", len(g.Members), "step", w.ts.st.Applied,
		"epoch", w.ts.st.Epoch, "ring", ringAt.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// pureJoin reports whether g only adds workers to prev, the generation
// just before it in which this worker trained. With every member at the
// same step (sameState), reconcile has nothing to do then: nobody applied
// a step past L, and prev's start (or an earlier one) already returned the
// partitions of everyone not in prev; so the root skips that round trip.
func pureJoin(prev, g *coord.Generation) bool {
	if prev == nil || prev.Number+1 != g.Number || len(g.Joiners) == 0 {
		return false
	}
	for _, id := range prev.Members {
		if g.Rank(id) < 0 {
			return false
		}
	}
	return true
}

func (w *Worker) joinedEvent(g *coord.Generation, rank int) {
	w.rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s joined generation %d as rank %d of %d", w.cfg.Worker, g.Number, rank, len(g.Members)),
		map[string]any{"worker": w.cfg.Worker, "generation": g.Number, "rank": rank, "world": len(g.Members)})
}

// reportFailure tells the leader this worker's ring of g broke and what it
// applied last; it retries while Redis is away.
func (w *Worker) reportFailure(ctx context.Context, g *coord.Generation) {
	w.ts.dropPending()
	if w.ring != nil {
		_ = w.ring.Close()
		w.ring = nil
	}
	applied := coord.NoState
	if w.ts.synced {
		applied = w.ts.st.Applied
	}
	w.mem.Report(ctx, g.Number, applied)
}

// leave is the graceful exit: the last cursor committed, the partition
// handed back, the leader lease handed over, the member record deleted.
func (w *Worker) leave(ctx context.Context, g *coord.Generation) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w.log.Info("leaving", "step", w.ts.st.Applied)
	w.dc.HandBack(ctx, w.ts.st.Epoch)
	w.mem.Leave(ctx, g, w.rep)
	return nil
}

// finish ends training: rank 0 records the job's end.
func (w *Worker) finish(ctx context.Context, g *coord.Generation, to jobs.State, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.dc.Com.Flush(ctx); err != nil {
		w.log.Warn("flush commits at the end", "err", err)
	}
	if g.Rank(w.cfg.Worker) == 0 {
		w.ck.take(ctx, g.Number, len(g.Members), true)
		if w.cfg.SaveFile != "" {
			if err := w.save(); err != nil {
				w.log.Warn("save state", "err", err)
			}
		}
		if err := core.Retry(ctx, w.log, "mark done", func() error { return w.mem.Co.MarkDone(ctx, string(to)) }); err != nil {
			w.log.Warn("mark job done", "err", err)
		}
		w.rep.Transition(ctx, to, reason)
	}
	return w.exit(ctx, reason)
}

func (w *Worker) exit(ctx context.Context, reason string) error {
	w.mem.Exit(ctx)
	w.rep.Flush(ctx)
	w.log.Info("exiting", "reason", reason, "step", w.ts.st.Applied, "epoch", w.ts.st.Epoch)
	return nil
}

// save writes the training state to SaveFile (atomically, by rename).
func (w *Worker) save() error {
	b := w.ts.encode()
	tmp := w.cfg.SaveFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp, w.cfg.SaveFile); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// restore loads the training state from RestoreFile.
func (w *Worker) restore() error {
	b, err := os.ReadFile(w.cfg.RestoreFile)
	if err != nil {
		return fmt.Errorf("restore state: %w", err)
	}
	st, err := w.ts.loadState(b)
	if err != nil {
		return fmt.Errorf("restore state from %s: %w", w.cfg.RestoreFile, err)
	}
	st.Meta, st.Debug = nil, ""
	w.ts.st = st
	return nil
}

// sameState reports, identically on every member, whether all members hold
// training state at the same applied step (a switch without failure and
// without newcomers), so the state broadcast can be skipped. A member that
// cannot tell says no.
//
// A joiner whose state is on its way from the root (direct hand-over) says
// "pending" and counts as up to date: it loads the state before it applies
// its first step. Any other joiner counts as having no state, even one that
// was a member before (it may hold an old state of the same step).
func (w *Worker) sameState(ctx context.Context, ring *collective.Ring, g *coord.Generation, rank int) bool {
	const have, pending = 1, 2
	flag := float32(0)
	switch {
	case w.ts.pending != nil && w.ts.pending.gen == g.Number:
		flag = pending
	case w.ts.synced && !slices.Contains(g.Joiners, w.cfg.Worker) && w.ts.st.Applied+2 < core.MaxExact:
		flag = have
	}
	world := len(g.Members)
	if world == 1 {
		return flag == have
	}
	v := make([]float32, 2*world)
	v[2*rank+1] = flag
	if flag == have {
		v[2*rank] = float32(w.ts.st.Applied + 2)
	}
	if err := ring.AllReduceExactTail(ctx, v, len(v)); err != nil { // steps above 2048: never fp16
		return false // the broadcast that follows fails the same way on everyone
	}
	step := float32(-1)
	for r := range world {
		switch v[2*r+1] {
		case pending:
		case have:
			if step >= 0 && v[2*r] != step {
				return false
			}
			step = v[2*r]
		default:
			return false
		}
	}
	return step >= 0
}
