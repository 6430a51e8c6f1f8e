package restart

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/warm"
)

// Warm starts (worker/warm): the worker keeps one interpreter ahead of
// its next program run, started with the job's interpreter and options,
// the preloads imported, waiting for a generation. A run then starts in
// it; the next one is started warmAfter later, while the run trains, so
// its imports do not compete with the run's own start.
//
//	none --prestart--> importing --ready--> waiting --take+Go--> the run (a Program like a cold one)
//	importing/waiting --exited before ready--> discarded, the run starts cold (event); warmGiveUp in a row: off
//	importing --not ready in ExecConfig.WarmTimeout--> discarded, cold (event), off for this worker
const (
	// warmAfter is how long after a run's start the next interpreter is
	// started.
	warmAfter = 2 * time.Second
	// warmGiveUp warm starts failing in a row turn warm starts off for
	// this worker.
	warmGiveUp = 3
)

// warmDelay is how long after the start of a run of g the next
// interpreter is started: warmAfter, so its import does not compete with
// the run's own start when every member restarts at once; at once in the
// job's first generation, where nobody restarts (before, a failure or a
// resize in a job's first two seconds found no interpreter ready and
// waited for a cold import: 1.2 s of a failure's 1.7-s stall).
func warmDelay(g *coord.Generation) time.Duration {
	if g.Reason == coord.ReasonStart {
		return 0
	}
	return warmAfter
}

// warmer is the worker's warm interpreter ahead of need. Used from the
// worker's loop only.
type warmer struct {
	w       *Worker
	cmd     warm.Command
	preload []string
	off     string // why runs start cold; "" while warm starts are on

	next   *warmProc
	fails  int    // warm starts failed in a row
	warned string // the last cold start's reason, told once

	noRendezvous bool // rank 0's program does not listen on MASTER_PORT: do not wait for it
}

// warmProc is one warm interpreter under its reaper.
type warmProc struct {
	prog *core.Program
	boot *warm.Boot
	at   time.Time
}

func newWarmer(w *Worker) *warmer {
	wm := &warmer{w: w, preload: w.Ex.Preloads()}
	if !w.Ex.WarmStart() {
		wm.off = "trainer.exec.warm is false"
		return wm
	}
	c, err := warm.Parse(w.Ex.Command)
	if err != nil {
		wm.off = "the command cannot start warm: " + err.Error()
		return wm
	}
	wm.cmd = c
	return wm
}

// prestart starts the next interpreter, unless one is there or warm
// starts are off; env is the program's environment less the generation's
// (core.ProgramEnv.BaseEnviron).
func (wm *warmer) prestart(env []string) {
	if wm.off != "" || wm.next != nil {
		return
	}
	bootPath, err := warm.WriteBoot(wm.w.Ecfg.Dir)
	if err != nil {
		wm.failed(err.Error())
		return
	}
	boot, err := warm.NewBoot()
	if err != nil {
		wm.failed(err.Error())
		return
	}
	e := wm.w.Ecfg
	prog := core.StartProgram(wm.cmd.Argv(bootPath, 3, 4, wm.preload), wm.w.Ex.Workdir, env, e.Stdout, e.Stderr, e.TailLines, boot.ChildFiles()...)
	boot.Started()
	if prog.Res.StartErr != nil {
		wm.failed(fmt.Sprintf("the interpreter did not start: %v", prog.Res.StartErr))
		return
	}
	wm.next = &warmProc{prog: prog, boot: boot, at: time.Now()}
	wm.w.Log.Debug("warm interpreter started", "pid", prog.Pid(), "preload", wm.preload)
}

// waitReady waits until the next interpreter (if any) has imported its
// preloads, within ExecConfig.WarmTimeout, and discards it if it cannot run a
// program. A newcomer calls it before it tells the leader it is ready.
func (wm *warmer) waitReady(ctx context.Context) {
	p := wm.next
	if p == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, wm.w.Ecfg.WarmTimeout)
	defer cancel()
	fails, err := p.boot.WaitReady(rctx)
	hung := err != nil && rctx.Err() != nil && ctx.Err() == nil
	select {
	case <-p.prog.Done:
		if err == nil {
			err = fmt.Errorf("it exited while waiting (%s)", p.prog.Res.Describe())
		}
	default:
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return // the worker stops: discard does the rest
	case hung:
		wm.discard()
		wm.fails = warmGiveUp - 1 // a hang is no accident: off at once
		wm.failed(fmt.Sprintf("the warm interpreter was not ready within %s (a preload hangs?)", wm.w.Ecfg.WarmTimeout))
		return
	case err != nil:
		wm.discard() // gone after it: its exit and stderr are known
		wm.failed(notReady(err, p.prog.Res))
		return
	case len(fails) > 0:
		// The program's own import of them fails the same way, cold or warm.
		wm.w.Log.Warn("preloads did not import", "failed", fails)
	}
	wm.w.Log.Debug("warm interpreter ready", "pid", p.prog.Pid(), "took", time.Since(p.at).Round(time.Millisecond))
}

