package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/redis/go-redis/v9"
)

// The job-level fallback to restart mode (docs/live.md, "Fallback"). A
// program whose in-process rebuild of its group failed MAX_INIT_FAILURES
// times in a row asks for the fallback; once liveFallbackAfter programs of
// the job did (counted in Redis), the job is in restart mode for good:
// from then on no program rebuilds a group in process. At every
// generation change each member's program writes its state to a file in
// the worker's folder and exits (LiveExitRestart); its worker, still a
// member (its counters, its membership and its store address unchanged),
// starts the program again on the same store port and hands it the file;
// the fresh process builds its group for the first time and the
// generation starts as any other: members at the same step keep what they
// loaded, a newcomer gets the root's state by the broadcast. Nothing is
// lost: every member's state and counters are those of its last applied
// step, as without the fallback.
//
// Redis keys, beside the job's coordination keys:
//
//	live:fallbacks   programs that asked for the fallback
//	live:restart     "1" once the job is in restart mode

const (
	// liveFallbackAfter is how many fallback requests of the job's
	// programs switch the job to restart mode. Each is already
	// MAX_INIT_FAILURES (3) failed rebuilds in a row of one program.
	liveFallbackAfter = 1
	// liveRestartTimeout bounds the group setup (and the collectives) of
	// a restarted program: every member restarts at once, and importing
	// torch takes seconds.
	liveRestartTimeout = 30 * time.Second
	// liveLocalFile is the state a program leaves for its restart.
	liveLocalFile = "live-local.pt"
)

// liveRestart is a live worker's side of restart mode.
type liveRestart struct {
	on      bool   // the job is in restart mode (read from Redis)
	planned bool   // the program was told to save and exit: restart it in place
	save    string // the file it was told to write ("" without state)
	restore string // the file the next program loads in its first generation
	port    int    // the store port the next program binds (0: any)
	progGen int64  // the generation the worker was in when its program started

	// setup is set while the program restarts or builds its group (until
	// its first "next"), with the step the worker would report: the
	// watcher (speakUp) reports a generation broken for it then.
	setup   atomic.Bool
	applied atomic.Int64
}

func (w *Worker) fallbackKey(name string) string { return w.Co.Keys().Base() + "live:" + name }

// restartMode reports whether the job is in restart mode.
func (w *Worker) restartMode(ctx context.Context) bool {
	if w.fb.on {
		return true
	}
	v, err := w.Deps.Redis.Get(ctx, w.fallbackKey("restart")).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		w.Log.Warn("read restart mode", "err", err)
	}
	if v == "1" {
		w.switchOn(ctx)
	}
	return w.fb.on
}

func (w *Worker) switchOn(ctx context.Context) {
	if w.fb.on {
		return
	}
	w.fb.on = true
	w.Log.Info("the job is in restart mode: the program restarts at every generation change")
	go w.speakUp(ctx) // ctx: the worker's (its serve loop's), ended when it returns
}

// settingUp marks the program as restarting or building its group, with
// the step its worker holds the state of.
func (w *Worker) settingUp() {
	a := coord.NoState
	if w.synced {
		a = w.st.Applied
	}
	w.fb.applied.Store(a)
	w.fb.setup.Store(true)
}

// liveOp notes the program's request: its first "next" ends its setup.
func (w *Worker) liveOp(op string) {
	if op == "next" {
		w.fb.setup.Store(false)
	}
}

// speakUp (restart mode) reports the current generation broken for this
// worker while its program restarts or sets its group up, once another
// member reported it broken: the program cannot report before its setup
// times out (liveRestartTimeout), and the leader would drop a member that
// says nothing within its report window, with the state it holds; it
// would then form the next generation of the others only, possibly of
// members without state. It runs until ctx ends.
func (w *Worker) speakUp(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	me := w.Cfg.Worker
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !w.fb.setup.Load() {
			continue
		}
		g, err := w.Co.ReadGen(ctx)
		if err != nil || g == nil || g.Rank(me) < 0 {
			continue
		}
		reps, err := w.Co.Reports(ctx)
		if err != nil || reps[me].Gen == g.Number && reps[me].Worker != "" {
			continue
		}
		for id, r := range reps {
			if id != me && r.Gen == g.Number {
				a := w.fb.applied.Load()
				if err := w.Co.Report(ctx, g.Number, a); err == nil {
					w.Log.Info("restart mode: reported the generation broken for the program in setup", "gen", g.Number, "applied", a, "first_report", id)
				}
				break
			}
		}
	}
}

// programStarting records where the worker stands as its program starts
// and returns the program's extra environment: the store port of the
// program it replaces in place (so the generation's address stays right).
func (w *Worker) programStarting() []string {
	w.fb.progGen = 0
	if w.g != nil {
		w.fb.progGen = w.g.Number
	}
	if w.fb.port > 0 {
		return []string{"EDL_STORE_PORT=" + strconv.Itoa(w.fb.port)}
	}
	return nil
}

// liveTimeoutS is the group timeout the program gets in its hello reply.
func (w *Worker) liveTimeoutS(ctx context.Context) float64 {
	if w.restartMode(ctx) {
		return max(w.Ecfg.LiveTimeout, liveRestartTimeout).Seconds()
	}
	return w.Ecfg.LiveTimeout.Seconds()
}

