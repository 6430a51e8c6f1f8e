package worker

import (
	"context"

	"github.com/edl-nomad/edl/worker/builtin"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/live"
	"github.com/edl-nomad/edl/worker/restart"
)

// The names callers use (cmd/edl, local, the benches and the end-to-end
// tests): the core's config and deps, the built-in trainer's worker, the
// exec worker that picks restart or live mode.
type (
	Config     = core.Config
	ExecConfig = core.ExecConfig
	Deps       = core.Deps
	JobSource  = core.JobSource
	// Worker is the built-in trainer's worker (worker/builtin).
	Worker = builtin.Worker
	// StaticConfig configures the static (non-elastic) baseline, RunStatic.
	StaticConfig = builtin.StaticConfig
	// SpeedFigure is one worker's step-time figure, as the planner reads it.
	SpeedFigure = builtin.SpeedFigure
)

// DefaultConfig fills in the defaults for job and worker.
func DefaultConfig(job, worker string) Config { return core.DefaultConfig(job, worker) }

// New is a worker of the built-in trainer (worker/builtin); it does no I/O.
func New(cfg Config, deps Deps) (*Worker, error) { return builtin.New(cfg, deps) }

// RunStatic runs the static baseline (worker/builtin).
var RunStatic = builtin.RunStatic

// ParseSpeedFigure reads a speed figure as a worker writes it.
func ParseSpeedFigure(v string) (SpeedFigure, error) { return builtin.ParseSpeedFigure(v) }

// The core's helpers callers use.
var (
	AdvertiseAddr    = core.AdvertiseAddr
	CheckpointJob    = core.CheckpointJob
	CheckSamples     = core.CheckSamples
	CheckLiveSamples = core.CheckLiveSamples
)

// ExecWorker runs a job whose trainer is "exec" in one worker's place:
// in restart mode (worker/restart: the program restarted at every
// generation change, docs/exec.md) or, for exec.mode "live", in live mode
// (worker/live: the program kept running through generations,
// docs/live.md); Run picks the mode from the job's spec.
type ExecWorker struct{ pw *core.ProgramWorker }

// NewExec checks its arguments; it does no I/O. Deps.Transport is not used.
func NewExec(cfg Config, ecfg ExecConfig, deps Deps) (*ExecWorker, error) {
	pw, err := core.NewProgramWorker(cfg, ecfg, deps)
	if err != nil {
		return nil, err
	}
	return &ExecWorker{pw: pw}, nil
}

// Run reads the job's spec and runs the worker in its mode until the job
// ends (see the modes' Run). When ctx ends (SIGTERM) the worker stops its
// program, leaves and returns nil.
func (w *ExecWorker) Run(ctx context.Context) error {
	if spec, err := w.pw.ReadSpec(ctx); err == nil && spec.Trainer.Exec != nil && spec.Trainer.Exec.Live() {
		return live.New(w.pw).Run(ctx)
	}
	return restart.New(w.pw).Run(ctx)
}

// ExecLastCall is the last call of an exec job's workers when
// Config.LastCall is 0 (see restart.DefaultLastCall).
const ExecLastCall = restart.DefaultLastCall
