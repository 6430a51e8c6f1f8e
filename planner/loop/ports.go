package loop

import (
	"context"

	"github.com/edl-nomad/edl/jobs"
)

// The loop's two sides. A round's read phase only uses the readers; only
// Apply uses the writers, and always through the lease's fence (the fenced
// job store, a holding check before each cluster action).

// ClusterReader is what the loop reads from wherever workers run.
type ClusterReader interface {
	// Capacity is every node's GPUs (and CPU slots) and what is free.
	Capacity(ctx context.Context) (jobs.Capacity, error)
	// Workers lists a job's workers, finished ones included (with their
	// ExitCode where the cluster knows it). An unknown job has none.
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
}

// ClusterWriter is what the loop changes there.
type ClusterWriter interface {
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

// Cluster is Nomad (nomadx.Cluster) or this machine (local.Cluster); the
// contract both keep is planner/clustertest.
type Cluster interface {
	ClusterReader
	ClusterWriter
}

// JobReader is what a round reads from the job store (jobstore.Store).
type JobReader interface {
	ChangeSeq(ctx context.Context) (int64, error)
	ListActive(ctx context.Context) ([]jobs.Job, error)
	ChangedSince(ctx context.Context, seq int64) ([]jobs.Job, int64, error)
	Finished(ctx context.Context) ([]jobs.Job, error)
	// ServiceHistory is the service of the newest succeeded jobs, what
	// the policy learns job sizes from (planner.ServiceHistory).
	ServiceHistory(ctx context.Context) ([]float64, error)
	// Versions and Get find the writes workers made through their
	// job-scoped stores, which the change index does not list.
	Versions(ctx context.Context, ids []string) ([]int64, error)
	Get(ctx context.Context, id string) (jobs.Job, error)
}

// JobIndex keeps the store's indexes in step with what workers wrote
// through job-scoped stores: a job a worker made terminal moves to the
// finished queue. Bookkeeping of a fact already written, not a decision, so
// the read phase does it (it is idempotent and needs no fence).
type JobIndex interface {
	Settle(ctx context.Context, j jobs.Job) error
	SettleActive(ctx context.Context) error
}

// snapshotStore is what the snapshot refresh needs.
type snapshotStore interface {
	JobReader
	JobIndex
}

// JobWriter is what Apply writes: the store fenced with the lease's fence
// number (jobstore.Store.WithFence), so a deposed planner writes nothing.
type JobWriter interface {
	Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error)
	Update(ctx context.Context, id string, fn func(*jobs.Job) error) (jobs.Job, error)
	UpdateWith(ctx context.Context, id string, fn func(*jobs.Job) ([]jobs.Event, error)) (jobs.Job, []jobs.Event, error)
	AppendEvent(ctx context.Context, id string, ev jobs.Event) (jobs.Event, error)
}