// planRestart tells the program to write its state (if it holds any) and
// exit, to be restarted in place.
func (w *Worker) planRestart() liveCkptReply {
	w.settingUp()
	w.fb.planned, w.fb.save = true, ""
	if w.synced {
		w.fb.save = filepath.Join(w.CkptDir, liveLocalFile)
		_ = os.Remove(w.fb.save)
		_ = os.Remove(w.fb.save + ".err")
	}
	return liveCkptReply{Save: w.fb.save}
}

// restartAtSwitch is the answer to "gen" in restart mode by a program
// that ran a generation already: write the state and exit (ok false: go
// on as usual).
func (w *Worker) restartAtSwitch(ctx context.Context) (liveReply, bool) {
	if w.g == nil || w.g.Number <= w.fb.progGen || w.LeaveReq.Load() || w.StopReq.Load() || !w.restartMode(ctx) {
		return liveReply{}, false
	}
	rep := liveReply{Action: "restart", Have: w.synced, Applied: w.st.Applied, Epoch: w.st.Epoch, liveCkptReply: w.planRestart()}
	w.Log.Info("restart mode: the program restarts for the next generation", "after_gen", w.g.Number, "step", w.st.Applied, "save", rep.Save)
	return rep, true
}

// fallbackReply counts a program's fallback request; once the job is in
// restart mode the program is told to write its state before it exits,
// and its worker restarts it in place.
func (w *Worker) fallbackReply(ctx context.Context, req liveRequest) liveCkptReply {
	if req.Op != "fallback" {
		return liveCkptReply{}
	}
	var n int64
	_ = core.Retry(ctx, w.Log, "count fallback", func() (err error) {
		n, err = w.Deps.Redis.Incr(ctx, w.fallbackKey("fallbacks")).Result()
		return err
	})
	if !w.fb.on && n >= liveFallbackAfter {
		var set bool
		_ = core.Retry(ctx, w.Log, "set restart mode", func() (err error) {
			set, err = w.Deps.Redis.SetNX(ctx, w.fallbackKey("restart"), "1", 0).Result()
			return err
		})
		w.switchOn(ctx)
		if set {
			w.Rep.Event(jobs.EventWorker, fmt.Sprintf("live re-initialisation in process failed for the job %d time(s) (last: worker %s, generation %d: %s); "+
				"the job falls back to restart mode: from now on every program restarts at each generation change, with its state", n, w.Cfg.Worker, req.Gen, req.Error),
				map[string]any{"worker": w.Cfg.Worker, "generation": req.Gen, "fallback": "restart", "job_level": true, "fallbacks": n})
		}
	}
	if !w.restartMode(ctx) {
		return liveCkptReply{}
	}
	return w.planRestart()
}

// restartInPlace restarts a program that exited as planned (restart
// mode) without leaving the membership: same counters, same store port,
// its state file handed to the new program. ok false: the exit was not
// planned or the state file is missing; programGone goes on as usual.
func (w *Worker) restartInPlace(ctx context.Context, res core.ProgramResult) (c *liveConn, ok bool, err error) {
	planned, save := w.fb.planned, w.fb.save
	w.fb.planned, w.fb.save = false, ""
	if !planned || res.Code != LiveExitRestart || w.LeaveReq.Load() || w.StopReq.Load() {
		return nil, false, nil
	}
	if save != "" {
		if _, err := os.Stat(save); err != nil {
			msg, _ := os.ReadFile(save + ".err")
			w.Log.Warn("restart mode: the program left no state; it restarts as a newcomer", "file", save, "err", err, "program_error", string(msg))
			return nil, false, nil
		}
	} else {
		w.synced = false
	}
	oldAddr := w.LiveAddr
	if _, p, err := net.SplitHostPort(oldAddr); err == nil {
		w.fb.port, _ = strconv.Atoi(p)
	}
	w.fb.restore = save
	if w.g != nil {
		w.minGen = max(w.minGen, w.g.Number)
	}
	c, err = w.startProgram(ctx)
	w.fb.port = 0
	if err != nil {
		return nil, true, err
	}
	if w.LiveAddr != oldAddr {
		// Its store port was taken: the member record gets the new
		// address, and a generation naming the old one is broken.
		w.Log.Warn("restarted program's store on another port", "was", oldAddr, "now", w.LiveAddr)
		_ = w.Register(ctx, w.State)
		if cur, err := w.Co.ReadGen(ctx); err == nil && cur != nil && cur.Rank(w.Cfg.Worker) >= 0 {
			w.reportLive(ctx, cur)
		}
	}
	w.Log.Info("restart mode: program restarted in place", "step", w.st.Applied, "have_state", w.synced)
	return c, true, nil
}

// restoreFor is the file a program loads in the generation it joins: a
// restored checkpoint's, else the state its predecessor left at a planned
// restart (handed over once).
func (w *Worker) restoreFor(restore string) string {
	if w.fb.on {
		w.settingUp()
	}
	local := w.fb.restore
	w.fb.restore = ""
	if restore != "" || !w.synced {
		return restore
	}
	return local
}