// notReady is why an interpreter that ended was not ready: err, its exit
// (unless err tells it) and its last stderr lines when it wrote some.
func notReady(err error, res core.ProgramResult) string {
	msg := fmt.Sprintf("the warm interpreter was not ready: %v", err)
	if d := res.Describe(); !strings.Contains(msg, d) {
		msg += " (" + d + ")"
	}
	if tail := strings.TrimSpace(res.Tail); tail != "" {
		msg += "; last stderr lines: " + tail
	}
	return msg
}

// start runs the program in the next interpreter with the generation's
// environment; nil when the run must start cold (the reason is logged,
// and told in a job event once). gate, if not nil, is called once the
// interpreter is ready, before it gets the environment.
func (wm *warmer) start(ctx context.Context, env []string, gate func() bool) (prog *core.Program, abandoned bool) {
	if wm.off != "" {
		if wm.warned != wm.off {
			wm.warned = wm.off
			wm.w.Log.Info("the program starts cold", "why", wm.off)
		}
		return nil, false
	}
	if wm.next == nil {
		return nil, false // a prestart failed: failed() told why
	}
	wm.waitReady(ctx)
	p := wm.next
	if p == nil {
		return nil, false
	}
	if gate != nil && !gate() {
		return nil, true // the interpreter stays for the next run
	}
	wm.next = nil
	if err := p.boot.Go(env, ""); err != nil {
		p.prog.Stop(0)
		wm.failed(err.Error())
		return nil, false
	}
	wm.fails = 0
	return p.prog, false
}

// rendezvousWait bounds how long a warm run of rank > 0 waits for rank
// 0's rendezvous store before it starts anyway.
const rendezvousWait = 3 * time.Second

// rendezvousCheck is how often that wait reads the generation's members
// in Redis.
const rendezvousCheck = 50 * time.Millisecond

// awaitRendezvous waits until addr (rank 0's MASTER_ADDR:MASTER_PORT)
// accepts a connection, within rendezvousWait. A warm run starts in
// milliseconds, so ranks > 0 would reach init_process_group before rank
// 0's TCPStore listens, and torch's client then retries only after a
// pause (about half a second to a second, torch 1.13's socket retry):
// that pause was most of a warm restart. A program whose rank 0 never
// listens there (no env:// rendezvous) turns the wait off for this
// worker after the first timeout. over is asked every rendezvousCheck
// whether the generation ended meanwhile (rank 0's program failed at
// once: a bad argument); then it returns false at once. Before, the
// wait went on blind for 3 s, the worker sent the leader no report in
// its window and was dropped from the next generation as lost (and the
// failure, a member lost, did not count as a restart), and the wait was
// turned off for the rest of the job.
func (wm *warmer) awaitRendezvous(ctx context.Context, addr string, over func() bool) bool {
	if wm.noRendezvous {
		return true
	}
	deadline := time.Now().Add(rendezvousWait)
	d := net.Dialer{Timeout: 100 * time.Millisecond}
	next := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return true
		}
		if time.Now().After(next) {
			if over() {
				return false
			}
			next = time.Now().Add(rendezvousCheck)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ctx.Err() == nil {
		wm.noRendezvous = true
		wm.w.Log.Info("rank 0's rendezvous store did not listen; warm runs no longer wait for it", "addr", addr, "waited", rendezvousWait)
	}
	return true
}

// failed counts a warm start that failed; warmGiveUp in a row turn warm
// starts off for this worker.
func (wm *warmer) failed(why string) {
	wm.fails++
	wm.w.Log.Warn("warm start failed; the program starts cold", "err", why, "in_a_row", wm.fails)
	if wm.fails >= warmGiveUp {
		wm.off = fmt.Sprintf("%d warm starts failed in a row, the last: %s", wm.fails, why)
	}
	wm.tellCold(why)
}

// tellCold says in a job event, once per reason, that this worker's
// program starts cold.
func (wm *warmer) tellCold(why string) {
	if why == wm.warned {
		return
	}
	wm.warned = why
	w := wm.w
	w.Rep.Event(jobs.EventWorker, fmt.Sprintf("worker %s starts its program cold: %s", w.Cfg.Worker, why),
		map[string]any{"worker": w.Cfg.Worker, "warm": false})
}

// discard ends the next interpreter, if any: it exits on its own once
// told so (an idle one does at once), and is killed after a moment.
func (wm *warmer) discard() {
	if wm == nil {
		return
	}
	p := wm.next
	if p == nil {
		return
	}
	wm.next = nil
	p.boot.Abandon()
	select {
	case <-p.prog.Done:
	case <-time.After(2 * time.Second):
		p.prog.Stop(0)
	}
}
