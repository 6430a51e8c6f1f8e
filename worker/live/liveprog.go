package live

// The live program's process and its connection: started with the edl
// package's environment, restarted when it dies on its own (or asked for
// the fallback), one JSON request per line on the Unix socket.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

// programExited reports whether the program has ended.
func (w *Worker) programExited() bool {
	select {
	case <-w.prog.Done:
		return true
	default:
		return false
	}
}

// errExitedBeforeHello: the program ended before it connected to the
// worker's socket.
var errExitedBeforeHello = errors.New("program exited before its hello")

// endingExitWait is how long a program whose connection ended before its
// hello has to exit on its own before it is stopped.
const endingExitWait = 10 * time.Second

// startProgram starts the program and waits for its hello.
func (w *Worker) startProgram(ctx context.Context) (*liveConn, error) {
	env := core.ProgramEnv{Base: w.Ecfg.Env, Spec: w.Ex.Env}.Environ()
	// Live mode's program gets no torchrun variables: its rank and world
	// change in process (the package asks its worker).
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := cutEq(kv)
		return jobs.ReservedEnv(k) && k != "CUDA_VISIBLE_DEVICES"
	})
	env = append(env, "EDL_SOCKET="+w.sock, "EDL_JOB_ID="+w.Cfg.Job, "EDL_WORKER_ID="+w.Cfg.Worker,
		"EDL_CHECKPOINT_DIR="+w.CkptDir, "EDL_LIVE_TIMEOUT_S="+strconv.FormatFloat(w.Ecfg.LiveTimeout.Seconds(), 'f', -1, 64))
	env = append(env, w.programStarting()...)
	w.prog = core.StartProgram(w.Ex.Command, w.Ex.Workdir, env, w.Ecfg.Stdout, w.Ecfg.Stderr, w.Ecfg.TailLines)
	w.Log.Info("program started", "pid", w.prog.Pid(), "restarts", w.restarts)
	if w.accepted == nil {
		// One Accept at a time: a program that died before it connected
		// leaves its Accept waiting, and the next program's connection
		// goes to it.
		ch := make(chan net.Conn, 1)
		w.accepted = ch
		go func() {
			c, err := w.ln.Accept()
			if err == nil {
				ch <- c
			}
		}()
	}
	var c net.Conn
	select {
	case c = <-w.accepted:
		w.accepted = nil
	case <-w.prog.Done:
		return nil, fmt.Errorf("worker: live mode: the program exited (%s) before it connected to %s (does it call edl.torch.init()?); last stderr lines:\n%s: %w",
			w.prog.Res.Describe(), w.sock, w.prog.Res.Tail, errExitedBeforeHello)
	case <-ctx.Done():
		w.prog.Stop(w.Grace())
		return nil, ctx.Err()
	}
	w.Log.Info("program connected", "pid", w.prog.Pid())
	lc := newLiveConn(c)
	req, err := lc.read()
	if err != nil && !errors.Is(err, errBadRequest) {
		lc.close()
		// The connection ends as the program exits (an exception between
		// init() and steps()); Python closes it before it has torn torch
		// down. Its own exit names the failure: stop it only if it does
		// not come. Before, the SIGTERM came first and every event and
		// the job's reason said "killed by SIGTERM".
		select {
		case <-w.prog.Done:
		case <-time.After(min(w.Grace(), endingExitWait)):
		case <-ctx.Done():
		}
		res := w.prog.Stop(w.Grace())
		return nil, fmt.Errorf("worker: live mode: the program's connection ended before its hello (%v; program %s): %w", err, res.Describe(), errExitedBeforeHello)
	}
	if err != nil || req.Op != "hello" {
		w.prog.Stop(w.Grace())
		return nil, helloRefused{fmt.Errorf("worker: live mode: the program's first request is not hello: %v %q", err, req.Op)}
	}
	if req.bad != "" {
		msg := req.bad
		_ = lc.write("hello", liveReply{Error: msg})
		w.prog.Stop(w.Grace())
		return nil, helloRefused{fmt.Errorf("worker: live mode: %s", msg)}
	}
	if req.DatasetLen != w.ds.Samples {
		msg := fmt.Sprintf("data set has %d samples but the job's trainer.exec.dataset.samples is %d", req.DatasetLen, w.ds.Samples)
		_ = lc.write("hello", liveReply{Error: msg})
		<-w.prog.Done
		w.Rep.Event(jobs.EventError, "worker "+w.Cfg.Worker+": "+msg, map[string]any{"worker": w.Cfg.Worker})
		return nil, helloRefused{fmt.Errorf("worker: live mode: %s", msg)}
	}
	if req.Epochs < 1 || req.StorePort <= 0 || req.StorePort > 65535 {
		msg := fmt.Sprintf("hello: epochs %d (want >= 1), store_port %d (want 1-65535)", req.Epochs, req.StorePort)
		_ = lc.write("hello", liveReply{Error: msg})
		w.prog.Stop(w.Grace())
		return nil, helloRefused{fmt.Errorf("worker: live mode: %s", msg)}
	}
	w.epochs = req.Epochs
	w.LiveAddr = net.JoinHostPort(w.Ecfg.Host, strconv.Itoa(req.StorePort))
	if err := lc.write("hello", liveReply{Job: w.Cfg.Job, Worker: w.Cfg.Worker, Samples: w.ds.Samples, Partitions: w.ds.Partitions,
		InitialWorld: max(1, w.Spec.Workers.Min),
		TimeoutS:     w.liveTimeoutS(ctx)}); err != nil {
		w.prog.Stop(w.Grace())
		return nil, fmt.Errorf("worker: live mode: hello reply: %w", err)
	}
	return lc, nil
}

