package workertest

import (
	"context"
	"sync"

	"github.com/edl-nomad/edl/jobs"
)

// ExecJobs is a JobSource that keeps the job in memory and records what
// the workers wrote.
type ExecJobs struct {
	Mu     sync.Mutex
	Job    jobs.Job
	Events []jobs.Event
}

func (f *ExecJobs) Get(ctx context.Context, id string) (jobs.Job, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Job, nil
}

func (f *ExecJobs) SetProgress(ctx context.Context, id string, p jobs.Progress) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Job.Progress = p
	return nil
}

func (f *ExecJobs) AppendEvent(ctx context.Context, id string, e jobs.Event) (jobs.Event, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Events = append(f.Events, e)
	return e, nil
}

func (f *ExecJobs) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if !jobs.CanTransition(f.Job.State, to) {
		return f.Job, &jobs.TransitionError{From: f.Job.State, To: to}
	}
	f.Job.State, f.Job.Reason = to, reason
	return f.Job, nil
}

func (f *ExecJobs) SetCheckpoint(ctx context.Context, id string, ref jobs.CheckpointRef) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Job.LastCheckpoint = &ref
	return nil
}

func (f *ExecJobs) State() (jobs.State, string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Job.State, f.Job.Reason
}
