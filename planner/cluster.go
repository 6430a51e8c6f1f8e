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
	// Workers lists a job's workers, finished ones included (with their
	// ExitCode where the cluster knows it). An unknown job has none.
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
	// Scale makes count workers of job run; it registers the job when the
	// cluster does not know it yet. Idempotent.
	Scale(ctx context.Context, job jobs.Job, count int, reason string) error
	// StopWorker removes one chosen worker gracefully: it gets SIGTERM,
	// finishes its step and exits 0. Nomad then lowers the job's count, so
	// no other worker is stopped and a later Scale grows the job back (on
	// other GPUs); the local cluster places a replacement at once. Callers
	// re-plan from Workers either way.
	StopWorker(ctx context.Context, jobID, workerID, reason string) error
	// Teardown removes every worker of the job and the job itself.
	Teardown(ctx context.Context, jobID string) error
}
