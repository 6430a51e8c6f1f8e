package worker

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

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// programExited reports whether the program has ended.
func (w *liveWorker) programExited() bool {
	select {
	case <-w.prog.done:
		return true
	default:
		return false
	}
}

// errExitedBeforeHello: the program ended before it connected to the
// worker's socket.
var errExitedBeforeHello = errors.New("program exited before its hello")

// startProgram starts the program and waits for its hello.
func (w *liveWorker) startProgram(ctx context.Context) (*liveConn, error) {
	env := ProgramEnv{Base: w.ecfg.Env, Spec: w.ex.Env}.Environ()
	// Live mode's program gets no torchrun variables: its rank and world
	// change in process (the package asks its worker).
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := cutEq(kv)
		return jobs.ReservedEnv(k) && k != "CUDA_VISIBLE_DEVICES"
	})
	env = append(env, "EDL_SOCKET="+w.sock, "EDL_JOB_ID="+w.cfg.Job, "EDL_WORKER_ID="+w.cfg.Worker,
		"EDL_CHECKPOINT_DIR="+w.ckptDir, "EDL_LIVE_TIMEOUT_S="+strconv.FormatFloat(w.ecfg.LiveTimeout.Seconds(), 'f', -1, 64))
	env = append(env, w.programStarting()...)
	w.prog = startProgram(w.ex.Command, w.ex.Workdir, env, w.ecfg.Stdout, w.ecfg.Stderr, w.ecfg.TailLines)
	w.log.Info("program started", "pid", w.prog.Pid(), "restarts", w.restarts)
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
	case <-w.prog.done:
		return nil, fmt.Errorf("worker: live mode: the program exited (%s) before it connected to %s (does it call edl.torch.init()?); last stderr lines:\n%s: %w",
			w.prog.res.describe(), w.sock, w.prog.res.Tail, errExitedBeforeHello)
	case <-ctx.Done():
		w.prog.stop(w.grace())
		return nil, ctx.Err()
	}
	w.log.Info("program connected", "pid", w.prog.Pid())
	lc := newLiveConn(c)
	req, err := lc.read()
	if err != nil && !errors.Is(err, errBadRequest) {
		lc.close()
		res := w.prog.stop(w.grace())
		return nil, fmt.Errorf("worker: live mode: the program's connection ended before its hello (%v; program %s): %w", err, res.describe(), errExitedBeforeHello)
	}
	if err != nil || req.Op != "hello" {
		w.prog.stop(w.grace())
		return nil, fmt.Errorf("worker: live mode: the program's first request is not hello: %v %q", err, req.Op)
	}
	if req.DatasetLen != w.ds.Samples {
		msg := fmt.Sprintf("data set has %d samples but the job's trainer.exec.dataset.samples is %d", req.DatasetLen, w.ds.Samples)
		_ = lc.write(liveReply{Error: msg})
		<-w.prog.done
		w.rep.event(jobs.EventError, "worker "+w.cfg.Worker+": "+msg, map[string]any{"worker": w.cfg.Worker})
		return nil, fmt.Errorf("worker: live mode: %s", msg)
	}
	if req.Epochs < 1 || req.StorePort <= 0 || req.StorePort > 65535 {
		msg := fmt.Sprintf("hello: epochs %d (want >= 1), store_port %d (want 1-65535)", req.Epochs, req.StorePort)
		_ = lc.write(liveReply{Error: msg})
		w.prog.stop(w.grace())
		return nil, fmt.Errorf("worker: live mode: %s", msg)
	}
	w.epochs = req.Epochs
	w.liveAddr = net.JoinHostPort(w.ecfg.Host, strconv.Itoa(req.StorePort))
	if err := lc.write(liveReply{Job: w.cfg.Job, Worker: w.cfg.Worker, Samples: w.ds.Samples, Partitions: w.ds.Partitions,
		InitialWorld: max(1, w.spec.Workers.Min),
		TimeoutS:     w.liveTimeoutS(ctx)}); err != nil {
		w.prog.stop(w.grace())
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
func (w *liveWorker) programGone(ctx context.Context) (*liveConn, error) {
	<-w.prog.done
	res := w.prog.res
	if c, ok, err := w.restartInPlace(ctx, res); ok {
		return c, err
	}
	fallback := res.Code == LiveExitRestart
	w.log.Warn("program ended", "exit", res.describe(), "fallback", fallback, "stderr_tail", res.Tail)
	gen := int64(0)
	if w.g != nil {
		gen = w.g.Number
	}
	if !fallback {
		w.rep.event(jobs.EventError, fmt.Sprintf("program of worker %s failed in generation %d: %s", w.cfg.Worker, gen, res.describe()),
			map[string]any{"worker": w.cfg.Worker, "generation": gen, "exit_code": res.Code})
	}
	w.synced = false
	if w.leaveReq.Load() || w.stopReq.Load() {
		return nil, w.programWorker.leave(ctx)
	}
	// Out of the membership while the new program starts: the next
	// generation forms without this worker (the survivors' reports, or its
	// missing record), not with the old program's store address; it comes
	// back as a newcomer once the new program said hello.
	if err := retry(ctx, w.log, "leave while restarting", func() error { return w.co.Leave(ctx) }); err != nil {
		return nil, err
	}
	w.state = ""
	if w.g != nil {
		w.minGen = w.g.Number
	}
	if w.g != nil && len(w.g.Members) == 1 && w.g.Rank(w.cfg.Worker) == 0 && w.lck == nil {
		// The only member's program held the only copy of the model, and
		// without a checkpoint store live mode keeps no checkpoint: going
		// on would train a fresh model on the rest of the epoch. (With
		// one, the restore generation loads the newest: liveckpt.go.)
		reason := fmt.Sprintf("live program of worker %s, the only member of generation %d, ended (%s): its training state is lost (no checkpoint store); last stderr lines:\n%s",
			w.cfg.Worker, w.g.Number, res.describe(), res.Tail)
		_ = retry(ctx, w.log, "mark done", func() error { return w.co.MarkDone(ctx, string(jobs.Failed)) })
		w.rep.transition(ctx, jobs.Failed, reason)
		return nil, w.exit(ctx, reason)
	}
	var c *liveConn
	for c == nil {
		w.restarts++
		if w.restarts > w.ex.Restarts() {
			reason := fmt.Sprintf("live program of worker %s failed %d times (max_restarts %d); last: %s; last stderr lines:\n%s",
				w.cfg.Worker, w.restarts, w.ex.Restarts(), res.describe(), res.Tail)
			_ = retry(ctx, w.log, "mark done", func() error { return w.co.MarkDone(ctx, string(jobs.Failed)) })
			w.rep.transition(ctx, jobs.Failed, reason)
			return nil, w.exit(ctx, reason)
		}
		// No member record until the new program said hello: a record (even
		// "preparing") would keep this worker in the next generation.
		var err error
		c, err = w.startProgram(ctx)
		if errors.Is(err, errExitedBeforeHello) {
			// The same program said hello before: it died while starting
			// (killed, out of memory); that is one more failed restart.
			res = w.prog.res
			w.log.Warn("restarted program ended before its hello", "exit", res.describe(), "stderr_tail", res.Tail)
			w.rep.event(jobs.EventError, fmt.Sprintf("program of worker %s failed while restarting: %s", w.cfg.Worker, res.describe()),
				map[string]any{"worker": w.cfg.Worker, "generation": gen, "exit_code": res.Code})
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	_ = w.register(ctx, coord.Ready)
	// Still named by the current generation (nobody's collective failed
	// yet): say it is broken, so the next one forms with the new address.
	if cur, err := w.co.ReadGen(ctx); err == nil && cur != nil && cur.Rank(w.cfg.Worker) >= 0 {
		w.reportLive(ctx, cur)
	}
	return c, nil
}

// errBadRequest: a line of the program's that is not a request.
var errBadRequest = errors.New("not a JSON request")

// serve answers the program's requests until the worker's life ends.
func (w *liveWorker) serve(ctx context.Context, c *liveConn) error {
	for {
		req, err := c.read()
		if err != nil {
			c.close()
			if errors.Is(err, errLineTooLong) {
				// Reading on would hold the whole line in the worker's memory.
				w.log.Warn("program's request too long; connection closed, program stopped", "err", err)
				w.rep.event(jobs.EventError, fmt.Sprintf("worker %s: its program sent a line of more than %d bytes on the live socket (not a request); its connection is closed and the program stopped",
					w.cfg.Worker, liveMaxLine), map[string]any{"worker": w.cfg.Worker})
				w.prog.stop(w.grace())
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
		if err := c.write(rep); err != nil {
			w.log.Warn("reply to the program", "err", err)
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
	return req, nil
}

func (l *liveConn) write(rep liveReply) error {
	b, err := json.Marshal(rep)
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