func cutEq(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// programGone handles the program's end without a leave, stop or done:
// it failed (or asked for the fallback). The worker leaves the membership,
// starts the program again and comes back as a newcomer without state (the
// restart fallback), up to max_restarts times.
func (w *Worker) programGone(ctx context.Context) (*liveConn, error) {
	<-w.prog.Done
	res := w.prog.Res
	if c, ok, err := w.restartInPlace(ctx, res); ok {
		return c, err
	}
	fallback := res.Code == LiveExitRestart
	w.Log.Warn("program ended", "exit", goneDescribe(res), "fallback", fallback, "stderr_tail", res.Tail)
	gen := int64(0)
	if w.g != nil {
		gen = w.g.Number
	}
	if !fallback {
		w.Rep.Event(jobs.EventError, fmt.Sprintf("program of worker %s failed in generation %d: %s", w.Cfg.Worker, gen, goneDescribe(res)),
			map[string]any{"worker": w.Cfg.Worker, "generation": gen, "exit_code": res.Code})
	}
	w.synced = false
	if w.LeaveReq.Load() || w.StopReq.Load() {
		return nil, w.ProgramWorker.Leave(ctx)
	}
	// Out of the membership while the new program starts: the next
	// generation forms without this worker (the survivors' reports, or its
	// missing record), not with the old program's store address; it comes
	// back as a newcomer once the new program said hello.
	if err := core.Retry(ctx, w.Log, "leave while restarting", func() error { return w.Co.Leave(ctx) }); err != nil {
		return nil, err
	}
	w.State = ""
	if w.g != nil {
		w.minGen = w.g.Number
	}
	if w.g != nil && len(w.g.Members) == 1 && w.g.Rank(w.Cfg.Worker) == 0 && w.lck == nil {
		// The only member's program held the only copy of the model, and
		// without a checkpoint store live mode keeps no checkpoint: going
		// on would train a fresh model on the rest of the epoch. (With
		// one, the restore generation loads the newest: liveckpt.go.)
		reason := fmt.Sprintf("live program of worker %s, the only member of generation %d, ended (%s): its training state is lost (no checkpoint store); last stderr lines:\n%s",
			w.Cfg.Worker, w.g.Number, goneDescribe(res), res.Tail)
		_ = core.Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(jobs.Failed)) })
		w.Rep.Transition(ctx, jobs.Failed, reason)
		return nil, w.Exit(ctx, reason)
	}
	var c *liveConn
	for c == nil {
		w.restarts++
		if w.restarts > w.Ex.Restarts() {
			reason := fmt.Sprintf("live program of worker %s failed %s (max_restarts %d); last: %s; last stderr lines:\n%s",
				w.Cfg.Worker, core.Times(w.restarts), w.Ex.Restarts(), goneDescribe(res), res.Tail)
			_ = core.Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(jobs.Failed)) })
			w.Rep.Transition(ctx, jobs.Failed, reason)
			return nil, w.Exit(ctx, reason)
		}
		// No member record until the new program said hello: a record (even
		// "preparing") would keep this worker in the next generation.
		var err error
		c, err = w.startProgram(ctx)
		if errors.Is(err, errExitedBeforeHello) {
			// The same program said hello before: it died while starting
			// (killed, out of memory); that is one more failed restart.
			res = w.prog.Res
			w.Log.Warn("restarted program ended before its hello", "exit", res.Describe(), "stderr_tail", res.Tail)
			w.Rep.Event(jobs.EventError, fmt.Sprintf("program of worker %s failed while restarting: %s", w.Cfg.Worker, res.Describe()),
				map[string]any{"worker": w.Cfg.Worker, "generation": gen, "exit_code": res.Code})
			continue
		}
		if errors.Is(err, errHelloRefused) {
			return nil, w.failStart(ctx, err)
		}
		if err != nil {
			return nil, err
		}
	}
	_ = w.Register(ctx, coord.Ready)
	// Still named by the current generation (nobody's collective failed
	// yet): say it is broken, so the next one forms with the new address.
	if cur, err := w.Co.ReadGen(ctx); err == nil && cur != nil && cur.Rank(w.Cfg.Worker) >= 0 {
		w.reportLive(ctx, cur)
	}
	return c, nil
}

