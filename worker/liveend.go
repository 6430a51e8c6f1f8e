package worker

// The end of a live worker's life: a leave after its last step, the end
// of training, a cancel; and what the worker tells its program about a
// generation that is over (genBroken).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// genBroken reports whether a collective of generation gen can no longer
// complete: a member reported gen broken (its collective failed: a peer
// died), or the current generation cur replaced gen other than by
// admitting newcomers (a member died, left or froze). A join of
// newcomers does not break gen: its members finish the step in flight
// and switch at its end. The worker sees both in Redis within
// milliseconds of the event; the program, waiting in a collective, asks
// every few tens of milliseconds ("latest") and leaves the collective
// instead of waiting for the backend's timeout.
func (w *liveWorker) genBroken(ctx context.Context, gen int64, cur *coord.Generation) bool {
	if cur != nil && cur.Number > gen {
		if w.g == nil || w.g.Number != gen || cur.Number != gen+1 || cur.Reason != "join" {
			return true
		}
		for _, id := range w.g.Members {
			if cur.Rank(id) < 0 {
				return true
			}
		}
		return false
	}
	reports, err := w.co.Reports(ctx)
	if err != nil {
		return false
	}
	for _, r := range reports {
		if r.Gen == gen {
			return true
		}
	}
	return false
}

// liveLeave is the graceful exit after this worker's last step: its last
// commit landed, its partitions handed back, then the exec worker's leave.
func (w *liveWorker) liveLeave(ctx context.Context) func() error {
	return func() error {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w.dc.handBack(fctx, w.st.Epoch)
		w.lck.wait(ctx)
		// The generation it leaves: a leader hands its lease to a member
		// of it (membership.leave), or the survivors would wait for the
		// lease to lapse before the next generation forms.
		w.last = w.g
		err := w.programWorker.leave(ctx)
		w.awaitProgram()
		return err
	}
}

// liveFinish ends the worker's life at the end of training (to
// Succeeded: finishTraining) or at a cancel.
func (w *liveWorker) liveFinish(ctx context.Context, g *coord.Generation, to jobs.State, reason string) func() error {
	return func() error {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.dc.com.flush(fctx); err != nil {
			w.log.Warn("flush commits at the end", "err", err)
		}
		w.lck.wait(ctx)
		if to == jobs.Succeeded {
			return w.finishTraining(ctx, g)
		}
		err := w.finish(ctx, g, to, reason)
		w.awaitProgram()
		return err
	}
}

func (w *liveWorker) liveExit(ctx context.Context, reason string) func() error {
	return func() error {
		err := w.exit(ctx, reason)
		w.awaitProgram()
		return err
	}
}

// awaitProgram gives the program a few seconds to return on its own
// after its last reply, then stops it.
func (w *liveWorker) awaitProgram() {
	select {
	case <-w.prog.done:
	case <-time.After(min(w.grace(), 10*time.Second) + time.Second):
		w.prog.stop(w.grace())
	}
}

// liveExitRecord is how a member's program ended after training
// finished, for rank 0's worker (the hash live:exits, by worker).
type liveExitRecord struct {
	OK   bool   `json:"ok"`   // exited 0 on its own
	Exit string `json:"exit"` // "exit code 3", "killed by SIGKILL", "did not exit ..."
	Tail string `json:"tail,omitempty"`
}

// liveExitGrace is how much longer than grace_period_s rank 0's worker
// waits for the other members' exit records (their workers stop a
// program at grace_period_s, then write it).
const liveExitGrace = 3 * time.Second

// finishTraining ends the worker's life once training reached its end.
// The job succeeds only when the programs finished: rank 0's exited 0
// after its loop and the other members' did too, awaited within
// grace_period_s. A non-zero exit, or a program that has not returned
// within grace_period_s (it is then stopped), fails the job with the exit
// and the stderr tail, as restart mode does. No generation forms
// meanwhile: rank 0 marks the training done first.
func (w *liveWorker) finishTraining(ctx context.Context, g *coord.Generation) error {
	root := g == nil || g.Rank(w.cfg.Worker) == 0
	if root {
		_ = retry(ctx, w.log, "mark done", func() error { return w.co.MarkDone(ctx, string(jobs.Succeeded)) })
	}
	deadline := time.Now().Add(w.grace())
	rec := w.awaitExit(deadline)
	key := w.co.Keys().Base() + "live:exits"
	b, _ := json.Marshal(rec)
	if err := retry(ctx, w.log, "record the program's exit", func() error {
		_, err := w.deps.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, w.cfg.Worker, b)
			p.Expire(ctx, key, 24*time.Hour)
			return nil
		})
		return err
	}); err != nil {
		w.log.Warn("record the program's exit", "err", err)
	}
	if !root {
		return w.exit(ctx, "training finished; the program "+rec.Exit)
	}
	var fails []string
	if !rec.OK {
		fails = append(fails, fmt.Sprintf("the program of worker %s (rank 0) %s; last stderr lines:\n%s", w.cfg.Worker, rec.Exit, rec.Tail))
	}
	for rank, id := range g.Members {
		if id == w.cfg.Worker {
			continue
		}
		r, ok := w.awaitExitRecord(ctx, key, id, deadline.Add(liveExitGrace))
		switch {
		case !ok:
			w.log.Warn("no exit record of a member's program", "worker", id)
		case !r.OK:
			fails = append(fails, fmt.Sprintf("the program of worker %s (rank %d) %s; last stderr lines:\n%s", id, rank, r.Exit, r.Tail))
		}
	}
	to, reason := jobs.Succeeded, "training finished and the program exited 0"
	if len(fails) > 0 {
		to, reason = jobs.Failed, "training finished, but "+strings.Join(fails, "\n")
		_ = retry(ctx, w.log, "mark done", func() error { return w.co.MarkDone(ctx, string(to)) })
	}
	w.rep.transition(ctx, to, reason)
	return w.exit(ctx, reason)
}

// awaitExit waits for the program to return after its loop until
// deadline, then stops it, and says how it ended.
func (w *liveWorker) awaitExit(deadline time.Time) liveExitRecord {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.prog.done:
		res := w.prog.res
		return liveExitRecord{OK: res.StartErr == nil && res.Signal == "" && res.Code == 0, Exit: res.describe(), Tail: res.Tail}
	case <-t.C:
		res := w.prog.stop(time.Second)
		w.log.Warn("program did not return after training finished; stopped", "exit", res.describe())
		return liveExitRecord{Exit: fmt.Sprintf("did not exit within grace_period_s (%s) after training finished: stopped (%s)", w.grace(), res.describe()), Tail: res.Tail}
	}
}

// awaitExitRecord waits for worker id's exit record until deadline.
func (w *liveWorker) awaitExitRecord(ctx context.Context, key, id string, deadline time.Time) (liveExitRecord, bool) {
	for {
		var r liveExitRecord
		if b, err := w.deps.Redis.HGet(ctx, key, id).Bytes(); err == nil && json.Unmarshal(b, &r) == nil {
			return r, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
