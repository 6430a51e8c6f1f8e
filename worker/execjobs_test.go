package worker

import (
	"context"
	"sync"

	"github.com/edl-nomad/edl/jobs"
)

// execJobs is a JobSource that keeps the job in memory and records what
// the workers wrote.
type execJobs struct {
	mu     sync.Mutex
	job    jobs.Job
	events []jobs.Event
}

func (f *execJobs) Get(ctx context.Context, id string) (jobs.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.job, nil
}

func (f *execJobs) SetProgress(ctx context.Context, id string, p jobs.Progress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.job.Progress = p
	return nil
}

func (f *execJobs) AppendEvent(ctx context.Context, id string, e jobs.Event) (jobs.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	return e, nil
}

func (f *execJobs) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !jobs.CanTransition(f.job.State, to) {
		return f.job, &jobs.TransitionError{From: f.job.State, To: to}
	}
	f.job.State, f.job.Reason = to, reason
	return f.job, nil
}

func (f *execJobs) SetCheckpoint(ctx context.Context, id string, ref jobs.CheckpointRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.job.LastCheckpoint = &ref
	return nil
}

func (f *execJobs) state() (jobs.State, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.job.State, f.job.Reason
}