// goneDescribe describes the end of a program that ended without a leave,
// stop or done: there an exit 0 means that it returned before training
// ended, having left its ctx.steps() loop early (a break out of it: the
// package says so on stderr), which "exit code 0" alone does not tell.
func goneDescribe(res core.ProgramResult) string {
	d := res.Describe()
	if res.StartErr == nil && res.Signal == "" && res.Code == 0 {
		d += " before training ended (it left its ctx.steps() loop early: a break or a return in the loop?)"
	}
	return d
}

// errBadRequest: a line of the program's that is not a request.
var errBadRequest = errors.New("not a JSON request")

// serve answers the program's requests until the worker's life ends.
func (w *Worker) serve(ctx context.Context, c *liveConn) error {
	for {
		req, err := c.read()
		if err != nil {
			c.close()
			if errors.Is(err, errLineTooLong) {
				// Reading on would hold the whole line in the worker's memory.
				w.Log.Warn("program's request too long; connection closed, program stopped", "err", err)
				w.Rep.Event(jobs.EventError, fmt.Sprintf("worker %s: its program sent a line of more than %d bytes on the live socket (not a request); its connection is closed and the program stopped",
					w.Cfg.Worker, liveMaxLine), map[string]any{"worker": w.Cfg.Worker})
				w.prog.Stop(w.Grace())
			}
			next, err := w.programGone(ctx)
			if next == nil {
				return err
			}
			c = next
			continue
		}
		rep, after := w.handle(ctx, req)
		if w.programExited() && after == nil {
			// It died while the worker was busy for it (a generation
			// wait): leave now, before a generation carries its address.
			c.close()
			next, err := w.programGone(ctx)
			if next == nil {
				return err
			}
			c = next
			continue
		}
		if err := c.write(req.Op, rep); err != nil {
			w.Log.Warn("reply to the program", "err", err)
		}
		if after != nil {
			return after()
		}
	}
}

// liveConn is the program's connection: JSON lines.
type liveConn struct {
	c  net.Conn
	r  *bufio.Reader
	mu sync.Mutex
}

func newLiveConn(c net.Conn) *liveConn { return &liveConn{c: c, r: bufio.NewReaderSize(c, 64<<10)} }

