package planner

import (
	"context"

	"github.com/edl-nomad/edl/jobs"
)

// Cluster is what the planner loop needs from wherever workers run: Nomad
// (nomadx.Cluster) or this machine (local.Cluster).
type Cluster interface {
	// Capacity is every node's GPUs (and CPU slots) and what is free.
	Capacity(ctx context.Context) (jobs.Capacity, error)
	// Workers lists a job's workers, finished ones included.
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
	// Scale makes count workers of job run; it registers the job when the
	// cluster does not know it yet. Idempotent.
	Scale(ctx context.Context, job jobs.Job, count int, reason string) error
	// StopWorker stops one worker; the cluster places a replacement.
	StopWorker(ctx context.Context, jobID, workerID, reason string) error
	// Teardown removes every worker of the job and the job itself.
	Teardown(ctx context.Context, jobID string) error
}

// JobStore is the part of jobs.Store the loop reads and writes.
type JobStore interface {
	ListActive(ctx context.Context) ([]jobs.Job, error)
	Get(ctx context.Context, id string) (jobs.Job, error)
	Update(ctx context.Context, id string, fn func(*jobs.Job) error) (jobs.Job, error)
	Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error)
	AppendEvent(ctx context.Context, id string, ev jobs.Event) (jobs.Event, error)
	Subscribe(ctx context.Context) <-chan string
}
