package live

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
	"github.com/edl-nomad/edl/worker/core"
	"github.com/redis/go-redis/v9"
)

// genBroken reports whether a collective of generation gen can no longer
// complete: a member reported gen broken (its collective failed: a peer
// died), a member's heartbeat lapsed, or the current generation cur replaced gen other than by
// admitting newcomers (a member died, left or froze). A join of
// newcomers does not break gen: its members finish the step in flight
// and switch at its end. The worker sees both in Redis within
// milliseconds of the event; the program, waiting in a collective, asks
// every few tens of milliseconds ("latest") and leaves the collective
// instead of waiting for the backend's timeout.
func (w *Worker) genBroken(ctx context.Context, gen int64, cur *coord.Generation) bool {
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
	reports, err := w.Co.Reports(ctx)
	if err != nil {
		return false
	}
	for _, r := range reports {
		if r.Gen == gen {
			return true
		}
	}
	if w.g != nil && w.g.Number == gen {
		// A member that died or froze without a report (for one, just
		// before the leader formed gen beside it) never comes.
		if id, err := w.Co.Lapsed(ctx, w.g, w.Cfg.Worker); err == nil && id != "" {
			return true
		}
	}
	return false
}

// liveLeave is the graceful exit after this worker's last step: its last
// commit landed, its partitions handed back, then the exec worker's leave.
func (w *Worker) liveLeave(ctx context.Context) func() error {
	return func() error {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w.dc.HandBack(fctx, w.st.Epoch)
		w.lck.wait(ctx)
		// The generation it leaves: a leader hands its lease to a member
		// of it (membership.leave), or the survivors would wait for the
		// lease to lapse before the next generation forms.
		w.Last = w.g
		err := w.ProgramWorker.Leave(ctx)
		w.awaitProgram()
		return err
	}
}

// liveFinish ends the worker's life at the end of training (to
// Succeeded: finishTraining) or at a cancel.
func (w *Worker) liveFinish(ctx context.Context, g *coord.Generation, to jobs.State, reason string) func() error {
	return func() error {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.dc.Com.Flush(fctx); err != nil {
			w.Log.Warn("flush commits at the end", "err", err)
		}
		w.lck.wait(ctx)
		if to == jobs.Succeeded {
			return w.finishTraining(ctx, g)
		}
		err := w.Finish(ctx, g, to, reason)
		w.awaitProgram()
		return err
	}
}

func (w *Worker) liveExit(ctx context.Context, reason string) func() error {
	return func() error {
		err := w.Exit(ctx, reason)
		w.awaitProgram()
		return err
	}
}

// awaitProgram gives the program a few seconds to return on its own
// after its last reply, then stops it.
func (w *Worker) awaitProgram() {
	select {
	case <-w.prog.Done:
	case <-time.After(min(w.Grace(), 10*time.Second) + time.Second):
		w.prog.Stop(w.Grace())
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
func (w *Worker) finishTraining(ctx context.Context, g *coord.Generation) error {
	root := g == nil || g.Rank(w.Cfg.Worker) == 0
	if root {
		_ = core.Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(jobs.Succeeded)) })
	}
	deadline := time.Now().Add(w.Grace())
	rec := w.awaitExit(deadline)
	key := w.Co.Keys().Base() + "live:exits"
	b, _ := json.Marshal(rec)
	if err := core.Retry(ctx, w.Log, "record the program's exit", func() error {
		_, err := w.Deps.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, w.Cfg.Worker, b)
			p.Expire(ctx, key, 24*time.Hour)
			return nil
		})
		return err
	}); err != nil {
		w.Log.Warn("record the program's exit", "err", err)
	}
	if !root {
		return w.Exit(ctx, "training finished; the program "+rec.Exit)
	}
	var fails []string
	if !rec.OK {
		fails = append(fails, fmt.Sprintf("the program of worker %s (rank 0) %s; last stderr lines:\n%s", w.Cfg.Worker, rec.Exit, rec.Tail))
	}
	for rank, id := range g.Members {
		if id == w.Cfg.Worker {
			continue
		}
		r, ok := w.awaitExitRecord(ctx, key, id, deadline.Add(liveExitGrace))
		switch {
		case !ok:
			w.Log.Warn("no exit record of a member's program", "worker", id)
		case !r.OK:
			fails = append(fails, fmt.Sprintf("the program of worker %s (rank %d) %s; last stderr lines:\n%s", id, rank, r.Exit, r.Tail))
		}
	}
	to, reason := jobs.Succeeded, "training finished and the program exited 0"
	if len(fails) > 0 {
		to, reason = jobs.Failed, "training finished, but "+strings.Join(fails, "\n")
		_ = core.Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(to)) })
	}
	w.Rep.Transition(ctx, to, reason)
	return w.Exit(ctx, reason)
}

// awaitExit waits for the program to return after its loop until
// deadline, then stops it, and says how it ended.
func (w *Worker) awaitExit(deadline time.Time) liveExitRecord {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.prog.Done:
		res := w.prog.Res
		return liveExitRecord{OK: res.StartErr == nil && res.Signal == "" && res.Code == 0, Exit: res.Describe(), Tail: res.Tail}
	case <-t.C:
		res := w.prog.Stop(time.Second)
		w.Log.Warn("program did not return after training finished; stopped", "exit", res.Describe())
		return liveExitRecord{Exit: fmt.Sprintf("did not exit within grace_period_s (%s) after training finished: stopped (%s)", w.Grace(), res.Describe()), Tail: res.Tail}
	}
}

// awaitExitRecord waits for worker id's exit record until deadline.
func (w *Worker) awaitExitRecord(ctx context.Context, key, id string, deadline time.Time) (liveExitRecord, bool) {
	for {
		var r liveExitRecord
		if b, err := w.Deps.Redis.HGet(ctx, key, id).Bytes(); err == nil && json.Unmarshal(b, &r) == nil {
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