// liveMaxLine bounds one line of the program's: the largest requests
// (adopt's counters, a store value) are a few kilobytes; a longer line is
// not a request, and reading it whole would grow the worker without bound.
const liveMaxLine = 4 << 20

// errLineTooLong: the program sent a line of more than liveMaxLine bytes.
var errLineTooLong = errors.New("line too long")

func (l *liveConn) read() (liveRequest, error) {
	var req liveRequest
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(line)+len(frag) > liveMaxLine {
			return req, fmt.Errorf("a line of more than %d bytes: %w", liveMaxLine, errLineTooLong)
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return req, err
		}
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("request %q: %w: %w", truncate(line, 200), errBadRequest, err)
	}
	if err := protocol.checkRequest(line); err != nil {
		req.bad = err.Error() // answered with this error (protocol.json)
	}
	return req, nil
}

// write sends the reply to op, shaped by protocol.json.
func (l *liveConn) write(op string, rep liveReply) error {
	b, err := protocol.encodeReply(op, rep)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.c.Write(append(b, '\n'))
	return err
}

func (l *liveConn) close() { _ = l.c.Close() }

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// errHelloRefused: the worker refused the program's hello (its data set's
// length, a hello that is not protocol.json's): starting it again gives
// the same answer.
var errHelloRefused = errors.New("hello refused")

// helloRefused is a refused hello's error (errors.Is errHelloRefused),
// its message unchanged.
type helloRefused struct{ error }

func (e helloRefused) Is(target error) bool { return target == errHelloRefused }
func (e helloRefused) Unwrap() error        { return e.error }

// jobEnded reports whether the job already ended (or is being
// cancelled), with its state.
func (w *Worker) jobEnded(ctx context.Context) (jobs.State, bool) {
	if w.Deps.Jobs == nil {
		return "", false
	}
	j, err := w.Deps.Jobs.Get(ctx, w.Cfg.Job)
	if err != nil {
		return "", false
	}
	return j.State, j.State.Terminal() || j.State == jobs.Cancelling
}

// failStart ends the worker whose program never connected: it failed
// before its hello max_restarts+1 times, or its hello was refused. The
// job fails, with the last exit and stderr lines in its reason, as past
// max_restarts after a hello (programGone). Before, the worker returned
// an error and exited non-zero: its cluster (the local one, Nomad)
// started a fresh worker with a fresh count in its place, and the job
// stayed starting for ever, its reason never naming the program's error.
// A refused hello still returns its error (the worker exits non-zero);
// a spent budget returns nil, as programGone's does.
func (w *Worker) failStart(ctx context.Context, err error) error {
	var reason string
	switch {
	case errors.Is(err, errExitedBeforeHello):
		res := w.prog.Res
		reason = fmt.Sprintf("live program of worker %s failed %s before it connected to its worker (max_restarts %d); last: %s",
			w.Cfg.Worker, core.Times(w.restarts+1), w.Ex.Restarts(), res.Describe())
		if w.prog.Res.Tail != "" {
			reason += "; last stderr lines:\n" + res.Tail
		}
		w.Log.Error("program failed before its hello; restart budget spent", "exit", res.Describe(), "restarts", w.restarts, "stderr_tail", res.Tail)
		w.Rep.Event(jobs.EventError, fmt.Sprintf("program of worker %s failed before it connected: %s", w.Cfg.Worker, res.Describe()),
			map[string]any{"worker": w.Cfg.Worker, "exit_code": res.Code})
	case errors.Is(err, errHelloRefused):
		reason = fmt.Sprintf("live program of worker %s: %v", w.Cfg.Worker, err)
	default:
		w.Rep.Flush(ctx)
		return err // the worker's own trouble (its socket, Redis): not the program's
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = core.Retry(fctx, w.Log, "mark done", func() error { return w.Co.MarkDone(fctx, string(jobs.Failed)) })
	w.Rep.Transition(fctx, jobs.Failed, reason)
	w.Rep.Flush(fctx)
	if errors.Is(err, errHelloRefused) {
		return err
	}
	return nil
}
