package planner

import (
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Snapshot is everything Decide looks at: one consistent view of the
// cluster and its live (not terminal) jobs.
type Snapshot struct {
	// Capacity lists the nodes. Decide may hand out, on each node, its
	// FreeGPUs (FreeCPUSlots) plus what the snapshot's own jobs hold there
	// according to JobState.Placement; whatever else is in use belongs to
	// somebody else and is left alone. The GPUs other Nomad jobs hold
	// (jobs.Node.ForeignGPUs) are never handed out: a node offers at most
	// its UsableGPUs, or what the snapshot's jobs hold there if more.
	Capacity jobs.Capacity
	Tenants  []TenantShare
	Jobs     []JobState
	// Config tunes the policy; the zero value means DefaultConfig().
	Config Config
	// Service, when it holds at least MinServiceHistory finished jobs,
	// makes Decide rank guaranteed and opportunistic jobs by the Gittins
	// index it learnt from their service instead of by least attained
	// service (Config.GittinsThreshold). nil: least attained service.
	Service *ServiceHistory
}

// TenantShare is a tenant's claim on the cluster. A tenant absent from
// Snapshot.Tenants has no quota and weight 1.
type TenantShare struct {
	Name string
	// QuotaGPUs caps what the tenant's guaranteed jobs hold in total
	// (GPUs, or CPU slots for CPU-only jobs); 0 means no cap. Opportunistic
	// jobs do not count against it: they only harvest what is idle.
	QuotaGPUs int
	// Weight orders tenants by weighted share (held / weight); <= 0 means 1.
	Weight float64
}

// JobState is one live job as the planner sees it.
type JobState struct {
	ID     string
	Tenant string
	// Min and Max bound the worker count; GPUsPerWorker 0 means a CPU-only
	// job that takes one CPU slot per worker.
	Min, Max      int
	GPUsPerWorker int
	GPU           *jobs.GPUConstraint
	Priority      jobs.Priority
	SubmittedAt   time.Time
	// AttainedGPUSeconds is the service the job has received so far (GPU
	// seconds; worker seconds for CPU-only jobs): Tiresias' priority.
	AttainedGPUSeconds float64
	// Current is how many workers the job holds now.
	Current int
	// Placement says where the Current workers are: node ID -> workers.
	Placement map[string]int
	// Pinned is a size the tenant pinned with POST /scale; 0 means none.
	// A pinned job is gang-placed at exactly that size (clamped to Min..Max);
	// a running job pinned above its size keeps its workers (and grows
	// toward the pin) until the pinned size fits.
	Pinned int
	// Throughput holds measured samples/s by worker count.
	Throughput map[int]float64
	// LastResize is when the job's worker count last changed (zero: never).
	LastResize time.Time
	// Speeds lists the job's running workers with the step time each last
	// published, for straggler replacement (straggler.go); empty turns it
	// off for the job (set it only for running jobs).
	Speeds []WorkerSpeed
	// SlowRounds is, per worker, how many rounds in a row it was slow: the
	// previous plan's Target.SlowRounds.
	SlowRounds map[string]int
	// LastReplace is when a straggler of the job was last replaced.
	LastReplace time.Time
	// Target is the job's target from the previous round (jobs.Job's
	// Workers.Target); a grow back to it replaces lost workers, and the
	// reason says so.
	Target int
	// Deadline, when set, makes it a deadline job: planned first, at the
	// share PlanDeadlines gives it (deadline.go).
	Deadline *Deadline
}

// Plan is Decide's answer: one Target per job of the snapshot, in the
// snapshot's job order.
type Plan struct {
	Targets []Target
	// Waiting counts the guaranteed jobs that get no workers.
	Waiting int
	// Compacted says whether running jobs were compacted to their minimum
	// because more than Config.CompactThreshold jobs would have waited.
	Compacted bool
	// Recheck, when not zero, is the earliest time at which a cooldown in
	// force now ends; a loop that re-plans only on events should also re-plan
	// then.
	Recheck time.Time
}

// Target is the planner's decision for one job.
type Target struct {
	JobID   string
	Workers int
	// Placement is where the workers should be: node ID -> workers. It
	// proves the target fits; the cluster may place differently.
	Placement map[string]int
	// Reason is one line for the job's event log.
	Reason string
	// Suspend is set when a job that holds workers now gets none: it was
	// preempted for a higher claim (or, for an opportunistic job, because
	// the GPUs are wanted back).
	Suspend bool
	// Replace, when set, is the one worker to replace as a straggler (the
	// cluster stops it and places another); only when Workers equals the
	// job's current size. ReplaceReason is the line for the event log.
	Replace       string
	ReplaceReason string
	// SlowRounds carries the straggler counts to the next round's
	// JobState.SlowRounds.
	SlowRounds map[string]int
	// Deadline is a deadline job's plan (PlanDeadlines): its share, when
	// the plan finishes it, whether that is in time; nil for other jobs.
	Deadline *DeadlineTarget
}

// Changed reports whether the target differs from the job's current size.
func (t Target) Changed(current int) bool { return t.Workers != current }

// Target returns the target for job id, and whether there is one.
func (p Plan) Target(id string) (Target, bool) {
	for _, t := range p.Targets {
		if t.JobID == id {
			return t, true
		}
	}
	return Target{}, false
}
