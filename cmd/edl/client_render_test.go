package main

import (
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// An exec job's progress is shown from what its spec and progress say: a
// live-mode job (exec.dataset and the epochs its loop reports) by samples,
// not by whole epochs (a one-epoch job showed 0% until it ended), with an
// ETA; a restart-mode job with total_steps by its step.
func TestFractionOfExecJobs(t *testing.T) {
	live := jobs.Job{State: jobs.Running, Spec: jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerExec,
		Exec: &jobs.ExecTrainer{Mode: jobs.ExecLive, Dataset: &jobs.ExecDataset{Samples: 60000, Partitions: 64}}}},
		Progress: jobs.Progress{Epoch: 0, Step: 87, Samples: 15000, SamplesPerS: 1000, TotalEpochs: 1}}
	if f := fraction(live); f != 0.25 {
		t.Errorf("live job at 15000 of 60000 samples: fraction %v, want 0.25", f)
	}
	if p := percent(live); p != "25%" {
		t.Errorf("percent %q, want 25%%", p)
	}
	if d := eta(live); d != 45*time.Second {
		t.Errorf("eta %v, want 45s", d)
	}
	live.Progress.TotalEpochs = 2
	if f := fraction(live); f != 0.125 {
		t.Errorf("live job of two epochs at 15000 of 120000 samples: fraction %v, want 0.125", f)
	}
	// Before the loop reports its epochs the total is unknown.
	live.Progress.TotalEpochs = 0
	if f := fraction(live); f != -1 {
		t.Errorf("no total_epochs yet: fraction %v, want -1", f)
	}

	restart := jobs.Job{State: jobs.Running, Spec: jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerExec,
		Exec: &jobs.ExecTrainer{TotalSteps: 400}}}, Progress: jobs.Progress{Step: 100}}
	if f := fraction(restart); f != 0.25 {
		t.Errorf("restart job at step 100 of total_steps 400: fraction %v, want 0.25", f)
	}
	restart.Spec.Trainer.Exec.TotalSteps = 0
	if f := fraction(restart); f != -1 {
		t.Errorf("restart job without total_steps: fraction %v, want -1", f)
	}
}
