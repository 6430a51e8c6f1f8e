package worker

import "context"

// ExecWorker runs a job whose trainer is "exec" in one worker's place:
// in restart mode (the program restarted at every generation change,
// docs/exec.md) or, for exec.mode "live", in live mode (the program kept
// running through generations, docs/live.md); Run picks the mode from
// the job's spec.
type ExecWorker struct{ pw *programWorker }

// NewExec checks its arguments; it does no I/O. Deps.Transport is not used.
func NewExec(cfg Config, ecfg ExecConfig, deps Deps) (*ExecWorker, error) {
	pw, err := newProgramWorker(cfg, ecfg, deps)
	if err != nil {
		return nil, err
	}
	return &ExecWorker{pw: pw}, nil
}

// Run reads the job's spec and runs the worker in its mode until the job
// ends (see the modes' Run). When ctx ends (SIGTERM) the worker stops its
// program, leaves and returns nil.
func (w *ExecWorker) Run(ctx context.Context) error {
	if spec, err := w.pw.readSpec(ctx); err == nil && spec.Trainer.Exec != nil && spec.Trainer.Exec.Live() {
		return newLive(w.pw).run(ctx)
	}
	return newRestart(w.pw).Run(ctx)
}
