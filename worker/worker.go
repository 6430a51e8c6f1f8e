package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/trainer"
	"github.com/redis/go-redis/v9"
)

// Deps are the concrete things a worker talks to; cmd/edl wires them.
type Deps struct {
	Redis     redis.UniversalClient
	Transport *collective.Transport // the ring listener, open for the worker's life
	Jobs      JobSource             // nil: no progress, events or state changes
	Spec      *jobs.Spec            // nil: read from Jobs
	Log       *slog.Logger
	Now       func() time.Time
	// Store, when set, is where rank 0 writes checkpoints and where a job
	// with no live training state restores from (checkpoint.Open).
	Store checkpoint.Store
	// StepLog, when set, gets one line per applied step:
	// "unix_ns step generation world epoch loss".
	StepLog io.Writer
}

// Worker is one elastic worker process's state. Its protocol state is in
// three parts, each keeping its own invariants (see their doc comments):
// mem, who it is in the job; dc, where it is in the data; ts, its
// training state. The rest is the built-in trainer's (data set, ring,
// step buffers) and the job's side channels (reports, speed,
// checkpoints).
type Worker struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	spec jobs.Spec
	bt   *jobs.BuiltinTrainer

	mem membership // who this worker is in the job (membership.go)
	dc  dataCursor // where it is in the data (datacursor.go)
	ts  trainState // model, optimizer, counters, hand-over (trainstate.go)

	rep   *reporter
	met   *metricSink   // rank 0's loss per step, for sweeps (metrics.go)
	speed speedMeter    // per-step compute time, for the planner's straggler check
	ck    *checkpointer // nil without a store

	data      *trainer.Dataset
	ring      *collective.Ring
	buf       []float32 // gradient ++ metadata, all-reduced every step
	exact     []int64   // the step's metadata as integers (exactMeta)
	ids       []int64
	x         []float32
	labels    []int32
	lastSteps time.Time
	sw        switchTrace
}

// New checks cfg and deps; it does no I/O.
func New(cfg Config, deps Deps) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Redis == nil || deps.Transport == nil {
		return nil, errors.New("worker: Redis and Transport are required")
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
	log := deps.Log.With("component", "worker", "job", cfg.Job, "worker", cfg.Worker)
	cc := coord.Config{Prefix: cfg.Prefix, Job: cfg.Job, Worker: cfg.Worker, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat}
	co, err := coord.New(deps.Redis, cc, deps.Log)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, deps: deps, log: log}
	w.mem = membership{self: cfg.Worker, addr: cfg.Advertise, log: log, now: deps.Now, co: co}
	if w.mem.addr == "" {
		w.mem.addr = deps.Transport.Addr()
	}
	w.dc = newDataCursor(datapipe.New(deps.Redis, co.Keys(), cfg.Worker), log)
	w.met = newMetricSink(deps.Redis, cfg.Prefix, cfg.Job)
	return w, nil
}

// Run prepares the worker, joins the job and trains until the job ends.
// When ctx ends (SIGTERM) the worker finishes its step, hands its data back,
// leaves and returns nil: that is a graceful exit, not an error.
func (w *Worker) Run(ctx context.Context) error {
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			// SIGTERM while preparing: nothing to hand back; leave quietly.
			lctx, lcancel := context.WithTimeout(bg, 5*time.Second)
			defer lcancel()
			_ = w.mem.co.Leave(lctx)
			w.log.Info("stopped while preparing", "err", err)
			return nil
		}
		return err
	}
	go func() {
		<-ctx.Done()
		w.mem.requestLeave()
	}()
	go func() { _ = w.mem.co.RunHeartbeat(bg) }()
	go w.dc.com.run(bg)
	go w.rep.run(bg)
	defer w.met.start(func(err error) { w.log.Warn("metrics", "err", err) })()
	sw := &speedWriter{rdb: w.deps.Redis, key: w.mem.co.Keys().Speed(), worker: w.cfg.Worker, meter: &w.speed,
		every: speedEvery, ttl: speedTTL, log: w.log}
	sctx, scancel := context.WithCancel(bg)
	sdone := make(chan struct{})
	go func() { defer close(sdone); sw.run(sctx) }()
	defer func() {
		// Stop writing first, then drop this worker's field: it is gone.
		scancel()
		<-sdone
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		defer ccancel()
		_ = sw.clear(cctx)
	}()
	if w.ck != nil {
		go func() { _ = w.ck.up.Run(bg) }()
	}
	go w.mem.poll(bg, w.deps.Redis, w.deps.Jobs, w.cfg.Job)
	lctx, lcancel := context.WithCancel(bg)
	w.mem.stopLead = lcancel
	go func() { _ = w.mem.leader.Run(lctx) }()
	defer func() {
		if w.ring != nil {
			_ = w.ring.Close()
		}
	}()
	return w.loop(ctx, bg)
}

