package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/trainer"
)

// Worker is one elastic worker process's state. Its protocol state is in
// three parts, each keeping its own invariants (see their doc comments):
// mem, who it is in the job; dc, where it is in the data; ts, its
// training state. The rest is the built-in trainer's (data set, ring,
// step buffers) and the job's side channels (reports, speed,
// checkpoints).
type Worker struct {
	cfg  core.Config
	deps core.Deps
	log  *slog.Logger
	spec jobs.Spec
	bt   *jobs.BuiltinTrainer

	mem core.Membership // who this worker is in the job (core/membership.go)
	dc  core.DataCursor // where it is in the data (core/datacursor.go)
	ts  trainState      // model, optimizer, counters, hand-over (trainstate.go)

	rep   *core.Reporter
	met   *core.MetricSink // rank 0's loss per step and validation per epoch, for sweeps
	val   *heldOut         // the validation set (validate.go), drawn at the first epoch's end
	speed speedMeter       // per-step compute time, for the planner's straggler check
	ck    *checkpointer    // nil without a store

	data   *trainer.Dataset
	ring   *collective.Ring
	buf    []float32 // gradient ++ metadata, all-reduced every step
	exact  []int64   // the step's metadata as integers (exactBlock)
	ids    []int64
	x      []float32
	labels []int32
	rate   core.Rate // rank 0's reported speed
	sw     switchTrace
}

// New checks cfg and deps; it does no I/O.
func New(cfg core.Config, deps core.Deps) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.Check(true); err != nil {
		return nil, err
	}
	log := deps.Log.With("component", "worker", "job", cfg.Job, "worker", cfg.Worker)
	cc := coord.Config{Prefix: cfg.Prefix, Job: cfg.Job, Worker: cfg.Worker, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat}
	co, err := coord.New(deps.Redis, cc, deps.Log)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, deps: deps, log: log}
	w.mem = core.Membership{Self: cfg.Worker, Addr: cfg.Advertise, Log: log, Now: deps.Now, Co: co}
	if w.mem.Addr == "" {
		w.mem.Addr = deps.Transport.Addr()
	}
	w.dc = core.NewDataCursor(datapipe.New(deps.Redis, co.Keys(), cfg.Worker), log)
	w.met = core.NewMetricSink(deps.Redis, cfg.Prefix, cfg.Job)
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
			_ = w.mem.Co.Leave(lctx)
			w.log.Info("stopped while preparing", "err", err)
			return nil
		}
		return err
	}
	go func() {
		<-ctx.Done()
		w.mem.RequestLeave()
	}()
	go func() { _ = w.mem.Co.RunHeartbeat(bg) }()
	go w.dc.Com.Run(bg)
	go w.rep.Run(bg)
	defer w.met.Start(func(err error) { w.log.Warn("metrics", "err", err) })()
	sw := &speedWriter{rdb: w.deps.Redis, key: w.mem.Co.Keys().Speed(), worker: w.cfg.Worker, meter: &w.speed,
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
	go w.mem.Poll(bg, w.deps.Redis, w.deps.Jobs, w.cfg.Job)
	lctx, lcancel := context.WithCancel(bg)
	w.mem.StopLead = lcancel
	go func() { _ = w.mem.Leader.Run(lctx) }()
	defer func() {
		if w.ring != nil {
			_ = w.ring.Close()
		}
	}()
	return w.loop(ctx, bg)
}

func (w *Worker) prepare(ctx context.Context) error {
	spec, err := w.deps.ReadSpec(ctx, w.cfg.Job)
	if err != nil {
		return err
	}
	bt, err := validateSpec(*spec)
	if err != nil {
		return err
	}
	w.spec, w.bt = *spec, bt
	if err := w.mem.Register(ctx, coord.Preparing); err != nil {
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
	if _, size := w.data.Partition(0); size >= core.MaxExact {
		return fmt.Errorf("worker: partitions of %d samples exceed %d; use more partitions", size, core.MaxExact)
	}
	w.dc.Parts, w.dc.Seed = w.data.NumPartitions(), bt.Dataset.Seed
	w.dc.Size = func(p int) int64 { _, size := w.data.Partition(p); return size }
	w.warmUp()
	w.mem.Leader = core.NewLeader(w.cfg, *spec, w.mem.Co, w.deps.Now, w.lostEvents)
	w.mem.Watch = w.mem.Co.Watch(context.WithoutCancel(ctx), 100*time.Millisecond)
	w.rep = core.NewReporter(w.deps.Jobs, w.cfg.Job, w.cfg.ProgressEvery, w.log)
	if w.deps.Store != nil {
		if w.ck, err = newCheckpointer(w, w.deps.Store); err != nil {
			return err
		}
	}
	if err := w.mem.Register(ctx, coord.Ready); err != nil {
		return err
	}
	w.log.Info("ready", "addr", w.mem.Addr, "listen", w.deps.Transport.Addr(), "params", w.ts.model.NumParams())
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

// validateSpec checks that spec is a built-in trainer job this worker can run.
func validateSpec(s jobs.Spec) (*jobs.BuiltinTrainer, error) {
	if s.Trainer.Kind != jobs.TrainerBuiltin || s.Trainer.Builtin == nil {
		return nil, fmt.Errorf("job spec: trainer: kind %q is not the built-in trainer", s.Trainer.Kind)
	}
	b := s.Trainer.Builtin
	switch {
	case b.Epochs <= 0:
		return nil, errors.New("job spec: trainer.builtin.epochs: must be positive")
	case b.BatchSize <= 0:
		return nil, errors.New("job spec: trainer.builtin.batch_size: must be positive")
	case b.Dataset.Partitions <= 0:
		return nil, errors.New("job spec: trainer.builtin.dataset.partitions: must be positive")
	}
	return b, nil
}
