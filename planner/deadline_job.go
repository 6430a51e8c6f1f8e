package planner

import (
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// DeadlineOf is the planner's view of a stored job's deadline (nil when it
// has none): the planner loop and the API build their snapshots with it, so
// that both ask Admit and PlanDeadlines the same question. share is the
// worker count planned last round (the job's target), kept as a floor.
//
// Work left is in samples: a built-in job's samples x epochs less the
// samples it has trained; a program's total_steps less the steps it has
// reported, converted at its samples per step once it has reported both
// (before that, steps, and per_worker_speed is then steps/s).
func DeadlineOf(j jobs.Job, share int) *Deadline {
	s := j.Spec
	if !s.HasDeadline() {
		return nil
	}
	d := &Deadline{At: s.DeadlineAt(j.CreatedAt), BestEffort: s.BestEffort(), Share: share, PriorSamplesPerS: s.PerWorkerSpeed}
	p := j.Progress
	switch {
	case s.Trainer.Builtin != nil:
		d.Remaining = max(s.Work()-float64(p.Samples), 0)
	case p.Step > 0 && p.Samples > 0:
		d.Remaining = max(s.Work()-float64(p.Step), 0) * float64(p.Samples) / float64(p.Step)
	default:
		d.Remaining = max(s.Work()-float64(p.Step), 0)
	}
	return d
}

// AdmitJob answers Admit for a job about to be created from spec at now,
// against the cluster's capacity and the live jobs of the store (the
// deadline ones count, with the throughput the planner saved on them): what
// POST /v1/jobs asks.
func AdmitJob(capacity jobs.Capacity, live []jobs.Job, spec jobs.Spec, cfg Config, now time.Time) Admission {
	s := Snapshot{Capacity: capacity, Config: cfg}
	for _, j := range live {
		if j.State.Terminal() {
			continue
		}
		if d := DeadlineOf(j, j.Workers.Target); d != nil {
			var thr map[int]float64
			if j.Planner != nil {
				thr = j.Planner.Throughput
			}
			s.Jobs = append(s.Jobs, JobState{ID: j.ID, Min: j.Spec.Workers.Min, Max: j.Spec.Workers.Max,
				GPUsPerWorker: j.Spec.GPUsPerWorker, Current: j.Workers.Current, Throughput: thr, Deadline: d})
		}
	}
	cand := jobs.Job{ID: "new", Spec: spec, CreatedAt: now}
	c := JobState{ID: cand.ID, Min: spec.Workers.Min, Max: spec.Workers.Max, GPUsPerWorker: spec.GPUsPerWorker, Deadline: DeadlineOf(cand, 0)}
	a := Admit(s, c, now)
	if !a.Admitted && !a.EarliestFeasible.IsZero() {
		// Good for a resubmission within ResubmitMargin: planned as if the
		// job came that much later and no other job moved meanwhile.
		if later := Admit(s, c, now.Add(ResubmitMargin)); !later.EarliestFeasible.IsZero() {
			a.EarliestFeasible = later.EarliestFeasible
		}
	}
	return a
}

// ResubmitMargin is how long after a refusal its earliest_feasible still
// holds (AdmitJob): a client that resubmits with it at once is admitted,
// though jobs progress, are measured again and re-planned meanwhile.
const ResubmitMargin = 5 * time.Second