func (w *Worker) prepare(ctx context.Context) error {
	spec := w.deps.Spec
	if spec == nil {
		j, err := w.deps.Jobs.Get(ctx, w.cfg.Job)
		if err != nil {
			return fmt.Errorf("worker: read job %s: %w", w.cfg.Job, err)
		}
		spec = &j.Spec
	}
	bt, err := validateSpec(*spec)
	if err != nil {
		return err
	}
	w.spec, w.bt = *spec, bt
	if err := w.mem.register(ctx, coord.Preparing); err != nil {
		return err
	}
	mc := trainer.ModelConfigFrom(*bt)
	mc.Threads = max(w.cfg.Threads, 1)
	w.ts.mc = mc
	if err := w.ts.reset(bt); err != nil {
		return fmt.Errorf("worker: build model: %w", err)
	}
	if w.data, err = trainer.NewDataset(bt.Dataset); err != nil {
		return fmt.Errorf("worker: build data set: %w", err)
	}
	if _, size := w.data.Partition(0); size >= maxExact {
		return fmt.Errorf("worker: partitions of %d samples exceed %d; use more partitions", size, maxExact)
	}
	w.dc.parts, w.dc.seed = w.data.NumPartitions(), bt.Dataset.Seed
	w.dc.size = func(p int) int64 { _, size := w.data.Partition(p); return size }
	w.warmUp()
	minStart, maxW := w.cfg.MinStart, w.cfg.MaxWorkers
	if minStart == 0 {
		minStart = max(1, spec.Workers.Min)
	}
	if maxW == 0 {
		// The planner decides how many workers run; the spec's max read at
		// start may be stale (a PATCH can raise it), so the leader admits
		// every ready worker up to the API's hard limit.
		maxW = 1024
	}
	w.mem.leader = coord.NewLeader(w.mem.co, coord.LeaderOptions{MinStart: minStart, MaxWorkers: maxW, Window: w.cfg.ReportWindow,
		OnFormed: w.lostEvents}, w.deps.Now)
	w.mem.watch = w.mem.co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	w.rep = newReporter(w.deps.Jobs, w.cfg.Job, w.cfg.ProgressEvery, w.log)
	if w.deps.Store != nil {
		if w.ck, err = newCheckpointer(w, w.deps.Store); err != nil {
			return err
		}
	}
	if err := w.mem.register(ctx, coord.Ready); err != nil {
		return err
	}
	w.log.Info("ready", "addr", w.mem.addr, "listen", w.deps.Transport.Addr(), "params", w.ts.model.NumParams())
	return nil
}

// warmUp computes one throw-away gradient of the largest batch this worker
// is likely to take, so that its first real step (which every member waits
// for when it joins) does not pay for growing the model's workspace.
func (w *Worker) warmUp() {
	n := max(1, w.bt.BatchSize/max(1, w.spec.Workers.Min)+1)
	feat := w.data.Features()
	w.ids = w.data.PartitionSamples(0, 0, 0, n, w.ids)
	n = len(w.ids)
	x, labels := make([]float32, n*feat), make([]int32, n)
	w.data.Batch(w.ids, x, labels)
	w.ts.model.Gradient(x, labels, n, make([]float32, w.ts.model.NumParams()))
}

// AdvertiseAddr resolves an --advertise value against the listener's
// address: "host:port" is used as is, a bare "host" gets the listener's
// port (useful with --listen 0.0.0.0:0), "" means the listener's address.
func AdvertiseAddr(advertise, listenAddr string) (string, error) {
	if advertise == "" {
		return listenAddr, nil
	}
	if _, _, err := net.SplitHostPort(advertise); err == nil {
		return advertise, nil
	}
	_, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return "", fmt.Errorf("advertise %q: listener address %q: %w", advertise, listenAddr, err)
	}
	if strings.ContainsAny(advertise, "[]") {
		return "", fmt.Errorf("advertise %q: want host or host:port", advertise)
	}
	return net.JoinHostPort(advertise, port), nil
}
